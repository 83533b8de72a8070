"""The page to watch a run, in a real headless browser (Debian's chromium-headless-shell,
driven by playwright; never `playwright install`, which downloads). Start a run against the
fake model, see the nodes appear and the run's state, read the report with clickable
citations and sources that open in a new tab; one start however often the button is
pressed; the questions the API takes; the token typed into a page that loads without it.

Outside CI (``CI`` unset) the test skips when the browser or playwright is missing; in CI
that is a failure (`.ci/run` installs both)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pytest

from deep_research.app.config import Settings
from deep_research.app.options import MAX_QUESTION_CHARS
from deep_research.app.runs import Caps, RunManager
from deep_research.frontends.http.app import create_app
from deep_research.persistence.sessions import SessionStore
from tests.fake_openai import FakeOpenAI
from tests.serving import free_port, serving
from tests.world import ResearchWorld, plan_task

if TYPE_CHECKING:
    from playwright.async_api import Page, Route

BROWSER = shutil.which("chromium-headless-shell") or "/usr/bin/chromium-headless-shell"
HAVE_BROWSER = os.path.exists(BROWSER)


def need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI must have it: see .ci/run)")
        pytest.skip(why)


QUESTION = "How do vector databases handle deletes?"
TOKEN = "page-token-" + "0123456789" * 2 + "x"  # 32 characters


@pytest.fixture
def settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[str]:
    port = free_port()
    app = create_app(settings, port=port, runs=RunManager(settings, Caps(max_cost_per_run=20)))
    async with serving(app, port) as base:
        yield base


@pytest.fixture
async def page() -> AsyncIterator[Page]:
    """A page of a fresh headless browser; fails the test on a script error."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        need(False, "playwright is not installed (pip install -e '.[browser]')")
    need(HAVE_BROWSER, f"no {BROWSER} (apt-get install chromium-headless-shell)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        try:
            opened = await browser.new_page()
            problems: list[str] = []
            opened.on("pageerror", lambda error: problems.append(str(error)))
            yield opened
            assert problems == []
        finally:
            await browser.close()


async def test_a_run_started_in_the_page_fills_its_tree_live_and_shows_the_report(
    server: str, fake_openai: FakeOpenAI
) -> None:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        need(False, "playwright is not installed (pip install -e '.[browser]')")
    need(HAVE_BROWSER, f"no {BROWSER} (apt-get install chromium-headless-shell)")
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2", "t1")]]).install(fake_openai)

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        try:
            page = await browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on(
                "console",
                lambda message: problems.append(message.text) if message.type == "error" else None,
            )
            await page.goto(server + "/")
            await page.fill("#question", "How do vector databases handle deletes?")
            await page.click("#go")

            await page.wait_for_selector("#tree tr[data-node='t1']", timeout=20_000)
            await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
            statuses = await page.eval_on_selector_all(
                "#tree tbody tr", "rows => rows.map(r => [r.dataset.node, r.cells[1].textContent])"
            )
            assert sorted(statuses) == [["t1", "done"], ["t2", "done"]]

            await page.wait_for_selector("#report h1", timeout=10_000)
            title = await page.inner_text("#report h1")
            assert title == "How do vector databases handle deletes?"
            # Sources open in a new tab, with no opener and no referrer to this page.
            links = await page.eval_on_selector_all(
                "#report a[href]",
                "links => links.filter(a => !a.getAttribute('href').startsWith('#'))"
                ".map(a => [a.href, a.target, a.rel])",
            )
            assert links
            for href, target, rel in links:
                assert (target, rel) == ("_blank", "noopener noreferrer"), href
            citation = page.locator("#report a[href='#source-1']").first
            await citation.click()  # a citation leads to its source
            assert await page.locator("#report li#source-1").count() == 1
            assert "#source-1" in page.url

            await page.wait_for_selector("#sessions tbody tr")
            assert await page.locator("#sessions tbody tr").count() == 1
            assert problems == []
        finally:
            await browser.close()


async def test_the_page_links_each_citation_to_its_real_source(
    server: str, fake_openai: FakeOpenAI
) -> None:
    """Pages with forged titles and report sections with their own Sources list and link
    definitions (``ForgingWorld``): on the page, [N] still opens source N, whose link goes
    where its title says it does."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        need(False, "playwright is not installed (pip install -e '.[browser]')")
    need(HAVE_BROWSER, f"no {BROWSER} (apt-get install chromium-headless-shell)")
    from tests.test_http_api import ForgingWorld

    ForgingWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        try:
            page = await browser.new_page()
            await page.goto(server + "/")
            await page.fill("#question", "How do vector databases handle deletes?")
            await page.click("#go")
            await page.wait_for_selector("#report li#source-1", timeout=30_000)
            linked = await page.eval_on_selector_all(
                "#report a[href^='#']", "links => links.map(a => [a.hash, a.textContent])"
            )
            # every [N] links to its source (a claim's mark links to the Claim check section)
            cited = [(h, t) for h, t in linked if re.fullmatch(r"\[\d+\]", t.strip())]
            assert cited
            marks = [(h, t) for h, t in linked if t.startswith("⚠")]
            assert all(h == "#claim-check" for h, _ in marks)
            assert all(f"#source-{text.strip('[]')}" == hash_ for hash_, text in cited)
            sources = await page.eval_on_selector_all(
                "#report li[id^='source-'] > p > a:first-child",
                "links => links.map(a => [a.href, a.textContent])",
            )
            assert sources  # the jobs' notes are alike: one section states them
            for href, title in sources:
                number = href.removeprefix("https://source").removesuffix(".example/page")
                assert title == f"Source {number}](https://phish.example/{number}) [real"
            await page.locator("#report a[href='#source-1']").first.click()
            assert page.url.endswith("#source-1")
        finally:
            await browser.close()


async def test_the_research_button_starts_one_run_however_often_it_is_pressed(
    server: str, fake_openai: FakeOpenAI, page: Page
) -> None:
    """Two clicks started two paid runs: while a start is on its way the button is
    disabled and says so, and nothing else submits the form again."""
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    posts: list[str] = []
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold(route: Route) -> None:  # the server accepting a start slowly
        posts.append(route.request.post_data or "")
        arrived.set()
        await release.wait()
        await route.continue_()

    await page.route("**/research", hold)
    await page.goto(server + "/")
    await page.fill("#question", QUESTION)
    await page.click("#go")
    await arrived.wait()
    assert await page.is_disabled("#go")
    assert await page.inner_text("#go") == "Starting…"
    await page.click("#go", force=True)
    await page.eval_on_selector("#start", "form => form.requestSubmit()")
    await page.press("#max-cost", "Enter")
    release.set()
    await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
    assert await page.is_enabled("#go")
    assert await page.inner_text("#go") == "Research"
    assert len(posts) == 1
    await page.wait_for_selector("#sessions tbody tr")
    assert await page.locator("#sessions tbody tr").count() == 1


async def test_the_page_shows_the_runs_state_iteration_and_elapsed_time(
    server: str, fake_openai: FakeOpenAI, page: Page
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True  # the research job runs until released
    await page.goto(server + "/")
    await page.fill("#question", QUESTION)
    await page.click("#go")
    await page.wait_for_selector("#tree tr[data-node='t1'] td.running", timeout=20_000)
    state = page.locator("#run-status")
    await page.wait_for_selector("#run-status[data-status='running']")
    await page.wait_for_function(
        "() => document.querySelector('#run-status').textContent.includes('iteration 1')"
    )
    running = await state.inner_text()
    assert re.fullmatch(r"running · iteration 1 · \d+:\d\d elapsed( · .*)?", running), running
    # The elapsed time goes on while the run does, between events.
    await page.wait_for_function(
        "first => document.querySelector('#run-status').textContent.split(' · ')[2] !== first",
        arg=running.split(" · ")[2],
        timeout=5_000,
    )
    for response_id in fake_openai.response_ids:
        fake_openai.complete(response_id)
    fake_openai.hold_responses = False
    await page.wait_for_selector("#run-status[data-status='complete']", timeout=30_000)
    done = await state.inner_text()
    assert re.fullmatch(r"complete · iteration 1 · \d+:\d\d elapsed · spent \$.*", done), done


def question_of(length: int) -> str:
    """A question of ``length`` characters as the API counts them (code points, once runs of
    whitespace are one space), typed with runs of spaces and characters a browser counts
    twice (outside the BMP)."""
    words = " ".join(["Which", "𝔽𝕒𝕤𝕥", "index", "handles", "deletes?"] * (length // 20 + 1))
    return (words[: length - 1] + "x").replace(" ", "   ")


async def test_the_page_takes_the_questions_the_api_takes(
    server: str, settings: Settings, fake_openai: FakeOpenAI, page: Page
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    longest = question_of(MAX_QUESTION_CHARS)
    assert len(" ".join(longest.split())) == MAX_QUESTION_CHARS
    assert len(longest.encode("utf-16-le")) // 2 > MAX_QUESTION_CHARS  # as JS counts
    sent: list[dict[str, Any]] = []

    async def record(route: Route) -> None:
        sent.append(json.loads(route.request.post_data or "{}"))
        await route.continue_()

    await page.route("**/research", record)
    await page.goto(server + "/")
    await page.focus("#question")
    await page.keyboard.insert_text(longest)  # as typed or pasted: the field's limits apply
    await page.click("#go")
    await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
    assert [body["question"] for body in sent] == [longest]
    [saved] = SessionStore(settings.sessions_dir).list()
    assert saved.question == " ".join(longest.split())

    await page.fill("#question", "")
    await page.focus("#question")
    await page.keyboard.insert_text(question_of(MAX_QUESTION_CHARS + 1))
    await page.click("#go")
    await page.wait_for_function("() => document.querySelector('#error').textContent")
    assert "the limit is 4,000" in await page.inner_text("#error")
    assert len(SessionStore(settings.sessions_dir).list()) == 1


async def test_the_page_loads_with_a_token_set_and_takes_it(settings: Settings, page: Page) -> None:
    """With DEEP_RESEARCH_API_TOKEN set, the page (where the token is typed) loads; its data
    comes once the token is given."""
    settings = settings.with_overrides(api_token=TOKEN)
    SessionStore(settings.sessions_dir).create(QUESTION)
    port = free_port()
    app = create_app(settings, port=port)
    async with serving(app, port) as base:
        loaded = await page.goto(base + "/")
        assert loaded is not None
        assert loaded.status == 200
        await page.wait_for_function("() => document.querySelector('#error').textContent")
        assert "token" in await page.inner_text("#error")
        assert await page.locator("#sessions tbody tr").count() == 0
        await page.fill("#token", TOKEN)
        await page.press("#token", "Enter")
        await page.wait_for_selector("#sessions tbody tr")
        assert await page.inner_text("#error") == ""
        assert await page.locator("#sessions tbody tr td:last-child").inner_text() == QUESTION


# --- the first screen: choices, the server's cap, dates, addresses, narrow screens ---------

PARIS = ZoneInfo("Europe/Paris")
LONG_WORD = "https://example.org/" + "very-long-path-segment-" * 6  # nothing to wrap at
NARROW = {"width": 400, "height": 900}


def fits(page: Page) -> Any:
    """Whether nothing on the page scrolls sideways."""
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


SCREENSHOTS = Path(__file__).resolve().parent.parent / "screenshots"
"""Where ``DEEP_RESEARCH_SCREENSHOTS=1`` saves what the browser showed (gitignored)."""
TAKE_SCREENSHOTS = os.environ.get("DEEP_RESEARCH_SCREENSHOTS") == "1"
"""Read on import: the ``env`` fixture clears every DEEP_RESEARCH_* variable."""


async def screenshot(page: Page, name: str) -> None:
    """The whole page as ``screenshots/NAME.png``, when DEEP_RESEARCH_SCREENSHOTS=1."""
    if TAKE_SCREENSHOTS:
        SCREENSHOTS.mkdir(exist_ok=True)
        await page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)


async def test_the_page_sends_the_preset_and_scope_and_shows_the_servers_cap(
    server: str, settings: Settings, fake_openai: FakeOpenAI, page: Page
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    sent: list[dict[str, Any]] = []

    async def record(route: Route) -> None:
        sent.append(json.loads(route.request.post_data or "{}"))
        if sent[-1].get("kb_only"):
            await route.abort()  # the page's mapping only: no knowledge base here
        else:
            await route.continue_()

    await page.route("**/research", record)
    await page.goto(server + "/")
    # The server's cap (Caps(max_cost_per_run=20)) as a hint and as the field's bound.
    await page.wait_for_function("() => document.querySelector('#cap').textContent")
    hint = await page.inner_text("#cap")
    assert "$20.00 a run" in hint, hint
    assert "Empty: at most $20.00" in hint, hint  # the configured $20, within the cap
    assert await page.get_attribute("#max-cost", "max") == "20"
    assert await page.input_value("#preset") == "standard"  # the server's preset

    await page.fill("#question", QUESTION)
    await page.select_option("#preset", "deep")
    await page.select_option("#scope", "web")
    await page.click("#go")
    await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
    await page.select_option("#scope", "kb")
    await page.click("#go")
    await page.wait_for_function("() => document.querySelector('#error').textContent")
    assert sent == [
        {"question": QUESTION, "preset": "deep", "web_only": True},
        {"question": QUESTION, "preset": "deep", "kb_only": True},
    ]
    [saved] = SessionStore(settings.sessions_dir).list()
    assert SessionStore(settings.sessions_dir).load(saved.session_id).run_spec.preset == "deep"


async def test_the_sessions_table_dates_each_run_and_says_why_it_stopped(
    server: str, settings: Settings
) -> None:
    """Dates in the reader's time zone (the browser's, here Paris: UTC+1 in January)."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        need(False, "playwright is not installed (pip install -e '.[browser]')")
    need(HAVE_BROWSER, f"no {BROWSER} (apt-get install chromium-headless-shell)")
    store = SessionStore(settings.sessions_dir)
    started = datetime(2026, 1, 15, 8, 5, tzinfo=UTC)
    stopped = store.create(QUESTION, created_at=started, status="stopped", stop_reason="cost_limit")
    store.write_report(stopped.session_id, "# Report\n")  # one with none reads interrupted
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        try:
            page = await browser.new_page(timezone_id="Europe/Paris")
            await page.goto(server + "/")
            row = page.locator(f"#sessions tr[data-session='{stopped.session_id}']")
            await row.wait_for()
            when = await row.locator("td.when").inner_text()
            updated = store.load(stopped.session_id).updated_at.astimezone(PARIS)  # today
            assert when == f"2026-01-15 09:05 – {updated:%Y-%m-%d %H:%M}"
            assert await row.locator("td.status").inner_text() == "stopped"
            assert await row.locator("td.stop").inner_text() == "cost limit"
        finally:
            await browser.close()


