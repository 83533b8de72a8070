"""How long a paid research job's id is only in memory: from the fake server's create reply
to the id being readable in the saved session's jobs.jsonl, where an id is written first
(a resume after kill -9 reads it after state.json).

- create_to_disk_ms_first: the first create of a fresh CLI process (median of 5 processes)
- create_to_disk_ms_p95:   50 creates in one CLI process (95th percentile)

The CLI runs as a child process against the loopback fake OpenAI server of the test suite;
a watcher thread here reads those files every ~0.5 ms, so figures carry that resolution.
`bench/engine.py` runs this (it is not a script of its own).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task

REPO = Path(__file__).resolve().parents[1]


class Watcher:
    """Records, for each job id the fake created, when it first appears in a saved session."""

    def __init__(self, fake: FakeOpenAI, sessions: Path) -> None:
        self.fake = fake
        self.sessions = sessions
        self.seen: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            pending = [r for r in self.fake.response_ids if r not in self.seen]
            if pending:
                files = self.sessions.glob("*/jobs.jsonl")
                text = "".join(p.read_text(errors="replace") for p in files)
                now = time.time()
                for rid in pending:
                    if rid in text:
                        self.seen[rid] = now
            time.sleep(0.0005)

    def latencies_ms(self) -> list[float]:
        replied = self.fake.create_replied_at
        return [(self.seen[r] - replied[r]) * 1000 for r in self.seen if r in replied]


def _cli(env: dict[str, str], log: Path, *args: str) -> subprocess.Popen[bytes]:
    # The user's own settings stay out: the figures are of the defaults plus the ones below.
    own = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_RESEARCH_"))}
    with log.open("wb") as stderr:
        return subprocess.Popen(
            [sys.executable, "-m", "deep_research.frontends.cli", *args],
            env={**own, **env, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )


def _wait(
    fake: FakeOpenAI,
    child: subprocess.Popen[bytes],
    log: Path,
    done: Callable[[], bool],
    timeout: float,
) -> None:
    """Until ``done()``; a CLI that exits first fails at once, with the end of its stderr."""
    deadline = time.monotonic() + timeout
    while not done():
        if child.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"the CLI exited {child.returncode}: " + " | ".join(tail))
        if time.monotonic() > deadline:
            raise TimeoutError(f"not done within {timeout}s")
        with contextlib.suppress(TimeoutError):
            fake.wait_for(done, 0.5)  # woken by the fake's requests; a dead child makes none


def _env(fake: FakeOpenAI, home: Path) -> dict[str, str]:
    return {
        "DEEP_RESEARCH_HOME": str(home),
        "OPENAI_BASE_URL": fake.base_url,
        "OPENAI_API_KEY": "bench",
        "DEEP_RESEARCH_WEB_ENGINE": "openai",  # research jobs are what is measured
        "DEEP_RESEARCH_WEB_POLL_SECONDS": "0.05",
        "DEEP_RESEARCH_MAX_NODES_PER_PLAN": "50",
        "DEEP_RESEARCH_MAX_PARALLEL": "8",
        "DEEP_RESEARCH_MAX_COST_USD": "10000",
    }


def first_create_ms(tmp: Path) -> float:
    """One fresh process, one web node; its job is held so the run stays put."""
    with FakeOpenAI() as fake:
        ResearchWorld(plans=[[plan_task("t1")]]).install(fake)
        fake.hold_responses = True
        home = tmp / f"first-{time.monotonic_ns()}"
        log = tmp / f"{home.name}.stderr"
        with Watcher(fake, home / "sessions") as watcher:
            child = _cli(_env(fake, home), log, "How do X and Y compare?", "--json")
            try:
                _wait(fake, child, log, lambda: len(watcher.seen) == 1, 120)
            finally:
                child.kill()
                child.wait()
        (latency,) = watcher.latencies_ms()
        return latency


def many_creates_ms(tmp: Path, n: int = 50) -> list[float]:
    with FakeOpenAI(polls_to_complete=1) as fake:
        ResearchWorld(plans=[[plan_task(f"t{i}") for i in range(n)]]).install(fake)
        home = tmp / "many"
        log = tmp / "many.stderr"
        with Watcher(fake, home / "sessions") as watcher:
            child = _cli(_env(fake, home), log, "How do X and Y compare?", "--json")
            try:
                _wait(fake, child, log, lambda: len(watcher.seen) == n, 300)
            finally:
                child.kill()
                child.wait()
        return watcher.latencies_ms()


def bench_create_to_disk(processes: int = 5, creates: int = 50) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        firsts = [first_create_ms(Path(tmp)) for _ in range(processes)]
        many = sorted(many_creates_ms(Path(tmp), creates))
    p95 = many[min(len(many) - 1, round(0.95 * (len(many) - 1)))]
    return {
        "create_to_disk_ms_first": statistics.median(firsts),
        "create_to_disk_ms_first_max": max(firsts),
        "create_to_disk_ms_p50": statistics.median(many),
        "create_to_disk_ms_p95": p95,
    }
