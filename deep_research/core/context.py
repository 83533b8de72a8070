"""What each model call may see: bounded views of a session (pure).

Every function here returns something whose size is capped independently of how many
nodes the tree holds — that is what keeps every prompt from growing with the research.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping

from deep_research.core.citations import cited_refs
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import ResearchNode, SessionState
from deep_research.core.ports import Finding
from deep_research.core.tree import UNDONE

CATALOG_SIZE = 16
"""Nodes the planner and judge see by id (done first, newest first)."""
SUMMARY_BATCH = 4
"""Most nodes folded into the rolling summary by one summarizer call."""
OVERVIEW_NODES = 20
MIN_FINDING_TOKENS = 25


def catalog(nodes: Collection[ResearchNode]) -> list[ResearchNode]:
    """A bounded window of nodes a plan may build on: done first, newest first."""
    ranked = sorted(nodes, key=lambda n: (n.status != "done", -n.created_at.timestamp()))
    return ranked[:CATALOG_SIZE]


def findings(nodes: Mapping[str, ResearchNode], node: ResearchNode, cap: int) -> list[Finding]:
    """A node's dependencies' notes (and the sources those notes cite), together <= ``cap``.

    With more dependencies than ``cap / MIN_FINDING_TOKENS``, the most confident are kept.
    """
    deps = [nodes[d] for d in node.depends_on]
    if not deps:
        return []
    deps = sorted(deps, key=lambda d: -d.confidence)[: max(1, cap // MIN_FINDING_TOKENS)]
    share = max(MIN_FINDING_TOKENS, cap // len(deps))
    result = []
    for dep in deps:
        notes = cap_tokens(dep.notes, share)
        cited = set(cited_refs(notes))
        sources = tuple(c for c in dep.citations if c.ref in cited)[:5]
        result.append(Finding(dep.id, dep.question, notes, sources))
    return result


def take_batch(done: list[ResearchNode], budget_tokens: int) -> list[ResearchNode]:
    """The next nodes to fold: as many as fit the digest budget (at least one, at most
    ``SUMMARY_BATCH``), so a summarizer prompt is at most summary cap + budget."""
    batch: list[ResearchNode] = []
    used = 0
    for node in done[:SUMMARY_BATCH]:
        size = min(estimate_tokens(node.notes), budget_tokens)
        if batch and used + size > budget_tokens:
            break
        batch.append(node)
        used += size
    return batch


def unmerged(state: SessionState, budget_tokens: int) -> str:
    """The done nodes' notes not yet folded into the rolling summary, together <= ``budget``
    (a fair share each): what a reader of the summary as it stands would miss. The last
    iteration's judge reads them beside it instead of waiting for the fold."""
    folded = set(state.summarized)
    todo = [n for n in state.nodes.values() if n.status == "done" and n.id not in folded]
    if not todo:
        return ""
    todo = todo[: max(1, budget_tokens // MIN_FINDING_TOKENS)]
    share = max(MIN_FINDING_TOKENS, budget_tokens // len(todo))
    return "\n\n".join(
        f"### {cap_tokens(n.question, 40)}\n{cap_tokens(n.notes, share)}" for n in todo
    )


def gaps(state: SessionState) -> list[str]:
    """What the research has not covered: failed, blocked, unresearched, judged missing."""
    found: list[str] = []
    for node in state.nodes.values():
        if node.status in UNDONE:
            found.append(f"{node.question} — {node.status}: {node.error}")
        elif node.status == "pending":
            found.append(f"{node.question} — not researched")
    if state.iterations and (verdict := state.iterations[-1].verdict):
        found += [f"missing: {m}" for m in verdict.missing_aspects]
    return [cap_tokens(g, 60) for g in found[:OVERVIEW_NODES]]


def overview(nodes: Collection[ResearchNode]) -> str:
    """Status counts and a bounded list of nodes, one line each (the judge's tree view)."""
    counts = Counter(node.status for node in nodes)
    lines = [", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))]
    for node in catalog(nodes)[:OVERVIEW_NODES]:
        lines.append(
            f"- {node.id} [{node.status}, {node.source_hint}] {cap_tokens(node.question, 40)}"
        )
    return "\n".join(lines)
