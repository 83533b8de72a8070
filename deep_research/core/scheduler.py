"""Dependency-driven scheduling: a node starts the moment its last dependency is done.

Every pending node gets one coroutine, all run under one ``asyncio.gather``. A coroutine
waits for its dependencies' completion events, then for a slot: at most ``limit`` nodes
in flight, a non-parallelizable node only when nothing else runs (and nothing else
while it runs), and among waiters the most urgent first (priority, then depth). There
are no waves: a slow node delays only its own dependents.

The scheduler decides *when*; the caller's ``execute`` does the work and records the
outcome on the node. ``may_start`` is asked right before a node would start; answering
no leaves the node pending (a budget stop).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from deep_research.core.models import ResearchNode
from deep_research.core.tree import ResearchTree, schedule_key


class Slots:
    """A priority-ordered semaphore with exclusive (run-alone) acquisitions."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._running = 0
        self._exclusive = False
        self._waiters: list[tuple[tuple[Any, ...], int, bool, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def _fits(self, exclusive: bool) -> bool:
        if self._exclusive:
            return False
        return self._running == 0 if exclusive else self._running < self.limit

    def _wake(self) -> None:
        while self._waiters:
            _, _, exclusive, future = self._waiters[0]
            if future.done():  # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            if not self._fits(exclusive):
                return  # strict priority: the head waits, nobody jumps the queue
            heapq.heappop(self._waiters)
            self._take(exclusive)
            future.set_result(None)

    def _take(self, exclusive: bool) -> None:
        self._running += 1
        self._exclusive = exclusive

    def _give_back(self) -> None:
        self._running -= 1
        self._exclusive = False
        # Wake on the next loop turn, not now: nodes made ready by the finishing node get
        # to queue first, so the freed slot goes to the most urgent of them all.
        asyncio.get_running_loop().call_soon(self._wake)

    @asynccontextmanager
    async def hold(self, priority_key: tuple[Any, ...], *, exclusive: bool) -> AsyncIterator[None]:
        if not self._waiters and self._fits(exclusive):
            self._take(exclusive)
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            heapq.heappush(self._waiters, (priority_key, next(self._seq), exclusive, future))
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._give_back()  # granted and cancelled in the same tick
                raise
        try:
            yield
        finally:
            self._give_back()


def chain_lengths(tree: ResearchTree) -> dict[str, int]:
    """For each node, the number of nodes on the longest dependency chain it starts: Kahn's
    topological order over ``depends_on`` (the tree keeps the graph acyclic), read back."""
    dependents: dict[str, list[str]] = {nid: [] for nid in tree.nodes}
    for node in tree.nodes.values():
        for dep in node.depends_on:
            dependents[dep].append(node.id)
    remaining = {nid: len(n.depends_on) for nid, n in tree.nodes.items()}
    order = [nid for nid, count in remaining.items() if count == 0]
    for nid in order:  # grows as it is read: a node once its last dependency is in
        for child in dependents[nid]:
            remaining[child] -= 1
            if remaining[child] == 0:
                order.append(child)
    length: dict[str, int] = {}
    for nid in reversed(order):
        length[nid] = 1 + max((length[c] for c in dependents[nid]), default=0)
    return length


async def gather_owned(coros: list[Coroutine[Any, Any, None]]) -> None:
    """``asyncio.gather`` that never leaves a sibling running when one of them fails."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def run_dag(
    tree: ResearchTree,
    execute: Callable[[ResearchNode], Awaitable[None]],
    *,
    limit: int,
    may_start: Callable[[ResearchNode], bool],
    after: Callable[[ResearchNode], Awaitable[None]] | None = None,
) -> None:
    """Run every pending node whose dependencies can complete; return when none can start.

    ``after`` runs once a node's slot is released (folding its notes into the rolling
    summary) so bookkeeping never delays the next node.
    """
    slots = Slots(limit)
    chain = chain_lengths(tree)

    def urgency(node: ResearchNode) -> tuple[Any, ...]:
        # The planner's priority first; then the longest chain of work still behind a node
        # (critical path first keeps the tail short), then the tree's own order.
        return (-node.priority, -chain[node.id], *schedule_key(node)[1:])

    # Started in urgency order, so that nodes ready at once also start in that order.
    pending = sorted((n for n in tree.nodes.values() if n.status == "pending"), key=urgency)
    finished = {n.id: asyncio.Event() for n in pending}

    async def drive(node: ResearchNode) -> None:
        try:
            for dep in node.depends_on:
                if dep in finished:
                    await finished[dep].wait()
            if node.status != "pending":
                return  # blocked by a failed dependency meanwhile
            if any(tree.nodes[d].status != "done" for d in node.depends_on):
                return  # a dependency was left pending (budget stop); so is this node
            if not may_start(node):
                return
            async with slots.hold(urgency(node), exclusive=not node.parallelizable):
                if node.status != "pending" or not may_start(node):
                    return
                try:
                    await execute(node)
                finally:
                    finished[node.id].set()  # before the slot is freed (see Slots._give_back)
        finally:
            finished[node.id].set()
        if after is not None:
            await after(node)

    await gather_owned([drive(node) for node in pending])
