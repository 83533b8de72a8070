"""Web search providers: each API's request and answer, cache, rate limit, Retry-After, fees,
failures, and the run's web scope asked in each provider's own terms and enforced after.

One table (`ROWS`) says what each provider is: the user's settings for it, its list price,
the request it sends (and what the web scope adds to it), and the hits its recorded answer
becomes (``tests/search_fixtures/<provider>.json``, one file a provider). The tests of the
wire formats run over the table; a new provider is one row and one fixture. HTTP providers
are driven through an httpx transport (`tests/search_wire.py`), DuckDuckGo through a
recorded ``DDGS``-like object raising ddgs' own exceptions. Nothing here reaches the network.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
from pydantic import SecretStr

from deep_research.adapters.branches.protocols import Searcher, SearchHit
from deep_research.adapters.web.retry_after import retry_after_seconds
from deep_research.adapters.web.search import default_rate_limits, make_provider, providers
from deep_research.adapters.web.search import (
    provider as find_provider,
)
from deep_research.adapters.web.search.base import RateLimits, SearchFailed, WebSearch
from deep_research.app.config import Settings
from deep_research.app.setting_types import SEARCH_PROVIDERS
from deep_research.core.errors import ConfigError
from deep_research.persistence.cache import ResultCache
from deep_research.sources.search import search_key, search_url
from tests.search_wire import Answer, Wire, recorded, replay

QUERY = "asyncio rate limiting"
KEY = "k-FAKEKEY-0123456789"
TODAY = date.today()
SINCE = TODAY - timedelta(days=20)  # a month back at most: SearXNG "month", DuckDuckGo "m"
SCOPE = {
    "domains": "pypi.org,python.org",
    "exclude_domains": "discuss.python.org",
    "since": SINCE.isoformat(),
}
UNSCOPED = dict.fromkeys(SCOPE, "")  # whatever the shell running the tests has set
SITES = "(site:pypi.org OR site:python.org) -site:discuss.python.org"
AIOLIMITER = "https://pypi.org/project/aiolimiter/"
ASYNCIO_SYNC = "https://docs.python.org/3/library/asyncio-sync.html"
DISCUSS = "https://discuss.python.org/t/rate-limiting-with-asyncio/31862"
STACK = "https://stackoverflow.com/questions/48483348/how-to-limit-concurrency-with-python-asyncio"
WIKIPEDIA = "https://en.wikipedia.org/wiki/Token_bucket"


# --- the table: one row a provider -------------------------------------------------------
@dataclass(frozen=True)
class Row:
    name: str
    settings: Mapping[str, str]
    """What the user sets for this provider (``Settings`` fields, by their env names)."""
    price: float
    """The list price of one request (checked 2026-11-23, see ``search/__init__.py``)."""
    sent: Mapping[str, object]
    """The request for `QUERY`, 5 results, flattened (`search_wire.Sent.flat`)."""
    scoped: Mapping[str, object]
    """What `SCOPE` changes in that request, in the provider's own terms."""
    not_scoped: tuple[str, ...]
    """What is never sent for `SCOPE`."""
    hits: list[SearchHit]
    """The recorded answer, read."""
    in_scope: frozenset[str]
    """What the filter keeps of the recorded answer under `SCOPE` (it ignored the scope)."""
    count: tuple[str, int] | None
    """Where the result count is sent, and the most one request may ask for."""
    results: tuple[str, ...] = ("results",)
    """Where the hits are in the answer."""


