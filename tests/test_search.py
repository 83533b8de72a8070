"""Web search providers: parsing real shapes, cache, rate limit, Retry-After, fees, failures.

HTTP providers run against `tests/fake_search.py` on loopback; DuckDuckGo against a recorded
``DDGS``-like object raising ddgs' own exceptions. Nothing here reaches the network.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
from pydantic import SecretStr

from deep_research.adapters.branches.protocols import Searcher, SearchHit
from deep_research.adapters.web.retry_after import retry_after_seconds
from deep_research.adapters.web.search import (
    DEFAULTS,
    RateLimits,
    SearchFailed,
    WebSearch,
    default_rate_limits,
    make_provider,
)
from deep_research.core.errors import ConfigError
from deep_research.core.models import SEARCH_PROVIDERS
from deep_research.persistence.cache import ResultCache
from tests.fake_search import Api, Doc, FakeSearch, Fault, rate_limited

FIXTURES = Path(__file__).parent / "search_fixtures"
QUERY = "asyncio rate limiting"
KEYED: tuple[Api, ...] = ("tavily", "brave", "exa")


# --- fixtures and helpers ---------------------------------------------------------------
@pytest.fixture
def fake() -> Iterator[FakeSearch]:
    with FakeSearch() as server:
        yield server
    if server.errors:
        pytest.fail("FakeSearch saw errors:\n" + "\n".join(server.errors))


@pytest.fixture
def limits() -> RateLimits:
    """Fast enough not to slow tests that are not about the rate."""
    return default_rate_limits(dict.fromkeys(SEARCH_PROVIDERS, 1000.0))


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResultCache]:
    store = ResultCache(tmp_path / "cache")
    yield store
    store.close()


@pytest.fixture
async def providers() -> AsyncIterator[list[WebSearch]]:
    """Providers appended here are closed at teardown."""
    made: list[WebSearch] = []
    yield made
    for provider in made:
        await provider.aclose()


def build(
    fake: FakeSearch,
    api: Api,
    limits: RateLimits,
    made: list[WebSearch],
    *,
    key: str | None = None,
    **options: Any,
) -> WebSearch:
    api_key = None if api == "searxng" else SecretStr(key or fake.key(api))
    options.setdefault("timeout", 5.0)
    provider = make_provider(api, limits=limits, api_key=api_key, base_url=fake.url(api), **options)
    made.append(provider)
    return provider


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def assert_alone(error: BaseException) -> None:
    """No library exception travels with ours (a traceback would show it, and its request)."""
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- parsing each API's answer ----------------------------------------------------------
AIOLIMITER = "https://pypi.org/project/aiolimiter/"
WIKIPEDIA = "https://en.wikipedia.org/wiki/Token_bucket"
EXPECTED: dict[Api, list[SearchHit]] = {
    "searxng": [
        SearchHit(
            AIOLIMITER,
            "aiolimiter · PyPI",
            "An efficient implementation of a rate limiter for asyncio.",
        ),
        SearchHit(
            "https://docs.python.org/3/library/asyncio-sync.html",
            "Synchronization Primitives — Python 3.13 documentation",
            "asyncio synchronization primitives are designed to be similar to those of the "
            "threading module.",
        ),
        SearchHit(WIKIPEDIA, "Token bucket - Wikipedia", ""),
    ],
    "tavily": [
        SearchHit(
            AIOLIMITER,
            "aiolimiter · PyPI",
            "An efficient implementation of a rate limiter for asyncio. This project "
            "implements the Leaky bucket algorithm.",
        ),
        SearchHit(
            "https://discuss.python.org/t/rate-limiting-with-asyncio/31862",
            "Rate limiting with asyncio - Python Discussions",
            "A semaphore bounds concurrency, not rate; for a rate, use a token or leaky bucket.",
        ),
        SearchHit(
            WIKIPEDIA,
            "Token bucket - Wikipedia",
            "The token bucket is an algorithm used in packet-switched networks.",
        ),
    ],
    "brave": [
        SearchHit(
            AIOLIMITER,
            "aiolimiter · PyPI",
            "An efficient implementation of a rate limiter for asyncio.",
        ),
        SearchHit(
            "https://stackoverflow.com/questions/48483348/how-to-limit-concurrency-with-python-asyncio",
            "How to limit concurrency with Python asyncio? - Stack Overflow",
            "Let's assume we have a bunch of links to download & each may take a different time.",
        ),
    ],
    "exa": [
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
}


@pytest.mark.parametrize("api", ["searxng", "tavily", "brave", "exa"])
async def test_each_api_answer_becomes_plain_hits_and_reports_its_fee(
    api: Api, fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    fake.replies[(api, QUERY)] = fixture(f"{api}.json")
    provider = build(fake, api, limits, providers)

    outcome = await provider.search(f"  {QUERY} ", 5)

    assert outcome.hits == EXPECTED[api]
    assert not outcome.cached
    assert outcome.fee_usd == DEFAULTS[api].price_usd
    (sent,) = fake.of(api)
    assert (sent.query, sent.key_ok, sent.status) == (
        QUERY,
        None if api == "searxng" else True,
        200,
    )
    assert sent.count == {"searxng": None, "tavily": 5, "brave": 5, "exa": 5}[api]


def test_the_paid_providers_default_to_their_list_prices() -> None:
    prices = {name: DEFAULTS[name].price_usd for name in SEARCH_PROVIDERS}
    assert prices == {"duckduckgo": 0, "searxng": 0, "tavily": 0.008, "brave": 0.005, "exa": 0.007}


@pytest.mark.parametrize(("api", "sent"), [("tavily", 20), ("brave", 20), ("exa", 10)])
async def test_a_count_over_the_api_maximum_is_clamped_not_refused(
    api: Api, sent: int, fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    outcome = await build(fake, api, limits, providers).search("many results", 50)

    assert [r.count for r in fake.of(api)] == [sent]
    assert len(outcome.hits) == sent


async def test_a_brave_answer_without_web_results_is_no_hits(
    fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    fake.corpus["nothing matches this"] = []

    outcome = await build(fake, "brave", limits, providers).search("Nothing matches this", 5)

    assert outcome.hits == []
    assert outcome.fee_usd == DEFAULTS["brave"].price_usd  # Brave bills the request anyway


# --- DuckDuckGo through a recorded DDGS -------------------------------------------------
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


def ddg(limits: RateLimits, client: RecordedDDGS, **options: Any) -> WebSearch:
    return make_provider("duckduckgo", limits=limits, ddgs_client=client, **options)


async def test_duckduckgo_asks_ddgs_for_duckduckgo_only_off_the_event_loop(
    limits: RateLimits,
) -> None:
    client = RecordedDDGS(rows=fixture("ddgs_text.json"))

    outcome = await ddg(limits, client).search(QUERY, 3)

    assert [h.url for h in outcome.hits] == [r["href"] for r in fixture("ddgs_text.json")[:3]]
    assert outcome.hits[1] == SearchHit(
        AIOLIMITER,
        "aiolimiter · PyPI",
        "An efficient implementation of a rate limiter for asyncio. This project implements "
        "the Leaky bucket algorithm, giving you precise control over the rate a code section "
        "can be entered.",
    )
    assert outcome.fee_usd == 0
    ((query, kwargs, thread),) = client.calls
    assert query == QUERY
    assert kwargs["backend"] == "duckduckgo"  # "auto" would query other engines too
    assert kwargs["max_results"] == 3
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
    client = RecordedDDGS(rows=fixture("ddgs_text.json"), hold=hold)
    try:
        with pytest.raises(SearchFailed) as failed:
            await ddg(limits, client, timeout=0.2).search(QUERY, 5)
    finally:
        hold.set()

    assert failed.value.kind == "timeout"
    assert str(failed.value) == "duckduckgo: no answer within 0.2s"


# --- the cache --------------------------------------------------------------------------
async def test_a_repeated_query_is_served_from_the_cache_normalised_and_free(
    fake: FakeSearch, limits: RateLimits, cache: ResultCache, providers: list[WebSearch]
) -> None:
    provider = build(fake, "tavily", limits, providers, cache=cache)

    first = await provider.search("Asyncio  Rate\tLimiting", 5)
    again = await provider.search("asyncio rate limiting", 5)
    fewer = await provider.search("ASYNCIO RATE LIMITING", 2)

    assert len(fake.of("tavily")) == 1
    assert (first.cached, first.fee_usd) == (False, 0.008)
    assert (again.cached, again.fee_usd) == (True, 0.0)
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
    fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    store = DictStore()
    provider = build(fake, "brave", limits, providers, cache=store)

    first = await provider.search("Asyncio  Rate\tLimiting", 2)
    again = await provider.search("ASYNCIO rate limiting", 2)

    assert again.cached
    assert len(fake.of("brave")) == 1
    ((key, value),) = store.values.items()
    assert key == ("web_search@v1", "brave", "asyncio rate limiting")
    assert json.loads(value) == {
        "schema": 1,
        "asked": 2,
        "hits": [{"url": h.url, "title": h.title, "snippet": h.snippet} for h in first.hits],
    }


async def test_a_damaged_cache_value_is_a_miss_and_is_rewritten(
    fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    store = DictStore({("web_search@v1", "exa", "asyncio rate limiting"): '{"schema": 1, "hits'})
    provider = build(fake, "exa", limits, providers, cache=store)

    outcome = await provider.search(QUERY, 3)

    assert not outcome.cached
    assert len(fake.of("exa")) == 1
    assert json.loads(store.values[("web_search@v1", "exa", QUERY)])["asked"] == 3


async def test_the_cache_persists_and_is_kept_apart_per_provider(
    fake: FakeSearch, limits: RateLimits, tmp_path: Path, providers: list[WebSearch]
) -> None:
    store = ResultCache(tmp_path / "shared")
    try:
        await build(fake, "tavily", limits, providers, cache=store).search(QUERY, 5)
        brave = await build(fake, "brave", limits, providers, cache=store).search(QUERY, 5)
        reopened = ResultCache(tmp_path / "shared")
        later = await build(fake, "tavily", limits, providers, cache=reopened).search(QUERY, 5)
        reopened.close()
    finally:
        store.close()

    assert not brave.cached
    assert later.cached
    assert [len(fake.of(api)) for api in ("tavily", "brave")] == [1, 1]


async def test_asking_for_more_than_was_cached_searches_again_unless_that_was_all(
    fake: FakeSearch, limits: RateLimits, cache: ResultCache, providers: list[WebSearch]
) -> None:
    fake.corpus["three only"] = [Doc(f"https://a.example/{i}", f"t{i}", "s") for i in range(3)]
    provider = build(fake, "exa", limits, providers, cache=cache)

    await provider.search(QUERY, 2)
    more = await provider.search(QUERY, 5)
    await provider.search("three only", 5)
    all_there_was = await provider.search("three only", 8)

    assert not more.cached
    assert len(more.hits) == 5
    assert all_there_was.cached
    assert len(all_there_was.hits) == 3
    assert [r.count for r in fake.of("exa")] == [2, 5, 5]


# --- rate limits ------------------------------------------------------------------------
WINDOW = 0.2  # the fake accepts at most 2 requests in any 0.2 s


def busiest_window(arrivals: list[float], width: float) -> int:
    arrivals = sorted(arrivals)
    return max(
        sum(1 for t in arrivals[i:] if t - start < width) for i, start in enumerate(arrivals)
    )


async def test_concurrent_searches_of_one_provider_stay_under_the_server_rate_limit(
    fake: FakeSearch, providers: list[WebSearch]
) -> None:
    fake.limit("searxng", 2, WINDOW)
    # 1 every 0.25 s: 2 per window at most, with room for a loaded machine's jitter (at 1
    # every 0.167 s, one request sent 0.14 s late put three in one window)
    limits = default_rate_limits({"searxng": 4.0})
    # Two providers of one name (two runs in one process) share the process's bucket.
    one, two = (build(fake, "searxng", limits, providers) for _ in range(2))

    outcomes = await asyncio.gather(
        *(p.search(f"query {i}", 3) for i, p in enumerate([one, two] * 6))
    )

    assert all(len(o.hits) == 3 for o in outcomes)
    sent = fake.of("searxng")
    assert [r.status for r in sent] == [200] * 12
    arrivals = [r.at for r in sent]
    assert busiest_window(arrivals, WINDOW) <= 2
    assert max(arrivals) - min(arrivals) >= 11 / 4.0 * 0.9


async def test_without_our_limit_the_same_burst_is_refused_by_the_server(
    fake: FakeSearch, providers: list[WebSearch]
) -> None:
    """The control for the test above: the fake's limit is real, so that test can fail."""
    fake.limit("searxng", 2, WINDOW)
    limits = default_rate_limits({"searxng": 1000.0})
    provider = build(fake, "searxng", limits, providers, max_retry_after=0)

    outcomes = await asyncio.gather(
        *(provider.search(f"query {i}", 3) for i in range(12)), return_exceptions=True
    )

    refused = [o for o in outcomes if isinstance(o, SearchFailed)]
    assert refused
    assert all(o.kind == "rate_limited" for o in refused)
    assert any(r.status == 429 for r in fake.of("searxng"))


