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
The server's ``fsync`` and ``synchronous_commit`` are printed beside them (``details``): the
files are fsync'ed; CI's throwaway server runs with ``fsync=off``, which flatters it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from deep_research.core.models import Citation, ResearchNode, SessionState  # noqa: E402
from deep_research.persistence.checkpoints import Checkpointer  # noqa: E402
from deep_research.persistence.port import Sessions  # noqa: E402
from deep_research.persistence.postgres import PgSessions  # noqa: E402
from deep_research.persistence.sessions import SessionStore  # noqa: E402
from tests.pg import URL_VARIABLE, execute, fresh_database  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--smoke", action="store_true", help="toy sizes, once: does it run?")
    parser.add_argument("--runs", type=int, default=30, help="timed saves per figure")
    parser.add_argument("--database", help=f"a PostgreSQL server's URL (else ${URL_VARIABLE})")
    args = parser.parse_args()
    url = args.database or os.environ.get(URL_VARIABLE)
    if not url:
        sys.exit(f"bench/team.py needs a PostgreSQL server: --database URL or ${URL_VARIABLE}")
    os.environ[URL_VARIABLE] = url  # fresh_database reads it
    nodes, runs = (6, 2) if args.smoke else (48, args.runs)
    numbers, details = asyncio.run(figures(nodes, runs))
    for name, value in numbers.items():
        print(f"{name:>24}: {value:.2f}")
    print(f"{'server':>24}: {details}")
    if args.json:
        print(json.dumps({k: round(v, 3) for k, v in numbers.items()} | {"details": details}))


if __name__ == "__main__":
    main()