ROWS = [
    Row(
        "duckduckgo",
        settings={},
        price=0.0,
        sent={
            "method": "DDGS.text",
            "arg:query": QUERY,
            "kw:backend": "duckduckgo",  # "auto" would query other engines too
            "kw:max_results": 5,
            "kw:region": "us-en",
            "kw:safesearch": "moderate",
            "kw:timelimit": None,
        },
        scoped={"arg:query": f"{QUERY} {SITES}", "kw:timelimit": "m"},
        not_scoped=(),
        hits=[
            SearchHit(
                DISCUSS,
                "Rate limiting with asyncio - Python Discussions",
                "I want to limit the number of requests per second made by a group of asyncio "
                "tasks. A semaphore bounds concurrency, not rate...",
            ),
            SearchHit(
                AIOLIMITER,
                "aiolimiter · PyPI",
                "An efficient implementation of a rate limiter for asyncio. This project "
                "implements the Leaky bucket algorithm, giving you precise control over the "
                "rate a code section can be entered.",
            ),
            SearchHit(
                ASYNCIO_SYNC,
                "Synchronization Primitives — Python 3.13 documentation",
                "asyncio synchronization primitives are designed to be similar to those of the "
                "threading module with two important caveats: asyncio primitives are not "
                "thread-safe...",
            ),
            SearchHit(
                STACK,
                "How to limit concurrency with Python asyncio? - Stack Overflow",
                "Let's assume we have a bunch of links to download and each of the link may "
                "take a different amount of time to download.",
            ),
            SearchHit(
                WIKIPEDIA,
                "Token bucket - Wikipedia",
                "The token bucket is an algorithm used in packet-switched and "
                "telecommunications networks. It can be used to check that data transmissions "
                "conform to defined limits on bandwidth and burstiness.",
            ),
        ],
        in_scope=frozenset({AIOLIMITER, ASYNCIO_SYNC}),
        count=("kw:max_results", 20),
        results=(),
    ),
    Row(
        "searxng",
        settings={"searxng_url": "http://search.lan:8888/"},
        price=0.0,
        sent={
            "method": "GET",
            "url": "http://search.lan:8888/search",
            "param:q": QUERY,
            "param:format": "json",  # else a 403
            "param:categories": "general",
        },
        # No domain parameter: site: operators for its engines; a coarse time range.
        scoped={"param:q": f"{QUERY} {SITES}", "param:time_range": "month"},
        not_scoped=(),
        hits=[
            SearchHit(
                AIOLIMITER,
                "aiolimiter · PyPI",
                "An efficient implementation of a rate limiter for asyncio.",
            ),
            SearchHit(
                ASYNCIO_SYNC,
                "Synchronization Primitives — Python 3.13 documentation",
                "asyncio synchronization primitives are designed to be similar to those of the "
                "threading module.",
            ),
            SearchHit(WIKIPEDIA, "Token bucket - Wikipedia", ""),
        ],
        in_scope=frozenset({AIOLIMITER, ASYNCIO_SYNC}),
        count=None,  # one page, cut here
    ),
    Row(
        "tavily",
        settings={"TAVILY_API_KEY": KEY},
        price=0.008,
        sent={
            "method": "POST",
            "url": "https://api.tavily.com/search",
            "header:authorization": f"Bearer {KEY}",
            "json:query": QUERY,
            "json:max_results": 5,
            "json:search_depth": "basic",  # 1 credit
            "json:include_answer": False,
            "json:include_raw_content": False,
            "json:include_images": False,
        },
        scoped={
            "json:include_domains": ["pypi.org", "python.org"],
            "json:exclude_domains": ["discuss.python.org"],
            "json:start_date": SINCE.isoformat(),
        },
        not_scoped=(),
        hits=[
            SearchHit(
                AIOLIMITER,
                "aiolimiter · PyPI",
                "An efficient implementation of a rate limiter for asyncio. This project "
                "implements the Leaky bucket algorithm.",
            ),
            SearchHit(
                DISCUSS,
                "Rate limiting with asyncio - Python Discussions",
                "A semaphore bounds concurrency, not rate; for a rate, use a token or leaky "
                "bucket.",
            ),
            SearchHit(
                WIKIPEDIA,
                "Token bucket - Wikipedia",
                "The token bucket is an algorithm used in packet-switched networks.",
            ),
        ],
        in_scope=frozenset({AIOLIMITER}),
        count=("json:max_results", 20),
    ),
    Row(
        "brave",
        settings={"BRAVE_API_KEY": KEY},
        price=0.005,
        sent={
            "method": "GET",
            "url": "https://api.search.brave.com/res/v1/web/search",
            "header:x-subscription-token": KEY,
            "header:accept": "application/json",
            "param:q": QUERY,
            "param:count": "5",
        },
        scoped={
            "param:q": f"{QUERY} {SITES}",
            "param:freshness": f"{SINCE.isoformat()}to{TODAY.isoformat()}",
        },
        not_scoped=(),
        hits=[
            SearchHit(
                AIOLIMITER,
                "aiolimiter · PyPI",
                "An efficient implementation of a rate limiter for asyncio.",
            ),
            SearchHit(
                STACK,
                "How to limit concurrency with Python asyncio? - Stack Overflow",
                "Let's assume we have a bunch of links to download & each may take a different "
                "time.",
            ),
        ],
        in_scope=frozenset({AIOLIMITER}),
        count=("param:count", 20),
        results=("web", "results"),
    ),
    Row(
        "exa",
        settings={"EXA_API_KEY": KEY},
        price=0.007,
        sent={
            "method": "POST",
            "url": "https://api.exa.ai/search",
            "header:x-api-key": KEY,
            "json:query": QUERY,
            "json:numResults": 5,
            "json:type": "auto",
            "json:contents": {"highlights": True},
        },
        scoped={
            "json:includeDomains": ["pypi.org", "python.org"],
            "json:startPublishedDate": f"{SINCE.isoformat()}T00:00:00.000Z",
        },
        # One domain list a request: with allowed domains, the excluded are the filter's.
        not_scoped=("json:excludeDomains",),
        hits=[
            SearchHit(
                AIOLIMITER,
                "aiolimiter",
                "An efficient implementation of a rate limiter for asyncio. … This project "
                "implements the Leaky bucket algorithm.",
            ),
            SearchHit(
                WIKIPEDIA,
                "",
                "The token bucket is an algorithm used in packet-switched and telecommunications "
                "networks.",
            ),
        ],
        in_scope=frozenset({AIOLIMITER}),
        count=("json:numResults", 10),  # the price covers 10 results
    ),
]
BY_NAME = {row.name: row for row in ROWS}
HTTP = [row for row in ROWS if row.name != "duckduckgo"]
KEYED = [row for row in HTTP if row.name != "searxng"]


