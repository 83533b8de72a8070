"""The page reader: fetch a web page safely and politely, keep its main text as markdown.

One `PageReader` per process, shared by every run in it: it holds the per-host limits
(``per_host_concurrency``, ``per_host_rate``: `host_limits.py`), the robots.txt cache and the
page cache. It belongs to the event loop that first uses it; using it from another loop is a
bug and raises ``RuntimeError``.

HTTP goes through its own ``httpx.AsyncClient`` (encode's httpx; the openai SDK has its own
client, ``DefaultAsyncHttpxClient`` on httpx2, and nothing is shared with it) over
`fetch_guard.GuardedTransport`, the SSRF guard, which applies ``trust_env``. Per hop: the
origin's robots.txt (fetched once per scheme, host and port, and kept), a slot and a turn at
the host, one GET within the timeouts. Redirects are followed by hand, at most
``max_redirects``, every hop checked like the first.

A page is read when it is HTML, XHTML or plain text (by Content-Type, or HTML sniffed when
none is sent), no larger than ``max_bytes`` (the body is streamed and dropped at the cap);
`extraction.py` keeps its main text and date. Pages are cached by URL for the reader's
lifetime (a session), and so are the skips that would not change on a retry; a host that
could not be reached is not asked again for a while (``host_limits.DOWN_SECONDS``).

A read may carry the run's web scope (``core.scope.WebScope``): a URL outside it is never
requested, and a redirect that leaves it is refused at that hop, as the address guard
refuses a private address; under its ``since`` a page dated before it is dropped and an
undated page is kept, marked ``undated``. The caches hold what was read whatever the scope:
each read judges the cached page by its own scope.

Every page not read raises `PageSkipped` (a ``BranchError``); its message is a one-line
reason and no httpx exception reaches a caller. ``kind`` says which:

    bad_url             not a URL
    refused             not http(s), or an address the guard refuses (fetch_guard.py)
    robots              robots.txt disallows it, or RFC 9309 reads its answer as "disallow all"
    not_text            a PDF, an image, any other binary
    too_large           over ``max_bytes``
    timeout             connect, read or the page deadline
    network             refused connection, reset, bad TLS, unresolvable name, bad body
    http_status         any other non-2xx answer
    rate_limited        429 without Retry-After, Retry-After over ``max_retry_after``, or 429
                        again after waiting once (the wait pauses the whole host)
    too_many_redirects  more than ``max_redirects``
    no_text             under ``min_words`` words of main text: navigation and boilerplate
    out_of_scope        outside the web scope: its host, a redirect's, or dated before ``since``
"""

from __future__ import annotations

import asyncio
import codecs
import re
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Literal, get_args

import httpx

from deep_research.adapters.branches.protocols import Page
from deep_research.adapters.web import robots
from deep_research.adapters.web.extraction import extract
from deep_research.adapters.web.fetch_guard import (
    AddressRefused,
    AllowList,
    GuardedTransport,
    Resolver,
    system_resolver,
)
from deep_research.adapters.web.host_limits import HostLimits
from deep_research.adapters.web.retry_after import retry_after_seconds
from deep_research.adapters.web.search.http_api import user_agent
from deep_research.core.errors import BranchError
from deep_research.core.scope import WebScope

_Lasting = Literal[  # the skips a retry would meet again: kept in the page cache
    "bad_url", "refused", "robots", "not_text", "too_large", "too_many_redirects", "no_text"
]
SkipKind = Literal[_Lasting, "timeout", "network", "http_status", "rate_limited", "out_of_scope"]
_LASTING = frozenset(get_args(_Lasting))
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_ACCEPT = "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8"


class PageSkipped(BranchError):
    """A page that was not read; ``str()`` is the one-line reason. ``published``: the page's
    date, when it was refused for it (dated before the scope's ``since``)."""

    def __init__(self, url: str, kind: SkipKind, reason: str, published: date | None = None):
        super().__init__(reason)
        self.url, self.kind, self.reason, self.published = url, kind, reason, published


