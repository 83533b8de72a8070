"""The server's daily budget holds: admitting a run reserves its cost limit in a ledger that
every server process shares (``persistence/daily.py``), so runs posted back to back, to one
server or to two, never take the day's spend plus what is reserved over the budget; a run's
reservation turns into what it spent when it ends; verify_claim's judge is booked there too."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from mcp import Client

from deep_research.app import knowledge, saved, verify, wiring
from deep_research.app.config import Settings
from deep_research.app.options import ResumeRequest, RunOptions
from deep_research.app.runs import Caps, RunManager, daily_ledger
from deep_research.core.errors import UsageError
from deep_research.core.models import LedgerEntry
from deep_research.frontends.mcp.server import create_server
from deep_research.kb.catalog import open_kb
from deep_research.kb.ingest import ingest
from deep_research.persistence.daily import DailyLedger, DayIsSpent, FileBook
from deep_research.persistence.sessions import SessionStore
from tests.conftest import NOTES
from tests.fake_openai import FakeOpenAI
from tests.serving import free_port
from tests.world import ResearchWorld, plan_task

QUESTION = "How do vector databases handle deletes?"
SETTING = "DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD"
DAY = 0.5
RUN = 0.2
"""A run's cost limit: room for one small research job ($0.11 at worst) and the report."""
SMALL_JOBS = {
    "DEEP_RESEARCH_WEB_MAX_TOOL_CALLS": "1",
    "DEEP_RESEARCH_WEB_MAX_OUTPUT_TOKENS": "1000",
    "DEEP_RESEARCH_MAX_TOKENS_PER_CALL": "1000",
    "DEEP_RESEARCH_SECTION_MAX_TOKENS": "500",
    "DEEP_RESEARCH_REPORT_MAX_SECTIONS": "2",
}


@pytest.fixture
def small_env(env: dict[str, str]) -> dict[str, str]:
    """The fake OpenAI server, research jobs small enough for a $0.20 run, a $0.50 day."""
    return {
        **env,
        **SMALL_JOBS,
        "DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD": str(DAY),
        "DEEP_RESEARCH_SERVER_MAX_RUNS": "10",
    }