def rows(table: list[Row]) -> list[Any]:
    return [pytest.param(row, id=row.name) for row in table]


# --- the two wires ------------------------------------------------------------------------
@dataclass
class RecordedDDGS:
    """Stands in for ``ddgs.DDGS``: replays recorded rows or raises what ddgs raises."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    raises: BaseException | None = None
    hold: threading.Event | None = None
    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append((query, kwargs, threading.current_thread().name))
        if self.hold is not None:
            self.hold.wait(10)
        if self.raises is not None:
            raise self.raises
        return self.rows[: kwargs["max_results"]]


Double = Wire | RecordedDDGS


def answering(row: Row, answer: str = "answer") -> Double:
    """The provider's recorded ``answer``, to every request."""
    if row.name == "duckduckgo":
        return RecordedDDGS(rows=recorded(row.name)[answer])
    return Wire(replay(recorded(row.name)[answer]))


def widened(row: Row, n: int) -> Double:
    """The recorded answer with ``n`` hits: its first one, at ``n`` URLs."""
    if row.name == "duckduckgo":
        first = recorded(row.name)["answer"][0]
        return RecordedDDGS(rows=[{**first, "href": f"https://a.example/{i}"} for i in range(n)])
    return Wire(many(row, n))


def many(row: Row, n: int) -> Answer:
    answer = json.loads(json.dumps(recorded(row.name)["answer"]))
    node = answer["json"]
    for step in row.results[:-1]:
        node = node[step]
    first = node[row.results[-1]][0]
    node[row.results[-1]] = [{**first, "url": f"https://a.example/{i}"} for i in range(n)]
    return replay(answer)


def sent(double: Double) -> list[dict[str, object]]:
    """Every request the provider sent, flattened."""
    if isinstance(double, Wire):
        return [s.flat() for s in double.sent]
    return [
        {"method": "DDGS.text", "arg:query": query} | {f"kw:{k}": v for k, v in kwargs.items()}
        for query, kwargs, _ in double.calls
    ]


@dataclass
class Rig:
    """Builds providers as a run does, from the user's settings, onto a test double."""

    limits: RateLimits
    made: list[WebSearch] = field(default_factory=list)
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def provider(
        self,
        row: Row,
        double: Double,
        *,
        scope: Mapping[str, str] | None = None,
        settings: Mapping[str, str] | None = None,
        **options: Any,
    ) -> WebSearch:
        chosen = {**row.settings, **(settings or {}), **UNSCOPED, **(scope or {})}
        config = Settings(_env_file=None, search_provider=row.name, **chosen)  # type: ignore[call-arg]
        client = double.client() if isinstance(double, Wire) else None
        if client is not None:
            self.clients.append(client)
        options.setdefault("timeout", 5.0)
        provider = make_provider(
            row.name,
            limits=self.limits,
            api_key=search_key(config, row.name),
            base_url=search_url(config, row.name),
            scope=config.web_scope(),
            http_client=client,
            ddgs_client=double if isinstance(double, RecordedDDGS) else None,
            **options,
        )
        self.made.append(provider)
        return provider


@pytest.fixture
def limits() -> RateLimits:
    """Fast enough not to slow tests that are not about the rate."""
    return default_rate_limits(dict.fromkeys(SEARCH_PROVIDERS, 1000.0))


@pytest.fixture
async def rig(limits: RateLimits) -> AsyncIterator[Rig]:
    made = Rig(limits)
    yield made
    for provider in made.made:
        await provider.aclose()
    for client in made.clients:
        await client.aclose()


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResultCache]:
    store = ResultCache(tmp_path / "cache")
    yield store
    store.close()


def assert_alone(error: BaseException) -> None:
    """No library exception travels with ours (a traceback would show it, and its request)."""
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


def test_every_provider_has_a_row() -> None:
    assert set(SEARCH_PROVIDERS) <= set(BY_NAME)


# --- each provider's request and answer ------------------------------------------------------
@pytest.mark.parametrize("row", rows(ROWS))
async def test_each_provider_sends_its_request_and_reads_its_recorded_answer(
    row: Row, rig: Rig
) -> None:
    double = answering(row)

    search = rig.provider(row, double)
    outcome = await search.search(f"  {QUERY} ", 5)

    assert search.price_usd == row.price  # its documented list price
    assert outcome.hits == row.hits
    assert not outcome.cached
    (request,) = sent(double)
    assert {k: request.get(k) for k in row.sent} == row.sent
    assert not [k for k in row.scoped if k not in row.sent and k in request]


@pytest.mark.parametrize("row", rows(ROWS))
async def test_each_provider_is_asked_for_the_scope_in_its_own_terms_and_filtered_after(
    row: Row, rig: Rig
) -> None:
    """The recorded answer ignores the scope: the filter afterwards is the guarantee."""
    double = answering(row)

    outcome = await rig.provider(row, double, scope=SCOPE).search(QUERY, 5)

    (request,) = sent(double)
    expected = {**row.sent, **row.scoped}
    assert {k: request.get(k) for k in expected} == expected
    assert not [k for k in row.not_scoped if k in request]
    assert {h.url for h in outcome.hits} == row.in_scope
    assert len(outcome.hits) == len(row.in_scope)


