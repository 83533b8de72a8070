"""Evidence fitted to a prompt's token budget: a fair cut across nodes, a prefix, chunks,
and a written section's key points."""

from __future__ import annotations

import re
from collections.abc import Sequence

from deep_research.core import markdown as md
from deep_research.core.authoring import KEY_POINTS, POINT_TOKENS
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import EvidenceUnit


def fair_within(units: Sequence[EvidenceUnit], budget: int) -> list[str]:
    """The findings of ``units`` within ``budget`` tokens, taken node by node in turn (a
    cut takes from every node alike), then given back in reading order."""
    by_node: dict[str, list[int]] = {}
    for i, unit in enumerate(units):
        by_node.setdefault(unit.node_id, []).append(i)
    picked: list[int] = []
    used = 0
    for depth in range(max((len(q) for q in by_node.values()), default=0)):
        for queue in by_node.values():
            if depth < len(queue):
                cost = estimate_tokens(units[queue[depth]].finding) + 1
                if used + cost > budget:
                    return [units[i].finding for i in sorted(picked)]
                picked.append(queue[depth])
                used += cost
    return [units[i].finding for i in sorted(picked)]


def chunked(texts: Sequence[str], budget: int) -> list[list[str]]:
    """``texts`` in order, cut into runs of at most ``budget`` tokens each (a text longer
    than that alone in its run)."""
    chunks: list[list[str]] = []
    used = budget + 1
    for text in texts:
        cost = estimate_tokens(text) + 1
        if used + cost > budget:
            chunks.append([])
            used = 0
        chunks[-1].append(text)
        used += cost
    return chunks


def within(texts: Sequence[str], budget: int) -> list[str]:
    """The longest prefix of ``texts`` within ``budget`` tokens, in their order."""
    out: list[str] = []
    used = 0
    for text in texts:
        cost = estimate_tokens(text) + 1
        if used + cost > budget:
            break
        out.append(text)
        used += cost
    return out


_FIRST_SENTENCE = re.compile(r"^(.+?[.!?](?:\s*\[S\d{1,5}\])*)(?:\s|$)", re.DOTALL)


def key_points(text: str) -> list[str]:
    """A section's key points: the first sentence of each paragraph that cites (at any depth:
    in a list item, a quote), with its markers, at most ``KEY_POINTS``. The text is read as
    markdown, so a heading (``## Findings``, setext, in a quote or a list item) is never a
    point and never hides the bullets under it; table cells and code are not points."""
    points: list[str] = []
    for paragraph in (p.text for p in md.paragraphs(text) if p.kind != "row"):
        if "[S" not in paragraph:
            continue
        found = _FIRST_SENTENCE.match(paragraph)
        points.append(cap_tokens(found.group(1) if found else paragraph, POINT_TOKENS))
        if len(points) >= KEY_POINTS:
            break
    return points
