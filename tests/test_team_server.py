"""A team's servers are clients of its queue: `serve` and `mcp` (``RunManager``) save a run
as queued and put it on the queue for the workers; they cancel and resume runs any worker
holds, and research queued runs in their own process unless ``--no-local-worker``."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from deep_research.app import saved
from deep_research.app.config import Settings
from deep_research.app.options import ResumeRequest, RunOptions
from deep_research.app.runs import RunManager
from deep_research.core.errors import StorageError, UsageError
from deep_research.core.events import RunEvent
from tests.fake_openai import FakeOpenAI
from tests.pg import execute, fresh_database
from tests.serving import serve_process
from tests.test_daily_budget import RUN, SMALL_JOBS
from tests.test_team_worker import (
    Workers,
    event_types,
    statuses,
    team_env,
    wait_until,
    workers_for,  # noqa: F401 - the fixture
    workflows,
)
from tests.world import ResearchWorld, plan_task


# Set up before ``env``, which clears every DEEP_RESEARCH_ variable, the test server's too.
@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database() as conninfo:
        yield conninfo


@pytest.fixture
def team(database: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The fake OpenAI server's settings, in a team on ``database``; also this process's."""
    values = team_env(env, database) | SMALL_JOBS | {"DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD": "20"}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def settings() -> Settings:
    return Settings(_env_file=None)  # type: ignore[call-arg]


async def event_names(events: AsyncIterator[RunEvent]) -> list[str]:
    return [event.type async for event in events]


def reserved_for(session_id: str) -> float:
    from deep_research.app.runs import daily_ledger

    held = daily_ledger(settings()).reservations()
    return sum(r.amount_usd for r in held if r.session_id == session_id)


async def test_a_server_queues_runs_and_cancels_and_resumes_one_a_worker_holds(
    team: dict[str, str],
    database: str,
    fake_openai: FakeOpenAI,
    workers_for: Callable[[dict[str, str]], Workers],  # noqa: F811 - the fixture
) -> None:
    plans = [[plan_task("t1", question=f"What is known about aspect {i}?")] for i in range(2)]
    ResearchWorld(plans=plans).install(fake_openai)
    fake_openai.hold_responses = True  # both research jobs in flight until released
    runs = RunManager(settings(), local_worker=False)
    try:
        kept, cancelled = [
            await runs.start(f"Question number {i}?", RunOptions(max_cost_usd=RUN))
            for i in range(2)
        ]
        assert statuses(database, [kept, cancelled]) == {kept: "queued", cancelled: "queued"}
        assert saved.status(runs.settings, kept).status == "queued"
        assert {s for s, _ in workflows(database).values()} == {"ENQUEUED"}
        assert reserved_for(kept) == RUN, "held for the worker that runs it"
        assert runs.running() == [], "nothing researched in the server"
        follower = asyncio.create_task(event_names(saved.watch(runs.settings, kept)))

        workers = workers_for(team)
        workers.start()
        wait_until(
            lambda: (
                len(fake_openai.response_ids) == 2
                and all(fake_openai.retrieves[r] for r in fake_openai.response_ids)
            ),
            45,
            workers,
            "both research jobs created and polled",
        )
        result = await runs.cancel(cancelled)
        [(node, job_id, outcome)] = result.jobs
        assert outcome.status == "cancelled"
        assert result.recorded, "the worker let go of it first: recorded here"
        assert fake_openai.cancels[job_id] == 1
        state = saved.status(runs.settings, cancelled)
        assert (state.status, state.nodes[node].status) == ("interrupted", "cancelled")
        assert workflows(database)[cancelled][0] == "CANCELLED"

        for response_id in fake_openai.response_ids:
            if response_id != job_id:
                fake_openai.complete(response_id)
        wait_until(
            lambda: statuses(database, [kept])[kept] == "complete", 45, workers, "kept complete"
        )
        wait_until(lambda: reserved_for(kept) == 0, 10, workers, "its reservation released")
        followed = await asyncio.wait_for(follower, 30)
        assert (followed[0], followed[-1]) == ("start", "end"), "followed from its queueing"

        fake_openai.hold_responses = False
        again = await runs.resume(cancelled, ResumeRequest(retry_cancelled=True))
        assert again == cancelled
        assert statuses(database, [cancelled])[cancelled] == "queued"
        with pytest.raises(UsageError, match="queued already"):
            await runs.resume(cancelled, ResumeRequest())
        resumes = [w for w in workflows(database) if w.startswith(f"{cancelled}-")]
        assert len(resumes) == 1, "a resume is a workflow of its own"
        wait_until(
            lambda: (
                statuses(database, [cancelled])[cancelled] == "complete"
                and workflows(database)[resumes[0]][0] == "SUCCESS"
            ),
            45,
            workers,
            "the resumed run complete",
        )
        events = event_types(database, cancelled)
        assert [i for i, _ in events] == list(range(1, len(events) + 1)), "ids contiguous"
        assert [t for _, t in events].count("start") == 2
        assert len(fake_openai.response_ids) == 3, "the cancelled job created once more"

        # A finished run, its report written, resumed: researched again, not skipped.
        await runs.resume(kept, ResumeRequest(max_iterations=3))
        wait_until(
            lambda: (
                [t for _, t in event_types(database, kept)].count("end") == 2
                and statuses(database, [kept])[kept] == "complete"
            ),
            45,
            workers,
            "the finished run resumed to its end",
        )
        wait_until(lambda: reserved_for(kept) == 0, 10, workers, "its new reservation released")
    finally:
        await runs.shutdown()


