"""The web scope on the search-and-read engine: each search provider asked in its own terms
and its hits filtered afterwards, the page reader (never a page outside the scope, nor a
redirect that leaves it; under ``since`` an old page dropped and an undated one marked), the
claim check (an out-of-scope citation never read), and a run through the CLI.

Loopback only: `FakeSearch` speaks the providers' APIs (and narrows only by what a request
says), `FakeWeb` serves the pages, on 127.0.0.2 and 127.0.0.3 as two sites."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import SecretStr

from deep_research.adapters.claim_check import ClaimChecker
from deep_research.adapters.web.reader import PageReader, PageSkipped, ReaderSettings
from deep_research.adapters.web.search import RateLimits, make_provider
from deep_research.adapters.web.search.base import window
from deep_research.adapters.web.shared import SharedReader
from deep_research.core.models import Citation
from deep_research.core.scope import WebScope
from deep_research.persistence.claims import SessionClaims
from tests.clirun import cli, session_state
from tests.fake_search import Doc, FakeSearch
from tests.fake_web import FakeWeb
from tests.test_claim_check import Store, job, report_of, units_for

QUERY = "raft leader election"
TODAY = date.today()
A, B = "127.0.0.2", "127.0.0.3"


@pytest.fixture
def fake() -> Iterator[FakeSearch]:
    with FakeSearch() as search:
        yield search
    if search.errors:
        pytest.fail("FakeSearch saw errors:\n" + "\n".join(search.errors))


@pytest.fixture
def site_a() -> Iterator[FakeWeb]:
    with FakeWeb(address=A) as web:
        yield web
    if web.errors:
        pytest.fail("FakeWeb saw errors:\n" + "\n".join(web.errors))


@pytest.fixture
def site_b() -> Iterator[FakeWeb]:
    with FakeWeb(address=B) as web:
        yield web


def limits() -> RateLimits:
    return RateLimits({}, default=1000.0)


def corpus() -> list[Doc]:
    old = (TODAY - timedelta(days=800)).isoformat()
    return [
        Doc("https://docs.a.example/raft", "Raft on a", "Raft elects a leader."),
        Doc("https://x.a.example/raft", "Raft on x.a", "A mirror."),
        Doc("https://b.example/raft", "Raft on b", "Raft terms."),
        Doc("https://elsewhere.example/raft", "Raft elsewhere", "Off scope."),
        Doc("https://a.example/old", "Raft, long ago", "An old page.", published=old),
    ]


SCOPE = WebScope(
    domains=("a.example", "b.example"),
    exclude_domains=("x.a.example", "never.example"),
    since=TODAY - timedelta(days=20),
)
IN_SCOPE = {"https://docs.a.example/raft", "https://b.example/raft"}
SITES = "(site:a.example OR site:b.example) -site:x.a.example"


def provider(fake: FakeSearch, api: Any, scope: WebScope) -> Any:
    key = SecretStr(fake.key(api)) if api != "searxng" else None
    return make_provider(api, limits=limits(), base_url=fake.url(api), api_key=key, scope=scope)


# --- search providers, in their own terms --------------------------------------------------


@pytest.mark.parametrize("api", ["searxng", "tavily", "brave", "exa"])
async def test_each_provider_is_asked_for_the_scope_in_its_own_terms(
    fake: FakeSearch, api: Any
) -> None:
    fake.corpus[QUERY] = corpus()
    async with provider(fake, api, SCOPE) as search:
        outcome = await search.search(QUERY, 10)

    assert {h.url for h in outcome.hits} == IN_SCOPE
    (sent,) = fake.of(api)
    since = SCOPE.since.isoformat() if SCOPE.since else ""
    if api == "searxng":  # no domain parameter; a coarse time range
        assert sent.params["q"] == f"{QUERY} {SITES}"
        assert sent.params["time_range"] == "month"
    elif api == "brave":
        assert sent.params["q"] == f"{QUERY} {SITES}"
        assert sent.params["freshness"] == f"{since}to{TODAY.isoformat()}"
    elif api == "tavily":
        assert sent.body["query"] == QUERY
        assert sent.body["include_domains"] == ["a.example", "b.example"]
        assert sent.body["exclude_domains"] == ["x.a.example", "never.example"]
        assert sent.body["start_date"] == since
    else:  # exa: the allowed domains alone; the excluded ones are the filter's
        assert sent.body["includeDomains"] == ["a.example", "b.example"]
        assert "excludeDomains" not in sent.body
        assert sent.body["startPublishedDate"] == f"{since}T00:00:00.000Z"


async def test_what_the_provider_returns_outside_the_scope_is_filtered_afterwards(
    fake: FakeSearch,
) -> None:
    """Exa is not told the excluded subdomain (one domain list a request), so it returns
    it; Brave's query cannot hold 50 domains' operators, so it is not narrowed at all."""
    fake.corpus[QUERY] = corpus()
    async with provider(fake, "exa", SCOPE) as exa:
        exa_hits = (await exa.search(QUERY, 10)).hits
    many = WebScope(domains=[f"d{n}.example" for n in range(49)] + ["a.example"])
    async with provider(fake, "brave", many) as brave:
        brave_hits = (await brave.search(QUERY, 10)).hits

    assert "https://x.a.example/raft" in [d.url for d in corpus()]
    assert {h.url for h in exa_hits} == IN_SCOPE
    (sent,) = fake.of("brave")
    assert sent.params["q"] == QUERY, "the operators would not fit in 400 characters"
    assert sent.status == 200
    assert {h.url for h in brave_hits} == {
        "https://docs.a.example/raft",
        "https://x.a.example/raft",
        "https://a.example/old",
    }


async def test_a_request_that_does_not_narrow_gets_the_whole_web_from_the_fake(
    fake: FakeSearch,
) -> None:
    """The fake narrows by the request alone: what the filter above removes was really sent."""
    fake.corpus[QUERY] = corpus()
    async with provider(fake, "searxng", WebScope()) as search:
        hits = (await search.search(QUERY, 10)).hits
    assert {h.url for h in hits} == {d.url for d in corpus()}


@pytest.mark.parametrize(
    ("api", "field", "value", "status"),
    [
        ("searxng", "time_range", "fortnight", 400),
        ("brave", "freshness", "2025-01-01", 422),
        ("tavily", "start_date", "2025/01/01", 400),
        ("exa", "startPublishedDate", "last year", 400),
    ],
)
def test_the_fake_refuses_a_malformed_scope_as_the_api_does(
    fake: FakeSearch, api: Any, field: str, value: str, status: int
) -> None:
    import httpx

    key = (
        {}
        if api == "searxng"
        else {"tavily": "Authorization", "brave": "X-Subscription-Token", "exa": "x-api-key"}
    )
    headers = {key[api]: ("Bearer " if api == "tavily" else "") + fake.key(api)} if key else {}
    if api in ("searxng", "brave"):
        path = "/search" if api == "searxng" else "/res/v1/web/search"
        params = {"q": QUERY, "format": "json", field: value}
        answer = httpx.get(fake.url(api) + path, params=params, headers=headers)
    else:
        answer = httpx.post(
            fake.url(api) + "/search", json={"query": QUERY, field: value}, headers=headers
        )
    assert answer.status_code == status


async def test_a_scoped_search_is_cached_apart_from_the_same_query_unscoped(
    fake: FakeSearch, tmp_path: Path
) -> None:
    from deep_research.persistence.cache import ResultCache

    fake.corpus[QUERY] = corpus()
    cache = ResultCache(tmp_path / "cache")
    try:
        plain = make_provider("searxng", limits=limits(), base_url=fake.url("searxng"), cache=cache)
        scoped = make_provider(
            "searxng", limits=limits(), base_url=fake.url("searxng"), cache=cache, scope=SCOPE
        )
        everything = await plain.search(QUERY, 10)
        narrowed = await scoped.search(QUERY, 10)
        again = await scoped.search(QUERY, 10)
    finally:
        cache.close()
    assert len(everything.hits) == len(corpus())
    assert not narrowed.cached
    assert {h.url for h in narrowed.hits} == IN_SCOPE
    assert again.cached
    assert again.hits == narrowed.hits
    assert len(fake.of("searxng")) == 2


@dataclass
class RecordingDDGS:
    """Stands in for ``ddgs.DDGS``: records what it is asked, answers every row it holds."""

    rows: list[dict[str, Any]]
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        self.calls.append((query, kwargs))
        return self.rows


async def test_duckduckgo_gets_site_operators_and_a_timelimit_and_is_filtered() -> None:
    rows = [{"href": d.url, "title": d.title, "body": d.text} for d in corpus()]
    client = RecordingDDGS(rows)
    search = make_provider("duckduckgo", limits=limits(), ddgs_client=client, scope=SCOPE)

    hits = (await search.search(QUERY, 10)).hits

    ((query, kwargs),) = client.calls
    assert query == f"{QUERY} {SITES}"
    assert kwargs["timelimit"] == "m"
    # ddgs ignored the operators: the filter held. A hit has no date: the reader judges it.
    assert {h.url for h in hits} == IN_SCOPE | {"https://a.example/old"}


@given(st.integers(min_value=0, max_value=2000))
def test_the_coarse_window_is_the_smallest_that_covers_since(days: int) -> None:
    spans = {"day": 1, "week": 7, "month": 28, "year": 365}
    found = window(TODAY - timedelta(days=days), TODAY)
    if found is None:
        assert days >= 365
    else:
        assert days < spans[found]
        assert all(days >= span for name, span in spans.items() if span < spans[found])
    assert window(None, TODAY) is None


# --- the page reader ---------------------------------------------------------------------


def reader_for(*sites: FakeWeb) -> PageReader:
    return PageReader(ReaderSettings(allow=tuple(s.netloc for s in sites), per_host_rate=100))


async def test_a_page_outside_the_scope_is_never_requested(
    site_a: FakeWeb, site_b: FakeWeb
) -> None:
    only_a = WebScope(domains=(A,))
    async with reader_for(site_a, site_b) as reader:
        page = await reader.read(site_a.url("/docs/bisect.html"), only_a)
        with pytest.raises(PageSkipped) as skipped:
            await reader.read(site_b.url("/docs/colorsys.html"), only_a)
        with pytest.raises(PageSkipped):
            await reader.read(site_a.url("/docs/bisect.html"), WebScope(exclude_domains=(A,)))

    assert page.text
    assert skipped.value.kind == "out_of_scope"
    assert str(skipped.value) == f"{B} is outside the run's web scope (only {A})"
    assert site_b.hits == [], "not even its robots.txt"


async def test_a_redirect_that_leaves_the_scope_is_refused_at_that_hop(
    site_a: FakeWeb, site_b: FakeWeb
) -> None:
    only_a = WebScope(domains=(A,))
    moved = site_a.url("/redirect/to?url=" + quote(site_b.url("/docs/colorsys.html")))
    async with reader_for(site_a, site_b) as reader:
        with pytest.raises(PageSkipped) as skipped:
            await reader.read(moved, only_a)
        assert site_b.hits == []
        anywhere = await reader.read(moved)  # another run, unscoped: the refusal was not kept
        with pytest.raises(PageSkipped) as cached:  # the page it cached is judged again
            await reader.read(moved, only_a)

    assert skipped.value.kind == cached.value.kind == "out_of_scope"
    assert str(skipped.value) == (
        f"redirected out of scope: {B} is outside the run's web scope (only {A})"
    )
    assert anywhere.url == site_b.url("/docs/colorsys.html")


async def test_under_since_an_old_page_is_dropped_and_an_undated_one_kept_marked(
    site_a: FakeWeb,
) -> None:
    since = WebScope(since=date(2025, 1, 1))
    async with reader_for(site_a) as reader:
        with pytest.raises(PageSkipped) as old:
            await reader.read(site_a.url("/dated/2020-01-02.html"), since)
        recent = await reader.read(site_a.url("/dated/2026-01-02.html"), since)
        undated = await reader.read(site_a.url("/page/7.html"), since)
        anytime = await reader.read(site_a.url("/dated/2020-01-02.html"))

    assert old.value.kind == "out_of_scope"
    assert str(old.value) == "published 2020-01-02, before the run's since 2025-01-01"
    assert (recent.published, recent.undated) == (date(2026, 1, 2), False)
    assert (undated.published, undated.undated) == (None, True)
    assert (anytime.published, anytime.undated) == (date(2020, 1, 2), False)


# --- the claim check ---------------------------------------------------------------------


async def test_the_claim_check_never_reads_a_cited_page_outside_the_scope(
    site_a: FakeWeb, site_b: FakeWeb, tmp_path: Path
) -> None:
    scope = WebScope(exclude_domains=(B,))
    inside = Citation(ref="S1", kind="web", url=site_a.url("/page/3.html"), title="in")
    outside = Citation(ref="S2", kind="web", url=site_b.url("/page/3.html"), title="out")
    claim = "The reader keeps to its limits per host, so a research run never floods one server"
    report = report_of(f"{claim} [1]. {claim} as well [2].", inside, outside)
    reader = SharedReader(ReaderSettings(allow=(site_a.netloc, site_b.netloc)), scope)
    try:
        checker = ClaimChecker(reader=reader, scope=scope)
        await checker.check(job(report, Store(tmp_path, units_for(inside, outside))))
    finally:
        await reader.aclose()

    ledger = SessionClaims(tmp_path).load()
    assert ledger is not None
    first, second = ledger.claims
    assert first.verdict == "supported"
    assert second.verdict == "unsupported"
    assert second.sources[0].note == (
        f"outside the run's web scope (not {B}): not read, and it supports nothing"
    )
    assert site_b.hits == []
    assert [h.path for h in site_a.hits if h.path != "/robots.txt"] == ["/page/3.html"]


async def test_a_cited_page_the_reader_refuses_for_its_date_supports_nothing(
    site_a: FakeWeb, tmp_path: Path
) -> None:
    """The same page, the same claim: supported without ``since``; under it, the page is
    dated before the window, and the claim is ``unsupported``, not left unverifiable."""
    old = Citation(ref="S1", kind="web", url=site_a.url("/dated/2020-01-03.html"), title="old")
    claim = "The reader keeps to its limits per host, so a research run never floods one server"
    verdicts = []
    for n, scope in enumerate((WebScope(), WebScope(since=date(2025, 1, 1)))):
        reader = SharedReader(ReaderSettings(allow=(site_a.netloc,)), scope)
        (tmp_path / str(n)).mkdir()
        try:
            store = Store(tmp_path / str(n), units_for(old))
            await ClaimChecker(reader=reader, scope=scope).check(
                job(report_of(f"{claim} [1].", old), store)
            )
        finally:
            await reader.aclose()
        ledger = SessionClaims(tmp_path / str(n)).load()
        assert ledger is not None
        verdicts.append((ledger.claims[0].verdict, ledger.claims[0].sources[0].note))
    assert verdicts == [
        ("supported", ""),
        (
            "unsupported",
            "outside the run's web scope (since 2025-01-01): not read, and it supports nothing",
        ),
    ]


# --- through the CLI ---------------------------------------------------------------------

QUESTION = "How does the reader keep to its limits per host?"
KEY = " ".join(QUESTION.casefold().rstrip("?").split())


@pytest.fixture
def run_env(
    env: dict[str, str], site_a: FakeWeb, site_b: FakeWeb, fake: FakeSearch
) -> dict[str, str]:
    """A no-model search run on SearXNG, reading both sites."""
    return {k: v for k, v in env.items() if not k.startswith("OPENAI_")} | {
        "DEEP_RESEARCH_SEARCH_PROVIDER": "searxng",
        "DEEP_RESEARCH_SEARXNG_URL": fake.url("searxng"),
        "DEEP_RESEARCH_FETCH_ALLOW": f"{site_a.netloc},{site_b.netloc}",
        "DEEP_RESEARCH_EMBEDDING_PROVIDER": "local-fast",
        "DEEP_RESEARCH_SEARCH_RATE_PER_SECOND": '{"searxng": 100}',
    }


def cited(env: dict[str, str]) -> set[str]:
    (session,) = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    state = session_state(env, session.name)
    return {c["url"] for node in state["nodes"].values() for c in node["citations"]}


def test_domains_keep_the_run_to_them_and_a_redirect_away_is_not_followed(
    run_env: dict[str, str], fake: FakeSearch, site_a: FakeWeb, site_b: FakeWeb
) -> None:
    moved = site_a.url("/redirect/to?url=" + quote(site_b.url("/page/2.html")))
    fake.corpus[KEY] = [
        Doc(site_a.url("/page/1.html"), "Page 1", "…"),
        Doc(site_b.url("/page/2.html"), "Page 2", "…"),
        Doc(moved, "Page 2, moved", "…"),
    ]
    code, out, err = cli(run_env, QUESTION, "--web-engine", "search", "--domains", A)

    assert code == 0, err
    (sent,) = fake.of("searxng")
    assert sent.params["q"].endswith(f" site:{A}")
    assert site_b.hits == [], "never read, not even through the redirect"
    assert cited(run_env) == {site_a.url("/page/1.html")}
    assert "redirected out of scope" in out


def test_an_excluded_domain_is_never_read_nor_cited_even_when_the_provider_returns_it(
    run_env: dict[str, str], fake: FakeSearch, site_a: FakeWeb, site_b: FakeWeb
) -> None:
    docs = [
        Doc(site_a.url("/page/1.html"), "Page 1", "…"),
        Doc(site_b.url("/page/2.html"), "2", "…"),
    ]
    # A server that ignores the -site: operator: the scripted answer holds site B anyway.
    sent_query = f"{QUESTION.rstrip('?')} -site:{B}"  # a run searches its question
    fake.replies[("searxng", sent_query)] = {
        "query": sent_query,
        "results": [{"url": d.url, "title": d.title, "content": d.text} for d in docs],
    }
    env = run_env | {"DEEP_RESEARCH_WEB_EXCLUDE_DOMAINS": B}
    code, out, err = cli(env, QUESTION, "--web-engine", "search")

    assert code == 0, err
    (sent,) = fake.of("searxng")
    assert sent.params["q"] == sent_query
    assert site_b.hits == []
    assert cited(env) == {site_a.url("/page/1.html")}
    assert site_b.url("/page/2.html") not in out


def test_since_drops_an_old_page_and_keeps_an_undated_one_marked_in_the_report(
    run_env: dict[str, str], fake: FakeSearch, site_a: FakeWeb
) -> None:
    fake.corpus[KEY] = [
        Doc(site_a.url("/dated/2020-01-02.html"), "An old page", "…"),  # the index has no date
        Doc(site_a.url("/page/5.html"), "Page 5", "…"),
    ]
    code, out, err = cli(run_env, QUESTION, "--web-engine", "search", "--since", "2025-01-01")

    assert code == 0, err
    (sent,) = fake.of("searxng")
    assert "time_range" not in sent.params, "nearly two years back: no range covers it"
    assert cited(run_env) == {site_a.url("/page/5.html")}
    assert "published 2020-01-02, before the run's since 2025-01-01" in out
    (line,) = [ln for ln in out.splitlines() if site_a.url("/page/5.html") in ln and "](" in ln]
    assert "_(undated)_" in line