async def test_a_sessions_address_opens_it_on_load_and_on_a_hash_change(
    server: str, fake_openai: FakeOpenAI, page: Page
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    await page.goto(server + "/")
    await page.fill("#question", QUESTION)
    await page.click("#go")
    await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
    session_id = page.url.rsplit("#", 1)[1]  # a started run's address is its own
    assert re.fullmatch(r"[0-9a-f]{12}", session_id), page.url

    await page.goto("about:blank")
    await page.goto(f"{server}/#{session_id}")  # on load
    await page.wait_for_selector("#report h1", timeout=20_000)
    assert await page.inner_text("#run-title") == QUESTION
    assert await page.inner_text("#report h1") == QUESTION

    await page.goto("about:blank")
    await page.goto(server + "/")
    await page.wait_for_selector("#sessions tbody tr")
    assert await page.is_hidden("#run")
    await page.evaluate("id => { location.hash = id; }", "abcdef012345")  # no such session
    await page.wait_for_function("() => document.querySelector('#error').textContent")
    assert "abcdef012345" in await page.inner_text("#error")
    assert await page.is_hidden("#run")
    await page.evaluate("id => { location.hash = id; }", session_id)  # on a hash change
    await page.wait_for_selector("#report h1", timeout=20_000)
    assert await page.inner_text("#run-title") == QUESTION
    assert await page.inner_text("#error") == ""


async def test_at_400_px_nothing_scrolls_sideways(server: str, fake_openai: FakeOpenAI) -> None:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        need(False, "playwright is not installed (pip install -e '.[browser]')")
    need(HAVE_BROWSER, f"no {BROWSER} (apt-get install chromium-headless-shell)")
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2", "t1")]]).install(fake_openai)
    question = f"How do vector databases handle deletes, as {LONG_WORD} says?"
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=BROWSER, args=["--no-sandbox"])
        try:
            page = await browser.new_page(viewport=NARROW)
            await page.goto(server + "/")
            assert await fits(page)
            await page.fill("#question", question)
            await page.click("#go")
            await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
            await page.wait_for_selector("#report h1", timeout=10_000)
            await page.wait_for_selector("#sessions tbody tr")
            assert await fits(page)
            await screenshot(page, "page-400")
            # The tables' rows are stacked, each cell named by its column.
            first = page.locator("#sessions tbody tr td").nth(1)
            assert await first.evaluate("td => getComputedStyle(td).display") == "block"
            assert await first.get_attribute("data-label") == "started"
            await page.set_viewport_size({"width": 1280, "height": 900})  # a table again
            assert await first.evaluate("td => getComputedStyle(td).display") == "table-cell"
            await screenshot(page, "page-1280")
            session_id = page.url.rsplit("#", 1)[1]
            await page.set_viewport_size(NARROW)  # the HTML report, as a phone shows it
            await page.goto(f"{server}/research/{session_id}/report")
            await page.wait_for_selector("main h1")
            assert await fits(page)
            await screenshot(page, "report-400")
        finally:
            await browser.close()


