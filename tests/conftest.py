"""Shared pytest fixtures. Keep each group short and labelled."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from langchain_openai import ChatOpenAI

from deep_research.app.config import Settings
from tests.fake_openai import FakeOpenAI
from tests.fakes import tracked_rigs

pytest_plugins = ["pytester"]

# --- generated inputs (hypothesis) -----------------------------------------------------------
# Every run draws the same examples (a failure seen once is seen again, in CI too), with no
# per-example deadline and no check of how fast examples are drawn (these machines are
# shared: slow is not a failure), and writes no example database into the working tree.
hypothesis_settings.register_profile(
    "deep-research",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
hypothesis_settings.load_profile("deep-research")

# --- scripted fakes (tests/fakes.py) --------------------------------------------------------
# Every Rig built during a test is checked once the test has passed: a scripted step that
# nothing used fails it (unless the test called `rig.allow_leftovers(reason)`). A test that
# failed or xfailed is not checked again: its own failure says more.

CALL_REPORT = pytest.StashKey[pytest.TestReport]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[CALL_REPORT] = report
    return report


@pytest.fixture(autouse=True)
def rigs_use_up_their_scripts(request: pytest.FixtureRequest) -> Iterator[None]:
    with tracked_rigs() as rigs:
        yield
    call = request.node.stash.get(CALL_REPORT, None)
    if call is not None and call.passed:
        for rig in rigs:
            rig.check_at_teardown()


# --- fake OpenAI server (tests/fake_openai.py) --------------------------------------------
# Every client below is built per test and closed at teardown: an HTTP pool belongs to
# the event loop that first used it, and each test has its own loop ("Event loop is
# closed"). langchain-openai also caches its default pool per (base_url, timeout) for
# the whole process, so ChatOpenAI always gets its own `http_async_client` here.


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A loopback OpenAI-compatible server for this test; fails the test on handler errors."""
    with FakeOpenAI() as fake:
        yield fake
    if fake.errors:
        pytest.fail("FakeOpenAI saw errors:\n" + "\n".join(fake.errors))


@pytest.fixture
async def openai_client(
    fake_openai: FakeOpenAI,
) -> AsyncIterator[Callable[..., openai.AsyncOpenAI]]:
    """Factory of `openai.AsyncOpenAI` clients on `fake_openai` (kwargs pass through)."""
    clients: list[openai.AsyncOpenAI] = []

    def make(**kwargs: Any) -> openai.AsyncOpenAI:
        kwargs.setdefault("api_key", "test")
        clients.append(openai.AsyncOpenAI(base_url=fake_openai.base_url, **kwargs))
        return clients[-1]

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def chat_openai(fake_openai: FakeOpenAI) -> AsyncIterator[Callable[..., ChatOpenAI]]:
    """Factory of `ChatOpenAI` models on `fake_openai` (default model gpt-4.1-mini)."""
    pools: list[openai.DefaultAsyncHttpxClient] = []

    def make(**kwargs: Any) -> ChatOpenAI:
        pools.append(openai.DefaultAsyncHttpxClient())
        kwargs.setdefault("model", "gpt-4.1-mini")
        kwargs.setdefault("api_key", "test")
        return ChatOpenAI(base_url=fake_openai.base_url, http_async_client=pools[-1], **kwargs)

    yield make
    for pool in pools:
        await pool.aclose()


@pytest.fixture(autouse=True)
def _claim_check_reads_no_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim check reads the pages research jobs cite; the fakes cite addresses nobody
    serves (``*.example``, example.org). Tests of page reading serve their pages on loopback
    and turn it on."""
    monkeypatch.setenv("DEEP_RESEARCH_CHECK_FETCH", "off")


# --- CLI runs (tests/clirun.py) -------------------------------------------------------------
# Each run gets its own DEEP_RESEARCH_HOME and working directory (so no `.env` is read), and
# talks to the fake server with a key that tests check never reaches the disk. The fake
# server stands in for OpenAI's API, so its web branches are research jobs, as they are there
# (any other base URL would choose search-and-read).


@pytest.fixture
def env(tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("DEEP_RESEARCH_", "OPENAI_")):
            monkeypatch.delenv(name)
    return {
        "DEEP_RESEARCH_HOME": str(tmp_path / "home"),
        "OPENAI_BASE_URL": fake_openai.base_url,
        "OPENAI_API_KEY": "sk-test-secret-value",
        "DEEP_RESEARCH_WEB_POLL_SECONDS": "0.01",
        "DEEP_RESEARCH_MAX_RETRIES": "1",
        "DEEP_RESEARCH_WEB_ENGINE": "openai",
        "DEEP_RESEARCH_CHECK_FETCH": "off",
    }


# --- service runs with no model (extractive) ------------------------------------------------

NOTES = {
    "scheduling.md": "# Scheduling\n\nA research node starts as soon as its dependencies are "
    "done. Independent nodes run in parallel, up to max_parallel at once.\n",
    "budgets.md": "# Budgets\n\nEvery web job reserves its worst-case cost before it starts, "
    "and the reservation is released when the job's real usage is recorded.\n",
}


@pytest.fixture
def kb_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The fake OpenAI server's settings and ``NOTES`` ingested as kb/ (the working
    directory's)."""
    from tests.clirun import cli  # the CLI app: only the tests that run it import it

    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text)
    code, _, err = cli(env, "kb", "ingest", "kb")
    assert code == 0, err
    return env


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings with no model (extractive mode) and a small kb/ to ingest."""
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text)
    return Settings(home=tmp_path / "home", kb_path=kb, _env_file=None)  # type: ignore[call-arg]
