"""Runs a server process starts and executes itself: returned at once, capped, queued,
cancelled and saved exactly like CLI runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from deep_research.app import lifecycle, preparation, saved
from deep_research.app.config import Settings
from deep_research.app.options import ResumeRequest, RunOptions
from deep_research.app.runs import Caps, RunManager
from deep_research.app.warm import warm_up
from deep_research.core.errors import UsageError
from deep_research.core.events import RunEvent
from deep_research.core.models import LedgerEntry
from deep_research.kb import onnx_embeddings
from deep_research.persistence.events import read_events
from deep_research.persistence.sessions import SessionStore
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task

QUESTION = "When does a research node start?"


@pytest.fixture
def settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings for the fake OpenAI server (research jobs for web nodes)."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


def events(settings: Settings, session_id: str) -> list[str]:
    path = settings.sessions_dir / session_id / "events.jsonl"
    return [e.message for e in read_events(path)]


async def test_a_started_run_returns_its_id_at_once_and_researches_in_the_background(
    offline: Settings,
) -> None:
    runs = RunManager(offline)
    session_id = await runs.start(QUESTION, RunOptions())
    assert session_id in runs.running()
    assert SessionStore(offline.sessions_dir).is_locked(session_id), "the task holds the lock"
    await runs.wait(session_id)
    assert runs.running() == []
    state = saved.status(offline, session_id)
    assert state.status == "complete"
    assert not SessionStore(offline.sessions_dir).is_locked(session_id)
    assert events(offline, session_id)[-1].endswith("complete")


async def test_runs_over_the_limit_wait_their_turn_and_say_so(offline: Settings) -> None:
    runs = RunManager(offline, Caps(max_runs=1))
    first = await runs.start(QUESTION, RunOptions())
    second = await runs.start("How are costs capped?", RunOptions())
    await asyncio.gather(runs.wait(first), runs.wait(second))
    assert any(m.startswith("queued: 1 runs are researching") for m in events(offline, second))
    assert not any(m.startswith("queued") for m in events(offline, first))
    assert saved.status(offline, second).status == "complete"


async def test_a_cost_over_the_cap_is_refused_before_anything_is_saved(
    offline: Settings,
) -> None:
    runs = RunManager(offline, Caps(max_cost_per_run=2.0))
    with pytest.raises(UsageError, match=r"over this server's cap of \$2.00"):
        await runs.start(QUESTION, RunOptions(max_cost_usd=3.0))
    assert saved.list_sessions(offline) == []


def spend(settings: Settings, usd: float, at: datetime) -> None:
    store = SessionStore(settings.sessions_dir)
    state = store.create("an earlier run")
    state.ledger.append(LedgerEntry(role="planner", model="gpt-6-sol", cost_usd=usd, at=at))
    store.save(state)


async def test_the_daily_budget_counts_every_session_of_the_day(offline: Settings) -> None:
    spend(offline, 48.0, datetime.now(UTC))
    spend(offline, 30.0, datetime(2026, 1, 1, tzinfo=UTC))  # another day: not counted
    runs = RunManager(offline, Caps(max_cost_per_run=5.0, daily_budget=50.0))
    assert runs.ledger.committed().spent == pytest.approx(48.0)
    with pytest.raises(UsageError, match=r"has \$2.00 left"):
        await runs.start(QUESTION, RunOptions(max_cost_usd=3.0))
    session_id = await runs.start(QUESTION, RunOptions())  # given what is left
    await runs.wait(session_id)
    assert saved.status(offline, session_id).limits.max_cost_usd == pytest.approx(2.0)


async def test_cancel_stops_the_run_and_its_jobs_and_resume_leaves_them(
    settings: Settings, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    fake_openai.hold_responses = True
    runs = RunManager(settings, Caps(max_cost_per_run=20.0))  # room for two $4 jobs at once
    session_id = await runs.start("How do vector databases handle deletes?", RunOptions())
    await asyncio.to_thread(
        fake_openai.wait_for, lambda: sum(1 for n in fake_openai.retrieves.values() if n) >= 2, 30
    )
    result = await runs.cancel(session_id)
    assert result.recorded, "the run had stopped: its cancels are recorded now"
    assert sorted(o.status for _, _, o in result.jobs) == ["cancelled", "cancelled"]
    state = saved.status(settings, session_id)
    assert state.status == "interrupted"
    assert {n.status for n in state.nodes.values()} == {"cancelled"}
    assert runs.running() == []
    # Resumed from here (or the CLI), the cancelled nodes are not researched again.
    fake_openai.hold_responses = False
    creates = fake_openai.count("/v1/responses", "POST")
    resumed = await runs.resume(session_id, ResumeRequest())
    await runs.wait(resumed)
    assert fake_openai.count("/v1/responses", "POST") == creates
    assert {n.status for n in saved.status(settings, session_id).nodes.values()} == {"cancelled"}


async def test_shutdown_saves_every_run_as_interrupted(
    settings: Settings, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    runs = RunManager(settings)
    session_id = await runs.start("How do vector databases handle deletes?", RunOptions())
    await asyncio.to_thread(
        fake_openai.wait_for, lambda: any(n for n in fake_openai.retrieves.values()), 30
    )
    await runs.shutdown()
    state = saved.status(settings, session_id)
    assert state.status == "interrupted"
    assert [n.remote_jobs for n in state.nodes.values()] != [{}], "the job's id is kept"
    assert events(settings, session_id)[-1].endswith("interrupted")


async def test_a_resume_through_the_server_is_bound_by_todays_budget(offline: Settings) -> None:
    runs = RunManager(offline, Caps(max_cost_per_run=5.0, daily_budget=50.0))
    session_id = await runs.start(QUESTION, RunOptions())
    await runs.wait(session_id)
    spend(offline, 49.0, datetime.now(UTC))
    resumed = await runs.resume(session_id, ResumeRequest(max_iterations=2))
    await runs.wait(resumed)
    assert saved.status(offline, session_id).limits.max_cost_usd == pytest.approx(1.0)
    spend(offline, 1.0, datetime.now(UTC))
    with pytest.raises(UsageError, match=r"has \$0.00 left"):
        await runs.resume(session_id, ResumeRequest())


async def test_a_queued_run_that_is_cancelled_is_saved_interrupted_and_its_log_ended(
    settings: Settings, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")], [plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    runs = RunManager(settings, Caps(max_runs=1, max_cost_per_run=20.0))
    first = await runs.start("How do vector databases handle deletes?", RunOptions())
    await asyncio.to_thread(
        fake_openai.wait_for, lambda: any(n for n in fake_openai.retrieves.values()), 30
    )
    queued = await runs.start("How do they compact?", RunOptions())
    follower = asyncio.ensure_future(_collect(runs.watch(queued)))
    # Waiting is not researching: a waiter that gives up leaves the run alone.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(runs.wait(queued), 0.2)
    assert queued in runs.running()

    await runs.cancel(queued)
    seen = await asyncio.wait_for(follower, 10)
    assert [e.type for e in seen][-2:] == ["stop", "end"]
    assert seen[-1].data["status"] == "interrupted"
    assert saved.status(settings, queued).status == "interrupted"
    assert not SessionStore(settings.sessions_dir).is_locked(queued)
    assert runs.running() == [first]
    await runs.shutdown()
    with pytest.raises(UsageError, match="shutting down"):
        await runs.start(QUESTION, RunOptions())


async def _collect(events: AsyncIterator[RunEvent]) -> list[RunEvent]:
    return [event async for event in events]


async def test_following_a_queued_resume_shows_only_the_new_run(offline: Settings) -> None:
    runs = RunManager(offline, Caps(max_runs=1))
    session_id = await runs.start(QUESTION, RunOptions())
    await runs.wait(session_id)
    blocker = await runs.start("How are costs capped?", RunOptions())
    resumed = await runs.resume(session_id, ResumeRequest(max_iterations=2))
    log = runs._logs.get(resumed)
    assert log is not None
    seen = await _collect(saved.watch(offline, resumed, live=log))
    assert seen[0].id == log.opened_after + 1  # nothing of the finished run is replayed
    assert seen[0].message.startswith("queued")
    assert [e.type for e in seen].count("start") == 1
    assert seen[-1].type == "end"
    await runs.wait(blocker)


def test_a_running_session_no_process_holds_reads_as_interrupted(offline: Settings) -> None:
    store = SessionStore(offline.sessions_dir)
    prepared = preparation.prepare(offline, QUESTION, RunOptions())
    with lifecycle.start(prepared, lambda _message: None) as run:
        assert saved.status(offline, run.state.session_id).status == "running"
    # Its process is gone (kill -9): nothing holds the lock, the file still says running.
    assert store.load(run.state.session_id).status == "running"
    assert saved.status(offline, run.state.session_id).status == "interrupted"


async def test_a_start_cancelled_while_reserving_gives_its_reservation_back(
    offline: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    runs = RunManager(offline, Caps(max_cost_per_run=5.0, daily_budget=50.0))
    entered, proceed, released = threading.Event(), threading.Event(), threading.Event()
    reserve, release = runs.ledger.reserve, runs.ledger.release

    def slow_reserve(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        proceed.wait(30)  # the client goes away while the ledger is being written
        return reserve(*args, **kwargs)

    def observed_release(reservation: str) -> None:
        release(reservation)
        released.set()

    monkeypatch.setattr(runs.ledger, "reserve", slow_reserve)
    monkeypatch.setattr(runs.ledger, "release", observed_release)
    starting = asyncio.create_task(runs.start(QUESTION, RunOptions(max_cost_usd=3.0)))
    assert await asyncio.to_thread(entered.wait, 30)
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    proceed.set()
    assert await asyncio.to_thread(released.wait, 30), "what was reserved meanwhile is given back"
    assert runs.ledger.committed().reserved == 0
    assert saved.list_sessions(offline) == []


def test_the_warm_up_loads_the_claim_checks_embedding_model(
    settings: Settings, fake_openai: FakeOpenAI
) -> None:
    """Every run's claim check embeds with the shipped model: a server (or a team's worker)
    loads it as it starts, a web-only one too, not in its first run (~0.5 s of CPU)."""
    onnx_embeddings._load_onnx.cache_clear()
    runs = RunManager(settings.model_copy(update={"web_engine": "openai"}))
    warm_up(runs.settings, runs.say_engine)
    assert onnx_embeddings._load_onnx.cache_info().currsize == 1


@pytest.mark.parametrize("serves", [True, False], ids=["serves", "does-not-serve"])
def test_a_server_says_once_at_start_which_engine_auto_chose(
    settings: Settings,
    fake_openai: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    serves: bool,
) -> None:
    """The fake server as a gateway (not OpenAI's own API): the warm-up asks it, as the first
    run would, and the choice is logged once however often it is made."""
    if not serves:
        fake_openai.models.pop("gpt-5.5")
    runs = RunManager(settings.model_copy(update={"web_engine": "auto"}))
    with caplog.at_level(logging.INFO, logger="deep_research"):
        warm_up(runs.settings, runs.say_engine)
        warm_up(runs.settings, runs.say_engine)
    [said] = [r for r in caplog.records if "web engine auto" in r.getMessage()]
    if serves:
        assert said.levelno == logging.INFO
        assert said.getMessage().startswith("web engine auto: openai (OpenAI research jobs")
        assert said.getMessage().endswith("serves gpt-5.5")
    else:
        assert said.levelno == logging.WARNING
        assert said.getMessage().startswith("web engine auto: search (search and read via ")
        assert "does not serve gpt-5.5" in said.getMessage()