@pytest.mark.parametrize("row", rows([row for row in ROWS if row.count]))
async def test_a_count_over_the_api_maximum_is_clamped_not_refused(row: Row, rig: Rig) -> None:
    assert row.count is not None
    where, most = row.count
    double = widened(row, 30)

    outcome = await rig.provider(row, double).search("many results", 50)

    (request,) = sent(double)
    assert request[where] == (str(most) if where.startswith("param:") else most)
    assert len(outcome.hits) == most


@pytest.mark.parametrize(
    ("row", "where"),
    [(BY_NAME["searxng"], "param:time_range"), (BY_NAME["duckduckgo"], "kw:timelimit")],
    ids=["searxng", "duckduckgo"],
)
async def test_a_since_no_coarse_range_covers_asks_for_no_range(
    row: Row, where: str, rig: Rig
) -> None:
    """Past a year back no "past day/week/month/year" covers ``since``: none is sent."""
    double = answering(row)
    long_ago = {"since": (TODAY - timedelta(days=400)).isoformat()}

    await rig.provider(row, double, scope=long_ago).search(QUERY, 5)

    (request,) = sent(double)
    assert request.get(where) is None


async def test_a_brave_answer_without_web_results_is_no_hits(rig: Rig) -> None:
    brave = BY_NAME["brave"]

    outcome = await rig.provider(brave, answering(brave, "nothing_found")).search("zzqxv", 5)

    assert outcome.hits == []


async def test_brave_leaves_the_operators_out_when_they_would_not_fit_its_query(
    rig: Rig,
) -> None:
    """Brave's q takes at most 400 characters and 50 words: 50 domains' operators do not
    fit, so the query goes unnarrowed and the filter alone keeps the scope."""
    brave = BY_NAME["brave"]
    domains = ",".join([f"d{n}.example" for n in range(49)] + ["pypi.org"])
    double = answering(brave)

    outcome = await rig.provider(brave, double, scope={"domains": domains}).search(QUERY, 5)

    (request,) = sent(double)
    assert request["param:q"] == QUERY
    assert {h.url for h in outcome.hits} == {AIOLIMITER}


# --- DuckDuckGo through a recorded DDGS -------------------------------------------------
def ddg(limits: RateLimits, client: RecordedDDGS, **options: Any) -> WebSearch:
    return make_provider("duckduckgo", limits=limits, ddgs_client=client, **options)


async def test_duckduckgo_asks_ddgs_off_the_event_loop(limits: RateLimits) -> None:
    client = RecordedDDGS(rows=recorded("duckduckgo")["answer"])

    outcome = await ddg(limits, client).search(QUERY, 3)

    assert outcome.hits == BY_NAME["duckduckgo"].hits[:3]
    ((_, _, thread),) = client.calls
    assert thread != threading.main_thread().name


@pytest.mark.parametrize(
    ("raised", "kind", "reason"),
    [
        (RatelimitException("https://html.duckduckgo.com/html 202 Ratelimit"), "rate_limited",
         "duckduckgo: DuckDuckGo is rate limiting this address"),
        (TimeoutException("https://html.duckduckgo.com/html/ timed out"), "timeout",
         "duckduckgo: DuckDuckGo did not answer in time"),
        (DDGSException("ConnectError: ConnectError('error sending request for url "
                       "(https://html.duckduckgo.com/html/)')"), "network",
         "duckduckgo: search failed (ConnectError: ConnectError('error sending request"),
    ],
)  # fmt: skip
async def test_ddgs_exceptions_become_one_typed_failure(
    raised: BaseException, kind: str, reason: str, limits: RateLimits
) -> None:
    with pytest.raises(SearchFailed) as failed:
        await ddg(limits, RecordedDDGS(raises=raised)).search(QUERY, 5)

    assert failed.value.kind == kind
    assert str(failed.value).startswith(reason)
    assert "\n" not in str(failed.value)
    assert_alone(failed.value)


async def test_ddgs_failure_text_loses_proxy_credentials(limits: RateLimits) -> None:
    raised = DDGSException("ProxyError: 'http://alice:hunter2@proxy.lan:3128' refused")

    with pytest.raises(SearchFailed) as failed:
        await ddg(limits, RecordedDDGS(raises=raised)).search(QUERY, 5)

    assert "hunter2" not in str(failed.value)
    assert "proxy.lan:3128" in str(failed.value)


async def test_ddgs_no_results_is_an_empty_answer_that_is_not_cached(
    limits: RateLimits, cache: ResultCache
) -> None:
    client = RecordedDDGS(raises=DDGSException("No results found."))
    provider = ddg(limits, client, cache=cache)

    first = await provider.search("zzqxv nothing", 5)
    second = await provider.search("zzqxv nothing", 5)

    assert first.hits == second.hits == []
    assert not second.cached
    assert len(client.calls) == 2  # may have been DuckDuckGo's rate limit page: ask again


