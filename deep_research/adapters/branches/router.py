"""Routes each node to its executor by ``source_hint``; ``mixed`` runs them all and merges.

A source that is not available (no knowledge base yet, no model for the web, or turned
off by ``--kb-only`` / ``--web-only``) fails the node with the reason, never silently.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from deep_research.core.citations import shift
from deep_research.core.errors import BranchError
from deep_research.core.models import MIXED, Citation, SourceHint
from deep_research.core.ports import BranchExecutor, BranchResult, BranchTask, Meter, RemoteJobHook


@dataclass(frozen=True)
class Route:
    executor: BranchExecutor
    name: str
    """How its part of a ``mixed`` node is named: "knowledge base", "web"."""


@dataclass(frozen=True)
class RoutingExecutor:
    """One route per source (``internal``, ``web``, registered ones), in the order a
    ``mixed`` node runs them all and merges what they found."""

    routes: Mapping[SourceHint, Route]

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        route = self.routes.get(task.source_hint)
        if route is not None:
            return await route.executor.run(task, meter, on_remote_job)
        if task.source_hint != MIXED:
            known = ", ".join([*self.routes, MIXED])
            raise BranchError(f"unknown source {task.source_hint!r} (this run has: {known})")
        routes = list(self.routes.values())
        outcomes = await asyncio.gather(
            *(r.executor.run(task, meter, on_remote_job) for r in routes),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, BranchError):
                raise outcome  # budget stops, cancellation and bugs are not branch failures
        pairs = list(zip(routes, outcomes, strict=True))
        found = [(r, o) for r, o in pairs if isinstance(o, BranchResult)]
        failed = [(r, o) for r, o in pairs if isinstance(o, BranchError)]
        if not found:
            raise BranchError("; ".join(f"{r.name}: {error}" for r, error in failed))
        # One part stands as it is; several are merged under their headings.
        result = found[0][1] if len(found) == 1 else merge([(r.name, o) for r, o in found])
        notes = "".join(f"\n\n_({r.name} part failed: {error})_" for r, error in failed)
        return dataclasses.replace(result, notes=result.notes + notes)


def merge(parts: Sequence[tuple[str, BranchResult]]) -> BranchResult:
    """One result: each part under its heading, in order, its markers shifted past the
    citations of the parts before it. Researched by the last part that says who did."""
    notes: list[str] = []
    citations: tuple[Citation, ...] = ()
    texts: tuple[str, ...] = ()
    for name, result in parts:
        notes.append(f"**From the {name}**\n\n{shift(result.notes, len(citations))}")
        citations += result.citations
        # one text per citation, so the next part's line up with its citations
        texts += (result.source_texts + ("",) * len(result.citations))[: len(result.citations)]
    confidence = max(result.confidence for _, result in parts)
    researched_by = next((r.researched_by for _, r in reversed(parts) if r.researched_by), "")
    skipped = tuple(s for _, result in parts for s in result.skipped)
    return BranchResult("\n\n".join(notes), citations, confidence, researched_by, texts, skipped)