async def test_the_html_report_is_styled_when_served_and_when_opened_alone(
    server: str, fake_openai: FakeOpenAI, page: Page, tmp_path: Any
) -> None:
    """The report carries the page's stylesheet inline, allowed by its hash: served, and as
    a file opened from disk; the browser refuses no style (it would say so on the console)."""
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    refused: list[str] = []
    page.on("console", lambda m: refused.append(m.text) if m.type == "error" else None)
    await page.goto(server + "/")
    await page.fill("#question", QUESTION)
    await page.click("#go")
    await page.wait_for_selector("#run[data-ended='complete']", timeout=30_000)
    session_id = page.url.rsplit("#", 1)[1]

    served = await page.goto(f"{server}/research/{session_id}/report")
    assert served is not None
    assert served.headers["content-type"].startswith("text/html")
    saved = tmp_path / "report.html"
    saved.write_bytes(await served.body())
    for where in (served.url, saved.as_uri()):
        await page.goto(where)
        style = await page.evaluate(
            "() => { const s = getComputedStyle(document.querySelector('main'));"
            " return [getComputedStyle(document.body).fontFamily, s.maxWidth]; }"
        )
        assert style[0].startswith("system-ui"), (where, style)
        assert style[1] == "768px", (where, style)  # .report { max-width: 48rem }
        h2 = page.locator("h2").first
        assert await h2.evaluate("h => getComputedStyle(h).borderBottomStyle") == "solid"
    assert refused == []