async def test_a_hung_ddgs_call_is_abandoned_at_the_deadline(limits: RateLimits) -> None:
    hold = threading.Event()
    client = RecordedDDGS(rows=recorded("duckduckgo")["answer"], hold=hold)
    try:
        with pytest.raises(SearchFailed) as failed:
            await ddg(limits, client, timeout=0.2).search(QUERY, 5)
    finally:
        hold.set()

    assert failed.value.kind == "timeout"
    assert str(failed.value) == "duckduckgo: no answer within 0.2s"


# --- the cache --------------------------------------------------------------------------
async def test_a_repeated_query_is_served_from_the_cache_normalised_and_free(
    rig: Rig, cache: ResultCache
) -> None:
    wire = answering(BY_NAME["tavily"])
    provider = rig.provider(BY_NAME["tavily"], wire, cache=cache)

    first = await provider.search("Asyncio  Rate\tLimiting", 5)
    again = await provider.search("asyncio rate limiting", 5)
    fewer = await provider.search("ASYNCIO RATE LIMITING", 2)

    assert len(sent(wire)) == 1
    assert (first.cached, again.cached) == (False, True)
    assert again.hits == first.hits
    assert fewer.cached
    assert fewer.hits == first.hits[:2]


@dataclass
class DictStore:
    """Any `ResultStore`: this one normalises nothing itself."""

    values: dict[tuple[str, str, str], str] = field(default_factory=dict)

    async def get(self, tool: str, model: str, query: str) -> str | None:
        return self.values.get((tool, model, query))

    async def set(self, tool: str, model: str, query: str, value: str) -> None:
        self.values[(tool, model, query)] = value


async def test_the_cache_key_is_provider_and_normalised_query_and_holds_only_hits(
    rig: Rig,
) -> None:
    store = DictStore()
    wire = answering(BY_NAME["brave"])
    provider = rig.provider(BY_NAME["brave"], wire, cache=store)

    first = await provider.search("Asyncio  Rate\tLimiting", 2)
    again = await provider.search("ASYNCIO rate limiting", 2)

    assert again.cached
    assert len(sent(wire)) == 1
    ((key, value),) = store.values.items()
    assert key == ("web_search@v1", "brave", "asyncio rate limiting")
    assert json.loads(value) == {
        "schema": 1,
        "asked": 2,
        "hits": [{"url": h.url, "title": h.title, "snippet": h.snippet} for h in first.hits],
    }


async def test_a_damaged_cache_value_is_a_miss_and_is_rewritten(rig: Rig) -> None:
    store = DictStore({("web_search@v1", "exa", "asyncio rate limiting"): '{"schema": 1, "hits'})
    wire = answering(BY_NAME["exa"])

    outcome = await rig.provider(BY_NAME["exa"], wire, cache=store).search(QUERY, 3)

    assert not outcome.cached
    assert len(sent(wire)) == 1
    assert json.loads(store.values[("web_search@v1", "exa", QUERY)])["asked"] == 3


async def test_the_cache_persists_and_is_kept_apart_per_provider(rig: Rig, tmp_path: Path) -> None:
    tavily, brave = answering(BY_NAME["tavily"]), answering(BY_NAME["brave"])
    store = ResultCache(tmp_path / "shared")
    try:
        await rig.provider(BY_NAME["tavily"], tavily, cache=store).search(QUERY, 5)
        second = await rig.provider(BY_NAME["brave"], brave, cache=store).search(QUERY, 5)
        reopened = ResultCache(tmp_path / "shared")
        later = await rig.provider(BY_NAME["tavily"], tavily, cache=reopened).search(QUERY, 5)
        reopened.close()
    finally:
        store.close()

    assert not second.cached
    assert later.cached
    assert [len(sent(tavily)), len(sent(brave))] == [1, 1]


async def test_asking_for_more_than_was_cached_searches_again_unless_that_was_all(
    rig: Rig, cache: ResultCache
) -> None:
    exa = BY_NAME["exa"]
    three, plenty = many(exa, 3), many(exa, 30)
    wire = Wire(lambda request: (three if b"three only" in request.content else plenty)(request))
    provider = rig.provider(exa, wire, cache=cache)

    await provider.search(QUERY, 2)
    more = await provider.search(QUERY, 5)
    await provider.search("three only", 5)
    all_there_was = await provider.search("three only", 8)

    assert not more.cached
    assert len(more.hits) == 5
    assert all_there_was.cached
    assert len(all_there_was.hits) == 3
    assert [r["json:numResults"] for r in sent(wire)] == [2, 5, 5]


async def test_a_scoped_search_is_cached_apart_from_the_same_query_unscoped(
    rig: Rig, cache: ResultCache
) -> None:
    searxng = BY_NAME["searxng"]
    wire = answering(searxng)
    plain = rig.provider(searxng, wire, cache=cache)
    scoped = rig.provider(searxng, wire, cache=cache, scope=SCOPE)

    everything = await plain.search(QUERY, 10)
    narrowed = await scoped.search(QUERY, 10)
    again = await scoped.search(QUERY, 10)

    assert everything.hits == searxng.hits
    assert not narrowed.cached
    assert {h.url for h in narrowed.hits} == searxng.in_scope
    assert again.cached
    assert again.hits == narrowed.hits
    assert len(sent(wire)) == 2