@dataclass(frozen=True)
class ReaderSettings:
    allow: tuple[str, ...] = ()
    """``host[:port]`` exempt from the address check (an intranet; loopback test servers)."""
    connect_timeout: float = 5.0
    read_timeout: float = 10.0
    page_timeout: float = 30.0
    """One request, from sending it to the last byte of the body."""
    max_bytes: int = 2_000_000
    max_redirects: int = 5
    per_host_concurrency: int = 2
    per_host_rate: float = 2.0
    """Requests to one host in any one-second window, robots.txt and redirect hops counted."""
    max_retry_after: float = 30.0
    min_words: int = 20
    """Less main text than this is not a page worth reading (a cookie notice, a menu)."""
    user_agent: str = field(default_factory=user_agent)
    trust_env: bool = True
    """Honour HTTP(S)_PROXY, ALL_PROXY, NO_PROXY, SSL_CERT_FILE and SSL_CERT_DIR."""


class _Skip(Exception):
    def __init__(self, kind: SkipKind, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class Reply:
    """One hop's answer: its status and headers, and the body of a 2xx answer as read."""

    url: httpx.URL
    status: int
    headers: httpx.Headers
    body: bytes = b""
    kind: Literal["html", "text"] = "html"
    encoding: str | None = None
    """The Content-Type charset, when Python knows it; else trafilatura detects it."""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


class PageReader:
    def __init__(
        self, settings: ReaderSettings | None = None, *, resolve: Resolver = system_resolver
    ) -> None:
        self.settings = s = settings or ReaderSettings()
        transport = GuardedTransport(AllowList.parse(s.allow), resolve, trust_env=s.trust_env)
        self._client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(s.read_timeout, connect=s.connect_timeout),
            headers={"User-Agent": s.user_agent, "Accept": _ACCEPT},
            follow_redirects=False,
            trust_env=False,  # the transport applies the environment
        )
        self._hosts: defaultdict[str, HostLimits] = defaultdict(
            lambda: HostLimits(s.per_host_concurrency, s.per_host_rate)
        )
        self._robots: dict[str, robots.Rules] = {}
        self._robots_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._pages: dict[str, Page | _Skip] = {}
        self._page_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __aenter__(self) -> PageReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def read(self, url: str, scope: WebScope | None = None) -> Page:
        """The page's main text; raises `PageSkipped` with the reason it was not read.
        ``scope``: where the run may read (None: anywhere)."""
        scope = scope or WebScope()
        loop = asyncio.get_running_loop()
        if self._loop not in (None, loop):
            raise RuntimeError("a PageReader is used from the event loop that first used it")
        self._loop = loop
        try:
            start = _checked_url(httpx.URL(url.strip()))
        except httpx.InvalidURL as exc:
            raise PageSkipped(url, "bad_url", f"not a valid URL: {exc}") from None
        except _Skip as skip:
            raise PageSkipped(url, skip.kind, skip.reason) from None
        if (outside := scope.refusal(str(start))) is not None:
            raise PageSkipped(url, "out_of_scope", outside)
        key = str(start)
        async with self._page_locks[key]:
            outcome = self._pages.get(key)
            if outcome is None:
                outcome = await self._outcome(start, scope)
        if isinstance(outcome, _Skip):
            raise PageSkipped(url, outcome.kind, outcome.reason)
        if (outside := scope.refusal(outcome.url)) is not None:  # read by an earlier run
            raise PageSkipped(url, "out_of_scope", f"redirected out of scope: {outside}")
        return _dated(url, outcome, scope)

    async def _outcome(self, start: httpx.URL, scope: WebScope) -> Page | _Skip:
        try:
            page = await self._read(start, scope)
        except _Skip as skip:
            if skip.kind in _LASTING:
                self._pages[str(start)] = _Skip(skip.kind, skip.reason)  # no traceback kept
            return skip
        self._pages[str(start)] = page
        self._pages.setdefault(page.url, page)
        return page

    async def _read(self, url: httpx.URL, scope: WebScope) -> Page:
        for hop in range(self.settings.max_redirects + 1):
            if hop and (outside := scope.refusal(str(url))) is not None:
                raise _Skip("out_of_scope", f"redirected out of scope: {outside}")
            await self._obey_robots(url)
            reply = await self._get_page(url)
            if reply.status not in _REDIRECTS:
                return await _page_of(reply, self.settings.min_words)
            url = _next_hop(reply)
        raise _Skip("too_many_redirects", f"more than {self.settings.max_redirects} redirects")

    async def _get_page(self, url: httpx.URL) -> Reply:
        reply = await self._request(url, page=True)
        if reply.status == 429:
            delay = retry_after_seconds(reply.headers.get("retry-after"))
            if delay is None:
                raise _Skip("rate_limited", "HTTP 429 (too many requests) without Retry-After")
            if delay > self.settings.max_retry_after:
                cap = self.settings.max_retry_after
                raise _Skip(
                    "rate_limited", f"HTTP 429: Retry-After {delay:.0f} s is over {cap:.0f} s"
                )
            host = self._hosts[url.host.lower()]
            host.not_before = max(host.not_before, asyncio.get_running_loop().time() + delay)
            reply = await self._request(url, page=True)
            if reply.status == 429:
                raise _Skip("rate_limited", "HTTP 429 (too many requests) again after waiting")
        if reply.status in _REDIRECTS or 200 <= reply.status < 300:
            return reply
        phrase = httpx.codes.get_reason_phrase(reply.status)
        raise _Skip("http_status", f"HTTP {reply.status} {phrase}".strip())

    async def _obey_robots(self, url: httpx.URL) -> None:
        origin = url.copy_with(path="/robots.txt", query=None)
        async with self._robots_locks[str(origin)]:
            if str(origin) not in self._robots:
                self._robots[str(origin)] = await self._fetch_robots(origin)
        rules, unreadable = self._robots[str(origin)]
        if not rules.can_fetch(self.settings.user_agent, str(url)):
            raise _Skip("robots", unreadable or f"robots.txt of {url.netloc.decode()} disallows it")

    async def _fetch_robots(self, origin: httpx.URL) -> robots.Rules:
        url, answered = origin, False
        try:
            for _ in range(self.settings.max_redirects + 1):
                reply = await self._request(url, page=False)
                answered = True
                if reply.status not in _REDIRECTS:
                    return robots.rules_of(reply.status, reply.body)
                url = _next_hop(reply)
            problem = "too many redirects"
        except _Skip as skip:
            if not answered:
                raise  # the host itself is refused, down or silent: say that, not "robots"
            problem = skip.reason
        return robots.off_limits(f"robots.txt unreadable ({problem})")

    async def _request(self, url: httpx.URL, *, page: bool) -> Reply:
        host = self._hosts[url.host.lower()]
        if isinstance(down := host.down(), _Skip):  # it did not answer a moment ago
            raise _Skip(down.kind, down.reason)
        async with host.turn():
            try:
                async with asyncio.timeout(self.settings.page_timeout):
                    async with self._client.stream("GET", url) as response:
                        return await self._receive(url, response, page=page)
            except AddressRefused as exc:  # the setting a user would change, named
                raise _Skip("refused", f"{exc}, and not on DEEP_RESEARCH_FETCH_ALLOW") from exc
            except (TimeoutError, httpx.TimeoutException) as exc:
                cause: Exception = exc
                skip = _Skip("timeout", _timeout_reason(exc, self.settings))
            except httpx.HTTPError as exc:
                cause, skip = exc, _Skip("network", _one_line(exc))
        if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout):
            host.failed(skip)  # unknown, down or silent: its other pages wait no turn
        raise skip from cause

    async def _receive(self, url: httpx.URL, response: httpx.Response, *, page: bool) -> Reply:
        reply = Reply(url, response.status_code, response.headers)
        if not 200 <= reply.status < 300:
            return reply
        if not page:
            return replace(reply, body=await _body(response, robots.MAX_BYTES, truncate=True))
        kind = _text_kind(response.headers.get("content-type", ""))
        declared = response.headers.get("content-length", "")
        cap = self.settings.max_bytes
        if declared.isdigit() and int(declared) > cap:
            raise _Skip("too_large", f"{int(declared):,} bytes, over the {cap:,}-byte cap")
        body = await _body(response, cap, truncate=False)
        if kind is None:
            if not re.match(rb"\s*(<!--.*?-->\s*)*<(!doctype html|html)", body[:1024], re.I | re.S):
                raise _Skip("not_text", "no Content-Type, and the body is not HTML")
            kind = "html"
        encoding = _codec(response.charset_encoding)
        return replace(reply, body=body, kind=kind, encoding=encoding, at=datetime.now(UTC))


