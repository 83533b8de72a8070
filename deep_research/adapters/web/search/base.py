"""What every provider shares: the typed failure, the per-process rate limits, and
`WebSearch`, which puts cache, limit and Retry-After around a provider's API.

Invariants:
- A search either returns `SearchResults` or raises `SearchFailed`; no httpx, ddgs or
  JSON exception reaches a caller. ``str(SearchFailed)`` is one line: ``"<provider>: why"``.
- One token bucket per provider name in a `RateLimits`, built once per process (per event
  loop) and shared by every search of that provider. No bursts: requests leave at least
  ``1 / rate`` seconds apart, so a server counting any one-second window sees at most
  ``rate`` of them (one more only at the window's exact edges).
- A 429 with ``Retry-After`` pauses the whole provider for that long, once, and only when
  it is at most ``max_retry_after``; the second 429 fails the search.
- Cache keys are (provider, normalised query); values hold hits only (url, title, snippet),
  never a key, a header or a base URL. Empty results are not cached: an empty answer from
  DuckDuckGo may be its rate limiting in disguise.
- A search's fee is ``price_usd`` a request: its caller books it for each result that is
  not ``cached``; a cache hit and a failure cost 0 (the paid APIs bill successful requests
  only).
- The run's web scope (``core.scope.WebScope``) is asked of each provider in its own terms
  (``site:`` filters, domain lists, date parameters: each provider's module) where
  it takes them, to spend no request on pages the run may not read; every hit is then kept
  only when ``scope.allows`` its url, whatever the provider did: that filter is the
  guarantee. A scoped search is cached under its own key (the query and the scope's
  domains and date), never under the unscoped query's.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping
from datetime import date
from typing import Literal, Protocol

from aiolimiter import AsyncLimiter

from deep_research.adapters.branches.protocols import SearchHit, SearchResults
from deep_research.core.errors import BranchError
from deep_research.core.scope import WebScope, under
from deep_research.persistence.cache import normalize_query

FailKind = Literal[
    "auth",  # the key was refused (401/403; Brave: 422 SUBSCRIPTION_TOKEN_INVALID)
    "quota",  # out of credit or over the plan (402; Tavily 432/433)
    "rate_limited",  # 429 without a usable Retry-After, or again after waiting
    "unavailable",  # 5xx
    "timeout",  # no complete answer in time
    "network",  # refused connection, reset, unresolvable name
    "bad_response",  # not JSON, or JSON of another shape
    "refused",  # any other 4xx (a bad request; SearXNG without JSON output)
]
_CACHE_SCHEMA = 1


class SearchFailed(BranchError):
    """A search that failed; ``str()`` is the one-line reason, ``kind`` says which."""

    def __init__(self, provider: str, kind: FailKind, reason: str) -> None:
        super().__init__(f"{provider}: {reason}")
        self.provider = provider
        self.kind = kind


class RetryAfter(Exception):
    """A provider API answered 429; ``seconds`` is its Retry-After, None when absent."""

    def __init__(self, seconds: float | None) -> None:
        super().__init__(f"rate limited, retry after {seconds}")
        self.seconds = seconds


class SearchApi(Protocol):
    """One provider's wire protocol: a single request, no cache, no limit."""

    name: str
    max_per_request: int
    """The most results one request may ask for."""

    async def fetch(self, query: str, max_results: int, scope: WebScope) -> list[SearchHit]:
        """Raises `SearchFailed`, or `RetryAfter` on a 429. ``scope`` is asked for in the
        provider's own terms where it takes them (its hits are filtered afterwards)."""
        ...

    async def aclose(self) -> None: ...


class ResultStore(Protocol):
    """The result cache (``persistence.cache.ResultCache``)."""

    async def get(self, tool: str, model: str, query: str) -> str | None: ...

    async def set(self, tool: str, model: str, query: str, value: str) -> None: ...


# --- the scope in a provider's terms -------------------------------------------------------

Window = Literal["day", "week", "month", "year"]


