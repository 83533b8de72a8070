"""The web scope on the search-and-read engine: the coarse date window the providers share
(each provider's own terms and the filter after are in the table of ``test_search.py``), the
page reader (never a page outside the scope, nor a redirect that leaves it; under ``since``
an old page dropped and an undated one marked), the claim check (an out-of-scope citation
never read), and a run through the CLI.

Loopback only: `FakeSearch` is a SearXNG that ignores the scope's operators (the client's
filter keeps the run in scope), `FakeWeb` serves the pages, on 127.0.0.2 and 127.0.0.3 as
two sites."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deep_research.adapters.claim_check import ClaimChecker
from deep_research.adapters.web.reader import PageReader, PageSkipped, ReaderSettings
from deep_research.adapters.web.search.base import window
from deep_research.adapters.web.shared import SharedReader
from deep_research.core.models import Citation, SessionState
from deep_research.core.scope import WebScope
from deep_research.persistence.claims import SessionClaims
from tests.clirun import cli, session_state
from tests.fake_search import Doc, FakeSearch
from tests.fake_web import FakeWeb
from tests.test_claim_check import Store, job, report_of, units_for

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


# --- the coarse window of the providers that take no date ---------------------------------


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
            "outside the run's web scope (published 2020-01-03, before its since 2025-01-01): "
            "it supports nothing",
        ),
    ]


async def test_an_old_page_a_research_job_cites_is_counted_and_an_undated_one_marked(
    site_a: FakeWeb, tmp_path: Path
) -> None:
    """OpenAI's ``web_search`` takes no date, so a research job may cite an older page (a job
    citation carries the page's address and what the job said, no text: the check reads the
    page). Under ``since`` the older page supports nothing and the report's limitations count
    it as paid for; a page with no date is marked undated, in the report's sources and the
    session's. A second check, taking the ledger's verdicts and reading no page, says the
    same of a report assembled from the session."""
    claim = "The reader keeps to its limits per host, so a research run never floods one server"
    old = Citation(
        ref="S1", kind="web", url=site_a.url("/dated/2020-01-03.html"), title="old", claim=claim
    )
    undated = Citation(
        ref="S2", kind="web", url=site_a.url("/page/7.html"), title="no date", claim=claim
    )
    state = SessionState(session_id="s1", question="q", sources={"S1": old, "S2": undated})
    scope = WebScope(since=date(2025, 1, 1))
    checked = []
    for _ in range(2):
        report = report_of(f"{claim} [1]. {claim} as well [2].", *state.sources.values())
        reader = SharedReader(ReaderSettings(allow=(site_a.netloc,)), scope)
        try:
            store = Store(tmp_path, units_for(old, undated))
            checker = ClaimChecker(reader=reader, scope=scope)
            checked.append(await checker.check(job(report, store, state=state)))
        finally:
            await reader.aclose()
        assert len([h for h in site_a.hits if h.path != "/robots.txt"]) == 2  # read once

    ledger = SessionClaims(tmp_path).load()
    assert ledger is not None
    first = ledger.claims[0]
    assert (first.verdict, first.sources[0].note) == (
        "unsupported",
        "outside the run's web scope (published 2020-01-03, before its since 2025-01-01): "
        "it supports nothing",
    )
    for report in checked:
        assert [s.undated for s in report.sources] == [False, True]
        assert report.limitations == [
            "- **Out of scope:** 1 cited page was published before the run's since 2025-01-01: "
            "what it is cited for is marked unsupported (its research job was still paid for)."
        ]
        assert f"2. [no date](<{undated.url}>) _(undated)_" in report.markdown
    assert [s.undated for s in state.sources.values()] == [False, True]


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
        "DEEP_RESEARCH_SEARXNG_URL": fake.url(),
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
    (sent,) = fake.requests
    assert f"site:{A}" in sent.query, "--domains reached the search"
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
    fake.corpus[KEY] = docs  # the fake ignores the -site: operator: site B is answered
    env = run_env | {"DEEP_RESEARCH_EXCLUDE_DOMAINS": B}
    code, out, err = cli(env, QUESTION, "--web-engine", "search")

    assert code == 0, err
    (sent,) = fake.requests
    assert f"-site:{B}" in sent.query, "the setting reached the search"
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
    assert len(fake.requests) == 1
    assert cited(run_env) == {site_a.url("/page/5.html")}
    assert "published 2020-01-02, before the run's since 2025-01-01" in out
    (line,) = [ln for ln in out.splitlines() if site_a.url("/page/5.html") in ln and "](" in ln]
    assert "_(undated)_" in line