# --- rate limits ------------------------------------------------------------------------
WINDOW = 0.2  # the server accepts at most 2 requests in any 0.2 s


def rate_limited(row: Row, retry_after: str | None) -> Answer:
    """The provider's 429, with ``Retry-After: retry_after`` (None: without one)."""
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    error = recorded(row.name)["error"]
    return replay(error, status=429, message="Too Many Requests", headers=headers)


def server_limit(row: Row, count: int, per: float) -> Answer:
    """A server that accepts at most ``count`` requests in any ``per`` seconds and answers
    the rest 429 with a whole-second Retry-After."""
    accepted: deque[float] = deque()
    ok = replay(recorded(row.name)["answer"])

    def answer(request: httpx.Request) -> httpx.Response:
        now = time.monotonic()
        while accepted and accepted[0] <= now - per:
            accepted.popleft()
        if len(accepted) >= count:
            wait = str(max(1, math.ceil(accepted[0] + per - now)))
            return rate_limited(row, wait)(request)
        accepted.append(now)
        return ok(request)

    return answer


def busiest_window(arrivals: list[float], width: float) -> int:
    arrivals = sorted(arrivals)
    return max(
        sum(1 for t in arrivals[i:] if t - start < width) for i, start in enumerate(arrivals)
    )


async def test_concurrent_searches_of_one_provider_stay_under_the_server_rate_limit(
    rig: Rig,
) -> None:
    searxng = BY_NAME["searxng"]
    wire = Wire(server_limit(searxng, 2, WINDOW))
    # 1 every 0.25 s: 2 per window at most, with room for a loaded machine's jitter (at 1
    # every 0.167 s, one request sent 0.14 s late put three in one window)
    rig.limits = default_rate_limits({"searxng": 4.0})
    # Two providers of one name (two runs in one process) share the process's bucket.
    one, two = (rig.provider(searxng, wire) for _ in range(2))

    outcomes = await asyncio.gather(
        *(p.search(f"query {i}", 5) for i, p in enumerate([one, two] * 6))
    )

    assert all(o.hits == searxng.hits for o in outcomes)
    assert [s.status for s in wire.sent] == [200] * 12
    arrivals = [s.at for s in wire.sent]
    assert busiest_window(arrivals, WINDOW) <= 2
    assert max(arrivals) - min(arrivals) >= 11 / 4.0 * 0.9


async def test_without_our_limit_the_same_burst_is_refused_by_the_server(rig: Rig) -> None:
    """The control for the test above: the server's limit is real, so that test can fail."""
    searxng = BY_NAME["searxng"]
    wire = Wire(server_limit(searxng, 2, WINDOW))
    provider = rig.provider(searxng, wire, max_retry_after=0)

    outcomes = await asyncio.gather(
        *(provider.search(f"query {i}", 3) for i in range(12)), return_exceptions=True
    )

    refused = [o for o in outcomes if isinstance(o, SearchFailed)]
    assert refused
    assert all(o.kind == "rate_limited" for o in refused)
    assert any(s.status == 429 for s in wire.sent)


async def test_rate_limits_belong_to_the_event_loop_that_first_used_them() -> None:
    limits = RateLimits({"tavily": 1000.0})
    await limits.acquire("tavily")

    with pytest.raises(RuntimeError, match="another event loop"):
        await asyncio.to_thread(asyncio.run, limits.acquire("tavily"))


def test_rate_limits_refuse_a_rate_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="brave"):
        RateLimits({"brave": 0.0})


# --- Retry-After ------------------------------------------------------------------------
async def test_a_429_with_retry_after_is_waited_out_once_and_billed_once(rig: Rig) -> None:
    tavily = BY_NAME["tavily"]
    wire = Wire(replay(recorded("tavily")["answer"]), rate_limited(tavily, "0.3"))

    outcome = await rig.provider(tavily, wire).search(QUERY, 5)

    first, second = wire.sent
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 0.3
    assert outcome.hits == tavily.hits


async def test_the_wait_pauses_every_search_of_that_provider(rig: Rig) -> None:
    brave = BY_NAME["brave"]
    wire = Wire(replay(recorded("brave")["answer"]), rate_limited(brave, "0.4"))
    rig.limits = default_rate_limits({"brave": 5.0})  # "second" would go 0.2 s after "first"
    provider = rig.provider(brave, wire)

    first, second = await asyncio.gather(provider.search("first", 3), provider.search("second", 3))

    limited, *rest = wire.sent
    assert (limited.request.url.params["q"], limited.status) == ("first", 429)
    assert first.hits
    assert second.hits
    assert sorted(s.request.url.params["q"] for s in rest) == ["first", "second"]
    assert all(s.at - limited.at >= 0.4 for s in rest)


async def test_a_second_429_fails_the_search_without_a_third_request(rig: Rig) -> None:
    exa = BY_NAME["exa"]
    wire = Wire(replay(recorded("exa")["answer"]), *[rate_limited(exa, "0.1")] * 2)

    with pytest.raises(SearchFailed) as failed:
        await rig.provider(exa, wire).search(QUERY, 5)

    assert failed.value.kind == "rate_limited"
    assert str(failed.value) == "exa: rate limited again (HTTP 429) after waiting 0.1s as asked"
    assert [s.status for s in wire.sent] == [429, 429]