def _dated(url: str, page: Page, scope: WebScope) -> Page:
    """``page`` as this read may take it under ``scope``'s ``since``: dropped when dated
    before it (`PageSkipped`), marked when undated."""
    if scope.since is None:
        return page
    if page.published is None:
        return replace(page, undated=True)
    if not scope.dated_in(page.published):
        since = scope.since.isoformat()
        reason = f"published {page.published.isoformat()}, before the run's since {since}"
        raise PageSkipped(url, "out_of_scope", reason, page.published)
    return page


def _checked_url(url: httpx.URL) -> httpx.URL:
    if not url.scheme:
        raise _Skip("bad_url", "not an absolute URL")
    if url.scheme not in ("http", "https"):
        raise _Skip("refused", f"only http and https are fetched, not {url.scheme} URLs")
    if not url.host:
        raise _Skip("bad_url", "the URL names no host")
    return url.copy_with(fragment=None)


def _next_hop(reply: Reply) -> httpx.URL:
    location = reply.headers.get("location")
    if not location:
        raise _Skip("http_status", f"HTTP {reply.status} redirect without a Location")
    try:
        return _checked_url(reply.url.join(location))
    except httpx.InvalidURL as exc:
        raise _Skip("bad_url", f"redirected to an invalid URL: {exc}") from None


