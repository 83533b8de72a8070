"""Engine benchmark: scheduling efficiency, parallel speed-up, per-node overhead, prompt growth.

    python bench/engine.py            # human-readable figures
    python bench/engine.py --json     # ... and a last line with one JSON object
    python bench/engine.py --smoke    # every figure once, at toy sizes: does it still run?

Figures (targets from the engine issue):
- dag_wall_over_bound      30-node DAG, injected branch latency: wall / max(critical path,
                           total work / max_parallel)                              <= 1.10
- speedup_12_parallel      12 independent branches, max_parallel 12 vs 1           >= 10
- overhead_ms_per_node     instant fakes, real session checkpoints on disk         <= 5
- max_prompt_growth_5_to_50  largest prompt of any model call, 50 nodes / 5 nodes  <= 1.25
                           (the real chains and Deep Research executor against the
                           loopback fake OpenAI server of the test suite)
- create_to_disk_ms_first  a research job's id: create reply -> readable in state.json, the
                           first create of a fresh CLI process (median of 5)      <= 20
- create_to_disk_ms_p95    the same over 50 creates in one process                 <= 20
Timings are medians of several runs on this (shared, noisy) machine. --smoke computes the
same figures once at toy sizes (the test suite runs it): its values are not the targets'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deep_research.adapters.prices import PriceTable
from deep_research.core.engine import Engine, RunConfig, SessionSaver
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import Citation, Limits, Plan, PlannedTask, SessionState
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import BranchResult, BranchTask, Meter, RemoteJobHook
from deep_research.core.writing import SectionedWriter
from deep_research.persistence.checkpoints import Checkpointer
from deep_research.persistence.sessions import SessionStore
from tests.fakes import (
    FakeAuthor,
    FakeJudge,
    FakePlanner,
    FakeSummarizer,
    MemorySaver,
    verdict,
)


class LatencyExecutor:
    """A branch that takes a fixed time per node (0 = instant)."""

    def __init__(self, latency: dict[str, float]) -> None:
        self.latency = latency

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        delay = self.latency.get(task.node_id, 0.0)
        if delay:
            await asyncio.sleep(delay)
        url = f"https://example.org/{task.node_id}"
        return BranchResult(f"finding {task.node_id} [1]", (Citation(kind="web", url=url),), 0.8)


def dag(n: int, seed: int) -> tuple[list[PlannedTask], dict[str, float]]:
    """A layered random DAG: each node depends on 0-3 earlier nodes; latencies 40-160 ms."""
    rng = random.Random(seed)
    tasks, latency = [], {}
    for i in range(n):
        earlier = [f"n{j}" for j in range(i)]
        deps = rng.sample(earlier, k=min(len(earlier), rng.choice([0, 0, 1, 1, 2, 3])))
        tasks.append(_task(f"n{i}", deps))
        latency[f"n{i}"] = rng.uniform(0.04, 0.16)
    return tasks, latency


def _task(tid: str, deps: list[str]) -> PlannedTask:
    return PlannedTask(
        id=tid,
        question=f"What does part {tid} of the system do?",  # a question the plan keeps
        depends_on=deps,
        parallelizable=True,
        priority=5,
        source_hint="web",
        parent_id=None,
    )


def lower_bound(tasks: list[PlannedTask], latency: dict[str, float], parallel: int) -> float:
    finish: dict[str, float] = {}
    for t in tasks:  # tasks are in topological order
        finish[t.id] = latency[t.id] + max((finish[d] for d in t.depends_on), default=0.0)
    return max(max(finish.values()), sum(latency.values()) / parallel)


async def run_once(
    tasks: list[PlannedTask],
    latency: dict[str, float],
    parallel: int,
    store: SessionStore | None = None,
) -> float:
    state = SessionState(session_id="b" * 12, question="bench?", limits=Limits(max_iterations=1))
    engine = Engine(
        FakePlanner([Plan(rationale="", tasks=tasks)]),
        LatencyExecutor(latency),
        FakeSummarizer(),
        FakeJudge([verdict(True)]),
        writer=SectionedWriter(FakeAuthor()),
    )
    saver: SessionSaver = MemorySaver()
    if store is not None:
        store.root.mkdir(parents=True, exist_ok=True)
        (store.root / state.session_id).mkdir(exist_ok=True)
        saver = Checkpointer(store)
    config = RunConfig(max_parallel=parallel, max_nodes_per_plan=len(tasks), max_depth=3)
    orch = ResearchOrchestrator(
        state, engine, saver, BudgetGuard(state, state.limits, prices=PriceTable()), config
    )
    start = time.perf_counter()
    await orch.run()
    wall = time.perf_counter() - start
    assert len(state.nodes) == len(tasks), "the plan was not kept as planned"
    assert all(n.status == "done" for n in state.nodes.values()), "bench run did not finish"
    return wall


def median_of(runs: int, make: Callable[[], Coroutine[object, object, float]]) -> float:
    return statistics.median(asyncio.run(make()) for _ in range(runs))


def bench_dag(runs: int, nodes: int = 30) -> dict[str, float]:
    tasks, latency = dag(nodes, seed=7)
    parallel = 4
    bound = lower_bound(tasks, latency, parallel)
    wall = median_of(runs, lambda: run_once(tasks, latency, parallel))
    return {"dag_wall_s": wall, "dag_bound_s": bound, "dag_wall_over_bound": wall / bound}


def bench_speedup(runs: int, seconds: float = 0.2) -> dict[str, float]:
    tasks = [_task(f"p{i}", []) for i in range(12)]
    latency = {t.id: seconds for t in tasks}
    serial = median_of(runs, lambda: run_once(tasks, latency, 1))
    parallel = median_of(runs, lambda: run_once(tasks, latency, 12))
    return {"serial_s": serial, "parallel_s": parallel, "speedup_12_parallel": serial / parallel}


def bench_overhead(runs: int, nodes: int = 200) -> dict[str, float]:
    tasks = [_task(f"o{i}", [f"o{i - 1}"] if i % 3 else []) for i in range(nodes)]
    latency = {t.id: 0.0 for t in tasks}

    async def one() -> float:
        with tempfile.TemporaryDirectory() as tmp:
            return await run_once(tasks, latency, 8, SessionStore(Path(tmp)))

    wall = median_of(runs, one)
    return {"overhead_ms_per_node": wall / nodes * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--runs", type=int, default=5, help="repetitions per figure (median)")
    parser.add_argument("--smoke", action="store_true", help="once, toy sizes, in seconds")
    args = parser.parse_args()
    runs = 1 if args.smoke else args.runs

    from bench.create_to_disk import bench_create_to_disk
    from bench.prompt_growth import bench_prompt_growth

    figures: dict[str, float] = {}
    steps: tuple[tuple[str, Callable[[], dict[str, float]]], ...] = (
        ("DAG scheduling", lambda: bench_dag(runs, nodes=8 if args.smoke else 30)),
        ("parallel speed-up", lambda: bench_speedup(runs, 0.02 if args.smoke else 0.2)),
        ("per-node overhead", lambda: bench_overhead(runs, nodes=20 if args.smoke else 200)),
        ("prompt growth", lambda: bench_prompt_growth(*((3, 6) if args.smoke else (5, 50)))),
        (
            "create to disk",
            lambda: bench_create_to_disk(*((1, 5) if args.smoke else (5, 50))),
        ),
    )
    for name, step in steps:
        result = step()
        figures.update(result)
        shown = ", ".join(f"{k}={v:.3f}" for k, v in result.items())
        print(f"{name:>18}: {shown}", flush=True)
    keys = (
        "dag_wall_over_bound",
        "speedup_12_parallel",
        "overhead_ms_per_node",
        "max_prompt_growth_5_to_50",
        "create_to_disk_ms_first",
        "create_to_disk_ms_p95",
    )
    if args.json:
        print(json.dumps({k: round(figures[k], 4) for k in keys}))


if __name__ == "__main__":
    main()