def site_terms(scope: WebScope) -> str:
    """The scope's domains as query operators: ``(site:a.com OR site:b.org) -site:x.a.com``.

    An excluded domain is said only where it narrows: always when no domain is allowed, else
    only under an allowed one. "" for a scope with no domains."""
    allowed = [f"site:{d}" for d in scope.domains]
    include = " OR ".join(allowed)
    if len(allowed) > 1:
        include = f"({include})"
    excluded = [
        f"-site:{d}" for d in scope.exclude_domains if not scope.domains or under(d, scope.domains)
    ]
    return " ".join(filter(None, [include, *excluded]))


def scoped_query(
    query: str, scope: WebScope, *, max_chars: int | None = None, max_words: int | None = None
) -> str:
    """``query`` with the scope's ``site_terms``, or ``query`` alone when they would take it
    over the provider's length limits (the hits are filtered afterwards either way)."""
    terms = site_terms(scope)
    if not terms:
        return query
    narrowed = f"{query} {terms}"
    if max_chars is not None and len(narrowed) > max_chars:
        return query
    if max_words is not None and len(narrowed.split()) > max_words:
        return query
    return narrowed


def window(since: date | None, today: date) -> Window | None:
    """The smallest of the coarse "past day/week/month/year" ranges that surely covers
    ``since`` (a month counted as 28 days, a year as 365); None when none does."""
    if since is None:
        return None
    days = (today - since).days
    spans: tuple[tuple[Window, int], ...] = (("day", 1), ("week", 7), ("month", 28), ("year", 365))
    return next((name for name, span in spans if days < span), None)


