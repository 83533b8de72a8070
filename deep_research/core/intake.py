"""A branch's result taken into its node: citations numbered into the session's sources,
and its findings kept as evidence units before the session counts them."""

from __future__ import annotations

from deep_research.core import evidence
from deep_research.core.citations import register
from deep_research.core.models import ResearchNode, SessionState
from deep_research.core.ports import BranchResult, EvidenceSink


async def take_result(
    state: SessionState, node: ResearchNode, result: BranchResult, sink: EvidenceSink | None
) -> None:
    """Record ``result`` on ``node`` (notes, citations, who researched it, confidence)."""
    notes, citations = register(state.sources, result.notes, result.citations)
    node.notes, node.citations = notes, citations
    node.researched_by = result.researched_by
    node.skipped_pages = list(result.skipped)
    node.consulted, node.dropped_citations = list(result.consulted), list(result.dropped)
    node.confidence = min(1.0, max(0.0, result.confidence))
    if sink is not None:  # kept before the session counts them
        texts = evidence.source_texts(citations, result.source_texts)
        units = evidence.units_of(node, state.sources, texts)
        await sink.keep(node.id, units)
        state.evidence_units += len(units)
