"""Evidence fitted to a prompt's token budget: each finding given to one section, a fair cut
across nodes, a prefix, chunks, and a written section's key points."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from deep_research.core import markdown as md
from deep_research.core.authoring import KEY_POINTS, POINT_TOKENS
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import EvidenceUnit, SectionPlan
from deep_research.core.words import prefix_words


def fair_within(units: Sequence[EvidenceUnit], budget: int) -> list[str]:
    """The findings of ``units`` within ``budget`` tokens, taken node by node in turn (a
    cut takes from every node alike), then given back in reading order."""
    return [unit.finding for unit in fair_units(units, budget)]


def fair_units(units: Sequence[EvidenceUnit], budget: int) -> list[EvidenceUnit]:
    """``fair_within``'s units."""
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
                    return [units[i] for i in sorted(picked)]
                picked.append(queue[depth])
                used += cost
    return [units[i] for i in sorted(picked)]


def given(
    sections: Sequence[SectionPlan],
    units: Sequence[EvidenceUnit],
    words: Mapping[str, frozenset[str]],
) -> list[list[EvidenceUnit]]:
    """Each section's units, in reading order, every finding given to one section at most:
    a unit goes to the section holding its node; a finding that several nodes state alike
    (its words, markers aside: two branches quoting one passage) is given once, to the
    section of those whose title, question and points share most of its ``words`` (the
    first on a tie), and once within it. A unit of a node in no section is given to none."""
    homes: dict[str, int] = {}
    for i, section in enumerate(sections):
        for node_id in section.node_ids:
            homes.setdefault(node_id, i)
    asks = [prefix_words(" ".join([s.title, s.question, *s.points])) for s in sections]
    alike: dict[str, list[EvidenceUnit]] = {}
    for unit in units:
        if unit.node_id in homes:
            alike.setdefault(finding_key(unit.finding), []).append(unit)
    chosen: set[str] = set()
    for copies in alike.values():
        first = min(
            copies, key=lambda u: (-len(asks[homes[u.node_id]] & words[u.id]), homes[u.node_id])
        )
        chosen.add(first.id)
    out: list[list[EvidenceUnit]] = [[] for _ in sections]
    for unit in units:
        if unit.id in chosen:
            out[homes[unit.node_id]].append(unit)
    return out


def finding_key(finding: str) -> str:
    """What two findings stated alike share: their words, lower-cased, markers and the
    final stop dropped."""
    return " ".join(_MARKER.sub(" ", finding).lower().split()).rstrip(" .")


_MARKER = re.compile(r"\[S?\d{1,5}\]")


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
