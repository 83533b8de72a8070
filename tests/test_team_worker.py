"""A team's queued runs: `deep-research submit` saves and queues them, `deep-research worker`
processes (DBOS on PostgreSQL) research them, and a worker killed with kill -9 has its runs
finished by another, each research job created once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.clirun import cli, run_json
from tests.fake_openai import FakeOpenAI
from tests.pg import execute, fresh_database
from tests.serving import serve_process
from tests.test_cli_kb_runs import kb_env, no_model  # noqa: F401 - the fixture
from tests.world import ResearchWorld, plan_task

REPO = Path(__file__).resolve().parents[1]
DATABASE = "DEEP_RESEARCH_DATABASE_URL"
TIMEOUT = "2"
"""DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS: a worker silent 2 s is dead."""


# Set up before ``env``, which clears every DEEP_RESEARCH_ variable, the test server's too.
@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database() as conninfo:
        yield conninfo


class Workers:
    """`deep-research worker` child processes, their output in files; killed at the end."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env = {**os.environ, **env, "PYTHONPATH": str(REPO)}
        self.logs = logs
        self.children: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = self.logs / f"worker{len(self.children)}.log"
        with log.open("wb") as out:
            child = subprocess.Popen(
                [sys.executable, "-m", "deep_research", "worker"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self.children.append(child)
        return child

    def output(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.logs.glob("worker*.log")))

    def stop(self, child: subprocess.Popen[bytes]) -> int:
        child.send_signal(signal.SIGTERM)
        return child.wait(timeout=30)

    def close(self) -> None:
        for child in self.children:
            if child.poll() is None:
                child.kill()
                child.wait()


@pytest.fixture
def workers_for(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], Workers]]:
    made: list[Workers] = []

    def make(env: dict[str, str]) -> Workers:
        logs = tmp_path / "logs"
        logs.mkdir(exist_ok=True)
        made.append(Workers(env, logs))
        return made[-1]

    yield make
    for workers in made:
        workers.close()


@pytest.fixture
def exits() -> Iterator[ExitStack]:
    """What a test starts and stops at its end, however it ends."""
    with ExitStack() as stack:
        yield stack


