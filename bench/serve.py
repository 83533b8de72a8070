"""Server benchmark: live events over SSE, and runs a server researches at once.

    python bench/serve.py            # human-readable figures
    python bench/serve.py --json     # ... and a last line with one JSON object
    python bench/serve.py --smoke    # one of each, few calls, short latency: does it run?

Against the loopback fake OpenAI server of the test suite (every answer after
``--latency`` seconds), with the real engine, sessions on disk and the real HTTP API on a
loopback uvicorn. Figures (targets):

- sse_event_lag_ms_p95          an event's time of creation (right where the run's state
                                changed, just before it is appended to events.jsonl) to its
                                arrival at an SSE client of the HTTP API, p95 over every
                                event of several runs                                  <= 50
- concurrent_runs_8_wall_over_1 8 runs started at once (server cap 8) over one run alone,
                                wall time to the last run's end, median of 3          <= 1.5
- mcp_tool_roundtrip_ms_p95     a research_status call on a finished 3-node run, from the
                                SDK's client over stdio to a real `deep-research mcp`
                                process and back, p95 of 300 calls                    <= 20
- mcp_initialize_ms             spawning `deep-research mcp` to its reply to `initialize` (the
                                engine loads on the first tool call), median of 5
- kb_run_here_s, kb_run_through_service_s
                                `deep-research QUESTION --kb-only` (a KB of two notes, three
                                sub-questions) run in its own process, and the same through
                                a `deep-research serve` already warm (``--server URL``): the
                                command's wall time, from spawning it to its exit, medians
                                of ``--repeats`` runs, interleaved
Timings come from this shared, noisy machine: medians and percentiles of one process.
--smoke computes every figure once at toy sizes (the test suite runs it): its values are
not the targets'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from deep_research.app import saved
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.app.runs import Caps, RunManager
from deep_research.core.events import RunEvent
from deep_research.frontends.http.app import create_app
from tests.conftest import NOTES
from tests.fake_openai import FakeOpenAI
from tests.serving import free_port, serve_process, serving
from tests.world import ResearchWorld, plan_task, verdict

NODES_PER_RUN = 3


@contextmanager
def world(latency: float, runs: int) -> Iterator[tuple[FakeOpenAI, Settings]]:
    """A fake OpenAI server answering ``runs`` runs of 3 nodes, and settings pointing at it."""
    with FakeOpenAI() as fake, tempfile.TemporaryDirectory() as home:
        fake.latency = latency
        plans = [[plan_task(f"r{r}n{i}") for i in range(NODES_PER_RUN)] for r in range(runs)]
        ResearchWorld(plans=plans, verdicts=[verdict(True)] * runs).install(fake)
        settings = Settings(
            _env_file=None,
            home=Path(home),
            openai_base_url=fake.base_url,
            openai_api_key="sk-bench",
            web_engine="openai",
            web_poll_seconds=0.05,
            max_retries=1,
            max_iterations=1,
            max_cost_usd=50.0,
            check_models=False,
        )
        yield fake, settings


def question(n: int) -> str:
    return f"Benchmark question number {n}: how do the parts fit together?"


async def runs_at_once(latency: float, count: int) -> float:
    """Seconds from starting ``count`` runs at once to the last one's end."""
    with world(latency, count) as (_fake, settings):
        manager = RunManager(settings, Caps(max_runs=8, max_cost_per_run=50, daily_budget=1e6))
        started = time.perf_counter()
        ids = [await manager.start(question(n), RunOptions()) for n in range(count)]
        await asyncio.gather(*(manager.wait(i) for i in ids))
        wall = time.perf_counter() - started
        bad = [i for i in ids if saved.status(settings, i).status != "complete"]
        if bad:
            raise SystemExit(f"runs did not complete: {bad}")
        return wall


async def sse_lags(latency: float, runs: int) -> list[float]:
    """Milliseconds from each event's creation to its arrival at an SSE client."""
    lags: list[float] = []
    with world(latency, runs) as (_fake, settings):
        port = free_port()
        manager = RunManager(settings, Caps(max_runs=8, max_cost_per_run=50, daily_budget=1e6))
        app = create_app(settings, port=port, runs=manager)
        async with (
            serving(app, port) as base,
            httpx.AsyncClient(base_url=base, timeout=60) as client,
        ):
            for n in range(runs):
                reply = await client.post("/research", json={"question": question(n)})
                reply.raise_for_status()
                path = reply.json()["events_url"]
                async with client.stream("GET", path) as stream:
                    async for line in stream.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        arrived = datetime.now(UTC)
                        event = RunEvent.model_validate(json.loads(line.removeprefix("data:")))
                        lags.append((arrived - event.at).total_seconds() * 1000)
                        if event.type == "end":
                            break
    return lags


async def mcp_roundtrips(latency: float, calls: int) -> list[float]:
    """Milliseconds per research_status call over stdio, on a finished run."""
    from mcp import Client, StdioServerParameters  # measured last: not loaded for the others

    with world(latency, 1) as (_fake, settings):
        manager = RunManager(settings, Caps(max_runs=8, max_cost_per_run=50, daily_budget=1e6))
        session_id = await manager.start(question(0), RunOptions())
        await manager.wait(session_id)
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "deep_research.frontends.cli", "mcp"],
            env={"DEEP_RESEARCH_HOME": str(settings.home)},
        )
        times: list[float] = []
        async with Client(server) as client:
            for _ in range(calls):
                started = time.perf_counter()
                result = await client.call_tool("research_status", {"session_id": session_id})
                times.append((time.perf_counter() - started) * 1000)
                if result.is_error or result.structured_content is None:
                    raise SystemExit(f"research_status failed: {result.content}")
        return times


