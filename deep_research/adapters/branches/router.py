"""Routes each node to its executor by ``source_hint``; ``mixed`` runs both and merges.

A source that is not available (no knowledge base yet, no model for the web, or turned
off by ``--kb-only`` / ``--web-only``) fails the node with the reason, never silently.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from deep_research.core.citations import shift
from deep_research.core.errors import BranchError
from deep_research.core.ports import BranchExecutor, BranchResult, BranchTask, Meter, RemoteJobHook


@dataclass(frozen=True)
class Unavailable:
    """An executor slot that explains why its source cannot be used."""

    reason: str

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        raise BranchError(self.reason)


@dataclass(frozen=True)
class RoutingExecutor:
    web: BranchExecutor
    internal: BranchExecutor

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        if task.source_hint == "web":
            return await self.web.run(task, meter, on_remote_job)
        if task.source_hint == "internal":
            return await self.internal.run(task, meter, on_remote_job)
        kb, web = await asyncio.gather(
            self.internal.run(task, meter, on_remote_job),
            self.web.run(task, meter, on_remote_job),
            return_exceptions=True,
        )
        for outcome in (kb, web):
            if isinstance(outcome, BaseException) and not isinstance(outcome, BranchError):
                raise outcome  # budget stops, cancellation and bugs are not branch failures
        results = [r for r in (kb, web) if isinstance(r, BranchResult)]
        if not results:
            raise BranchError(f"knowledge base: {kb}; web: {web}")
        if len(results) == 1:
            failed = kb if isinstance(kb, BranchError) else web
            only = results[0]
            note = f"\n\n_({'knowledge base' if failed is kb else 'web'} part failed: {failed})_"
            return BranchResult(
                only.notes + note, only.citations, only.confidence, only.researched_by
            )
        return merge(results[0], results[1])


def merge(kb: BranchResult, web: BranchResult) -> BranchResult:
    """One result: KB notes, then web notes with their markers shifted past the KB's."""
    shifted = shift(web.notes, len(kb.citations))
    notes = f"**From the knowledge base**\n\n{kb.notes}\n\n**From the web**\n\n{shifted}"
    confidence = max(kb.confidence, web.confidence)
    return BranchResult(notes, kb.citations + web.citations, confidence, web.researched_by)
