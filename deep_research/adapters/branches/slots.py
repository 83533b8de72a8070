"""A cap on research jobs in flight beyond one run: a team's (``persistence.slots``,
``DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS``), held by a job from before its create to its end."""

from __future__ import annotations

import asyncio
import contextlib
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


@contextlib.asynccontextmanager
async def slot_held(
    slots: JobSlots | None, task: BranchTask, model: str, poll_seconds: float, *, create: bool
) -> AsyncIterator[None]:
    """One of the team's slots while the job runs, waited for before a job is created
    (every ``poll_seconds``, within 0.2-2 s). A job created already (``create`` False: it
    is re-attached) takes one if one is free and never waits: it runs at the provider
    anyway."""
    if slots is None:
        yield
        return
    waited = False
    try:
        while (slot := await asyncio.to_thread(slots.try_take)) is None and create:
            if not waited and task.on_event is not None:
                task.on_event(
                    JobEvent(
                        node_id=task.node_id,
                        job_id="",
                        model=model,
                        status="waiting",
                        polls=0,
                        elapsed_seconds=0.0,
                        note=f"{task.node_id}: waiting for a research-job slot (the team's "
                        f"{slots.limit} are in use: DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS)",
                    )
                )
            waited = True
            await asyncio.sleep(max(0.2, min(poll_seconds, 2.0)))
    except StorageError as exc:
        raise BranchError(str(exc)) from None
    try:
        yield
    finally:
        if slot is not None:
            await asyncio.to_thread(slots.give_back, slot)