async def test_rate_limits_belong_to_the_event_loop_that_first_used_them() -> None:
    limits = RateLimits({"tavily": 1000.0})
    await limits.acquire("tavily")

    with pytest.raises(RuntimeError, match="another event loop"):
        await asyncio.to_thread(asyncio.run, limits.acquire("tavily"))


def test_rate_limits_refuse_a_rate_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="brave"):
        RateLimits({"brave": 0.0})


# --- Retry-After ------------------------------------------------------------------------
async def test_a_429_with_retry_after_is_waited_out_once_and_billed_once(
    fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    fake.inject(rate_limited("tavily", retry_after="0.3"))
    provider = build(fake, "tavily", limits, providers)

    outcome = await provider.search(QUERY, 5)

    first, second = fake.of("tavily")
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 0.3
    assert len(outcome.hits) == 5
    assert outcome.fee_usd == 0.008  # the refused request is not billed


async def test_the_wait_pauses_every_search_of_that_provider(
    fake: FakeSearch, providers: list[WebSearch]
) -> None:
    fake.inject(rate_limited("brave", retry_after="0.4"))
    limits = default_rate_limits({"brave": 5.0})  # "second" would go 0.2 s after "first"
    provider = build(fake, "brave", limits, providers)

    first, second = await asyncio.gather(provider.search("first", 3), provider.search("second", 3))

    limited, *rest = fake.of("brave")
    assert (limited.query, limited.status) == ("first", 429)
    assert first.hits
    assert second.hits
    assert sorted(r.query for r in rest) == ["first", "second"]
    assert all(r.at - limited.at >= 0.4 for r in rest)


async def test_a_second_429_fails_the_search_without_a_third_request(
    fake: FakeSearch, limits: RateLimits, providers: list[WebSearch]
) -> None:
    fake.inject(rate_limited("exa", retry_after="0.1", times=2))

    with pytest.raises(SearchFailed) as failed:
        await build(fake, "exa", limits, providers).search(QUERY, 5)

    assert failed.value.kind == "rate_limited"
    assert str(failed.value) == "exa: rate limited again (HTTP 429) after waiting 0.1s as asked"
    assert [r.status for r in fake.of("exa")] == [429, 429]


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
    retry_after: str | None,
    reason: str,
    fake: FakeSearch,
    limits: RateLimits,
    providers: list[WebSearch],
) -> None:
    fake.inject(rate_limited("tavily", retry_after=retry_after))

    with pytest.raises(SearchFailed) as failed:
        await build(fake, "tavily", limits, providers).search(QUERY, 5)

    assert str(failed.value) == reason
    assert len(fake.of("tavily")) == 1


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
    import httpx
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
FAILURES: list[tuple[Api, Fault | str, str, str]] = [
    ("tavily", "wrong_key", "auth", "tavily: the API key was refused (HTTP 401)"),
    ("brave", "wrong_key", "auth",
     "brave: the API key was refused (HTTP 422 SUBSCRIPTION_TOKEN_INVALID)"),
    ("exa", "wrong_key", "auth", "exa: the API key was refused (HTTP 401)"),
    ("tavily", Fault("status", status=432, message="This request exceeds your plan's set usage "
                     "limit. Please upgrade your plan or contact support@tavily.com"), "quota",
     "tavily: out of credit or over the plan (HTTP 432): This request exceeds your plan's set "
     "usage limit. Please upgrade your plan or contact support@tavily.com"),
    ("exa", Fault("status", status=402, message="You have run out of credits"), "quota",
     "exa: out of credit or over the plan (HTTP 402): You have run out of credits"),
    ("brave", Fault("status", status=503, message="Service Unavailable"), "unavailable",
     "brave: the service is unavailable (HTTP 503)"),
    ("searxng", Fault("status", status=500), "unavailable",
     "searxng: the service is unavailable (HTTP 500)"),
    ("tavily", Fault("status", status=400, message="Invalid topic"), "refused",
     "tavily: the request was refused (HTTP 400): Invalid topic"),
    ("exa", Fault("slow", delay=2.0), "timeout", "exa: no answer within 0.3s"),
    ("tavily", Fault("malformed"), "bad_response", "tavily: the answer is not JSON (HTTP 200)"),
    ("brave", Fault("wrong_shape"), "bad_response",
     "brave: the answer has no web.results list (HTTP 200)"),
    ("searxng", Fault("drop"), "network", "searxng: the connection to 127.0.0.1:"),
    ("searxng", "json_off", "refused",
     "searxng: the server does not answer in JSON (HTTP 403): add json to search.formats in its "
     "settings.yml"),
    ("exa", "closed_port", "network", "exa: cannot connect to 127.0.0.1:"),
]  # fmt: skip