@pytest.mark.parametrize(
    ("retry_after", "reason"),
    [
        (
            "120",
            "tavily: rate limited (HTTP 429): Retry-After 120s is over the 30s this tool waits",
        ),
        (None, "tavily: rate limited (HTTP 429, no Retry-After)"),
    ],
)
async def test_a_429_that_cannot_be_waited_out_fails_at_once(
    retry_after: str | None, reason: str, rig: Rig
) -> None:
    tavily = BY_NAME["tavily"]
    wire = Wire(replay(recorded("tavily")["answer"]), rate_limited(tavily, retry_after))

    with pytest.raises(SearchFailed) as failed:
        await rig.provider(tavily, wire).search(QUERY, 5)

    assert str(failed.value) == reason
    assert len(wire.sent) == 1


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    now = datetime(2026, 11, 23, 7, 28, 0, tzinfo=UTC)
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds("0.25") == 0.25
    assert retry_after_seconds("Mon, 23 Nov 2026 07:28:30 GMT", now) == 30.0
    assert retry_after_seconds("Mon, 23 Nov 2026 07:00:00 GMT", now) == 0.0
    assert [retry_after_seconds(v) for v in (None, "", "-1", "nan", "soon")] == [None] * 5


@pytest.mark.parametrize(
    ("header", "waited"),
    [("3", 3.0), ("120", 60.0), ("Mon, 23 Nov 2000 07:00:00 GMT", 0.0), (None, 2.0), ("-1", 2.0)],
)
def test_the_openai_jobs_read_retry_after_as_the_search_providers_do(
    header: str | None, waited: float
) -> None:
    """One parser: the background jobs take its seconds (capped at 60 s) or their backoff."""
    import openai

    from deep_research.adapters.web.openai_jobs import _retry_after

    headers = {"retry-after": header} if header is not None else {}
    request = httpx.Request("POST", "https://api.openai.com/v1/responses")
    exc = openai.RateLimitError(
        "slow down", response=httpx.Response(429, headers=headers, request=request), body=None
    )
    assert _retry_after(exc, 2.0) == waited
    assert retry_after_seconds(header) in (None, waited) or waited == 60.0


# --- failures: one typed error, one line ------------------------------------------------
Fault = Callable[[dict[str, Any]], Answer]
"""What goes wrong, from the provider's recorded answers."""


def error(status: int, message: str = "") -> Fault:
    return lambda answers: replay(answers["error"], status=status, message=message)


def said(name: str) -> Fault:
    return lambda answers: replay(answers[name])


def body(status: int, content: bytes) -> Fault:
    headers = {"content-type": "application/json"}
    return lambda answers: lambda request: httpx.Response(status, content=content, headers=headers)