async def test_a_run_the_queue_refuses_is_saved_interrupted_and_its_reservation_returned(
    team: dict[str, str], database: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbos import DBOSClient

    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    runs = RunManager(settings(), local_worker=False)

    def refused(*_args: object) -> None:
        raise RuntimeError(f"connection to {database} failed: the queue is down\nDETAIL: x")

    monkeypatch.setattr(DBOSClient, "enqueue", refused)
    try:
        with pytest.raises(StorageError) as caught:
            await runs.start("What is HNSW?", RunOptions(max_cost_usd=RUN))
        assert str(caught.value).startswith("could not queue session ")
        assert str(caught.value).endswith("the queue is down"), "one line"
        [row] = saved.list_sessions(runs.settings)
        assert (row.status, reserved_for(row.session_id)) == ("interrupted", 0)
    finally:
        await runs.shutdown()


async def test_a_queued_run_cancelled_before_any_worker_took_it_spends_nothing(
    team: dict[str, str], database: str, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    runs = RunManager(settings(), local_worker=False)  # and no worker anywhere
    try:
        session_id = await runs.start("What is HNSW?", RunOptions(max_cost_usd=RUN))
        assert reserved_for(session_id) == RUN
        result = await runs.cancel(session_id)
        assert (result.jobs, result.recorded) == ([], True)
        assert saved.status(runs.settings, session_id).status == "interrupted"
        assert workflows(database)[session_id][0] == "CANCELLED", "off the queue"
        assert reserved_for(session_id) == 0, "given back: nothing was spent"
        assert fake_openai.count("/v1/chat/completions") == 0

        await runs.resume(session_id, ResumeRequest())  # queued again, as a new workflow
        assert saved.status(runs.settings, session_id).status == "queued"
        [again] = [w for w in workflows(database) if w != session_id]
        assert (again.startswith(f"{session_id}-"), workflows(database)[again][0]) == (
            True,
            "ENQUEUED",
        )
    finally:
        await runs.shutdown()


@pytest.fixture
def serve(team: dict[str, str], tmp_path: Path) -> Iterator[Callable[..., str]]:
    """`deep-research serve` child processes in the team; their URL. Stopped at the end."""
    with ExitStack() as stack:
        numbers = itertools.count()

        def start(*flags: str) -> str:
            log = tmp_path / f"serve{next(numbers)}.log"
            return stack.enter_context(serve_process(team, *flags, log=log))

        yield start


def test_serve_researches_queued_runs_itself_unless_told_not_to(
    serve: Callable[..., str], database: str, fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")] for _ in range(2)]).install(fake_openai)
    reader = serve("--no-local-worker")
    posted = httpx.post(reader + "/research", json={"question": "What is HNSW?"}, timeout=60)
    assert posted.status_code == 202, posted.text
    queued = posted.json()["session_id"]
    assert httpx.get(f"{reader}/research/{queued}", timeout=10).json()["status"] == "queued"
    assert execute(database, "SELECT count(*) FROM workers") == [(0,)], "no worker there"

    full = serve()  # a worker too: it takes up the run the other one queued
    deadline = time.monotonic() + 60
    while httpx.get(f"{full}/research/{queued}", timeout=10).json()["status"] != "complete":
        assert time.monotonic() < deadline, "the serving worker did not research it"
        time.sleep(0.2)
    assert execute(database, "SELECT count(*) FROM workers") == [(1,)]
    with httpx.stream("GET", f"{reader}/research/{queued}/events", timeout=30) as stream:
        types = [line.removeprefix("event: ") for line in stream.iter_lines() if "event:" in line]
    assert (types[0], types[-1]) == ("start", "end"), "followed from the other server"


async def test_a_cancel_the_queue_cannot_answer_says_so_and_leaves_the_run_queued(
    team: dict[str, str], database: str, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbos import DBOSClient

    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    runs = RunManager(settings(), local_worker=False)
    try:
        session_id = await runs.start("What is HNSW?", RunOptions(max_cost_usd=RUN))

        def down(*_args: object, **_kwargs: object) -> None:
            raise RuntimeError("the queue is down\nDETAIL: x")

        monkeypatch.setattr(DBOSClient, "list_workflows", down)
        with pytest.raises(StorageError) as caught:
            await runs.cancel(session_id)
        assert str(caught.value) == (
            f"could not cancel the run of {session_id}: the queue is down: its research "
            "jobs were cancelled; the run may go on"
        )
        assert saved.status(runs.settings, session_id).status == "queued", "not unqueued"
        assert reserved_for(session_id) == RUN, "kept: a worker may still take it"
    finally:
        await runs.shutdown()