def _text_kind(content_type: str) -> Literal["html", "text"] | None:
    media = content_type.partition(";")[0].strip().lower()
    if not media:
        return None  # sniffed from the body
    if media in ("text/html", "application/xhtml+xml"):
        return "html"
    if media == "text/plain":
        return "text"
    raise _Skip("not_text", f"{media} is not HTML or text")


async def _body(response: httpx.Response, cap: int, *, truncate: bool) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > cap:
            if not truncate:
                raise _Skip("too_large", f"over the {cap:,}-byte cap")
            chunks.append(chunk[: cap - size])
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _codec(name: str | None) -> str | None:
    try:
        return codecs.lookup(name).name if name else None
    except LookupError:
        return None


async def _page_of(reply: Reply, min_words: int) -> Page:
    found = await asyncio.to_thread(extract, reply)
    if len(found.text.split()) < min_words:
        raise _Skip("no_text", "no main text found (only navigation or boilerplate)")
    return Page(
        url=str(reply.url),
        title=found.title,
        text=found.text,
        fetched_at=reply.at,
        published=found.published,
    )


def _timeout_reason(exc: Exception, settings: ReaderSettings) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {settings.connect_timeout:g} s"
    if isinstance(exc, httpx.ReadTimeout):
        return f"no data for {settings.read_timeout:g} s"
    if isinstance(exc, TimeoutError):
        return f"not read within {settings.page_timeout:g} s"
    return _one_line(exc)


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