@pytest.mark.parametrize(("api", "fault", "kind", "reason"), FAILURES)
async def test_every_failure_is_one_typed_error_with_a_one_line_reason(
    api: Api,
    fault: Fault | str,
    kind: str,
    reason: str,
    fake: FakeSearch,
    limits: RateLimits,
    providers: list[WebSearch],
) -> None:
    options: dict[str, Any] = {"timeout": 0.3}
    if fault == "wrong_key":
        options["key"] = "not-the-right-key-42"
    elif fault == "json_off":
        fake.searxng_json = False
    elif isinstance(fault, Fault):
        fake.inject(Fault(**{**fault.__dict__, "api": api}))
    provider = build(fake, api, limits, providers, **options)
    if fault == "closed_port":
        provider = make_provider(
            api,
            limits=limits,
            api_key=SecretStr(fake.key(api)),
            base_url=f"http://127.0.0.1:{closed_port()}/{api}",
        )
        providers.append(provider)

    with pytest.raises(SearchFailed) as failed:
        await provider.search(QUERY, 5)

    message = str(failed.value)
    assert (failed.value.kind, failed.value.provider) == (kind, api)
    assert message.startswith(reason), message
    assert "\n" not in message
    assert_alone(failed.value)


# --- secrets ----------------------------------------------------------------------------
@pytest.mark.parametrize("api", KEYED)
async def test_the_key_reaches_no_error_message_and_no_cache_file(
    api: Api,
    fake: FakeSearch,
    limits: RateLimits,
    tmp_path: Path,
    providers: list[WebSearch],
) -> None:
    secret = fake.key(api)
    store = ResultCache(tmp_path / "cache")
    provider = build(fake, api, limits, providers, cache=store, max_retry_after=0)
    echoing = "request from key {key} refused"  # some APIs quote the key they were sent
    fake.inject(
        *(Fault("status", api, status=s, message=echoing) for s in (400, 402, 432, 500, 503)),
        rate_limited(api, retry_after="5"),
        Fault("malformed", api),
    )
    messages = []
    for _ in range(7):
        with pytest.raises(SearchFailed) as failed:
            await provider.search(QUERY, 5)
        messages.append(str(failed.value))
    await provider.search(QUERY, 5)
    await provider.search("another query", 5)
    wrong = build(fake, api, limits, providers, key=f"{secret}-revoked")
    with pytest.raises(SearchFailed) as refused:
        await wrong.search("fresh query", 5)
    messages.append(str(refused.value))
    store.close()

    assert len(messages) == 8
    assert any("[redacted]" in m for m in messages)
    assert not [m for m in messages if secret in m]
    cache_bytes = b"".join(p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert b"example.com" in cache_bytes  # the files read are the ones holding the hits
    assert secret.encode() not in cache_bytes
    assert secret not in repr(provider.api)


# --- the factory ------------------------------------------------------------------------
def test_make_provider_refuses_what_cannot_work(limits: RateLimits) -> None:
    with pytest.raises(ConfigError, match=r"unknown search provider 'bing'.*duckduckgo, searxng"):
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
        provider: Searcher = make_provider(
            name,
            limits=limits,
            api_key=SecretStr("k-123456"),
            base_url="http://search.lan" if name == "searxng" else None,
            price_usd=0.5 if name == "exa" else None,
        )
        assert provider.name == name
        assert isinstance(provider, WebSearch)
        assert provider.price_usd == (0.5 if name == "exa" else DEFAULTS[name].price_usd)
        await provider.aclose()


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
    """One list of providers (``core.models.SEARCH_PROVIDERS``) behind the settings, the
    factory's defaults and the errors that name the choices."""
    from deep_research.app.config import Settings

    assert set(DEFAULTS) == set(SEARCH_PROVIDERS)
    assert Settings.model_fields["search_provider"].default == "duckduckgo" == SEARCH_PROVIDERS[0]
    for name in SEARCH_PROVIDERS:
        assert Settings(_env_file=None, search_provider=name).search_provider == name
    with pytest.raises(ConfigError, match="choose one of " + ", ".join(SEARCH_PROVIDERS)):
        make_provider("bing", limits=default_rate_limits({}))
