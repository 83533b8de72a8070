"""Team benchmark: what keeping the sessions in PostgreSQL costs a run, against the files.

    python bench/team.py            # human-readable figures
    python bench/team.py --json     # ... and a last line with one JSON object
    python bench/team.py --smoke    # every figure once, at toy sizes: does it still run?

It needs a PostgreSQL server it may create databases on: ``--database URL``, else
``DEEP_RESEARCH_TEST_DATABASE_URL`` (``.ci/run`` starts one on loopback). It creates a
database of its own, brings it to the schema (``schema.upgrade``) and drops it after.

Figures (targets from the team-service issue), medians of --runs:
- checkpoint_file_ms       a run's checkpoint (``Checkpointer.save``, awaited: serialized on
                           the loop, written off it) of a 48-node session (~200 KB), files
- checkpoint_pg_ms         the same into PostgreSQL, the session's lease held (a fenced write)
- checkpoint_pg_over_file  the ratio                                                   <= 3
- job_line_file_ms         a paid job's id kept (``save_jobs``: one journal line), files
- job_line_pg_ms           the same into PostgreSQL (a row, fenced)
- runs_per_minute_1 / _2 / _4  12 queued runs of one shape (a plan of 2 web sub-questions,
                           their research jobs, the judge, the report; every model call
                           200 ms at the loopback fake OpenAI server of the tests, or
                           --latency) through 1, 2 and 4 `deep-research worker` processes,
                           one run at a time each: runs over the minutes from the first
                           run's start event to the last one's end event (the workers'
                           start-up is not counted)
- worker_cpu_seconds_1 / _2 / _4  the CPU the workers used for those runs, their start-up
                           and warm-up (~3 s each) included: what 2 cores cap
- speedup_4_workers        runs_per_minute_4 / runs_per_minute_1                       >= 3.5
- recovery_seconds         a worker killed (kill -9) with a run in flight, the worker
                           timeout 2 s: from the kill to that run's start on the other
                           worker                                                      <= 4
The server's ``fsync`` and ``synchronous_commit`` are printed beside them (``details``): the
files are fsync'ed; CI's throwaway server runs with ``fsync=off``, which flatters it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deep_research.core.models import Citation, ResearchNode, SessionState  # noqa: E402
from deep_research.persistence.checkpoints import Checkpointer  # noqa: E402
from deep_research.persistence.port import Sessions  # noqa: E402
from deep_research.persistence.postgres import PgSessions  # noqa: E402
from deep_research.persistence.sessions import SessionStore  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402
from tests.pg import URL_VARIABLE, execute, fresh_database  # noqa: E402
from tests.world import ResearchWorld, plan_task  # noqa: E402

LATENCY = 0.2
TIMEOUT = 2.0
"""DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS of the workers here (5 s in --smoke, which the test
suite runs beside every other bench: a live worker's beats may lag 2 s on a loaded CI)."""

NOTE = (
    "Independent nodes run in parallel, up to the run's limit, each as soon as its "
    "dependencies are done, and every web job reserves its worst-case cost first [S{n}]. "
)


def session(store: Sessions, nodes: int) -> SessionState:
    """A saved session of ``nodes`` done sub-questions, each with notes and a citation."""
    state = store.create("What does a team's checkpoint cost?")
    for i in range(nodes):
        ref = f"S{i + 1}"
        state.sources[ref] = Citation(ref=ref, kind="web", url=f"https://x.example/{i}")
        state.nodes[f"t{i}"] = ResearchNode(
            id=f"t{i}",
            question=f"Sub-question {i}?",
            status="done",
            notes=NOTE.format(n=i + 1) * 20,
            citations=[state.sources[ref]],
            remote_jobs={"deep_research": f"resp_{i:04d}"},
        )
    return state


async def timed_ms(work: Callable[[], Awaitable[None]], runs: int) -> float:
    """The median wall time of ``work`` in ms, after one untimed run."""
    await work()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        await work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(store: Sessions, nodes: int, runs: int) -> tuple[float, float]:
    """(checkpoint ms, journal line ms) for a session of ``nodes`` held by this process."""
    state = session(store, nodes)
    checkpointer = Checkpointer(store)
    with store.lock(state.session_id):

        async def checkpoint() -> None:
            state.nodes["t0"].notes += "."  # a change, as every step makes one
            await checkpointer.save(state)

        async def job_line() -> None:
            state.nodes["t0"].remote_jobs["deep_research"] += "x"
            await asyncio.to_thread(store.save_jobs, state, "t0")

        return await timed_ms(checkpoint, runs), await timed_ms(job_line, runs)


async def figures(nodes: int, runs: int) -> tuple[dict[str, float], dict[str, str]]:
    """The figures, and the server's durability settings."""
    with tempfile.TemporaryDirectory() as home:
        file_checkpoint, file_line = await measure(SessionStore(Path(home)), nodes, runs)
    with fresh_database() as conninfo:
        pg_checkpoint, pg_line = await measure(PgSessions(conninfo), nodes, runs)
        [[fsync]] = execute(conninfo, "SHOW fsync")
        [[synchronous]] = execute(conninfo, "SHOW synchronous_commit")
    numbers = {
        "checkpoint_file_ms": file_checkpoint,
        "checkpoint_pg_ms": pg_checkpoint,
        "checkpoint_pg_over_file": pg_checkpoint / file_checkpoint,
        "job_line_file_ms": file_line,
        "job_line_pg_ms": pg_line,
    }
    return numbers, {"fsync": str(fsync), "synchronous_commit": str(synchronous)}


# --- runs through workers -----------------------------------------------------------------


def worker_env(conninfo: str, fake: FakeOpenAI, home: Path) -> dict[str, str]:
    """A worker's environment: this bench's database, fake and data directory only."""
    mine = ("OPENAI_", "DEEP_RESEARCH_")
    kept = {k: v for k, v in os.environ.items() if not k.upper().startswith(mine)}
    return kept | {
        "PYTHONPATH": str(REPO),
        "DEEP_RESEARCH_HOME": str(home),
        "DEEP_RESEARCH_DATABASE_URL": conninfo,
        "DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS": str(TIMEOUT),
        "DEEP_RESEARCH_WORKER_CONCURRENCY": "1",
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "sk-bench",
        "DEEP_RESEARCH_WEB_ENGINE": "openai",
        "DEEP_RESEARCH_WEB_POLL_SECONDS": "0.05",
        "DEEP_RESEARCH_CHECK_FETCH": "off",
    }


def submit(env: dict[str, str], runs: int) -> list[str]:
    """``runs`` new sessions saved and queued (in this process: as `submit` does), with the
    settings a worker reads from ``env``."""
    from deep_research.app import queue
    from deep_research.app.config import Settings
    from deep_research.app.options import RunOptions

    before = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        settings = Settings(_env_file=None)  # type: ignore[call-arg]
        return [
            queue.submit(settings, f"What is known about topic {i}?", RunOptions(), _quiet)
            for i in range(runs)
        ]
    finally:
        os.environ.clear()
        os.environ.update(before)


def _quiet(_message: object) -> None:
    pass


@contextmanager
def workers(env: dict[str, str], logs: Path) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start `deep-research worker` processes (its output in ``logs``); stopped at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        with (logs / f"worker{len(started)}.log").open("ab") as out:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "deep_research", "worker"],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        return started[-1]

    try:
        yield start
    finally:
        for child in started:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in started:
            try:
                child.wait(30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def events(conninfo: str, kind: str) -> dict[str, list[datetime]]:
    """When each session's events of ``kind`` were kept, in order."""
    rows = execute(
        conninfo,
        "SELECT session_id, event FROM session_events ORDER BY session_id, id",
    )
    found: dict[str, list[datetime]] = {}
    for session_id, event in rows:
        data = json.loads(event)
        if data["type"] == kind:
            found.setdefault(session_id, []).append(datetime.fromisoformat(data["at"]))
    return found


@contextmanager
def ended(conninfo: str) -> Iterator[Callable[[], int]]:
    """How many sessions have an end event so far, asked of one open connection: a check
    cheap enough to make five times a second without taking the workers' two cores (a new
    connection forks a server process, and reading every event back grows with the runs)."""
    import psycopg

    query = (
        "SELECT count(DISTINCT session_id) FROM session_events"
        " WHERE event::jsonb ->> 'type' = 'end'"
    )
    with psycopg.connect(conninfo, autocommit=True) as conn:

        def count() -> int:
            row = conn.execute(query).fetchone()
            return int(row[0]) if row else 0

        yield count


def wait_for(check: Callable[[], bool], seconds: float, what: str, logs: Path) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            tail = "".join(p.read_text()[-2000:] for p in sorted(logs.glob("*.log")))
            sys.exit(f"bench/team.py: {what} not after {seconds:.0f} s\n{tail}")
        time.sleep(0.2)


def world(fake: FakeOpenAI, runs: int, latency: float = LATENCY) -> None:
    plans = [[plan_task("t1"), plan_task("t2")] for _ in range(runs)]
    ResearchWorld(plans=plans, verdicts=[]).install(fake)
    fake.latency = latency


def runs_per_minute(
    count: int, runs: int, work: Path, latency: float = LATENCY
) -> tuple[float, float]:
    """Queued runs per minute through ``count`` workers (see the module docstring), and the
    CPU seconds the workers used, start-up included."""
    with FakeOpenAI(polls_to_complete=1) as fake, fresh_database() as conninfo:
        world(fake, runs, latency)
        env = worker_env(conninfo, fake, work / f"home{count}")
        sessions = submit(env, runs)
        logs = work / f"logs{count}"
        logs.mkdir()
        cpu = _children_cpu()
        with workers(env, logs) as start:
            for _ in range(count):
                start()
            with ended(conninfo) as done:
                wait_for(lambda: done() >= runs, 60 + 20 * runs, "every run", logs)
        cpu = _children_cpu() - cpu
        starts, ends = events(conninfo, "start"), events(conninfo, "end")
        assert set(ends) == set(sessions)
        first = min(at[0] for at in starts.values())
        last = max(at[-1] for at in ends.values())
        return runs / ((last - first).total_seconds() / 60), cpu


def _children_cpu() -> float:
    """CPU seconds of the worker processes waited for so far (start-up and warm-up too)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def recovery_seconds(work: Path) -> float:
    """From kill -9 of a worker holding two runs (their research jobs in flight) to the
    later of their starts on another worker, up with two free slots."""
    with FakeOpenAI(polls_to_complete=1) as fake, fresh_database() as conninfo:
        world(fake, 2)
        fake.hold_responses = True
        env = worker_env(conninfo, fake, work / "home-kill")
        env["DEEP_RESEARCH_WORKER_CONCURRENCY"] = "2"
        victims = submit(env, 2)
        logs = work / "logs-kill"
        logs.mkdir()
        held = "SELECT count(*) FROM sessions WHERE lease_owner IS NOT NULL"
        with workers(env, logs) as start:
            first = start()
            jobs_out = lambda: len(fake.response_ids) == 4  # noqa: E731 - 2 sub-questions a run
            wait_for(lambda: execute(conninfo, held) == [(2,)] and jobs_out(), 90, "held", logs)
            start()
            beating = "SELECT count(*) FROM workers"
            wait_for(lambda: execute(conninfo, beating) == [(2,)], 60, "a second worker", logs)
            first.send_signal(signal.SIGKILL)
            first.wait()
            killed = time.time()
            again = lambda: all(  # noqa: E731
                len(events(conninfo, "start").get(victim, [])) == 2 for victim in victims
            )
            wait_for(again, 60, "both runs resumed", logs)
            resumed = max(events(conninfo, "start")[victim][1] for victim in victims)
            fake.hold_responses = False
            for response_id in list(fake.response_ids):
                fake.complete(response_id)
            done = lambda: len(events(conninfo, "end")) == 2  # noqa: E731
            wait_for(done, 60, "both runs ended", logs)
            return resumed.timestamp() - killed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, once: does it run?")
    parser.add_argument("--runs", type=int, default=30, help="timed saves per figure")
    parser.add_argument("--database", help=f"a PostgreSQL server's URL (else ${URL_VARIABLE})")
    parser.add_argument(
        "--latency",
        type=float,
        default=LATENCY,
        help=f"seconds a model call takes (default {LATENCY}): longer runs, a smaller share "
        "of each for the queue's poll",
    )
    args = parser.parse_args()
    url = args.database or os.environ.get(URL_VARIABLE)
    if not url:
        sys.exit(f"bench/team.py needs a PostgreSQL server: --database URL or ${URL_VARIABLE}")
    os.environ[URL_VARIABLE] = url  # fresh_database reads it
    nodes, runs = (6, 2) if args.smoke else (48, args.runs)
    numbers, details = asyncio.run(figures(nodes, runs))
    queued = 2 if args.smoke else 12
    global TIMEOUT
    TIMEOUT = 5.0 if args.smoke else TIMEOUT
    with tempfile.TemporaryDirectory() as work:
        for count in (1, 2, 4):
            rate, cpu = runs_per_minute(count, queued, Path(work), args.latency)
            numbers[f"runs_per_minute_{count}"] = rate
            numbers[f"worker_cpu_seconds_{count}"] = cpu
        numbers["speedup_4_workers"] = numbers["runs_per_minute_4"] / numbers["runs_per_minute_1"]
        numbers["recovery_seconds"] = recovery_seconds(Path(work))
    for name, value in numbers.items():
        print(f"{name:>24}: {value:.2f}")
    print(f"{'server':>24}: {details}")
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in numbers.items()} | {"details": details}))


if __name__ == "__main__":
    main()
