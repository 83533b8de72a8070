"""A session's event log: every run appends typed events with increasing ids, and any
process can follow them (``sessions watch``, later the HTTP API's SSE stream)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from deep_research.app import lifecycle, preparation, saved
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.events import RunEvent
from deep_research.persistence.events import EventLog, follow, read_events
from tests.clirun import cli, run_json
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task, verdict


def events_of(env: dict[str, str], session_id: str) -> list[RunEvent]:
    return read_events(Path(env["DEEP_RESEARCH_HOME"]) / "sessions" / session_id / "events.jsonl")


def test_a_run_logs_every_step_with_increasing_ids(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(
        plans=[[plan_task("t1"), plan_task("t2", "t1")]], verdicts=[verdict(True)]
    ).install(fake_openai)
    data = run_json(env, "How do vector databases handle deletes?")
    events = events_of(env, data["session_id"])
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "start"
    assert events[-1].type == "end"
    assert events[-1].data["status"] == "complete"
    t2 = [e.data["status"] for e in events if e.type == "node" and e.node_id == "t2"]
    assert t2 == ["pending", "running", "done"], "every change of status, in order"
    running = [e.id for e in events if e.type == "node" and e.data["status"] == "running"]
    t1_done = next(e.id for e in events if e.node_id == "t1" and e.data.get("status") == "done")
    assert t1_done < running[-1], "t2 started only after t1 was done"
    spend = [e.data["cost_usd"] for e in events if e.type == "spend"]
    assert spend == sorted(spend)
    assert spend[-1] == pytest.approx(data["usage"]["cost_usd"], abs=1e-6)
    assert any(e.type == "job" for e in events), "the research jobs' progress"
    [report] = [e for e in events if e.type == "report"]
    assert report.data["path"] == data["report_path"]
    assert [e.type for e in events[-3:]] == ["stop", "report", "end"]


def test_watch_prints_the_latest_run_of_a_finished_session(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    data = run_json(env, "How do vector databases handle deletes?")
    code, out, err = cli(env, "sessions", "watch", data["session_id"][:6], "--json")
    assert code == 0, err
    watched = [RunEvent.model_validate(json.loads(line)) for line in out.splitlines()]
    assert watched == events_of(env, data["session_id"])
    code, out, _ = cli(env, "sessions", "watch", data["session_id"])
    assert code == 0
    assert "started" in out.splitlines()[0]
    assert "complete" in out.splitlines()[-1]


def test_watching_an_unknown_session_is_one_line(env: dict[str, str]) -> None:
    code, _, err = cli(env, "sessions", "watch", "abcdef012345")
    assert code == 4
    assert len(err.strip().splitlines()) == 1


async def test_a_follower_sees_a_run_live_and_stops_at_its_end(
    offline: Settings,
) -> None:
    prepared = preparation.prepare(offline, "When does a research node start?", RunOptions())
    with lifecycle.start(prepared, lambda _line: None) as run:
        live: list[RunEvent] = []
        run.events.listeners.append(live.append)
        watched: list[RunEvent] = []

        async def watch() -> None:
            async for event in saved.watch(offline, run.state.session_id, poll_seconds=0.01):
                watched.append(event)

        follower = asyncio.create_task(watch())
        await asyncio.sleep(0.05)  # following before the run writes anything
        await lifecycle.execute(run, lambda _event: None)
        await asyncio.wait_for(follower, 5)
    assert watched == live
    assert watched[0].type == "start"
    assert watched[-1].type == "end"


def test_ids_continue_across_resumes_and_torn_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.append(RunEvent(type="start"))
    log.append(RunEvent(type="end"))
    log.close()
    with path.open("a") as file:
        file.write('{"id": 3, "type": "mess')  # a crash mid-write: no newline
    assert [e.id for e in read_events(path)] == [1, 2], "a partial line waits"
    with path.open("a") as file:
        file.write("\n")
    resumed = EventLog(path)
    assert resumed.append(RunEvent(type="start")).id == 3
    resumed.close()
    assert [e.id for e in read_events(path)] == [1, 2, 3]
    assert [e.id for e in read_events(path, after=2)] == [3]


async def test_following_from_an_id_misses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    for _ in range(3):
        log.append(RunEvent(type="message"))

    async def collect() -> list[int]:
        return [e.id async for e in follow(path, after=2, poll_seconds=0.01)]

    task = asyncio.create_task(collect())
    await asyncio.sleep(0.03)
    log.append(RunEvent(type="message"))
    log.append(RunEvent(type="end"))
    log.append(RunEvent(type="start"))  # the next run's: not this follower's
    assert await asyncio.wait_for(task, 2) == [3, 4, 5]
    log.close()


async def test_a_live_follower_gets_the_backlog_then_each_event_as_it_is_written(
    tmp_path: Path,
) -> None:
    from deep_research.app.saved import follow_live

    log = EventLog(tmp_path / "events.jsonl")
    log.append(RunEvent(type="start"))
    log.append(RunEvent(type="message"))
    seen: list[int] = []

    async def collect() -> None:
        async for event in follow_live(log, after=0):
            seen.append(event.id)

    task = asyncio.create_task(collect())
    await asyncio.sleep(0)  # subscribed, backlog read
    assert seen == [1, 2]
    log.append(RunEvent(type="message"))
    await asyncio.sleep(0)
    assert seen == [1, 2, 3], "pushed at once, no polling interval"
    log.append(RunEvent(type="end"))
    await asyncio.wait_for(task, 1)
    assert seen == [1, 2, 3, 4]
    assert log.listeners == [], "unsubscribed at the end"
    log.close()