def follow_over_sse(
    session_id: str, workers: Workers, exits: ExitStack
) -> tuple[subprocess.Popen[str], str]:
    """`sessions watch ID --json --server URL` of a `serve --no-local-worker` (which
    researches nothing itself), from the first event; the child and its first line, read
    once it follows the run."""
    log = workers.logs / "serve.log"
    base = exits.enter_context(serve_process(workers.env, "--no-local-worker", log=log))
    watch = ["sessions", "watch", session_id, "--after=0", "--json", f"--server={base}"]
    follower = subprocess.Popen(
        [sys.executable, "-m", "deep_research", *watch],
        env=workers.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert follower.stdout is not None
    return follower, follower.stdout.readline()


def followed_events(follower: subprocess.Popen[str], first_line: str) -> list[dict[str, object]]:
    """The events a `sessions watch --json` child printed: ``first_line`` (read already),
    then the rest until it exits (at most a minute), read from the same buffered stream."""
    assert follower.stdout is not None
    rest: list[str] = []
    reader = threading.Thread(target=lambda: rest.append(follower.stdout.read()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert follower.wait(timeout=10) == 0, follower.stderr.read() if follower.stderr else ""
    return [json.loads(line) for line in [first_line, *"".join(rest).splitlines()]]


def statuses(database: str, session_ids: list[str]) -> dict[str, str]:
    rows = execute(database, "SELECT session_id, state FROM sessions")
    return {sid: json.loads(state)["status"] for sid, state in rows if sid in session_ids}


def wait_until(
    check: Callable[[], bool], seconds: float, workers: Workers, what: str, poll: float = 0.1
) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        dead = [c.returncode for c in workers.children if c.poll() is not None]
        if time.monotonic() > deadline or (dead and dead != [-signal.SIGKILL]):
            pytest.fail(f"{what}: not after {seconds} s; workers said:\n{workers.output()}")
        time.sleep(poll)


def event_types(database: str, session_id: str) -> list[tuple[int, str]]:
    rows = execute(
        database,
        "SELECT id, event FROM session_events WHERE session_id = %s ORDER BY id",
        (session_id,),
    )
    return [(int(i), json.loads(event)["type"]) for i, event in rows]


def workflows(database: str) -> dict[str, tuple[str, str]]:
    """Each DBOS workflow: (status, the executor that ran it last), by id."""
    rows = execute(database, "SELECT workflow_uuid, status, executor_id FROM dbos.workflow_status")
    return {wid: (status, executor) for wid, status, executor in rows}


def team_env(env: dict[str, str], database: str) -> dict[str, str]:
    return env | {
        DATABASE: database,
        "DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS": TIMEOUT,
    }


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("host=/var/run/postgresql dbname=r user=u", "not a Unix socket"),
        ("postgresql://u@h1,h2/r", "not a Unix socket or a list of hosts"),
        ("postgresql://u@h/r?sslpassword=k3y-s3cret", "cannot pass sslpassword"),
    ],
)
def test_an_address_dbos_would_misread_or_log_is_refused(address: str, refused: str) -> None:
    from deep_research.app import queue
    from deep_research.core.errors import ConfigError

    with pytest.raises(ConfigError, match=refused) as caught:
        queue.dbos_url(address)
    assert "k3y-s3cret" not in str(caught.value)


def test_submit_and_worker_need_a_database(env: dict[str, str]) -> None:
    for args in (("worker",), ("submit", "What is HNSW?")):
        code, _, err = cli(env, *args)
        assert code == 3, err
        assert err.strip().splitlines() == [
            "error: DEEP_RESEARCH_DATABASE_URL is not set: workers and queued runs keep "
            "their sessions and queue in a team's PostgreSQL database"
        ]


def test_one_worker_researches_every_queued_run_once(
    database: str,
    kb_env: dict[str, str],  # noqa: F811 - the fixture
    workers_for: Callable[[dict[str, str]], Workers],
) -> None:
    env = team_env(no_model(kb_env), database)
    questions = ["How are costs capped?", "When does a node start?", "What runs in parallel?"]
    submitted = [run_json(env, "submit", q) for q in questions]
    session_ids = [s["session_id"] for s in submitted]
    assert {s["status"] for s in submitted} == {"queued"}
    assert set(statuses(database, session_ids).values()) == {"queued"}, "saved, not run"
    listed = {row["session_id"]: row["status"] for row in run_json(env, "sessions", "list")}
    assert {listed[sid] for sid in session_ids} == {"queued"}
    assert {s for s, _ in workflows(database).values()} == {"ENQUEUED"}

    workers = workers_for(env)
    began = time.monotonic()
    worker = workers.start()
    wait_until(
        lambda: (
            set(statuses(database, session_ids).values()) == {"complete"}
            and {status for status, _ in workflows(database).values()} == {"SUCCESS"}
        ),
        45,
        workers,
        "every run complete",
    )
    print(f"\n3 extractive runs researched {time.monotonic() - began:.1f} s after the start")
    for session_id in session_ids:
        events = event_types(database, session_id)
        assert [i for i, _ in events] == list(range(1, len(events) + 1))
        assert [t for _, t in events].count("start") == 1, "researched once"
        assert events[-1][1] == "end"
        code, out, err = cli(env, "sessions", "report", session_id)
        assert code == 0, err
        assert "Extractive mode" in out
    assert {s for s, _ in workflows(database).values()} == {"SUCCESS"}

    from deep_research.app.config import Settings
    from deep_research.app.queue import RunQueue

    before = event_types(database, session_ids[0])
    queue = RunQueue(Settings(database_url=database))
    queue.put(session_ids[0])  # queued again: the same workflow, done already
    queue.close()
    assert len(workflows(database)) == 3
    assert workflows(database)[session_ids[0]][0] == "SUCCESS", "not put on the queue again"
    assert event_types(database, session_ids[0]) == before, "not researched again"
    assert workers.stop(worker) == 0, workers.output()
    [(beat,)] = execute(database, "SELECT heartbeat_at::text FROM workers")
    assert beat == "-infinity", "a worker that stops says so: its runs go on elsewhere"


def test_a_killed_workers_runs_finish_on_another_and_no_job_is_created_twice(
    database: str,
    env: dict[str, str],
    fake_openai: FakeOpenAI,
    workers_for: Callable[[dict[str, str]], Workers],
    exits: ExitStack,
) -> None:
    runs = 6
    plans = [[plan_task("t1", question=f"What is known about aspect {i}?")] for i in range(runs)]
    ResearchWorld(plans=plans).install(fake_openai)
    fake_openai.hold_responses = True  # every research job in flight until released
    env = team_env(env, database) | {"DEEP_RESEARCH_WORKER_CONCURRENCY": "3"}
    session_ids = [run_json(env, "submit", f"Question number {i}?")["session_id"] for i in range(6)]

    workers = workers_for(env)
    first, second = workers.start(), workers.start()
    wait_until(
        lambda: (
            len(fake_openai.response_ids) == runs
            and all(fake_openai.retrieves[r] for r in fake_openai.response_ids)
        ),
        45,
        workers,
        "six research jobs created and polled (their ids saved)",
    )
    running = workflows(database)
    executors = {executor for _, executor in running.values()}
    assert len(executors) == 2, "three runs on each worker"
    killed_executor = next(  # the first worker's: it wrote its id before the second started
        e for e in executors if f"-{first.pid}-" in e
    )
    orphans = {wid for wid, (_, e) in running.items() if e == killed_executor}
    assert len(orphans) == 3
    watched = sorted(orphans)[0]
    # A terminal following one of them through the kill: over SSE, from a server that
    # researches nothing itself.
    follower, first_line = follow_over_sse(watched, workers, exits)

    first.send_signal(signal.SIGKILL)
    first.wait()
    killed = time.monotonic()
    fake_openai.hold_responses = False
    for response_id in fake_openai.response_ids:
        fake_openai.complete(response_id)
    wait_until(
        lambda: (
            set(statuses(database, session_ids).values()) == {"complete"}
            and {status for status, _ in workflows(database).values()} == {"SUCCESS"}
        ),
        45,
        workers,
        "every run complete, the killed worker's too",
    )
    print(f"\nthe killed worker's runs complete {time.monotonic() - killed:.1f} s after kill -9")

    assert fake_openai.count("/v1/responses", "POST") == runs, "no research job created twice"
    assert sorted(fake_openai.research_inputs.values()) == [1] * runs
    after = workflows(database)
    assert {status for status, _ in after.values()} == {"SUCCESS"}
    for session_id in session_ids:
        events = event_types(database, session_id)
        assert [i for i, _ in events] == list(range(1, len(events) + 1)), "ids contiguous"
        starts = [t for _, t in events].count("start")
        assert starts == (2 if session_id in orphans else 1), (session_id, events)
        if session_id in orphans:
            assert after[session_id][1] != killed_executor, "finished by the live worker"
    ids = [event["id"] for event in followed_events(follower, first_line)]
    assert ids == list(range(1, len(event_types(database, watched)) + 1)), "none missed"
    assert workers.stop(second) == 0, workers.output()


def test_a_dead_worker_is_handed_on_once_and_kept_while_handing_on_fails(database: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from deep_research.persistence.workers import Heartbeats

    with Heartbeats(database, "alive-a", 60) as a, Heartbeats(database, "alive-b", 60) as b:
        execute(database, "INSERT INTO workers VALUES ('gone', now(), '-infinity')")

        def down(_gone: str) -> None:
            raise RuntimeError("the queue cannot be reached")

        assert a.reap(down) == []
        assert execute(database, "SELECT count(*) FROM workers WHERE executor_id = 'gone'") == [
            (1,)
        ], "kept for the next reap"

        handed: list[str] = []
        holding, other_done = threading.Event(), threading.Event()

        def while_b_reaps(gone: str) -> None:
            holding.set()  # a holds gone's row now: b reaps while it does
            assert other_done.wait(30), "b's reap waited on a's row instead of skipping it"
            handed.append(gone)

        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(a.reap, while_b_reaps)
            assert holding.wait(30)
            second = b.reap(handed.append)
            other_done.set()
            assert first.result(30) == ["gone"]
        assert second == [], "skipped: another reaper holds it"
        assert handed == ["gone"], "handed on by one reaper, once"
        assert execute(database, "SELECT executor_id FROM workers ORDER BY 1") == [
            ("alive-a",),
            ("alive-b",),
        ]


def test_the_team_cap_holds_a_research_job_until_a_slot_is_free(
    database: str,
    env: dict[str, str],
    fake_openai: FakeOpenAI,
    workers_for: Callable[[dict[str, str]], Workers],
) -> None:
    plans = [[plan_task("t1", question=f"What is known about aspect {i}?")] for i in range(2)]
    ResearchWorld(plans=plans).install(fake_openai)
    fake_openai.hold_responses = True
    env = team_env(env, database) | {"DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS": "1"}
    session_ids = [run_json(env, "submit", f"Question number {i}?")["session_id"] for i in range(2)]
    workers = workers_for(env)
    workers.start()  # two runs at once, one slot between them

    def waiting() -> list[str]:
        rows = execute(database, "SELECT session_id, event FROM session_events")
        return [sid for sid, event in rows if json.loads(event)["data"].get("status") == "waiting"]

    wait_until(
        lambda: len(waiting()) == 1 and len(fake_openai.response_ids) == 1,
        45,
        workers,
        "one run's job in flight, the other's waiting for the only slot",
    )
    fake_openai.hold_responses = False
    fake_openai.complete(fake_openai.response_ids[0])
    wait_until(
        lambda: set(statuses(database, session_ids).values()) == {"complete"},
        45,
        workers,
        "both runs complete, one job after the other",
    )
    assert len(fake_openai.response_ids) == 2
    assert sorted(fake_openai.research_inputs.values()) == [1, 1], "each job created once"


def test_a_follower_goes_on_through_a_worker_stopped_on_purpose(
    database: str,
    env: dict[str, str],
    fake_openai: FakeOpenAI,
    workers_for: Callable[[dict[str, str]], Workers],
    exits: ExitStack,
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    env = team_env(env, database)
    [session_id] = [run_json(env, "submit", "What is HNSW?")["session_id"]]
    workers = workers_for(env)
    first = workers.start()
    wait_until(lambda: bool(fake_openai.response_ids), 45, workers, "its job created")
    follower, first_line = follow_over_sse(session_id, workers, exits)
    assert workers.stop(first) == 0, workers.output()  # its run saved interrupted: an `end`
    workers.start()  # takes the run up where the first left it
    fake_openai.hold_responses = False
    fake_openai.complete(fake_openai.response_ids[0])
    events = followed_events(follower, first_line)
    assert [e["id"] for e in events] == list(range(1, len(events) + 1)), "none missed"
    ends = [e["data"]["status"] for e in events if e["type"] == "end"]
    assert ends == ["interrupted", "complete"], "followed on to the run's real end"
    assert len(fake_openai.response_ids) == 1, "its job re-attached, not created again"
