"""A cap on research jobs in flight beyond one run: a team's (``persistence.slots``,
``DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS``), held by a job from before its create to its end."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import AsyncIterator
from typing import Protocol

from deep_research.core.errors import BranchError, StorageError
from deep_research.core.ports import BranchTask, JobEvent


class JobSlots(Protocol):
    """A cap on research jobs in flight beyond this run: a team's (``persistence.slots``)."""

    limit: int

    def try_take(self) -> int | None:
        """A free slot, now held; None when every one is in use."""
        ...

    def give_back(self, slot: int) -> None: ...


class SlotHold:
    """One job's hold on the team's slots (``slot_held``); with no cap, a no-op."""

    def __init__(
        self, slots: JobSlots | None, task: BranchTask, model: str, poll_seconds: float
    ) -> None:
        self.slots, self.task, self.model = slots, task, model
        self.poll_seconds = max(0.2, min(poll_seconds, 2.0))
        self.slot: int | None = None

    async def take(self, *, wait: bool) -> float:
        """A slot, unless one is held already: waited for (``wait``: before a create, said
        in the run's events), else taken only if one is free. The seconds it waited."""
        slots = self.slots
        if slots is None or self.slot is not None:
            return 0.0
        began = time.monotonic()
        waited = False
        while (slot := await self._try_take(slots)) is None and wait:
            if not waited and self.task.on_event is not None:
                self.task.on_event(
                    JobEvent(
                        node_id=self.task.node_id,
                        job_id="",
                        model=self.model,
                        status="waiting",
                        polls=0,
                        elapsed_seconds=0.0,
                        note=f"{self.task.node_id}: waiting for a research-job slot (the "
                        f"team's {slots.limit} are in use: DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS)",
                    )
                )
            waited = True
            await asyncio.sleep(self.poll_seconds)
        self.slot = slot
        return time.monotonic() - began

    async def give_back(self) -> None:
        if self.slots is not None and (slot := self.slot) is not None:
            self.slot = None
            await asyncio.to_thread(self.slots.give_back, slot)

    async def _try_take(self, slots: JobSlots) -> int | None:
        """``try_take`` off the loop. A caller cancelled meanwhile cannot stop the thread:
        a slot it takes is given back when it ends, never held for the process's life."""
        pending = asyncio.ensure_future(asyncio.to_thread(slots.try_take))
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            pending.add_done_callback(functools.partial(_give_back, slots))
            raise
        except StorageError as exc:
            raise BranchError(str(exc)) from None


def _give_back(slots: JobSlots, taken: asyncio.Future[int | None]) -> None:
    if not taken.cancelled() and taken.exception() is None and (slot := taken.result()) is not None:
        # Not on the loop: ``give_back`` may wait for a ``try_take`` that is reconnecting.
        threading.Thread(target=slots.give_back, args=(slot,), daemon=True).start()


@contextlib.asynccontextmanager
async def slot_held(
    slots: JobSlots | None, task: BranchTask, model: str, poll_seconds: float, *, create: bool
) -> AsyncIterator[SlotHold]:
    """One of the team's slots while the job runs, waited for before a job is created
    (every ``poll_seconds``, within 0.2-2 s). A job created already (``create`` False: it
    is re-attached) takes one if one is free and never waits: it runs at the provider
    anyway; should it be gone, its new create waits for one (``SlotHold.take``)."""
    hold = SlotHold(slots, task, model, poll_seconds)
    await hold.take(wait=create)
    try:
        yield hold
    finally:
        await hold.give_back()