class RateLimits:
    """One token bucket per provider name, shared by every search of it in the process.

    Build one in the composition root and pass it to every provider. It belongs to the event
    loop that first uses it (aiolimiter's buckets do); another loop gets ``RuntimeError``.
    """

    def __init__(self, per_second: Mapping[str, float]) -> None:
        for name, rate in per_second.items():
            if not (rate > 0 and math.isfinite(rate)):
                raise ValueError(f"rate for {name} must be > 0, got {rate}")
        self._rates = dict(per_second)
        self._buckets: dict[str, AsyncLimiter] = {}
        self._paused_until: dict[str, float] = {}  # loop time
        self._loop: asyncio.AbstractEventLoop | None = None

    def rate(self, name: str) -> float:
        """Requests a second allowed to ``name`` (one for a provider not named)."""
        return self._rates.get(name, 1.0)

    async def acquire(self, name: str) -> None:
        """Wait for ``name``'s turn: past any pause, then a token from its bucket."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError("RateLimits is used from another event loop than its first")
        bucket = self._buckets.get(name)
        if bucket is None:
            # max_rate 1: no burst, one request per 1/rate seconds.
            bucket = self._buckets[name] = AsyncLimiter(1, 1 / self.rate(name))
        while True:
            wait = self._paused_until.get(name, 0.0) - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await bucket.acquire()
            if self._paused_until.get(name, 0.0) <= loop.time():
                return
            # A 429 paused the provider while this task queued for a token: wait again.

    def pause(self, name: str, seconds: float) -> None:
        """Hold every search of ``name`` for ``seconds`` (a 429's Retry-After)."""
        until = asyncio.get_running_loop().time() + seconds
        self._paused_until[name] = max(self._paused_until.get(name, 0.0), until)


class WebSearch:
    """A provider API behind the result cache, its rate limit and Retry-After handling.

    Implements ``branches.protocols.Searcher``: ``search`` returns `SearchResults` (hits,
    ``cached``) or raises `SearchFailed`.
    """

    def __init__(
        self,
        api: SearchApi,
        *,
        limits: RateLimits,
        cache: ResultStore | None = None,
        price_usd: float = 0.0,
        max_retry_after: float = 30.0,
        scope: WebScope | None = None,
    ) -> None:
        if price_usd < 0:
            raise ValueError(f"price_usd must be >= 0, got {price_usd}")
        self.api = api
        self.limits = limits
        self.cache = cache
        self.price_usd = price_usd
        self.max_retry_after = max_retry_after
        self.scope = scope or WebScope()
        """Where the run may read: asked of the provider, and every hit filtered by it."""

    @property
    def name(self) -> str:
        return self.api.name

    async def aclose(self) -> None:
        await self.api.aclose()

    async def search(self, query: str, max_results: int) -> SearchResults:
        if max_results < 1:
            raise ValueError(f"max_results must be >= 1, got {max_results}")
        query = " ".join(query.split())
        if not query:
            raise ValueError("an empty search query")
        max_results = min(max_results, self.api.max_per_request)
        cached = await self._cached(query, max_results)
        if cached is not None:
            return SearchResults(hits=cached, cached=True)
        found = await self._fetch(query, max_results)
        hits = [h for h in _dedupe(found) if self.scope.allows(h.url)][:max_results]
        if hits and self.cache is not None:
            await self.cache.set(*self._key(query), _dump(hits, max_results))
        return SearchResults(hits=hits, cached=False)

    async def _fetch(self, query: str, max_results: int) -> list[SearchHit]:
        waited: float | None = None
        while True:
            await self.limits.acquire(self.name)
            try:
                return await self.api.fetch(query, max_results, self.scope)
            except RetryAfter as limited:
                seconds = limited.seconds
            if waited is not None:
                why = f"rate limited again (HTTP 429) after waiting {waited:g}s as asked"
            elif seconds is None:
                why = "rate limited (HTTP 429, no Retry-After)"
            elif seconds > self.max_retry_after:
                why = (
                    f"rate limited (HTTP 429): Retry-After {seconds:g}s is over the "
                    f"{self.max_retry_after:g}s this tool waits"
                )
            else:
                self.limits.pause(self.name, seconds)
                waited = seconds
                continue
            raise SearchFailed(self.name, "rate_limited", why)

    def _key(self, query: str) -> tuple[str, str, str]:
        key = normalize_query(query)
        if self.scope.domains or self.scope.exclude_domains or self.scope.since:
            # Scoped results are other results: never served to (or from) the unscoped query.
            since = self.scope.since.isoformat() if self.scope.since else ""
            domains = ",".join(self.scope.domains)
            excluded = ",".join(self.scope.exclude_domains)
            key += f"\x00scope:{domains};-{excluded};{since}"
        return f"web_search@v{_CACHE_SCHEMA}", self.name, key

    async def _cached(self, query: str, max_results: int) -> list[SearchHit] | None:
        if self.cache is None:
            return None
        text = await self.cache.get(*self._key(query))
        if text is None:
            return None
        stored = _load(text)
        if stored is None:
            return None  # another schema or a damaged value: a miss, rewritten below
        asked, hits = stored
        # Asked for at least as many, or got fewer than asked (all there were): it answers.
        if asked >= max_results or len(hits) < asked:
            return hits[:max_results]
        return None


def _dedupe(hits: list[SearchHit]) -> list[SearchHit]:
    first: dict[str, SearchHit] = {}
    for hit in hits:
        first.setdefault(hit.url, hit)
    return list(first.values())


def _dump(hits: list[SearchHit], asked: int) -> str:
    rows = [{"url": h.url, "title": h.title, "snippet": h.snippet} for h in hits]
    return json.dumps({"schema": _CACHE_SCHEMA, "asked": asked, "hits": rows})


def _load(text: str) -> tuple[int, list[SearchHit]] | None:
    try:
        data = json.loads(text)
        if data["schema"] != _CACHE_SCHEMA:
            return None
        asked = data["asked"]
        rows = data["hits"]
        hits = [SearchHit(url=r["url"], title=r["title"], snippet=r["snippet"]) for r in rows]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(asked, int) or not all(
        isinstance(v, str) for h in hits for v in (h.url, h.title, h.snippet)
    ):
        return None
    return asked, hits