def slow(seconds: float) -> Fault:
    async def answer(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(seconds)
        return httpx.Response(200, json={})

    return lambda answers: answer


def raising(exc: type[httpx.TransportError], text: str) -> Fault:
    def answer(request: httpx.Request) -> httpx.Response:
        raise exc(text, request=request)

    return lambda answers: answer


FAILURES: list[tuple[str, Fault, str, str]] = [
    ("tavily", said("refused_key"), "auth", "tavily: the API key was refused (HTTP 401)"),
    ("brave", said("refused_key"), "auth",
     "brave: the API key was refused (HTTP 422 SUBSCRIPTION_TOKEN_INVALID)"),
    ("exa", said("refused_key"), "auth", "exa: the API key was refused (HTTP 401)"),
    ("tavily", error(403, "Forbidden"), "auth", "tavily: the API key was refused (HTTP 403)"),
    ("tavily", error(432, "This request exceeds your plan's set usage limit. Please upgrade "
                     "your plan or contact support@tavily.com"), "quota",
     "tavily: out of credit or over the plan (HTTP 432): This request exceeds your plan's set "
     "usage limit. Please upgrade your plan or contact support@tavily.com"),
    ("exa", error(402, "You have run out of credits"), "quota",
     "exa: out of credit or over the plan (HTTP 402): You have run out of credits"),
    ("brave", error(503, "Service Unavailable"), "unavailable",
     "brave: the service is unavailable (HTTP 503)"),
    ("searxng", error(500, "Internal server error"), "unavailable",
     "searxng: the service is unavailable (HTTP 500)"),
    ("tavily", error(400, "Invalid topic"), "refused",
     "tavily: the request was refused (HTTP 400): Invalid topic"),
    ("exa", slow(2.0), "timeout", "exa: no answer within 0.3s"),
    ("tavily", body(200, b'{"results": [{"url": "https://ex'), "bad_response",
     "tavily: the answer is not JSON (HTTP 200)"),
    ("brave", body(200, b'{"unexpected": true}'), "bad_response",
     "brave: the answer has no web.results list (HTTP 200)"),
    ("searxng", raising(httpx.RemoteProtocolError, "Server disconnected without sending a "
                        "response."), "network",
     "searxng: the connection to search.lan:8888 broke off"),
    ("searxng", said("json_off"), "refused",
     "searxng: the server does not answer in JSON (HTTP 403): add json to search.formats in its "
     "settings.yml"),
    ("exa", raising(httpx.ConnectError, "[Errno 111] Connection refused"), "network",
     "exa: cannot connect to api.exa.ai"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "fault", "kind", "reason"), FAILURES)
async def test_every_failure_is_one_typed_error_with_a_one_line_reason(
    name: str, fault: Fault, kind: str, reason: str, rig: Rig
) -> None:
    wire = Wire(fault(recorded(name)))
    provider = rig.provider(BY_NAME[name], wire, timeout=0.3)

    with pytest.raises(SearchFailed) as failed:
        await provider.search(QUERY, 5)

    message = str(failed.value)
    assert (failed.value.kind, failed.value.provider) == (kind, name)
    assert message == reason
    assert len(wire.sent) == 1
    assert_alone(failed.value)


# --- secrets ----------------------------------------------------------------------------
@pytest.mark.parametrize("row", rows(KEYED))
async def test_the_key_reaches_no_error_message_and_no_cache_file(
    row: Row, rig: Rig, tmp_path: Path
) -> None:
    answers = recorded(row.name)
    echoing = f"request from key {KEY} refused"  # some APIs quote the key they were sent
    wire = Wire(
        replay(answers["answer"]),
        *(replay(answers["error"], status=s, message=echoing) for s in (400, 402, 432, 500, 503)),
        replay(answers["error"], status=429, message=echoing, headers={"retry-after": "5"}),
        body(200, b'{"results": [{"url": "https://ex')(answers),
    )
    store = ResultCache(tmp_path / "cache")
    provider = rig.provider(row, wire, cache=store, max_retry_after=0)
    messages = []
    for _ in range(7):
        with pytest.raises(SearchFailed) as failed:
            await provider.search(QUERY, 5)
        messages.append(str(failed.value))
    await provider.search(QUERY, 5)
    await provider.search("another query", 5)
    key_env = find_provider(row.name).key_env
    assert key_env is not None
    revoked = {key_env: f"{KEY}-revoked"}
    wrong = rig.provider(row, answering(row, "refused_key"), settings=revoked)
    with pytest.raises(SearchFailed) as refused:
        await wrong.search("fresh query", 5)
    messages.append(str(refused.value))
    store.close()

    assert len(messages) == 8
    assert any("[redacted]" in m for m in messages)
    assert not [m for m in messages if KEY in m]
    cache_bytes = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert b"pypi.org" in cache_bytes  # the files read are the ones holding the hits
    assert KEY.encode() not in cache_bytes
    assert KEY not in repr(provider.api)


# --- the factory ------------------------------------------------------------------------
def test_make_provider_refuses_what_cannot_work(limits: RateLimits) -> None:
    with pytest.raises(ConfigError, match=r"unknown search provider 'bing': choose one of .*exa"):
        make_provider("bing", limits=limits)
    with pytest.raises(ConfigError, match="needs an API key: set TAVILY_API_KEY"):
        make_provider("tavily", limits=limits)
    with pytest.raises(ConfigError, match="needs an API key: set BRAVE_API_KEY"):
        make_provider("brave", limits=limits, api_key=SecretStr("  "))
    with pytest.raises(ConfigError, match="searxng search provider needs the base URL"):
        make_provider("searxng", limits=limits)
    with pytest.raises(ConfigError, match="not an http"):
        make_provider("searxng", limits=limits, base_url="ftp://search.lan")


async def test_make_provider_builds_every_provider_as_a_searcher(limits: RateLimits) -> None:
    for name in SEARCH_PROVIDERS:
        made: Searcher = make_provider(
            name,
            limits=limits,
            api_key=SecretStr("k-123456"),
            base_url="http://search.lan" if name == "searxng" else None,
            price_usd=0.5 if name == "exa" else None,
        )
        assert made.name == name
        assert isinstance(made, WebSearch)
        assert made.price_usd == (0.5 if name == "exa" else find_provider(name).price_usd)
        await made.aclose()


def test_importing_ddgs_and_the_providers_opens_no_connection() -> None:
    guard = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise SystemExit('network I/O at import: ' + repr(a[:2]))\n"
        "socket.socket.connect = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "import ddgs\n"
        "from ddgs import DDGS\n"
        "DDGS(timeout=5)\n"
        "import deep_research.adapters.web.search\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", guard], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


def test_every_provider_has_its_defaults_and_the_settings_take_the_same_names() -> None:
    """The built-in providers (``setting_types.SEARCH_PROVIDERS``) are the settings' names, the
    factory's and the errors'."""
    assert list(providers())[: len(SEARCH_PROVIDERS)] == list(SEARCH_PROVIDERS)
    assert Settings.model_fields["search_provider"].default == "duckduckgo" == SEARCH_PROVIDERS[0]
    for name in SEARCH_PROVIDERS:
        assert Settings(_env_file=None, search_provider=name).search_provider == name  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="choose one of " + ", ".join(SEARCH_PROVIDERS)):
        make_provider("bing", limits=default_rate_limits({}))
