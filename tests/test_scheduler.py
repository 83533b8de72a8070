"""The dependency-driven scheduler, with in-process fakes gated by events (no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from deep_research.core.models import PlannedTask, ResearchNode
from deep_research.core.scheduler import run_dag
from deep_research.core.tree import PlanPolicy, ResearchTree


def make_tree(spec: Iterable[tuple[str, list[str]]], **extra: dict[str, object]) -> ResearchTree:
    tree = ResearchTree({})
    tasks = []
    for tid, deps in spec:
        fields: dict[str, object] = {
            "id": tid,
            "question": f"What about {tid}?",
            "depends_on": deps,
            "parallelizable": True,
            "priority": 5,
            "source_hint": "web",
            "parent_id": None,
        }
        fields.update(extra.get(tid, {}))
        tasks.append(PlannedTask.model_validate(fields))
    tree.add_plan(tasks, iteration=1, policy=PlanPolicy(max_depth=3, max_tasks=100))
    return tree


class GatedWork:
    """Each node waits on its own gate; records starts, finishes and peak concurrency."""

    def __init__(self, tree: ResearchTree, open_: Iterable[str] = ()) -> None:
        self.tree = tree
        self.gates = {nid: asyncio.Event() for nid in tree.nodes}
        self.started: dict[str, asyncio.Event] = {nid: asyncio.Event() for nid in tree.nodes}
        self.order: list[str] = []
        self.in_flight = 0
        self.peak = 0
        self.changed = asyncio.Condition()
        for nid in open_:
            self.gates[nid].set()

    async def __call__(self, node: ResearchNode) -> None:
        self.tree.start(node)
        self.order.append(node.id)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.started[node.id].set()
        await self._notify()
        try:
            await self.gates[node.id].wait()
        finally:
            self.in_flight -= 1
        self.tree.finish(node)
        await self._notify()

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    def running(self) -> list[str]:
        return [n.id for n in self.tree.nodes.values() if n.status == "running"]


async def test_a_node_starts_when_its_own_dependencies_finish_not_in_waves() -> None:
    tree = make_tree([("slow", []), ("fast", []), ("after_fast", ["fast"])])
    work = GatedWork(tree, open_=["fast", "after_fast"])
    run = asyncio.ensure_future(run_dag(tree, work, limit=4, may_start=lambda n: True))
    await work.started["after_fast"].wait()
    assert tree.nodes["slow"].status == "running", "dependent started while the slow one runs"
    work.gates["slow"].set()
    await run
    assert all(n.status == "done" for n in tree.nodes.values())


async def test_at_most_limit_nodes_in_flight() -> None:
    tree = make_tree([(f"n{i}", []) for i in range(6)])
    work = GatedWork(tree)
    run = asyncio.ensure_future(run_dag(tree, work, limit=2, may_start=lambda n: True))

    def held() -> list[str]:
        return [nid for nid in work.running() if not work.gates[nid].is_set()]

    for _ in range(3):
        async with work.changed:
            await work.changed.wait_for(lambda: len(held()) == 2)
        for nid in held():
            work.gates[nid].set()
    await run
    assert work.peak == 2
    assert len(work.order) == 6


async def test_non_parallelizable_node_runs_alone() -> None:
    tree = make_tree(
        [("a", []), ("b", []), ("solo", []), ("c", [])],
        solo={"parallelizable": False, "priority": 9},
    )
    work = GatedWork(tree)
    run = asyncio.ensure_future(run_dag(tree, work, limit=4, may_start=lambda n: True))
    await work.started["solo"].wait()
    assert [n.id for n in tree.nodes.values() if n.status == "running"] == ["solo"]
    work.gates["solo"].set()
    await asyncio.gather(*(work.started[n].wait() for n in ("a", "b", "c")))
    assert work.peak == 3, "the others run in parallel once the solo node is done"
    for nid in ("a", "b", "c"):
        work.gates[nid].set()
    await run
    assert work.order[0] == "solo", "highest priority first"


async def test_priority_decides_who_gets_a_freed_slot() -> None:
    tree = make_tree(
        [("first", []), ("low", []), ("high", [])],
        first={"priority": 10},
        low={"priority": 1},
        high={"priority": 8},
    )
    work = GatedWork(tree, open_=list(tree.nodes))
    await run_dag(tree, work, limit=1, may_start=lambda n: True)
    assert work.order == ["first", "high", "low"]


async def test_refused_start_leaves_node_and_dependents_pending() -> None:
    tree = make_tree([("a", []), ("b", ["a"]), ("c", [])])
    work = GatedWork(tree, open_=list(tree.nodes))
    await run_dag(tree, work, limit=2, may_start=lambda n: n.id != "a")
    assert tree.nodes["a"].status == "pending"
    assert tree.nodes["b"].status == "pending"
    assert tree.nodes["c"].status == "done"


async def test_failed_dependency_blocks_instead_of_running() -> None:
    tree = make_tree([("a", []), ("b", ["a"])])
    ran: list[str] = []

    async def execute(node: ResearchNode) -> None:
        ran.append(node.id)
        tree.fail(node, "boom")

    await run_dag(tree, execute, limit=2, may_start=lambda n: True)
    assert ran == ["a"]
    assert tree.nodes["b"].status == "blocked"


async def test_a_bug_in_one_node_cancels_the_others_and_propagates() -> None:
    tree = make_tree([("ok", []), ("bug", [])])
    work = GatedWork(tree)
    cancelled = asyncio.Event()

    async def execute(node: ResearchNode) -> None:
        if node.id == "bug":
            await work.started["ok"].wait()
            raise RuntimeError("a bug")
        try:
            await work(node)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(RuntimeError, match="a bug"):
        await run_dag(tree, execute, limit=2, may_start=lambda n: True)
    assert cancelled.is_set()


async def test_after_hook_runs_once_per_node_after_its_slot_is_free() -> None:
    tree = make_tree([("a", []), ("b", [])], a={"priority": 9})
    work = GatedWork(tree, open_=list(tree.nodes))
    after: list[tuple[str, str]] = []

    async def hook(node: ResearchNode) -> None:
        after.append((node.id, node.status))
        if node.id == "a":
            # With one slot, b can only start once a has given its slot back.
            async with asyncio.timeout(10):
                await work.started["b"].wait()

    await run_dag(tree, work, limit=1, may_start=lambda n: True, after=hook)
    assert after == [("a", "done"), ("b", "done")]
    assert work.order == ["a", "b"]
    assert work.peak == 1