@pytest.fixture
def settings(small_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in small_env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def spend(settings: Settings, usd: float, at: datetime | None = None) -> str:
    """A session (a CLI run, say) that spent ``usd`` at ``at``."""
    store = SessionStore(settings.sessions_dir)
    state = store.create("an earlier run", status="complete")
    entry = LedgerEntry(role="planner", model="gpt-6-sol", cost_usd=usd)
    if at is not None:
        entry.at = at
    state.ledger.append(entry)
    store.save(state)
    return state.session_id


# --- one server process -------------------------------------------------------------------


async def test_ten_runs_back_to_back_are_admitted_only_as_far_as_the_day_reaches(
    settings: Settings, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")] for _ in range(10)]).install(fake_openai)
    fake_openai.hold_responses = True  # every admitted run keeps researching
    runs = RunManager(settings)
    admitted: list[str] = []
    refusals: list[str] = []
    for _ in range(10):
        try:
            admitted.append(await runs.start(QUESTION, RunOptions(max_cost_usd=RUN)))
        except UsageError as exc:
            refusals.append(str(exc))
    try:
        assert len(admitted) == 2, "$0.20 twice fits a $0.50 day, three times does not"
        assert len(refusals) == 8
        assert all(SETTING in message for message in refusals)
        assert runs.ledger.committed().total <= DAY
        assert len(saved.list_sessions(settings)) == 2, "a refused run saves nothing"
    finally:
        await runs.shutdown()


async def test_a_finished_run_gives_back_what_it_did_not_spend(offline: Settings) -> None:
    runs = RunManager(offline, Caps(max_cost_per_run=5.0, daily_budget=6.0))
    first = await runs.start(QUESTION, RunOptions(max_cost_usd=5.0))
    with pytest.raises(UsageError, match=r"has \$1.00 left"):
        await runs.start(QUESTION, RunOptions(max_cost_usd=5.0))
    await runs.wait(first)
    assert runs.ledger.committed().reserved == 0.0, "it spent nothing (no model): all back"
    second = await runs.start(QUESTION, RunOptions(max_cost_usd=5.0))
    await runs.wait(second)


async def test_an_interrupted_run_keeps_its_reservation_for_the_day_and_a_resume_reserves_again(
    settings: Settings, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    runs = RunManager(settings)
    session_id = await runs.start(QUESTION, RunOptions(max_cost_usd=RUN))
    await asyncio.to_thread(fake_openai.wait_for, lambda: any(fake_openai.retrieves.values()), 30)
    await runs.shutdown()  # Ctrl-C on the server: its job keeps running at the provider
    assert saved.status(settings, session_id).status == "interrupted"
    held = runs.ledger.committed()
    assert held.total == pytest.approx(RUN), "spent + what it may still spend"
    tomorrow = DailyLedger(
        runs.ledger.book,
        SessionStore(settings.sessions_dir),
        DAY,
        clock=lambda: datetime.now(UTC) + timedelta(days=1),
    )
    assert tomorrow.committed().reserved == 0.0, "held until the end of its day only"

    job_id = saved.status(settings, session_id).nodes["t1"].remote_jobs["deep_research"]
    fake_openai.complete(job_id)
    again = RunManager(settings)
    resumed = await again.resume(session_id, ResumeRequest())
    assert [r.session_id for r in again.ledger.reservations()] == [session_id], "replaced"
    await again.wait(resumed)
    assert saved.status(settings, session_id).status == "complete"
    assert again.ledger.reservations() == [], "released to what it spent"
    assert again.ledger.committed().spent == pytest.approx(
        sum(e.cost_usd for e in saved.status(settings, session_id).ledger)
    )


def test_the_ledger_counts_sessions_bookings_and_what_reservations_may_still_spend(
    offline: Settings,
) -> None:
    store = SessionStore(offline.sessions_dir)
    ledger = DailyLedger(FileBook(offline.home / "daily"), store, 10.0)
    spend(offline, 2.0)  # a CLI run, today
    spend(offline, 30.0, datetime(2026, 1, 1, tzinfo=UTC))  # another day
    held = ledger.reserve(5.0, exact=True)
    with pytest.raises(DayIsSpent, match=r"has \$3.00 left"):
        ledger.reserve(3.5, exact=True)
    assert ledger.reserve(9.0, exact=False).amount_usd == pytest.approx(3.0)  # what is left
    with pytest.raises(DayIsSpent, match=SETTING):
        ledger.reserve(0.5, exact=False)
    session_id = spend(offline, 0.0)
    ledger.attach(held.id, session_id)
    state = store.load(session_id)
    state.ledger.append(LedgerEntry(role="planner", model="gpt-6-sol", cost_usd=1.5))
    store.save(state)
    figure = ledger.committed()
    assert (figure.spent, figure.reserved) == (pytest.approx(3.5), pytest.approx(6.5))
    assert figure.total == pytest.approx(10.0), "what it spent came out of what it reserved"
    ledger.release(held.id)  # its run ended: its spend stays, the rest of its $5 is free
    assert ledger.committed().total == pytest.approx(6.5)
    call = ledger.reserve(1.0, exact=True, kind="call")
    ledger.settle(call.id, 0.25)
    assert ledger.committed().booked == pytest.approx(0.25)
    assert ledger.committed().total == pytest.approx(6.75)


def test_an_unreadable_ledger_refuses_admissions_and_names_its_file(offline: Settings) -> None:
    ledger = DailyLedger(FileBook(offline.home / "daily"), SessionStore(offline.sessions_dir), 10.0)
    ledger.reserve(1.0, exact=True)
    (offline.home / "daily" / "ledger.json").write_text("{torn")
    with pytest.raises(Exception, match=r"ledger\.json"):
        ledger.reserve(1.0, exact=True)


# --- two server processes sharing one data directory --------------------------------------


@pytest.fixture
def two_servers(small_env: dict[str, str]) -> Iterator[list[str]]:
    """Two `deep-research serve` processes on loopback, one DEEP_RESEARCH_HOME."""
    ports = [free_port(), free_port()]
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "deep_research.frontends.cli", "serve", "--port", str(port)],
            env={**os.environ, **small_env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for port in ports
    ]
    bases = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for base, server in zip(bases, servers, strict=True):
            for _ in range(400):  # polling the port: the process says nothing when it is bound
                try:
                    httpx.get(base + "/sessions", timeout=1)
                    break
                except httpx.TransportError:
                    assert server.poll() is None, server.stderr.read() if server.stderr else ""
                    threading.Event().wait(0.05)
        yield bases
    finally:
        for server in servers:
            server.send_signal(signal.SIGINT)
        for server in servers:
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


async def test_two_server_processes_share_one_daily_budget(
    small_env: dict[str, str], fake_openai: FakeOpenAI, two_servers: list[str]
) -> None:
    ResearchWorld(plans=[[plan_task("t1")] for _ in range(10)]).install(fake_openai)
    fake_openai.hold_responses = True
    async with httpx.AsyncClient(timeout=60) as client:
        replies = await asyncio.gather(
            *(
                client.post(
                    two_servers[i % 2] + "/research",
                    json={"question": f"{QUESTION} ({i})", "max_cost_usd": RUN},
                )
                for i in range(10)
            )
        )
    codes = sorted(r.status_code for r in replies)
    assert codes == [202] * 2 + [400] * 8, [r.text for r in replies]
    refused = [r.json()["error"] for r in replies if r.status_code == 400]
    assert all(e["code"] == "bad_request" and SETTING in e["message"] for e in refused)
    home = Path(small_env["DEEP_RESEARCH_HOME"])
    store = SessionStore(home / "sessions")
    assert len(store.list()) == 2
    ledger = DailyLedger(FileBook(home / "daily"), store, DAY)
    assert ledger.committed().total <= DAY


# --- verify_claim's judge -------------------------------------------------------------------


@pytest.fixture
def with_kb(settings: Settings, tmp_path: Path) -> Settings:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text)
    settings = settings.with_overrides(kb_path=kb)
    ingest(open_kb(settings.kb, create=True), kb)
    return settings


UNSURE = "Every web job is retried three times."
"""A claim the text verifier is unsure of against the budgets note (its words, mostly, but
not what it says): the judge settles it."""


def assert_unsure(settings: Settings, chunk_id: str) -> None:
    from deep_research.adapters import verifier

    text = knowledge.kb_fetch(settings, chunk_id).text
    assert verifier.verify(UNSURE, text).uncertain, "the test needs a claim in the uncertain band"


async def test_the_judge_of_verify_claim_is_booked_and_refused_once_the_day_is_spent(
    with_kb: Settings, fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(plans=[])
    world.install(fake_openai)
    source = knowledge.kb_search(with_kb, "worst-case cost reserved", k=1)[0].chunk_id
    assert_unsure(with_kb, source)
    ledger = DailyLedger(FileBook(with_kb.home / "daily"), SessionStore(with_kb.sessions_dir), DAY)
    judge = wiring.support_judge(with_kb, daily_ledger(with_kb))

    checked = await verify.verify_claim(with_kb, UNSURE, source, judge=judge)
    assert checked.support.verifier == with_kb.judge_model, checked
    assert checked.support.verdict == "unsupported"
    assert world.calls["verifier"] == 1
    booked = ledger.committed()
    assert booked.booked > 0, "the judge's call is in the day's ledger"
    assert booked.reserved == 0.0

    spend(with_kb, DAY - booked.booked)  # the rest of the day, spent by a run
    refused = await verify.verify_claim(with_kb, UNSURE, source, judge=judge)
    assert refused.support.verifier == "text", "the text verifier's verdict stands"
    assert refused.support.verdict != "supported"
    assert SETTING in refused.reason
    assert world.calls["verifier"] == 1, "the judge was not asked"


async def test_verify_claim_over_mcp_is_booked_in_the_servers_ledger(
    with_kb: Settings, fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(plans=[])
    world.install(fake_openai)
    runs = RunManager(with_kb, Caps(daily_budget=1.0))
    source = knowledge.kb_search(with_kb, "worst-case cost reserved", k=1)[0].chunk_id
    assert_unsure(with_kb, source)
    arguments = {"claim": UNSURE, "source": source}
    async with Client(create_server(with_kb, runs=runs)) as client:
        checked = await client.call_tool("verify_claim", arguments)
        assert checked.structured_content is not None
        assert checked.structured_content["support"]["verifier"] == with_kb.judge_model
        assert runs.ledger.committed().booked > 0
        spend(with_kb, 1.0)  # the day is spent
        refused = await client.call_tool("verify_claim", arguments)
        assert refused.structured_content is not None
        assert refused.structured_content["support"]["verifier"] == "text"
        assert SETTING in refused.structured_content["reason"]
    assert world.calls["verifier"] == 1
