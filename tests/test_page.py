"""The page to watch a run, in a real headless browser (Debian's chromium-headless-shell,
driven by playwright; never `playwright install`, which downloads). Start a run against the
fake model, see the nodes appear, read the report with clickable citations.

Outside CI (``CI`` unset) the test skips when the browser or playwright is missing; in CI
that is a failure (`.ci/run` installs both)."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator

import pytest

from deep_research.app.config import Settings
from deep_research.app.http_api import create_app
from deep_research.app.runs import Caps, RunManager
from tests.fake_openai import FakeOpenAI
from tests.serving import free_port, serving
from tests.world import ResearchWorld, plan_task

BROWSER = shutil.which("chromium-headless-shell") or "/usr/bin/chromium-headless-shell"
HAVE_BROWSER = os.path.exists(BROWSER)


def need(condition: bool, why: str) -> None:
    if not condition:
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI must have it: see .ci/run)")
        pytest.skip(why)


@pytest.fixture
async def server(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    port = free_port()
    app = create_app(settings, port=port, runs=RunManager(settings, Caps(max_cost_per_run=20)))
    async with serving(app, port) as base:
        yield base


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
    """Pages with forged titles and a synthesis with its own Sources list and link
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
            cited = await page.eval_on_selector_all(
                "#report a[href^='#']", "links => links.map(a => [a.hash, a.textContent])"
            )
            assert cited
            assert all(f"#source-{text.strip('[]')}" == hash_ for hash_, text in cited)
            sources = await page.eval_on_selector_all(
                "#report li[id^='source-'] > p > a:first-child",
                "links => links.map(a => [a.href, a.textContent])",
            )
            assert len(sources) >= 2
            for href, title in sources:
                number = href.removeprefix("https://source").removesuffix(".example/page")
                assert title == f"Source {number}](https://phish.example/{number}) [real"
            await page.locator("#report a[href='#source-1']").first.click()
            assert page.url.endswith("#source-1")
        finally:
            await browser.close()