async def mcp_initialize(home: str) -> float:
    """Milliseconds from spawning `deep-research mcp` to its reply to `initialize`."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    started = time.perf_counter()
    server = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "deep_research.frontends.cli", "mcp"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "DEEP_RESEARCH_HOME": home},
    )
    assert server.stdin is not None
    assert server.stdout is not None
    assert server.stderr is not None
    server.stdin.write(json.dumps(request).encode() + b"\n")
    await server.stdin.drain()
    reply = await server.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    server.stdin.close()
    errors = await server.stderr.read()
    await server.wait()
    if "result" not in json.loads(reply or b"{}"):
        raise SystemExit(f"no reply to initialize: {reply!r} {errors.decode()[-500:]}")
    return elapsed


def command_runs(latency: float, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of `deep-research QUESTION --kb-only` run here, and through a warm `serve`
    (``--server``), in turns: what a user at the terminal waits for either way."""
    with FakeOpenAI() as fake, tempfile.TemporaryDirectory() as tmp:
        fake.latency = latency
        plans = [
            [plan_task(f"k{r}n{i}", source="internal") for i in range(NODES_PER_RUN)]
            for r in range(2 * repeats)
        ]
        ResearchWorld(plans=plans, verdicts=[verdict(True)] * 2 * repeats).install(fake)
        kb = Path(tmp) / "kb"
        kb.mkdir()
        for name, text in NOTES.items():
            (kb / name).write_text(text)
        env = {
            **os.environ,
            "DEEP_RESEARCH_HOME": str(Path(tmp) / "home"),
            "OPENAI_BASE_URL": fake.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "DEEP_RESEARCH_MAX_ITERATIONS": "1",
            "DEEP_RESEARCH_CHECK_MODELS": "false",
        }
        cli = [sys.executable, "-m", "deep_research"]
        subprocess.run(
            [*cli, "kb", "ingest", "kb"], env=env, cwd=tmp, check=True, capture_output=True
        )
        here, there = [], []
        with serve_process(env, log=Path(tmp) / "serve.log") as base:
            httpx.get(f"{base}/limits", timeout=120)  # answered once its warm-up has ended
            for r in range(repeats):
                for times, extra in ((here, []), (there, ["--server", base])):
                    started = time.perf_counter()
                    done = subprocess.run(
                        [*cli, question(r), "--kb-only", "--yes", *extra],
                        env=env,
                        cwd=tmp,
                        capture_output=True,
                        text=True,
                    )
                    times.append(time.perf_counter() - started)
                    if done.returncode != 0:
                        raise SystemExit(f"a run failed ({done.returncode}): {done.stderr[-800:]}")
        return here, there


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--latency", type=float, default=0.2, help="fake server latency (s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="toy sizes, once")
    args = parser.parse_args()
    if args.smoke:
        args.latency, args.repeats = 0.01, 1
    sse_runs, mcp_calls = (1, 5) if args.smoke else (3, 300)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        os.environ.pop(name, None)

    lags = asyncio.run(sse_lags(args.latency, runs=sse_runs))
    lag_p50, lag_p95 = statistics.median(lags), percentile(lags, 0.95)
    print(f"sse: {len(lags)} events, lag p50 {lag_p50:.1f} ms, p95 {lag_p95:.1f} ms (<= 50)")

    one, eight = [], []
    for _ in range(args.repeats):  # interleaved: the machine's noise hits both alike
        one.append(asyncio.run(runs_at_once(args.latency, 1)))
        eight.append(asyncio.run(runs_at_once(args.latency, 8)))
    ratio = statistics.median(eight) / statistics.median(one)
    print(
        f"runs: one {statistics.median(one):.2f} s, eight at once "
        f"{statistics.median(eight):.2f} s: ratio {ratio:.2f} (<= 1.5)"
    )
    roundtrips = asyncio.run(mcp_roundtrips(args.latency, calls=mcp_calls))
    mcp_p50, mcp_p95 = statistics.median(roundtrips), percentile(roundtrips, 0.95)
    print(f"mcp: research_status over stdio p50 {mcp_p50:.1f} ms, p95 {mcp_p95:.1f} ms (<= 20)")
    with tempfile.TemporaryDirectory() as home:
        starts = [asyncio.run(mcp_initialize(home)) for _ in range(1 if args.smoke else 5)]
    print(f"mcp: spawn to the initialize reply, median {statistics.median(starts):.0f} ms")

    here, there = command_runs(args.latency, args.repeats)
    print(
        f"a kb run from the terminal: {statistics.median(here):.2f} s here, "
        f"{statistics.median(there):.2f} s through a warm service"
    )

    figures: dict[str, Any] = {
        "kb_run_here_s": round(statistics.median(here), 3),
        "kb_run_through_service_s": round(statistics.median(there), 3),
        "sse_event_lag_ms_p50": round(lag_p50, 2),
        "sse_event_lag_ms_p95": round(lag_p95, 2),
        "sse_events": len(lags),
        "mcp_tool_roundtrip_ms_p50": round(mcp_p50, 2),
        "mcp_tool_roundtrip_ms_p95": round(mcp_p95, 2),
        "mcp_initialize_ms": round(statistics.median(starts), 1),
        "one_run_s": round(statistics.median(one), 3),
        "eight_runs_s": round(statistics.median(eight), 3),
        "concurrent_runs_8_wall_over_1": round(ratio, 3),
        "latency_s": args.latency,
    }
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
