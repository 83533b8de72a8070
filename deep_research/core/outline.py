"""The report's outline without a model, and the author's outline made sound.

``repair`` keeps an author's plan to known done nodes, each in one section, at most
``max_sections``; ``grouped`` is the plan when there is none (a section per thread of the
tree); ``merged`` cuts a plan to fewer sections; ``outline_text`` is what the judge reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from deep_research.core.authoring import KEY_POINTS, POINT_TOKENS, PlannedSection
from deep_research.core.memory import cap_tokens
from deep_research.core.models import ResearchNode, SectionPlan, Writing
from deep_research.core.words import prefix_words


def threads(nodes: Sequence[ResearchNode]) -> list[list[ResearchNode]]:
    """Nodes grouped by thread: a node joins the group of its parent or first dependency."""
    home: dict[str, int] = {}
    groups: list[list[ResearchNode]] = []
    for node in nodes:
        anchor = node.parent_id or (node.depends_on[0] if node.depends_on else None)
        if anchor is not None and anchor in home:
            home[node.id] = home[anchor]
            groups[home[anchor]].append(node)
        else:
            home[node.id] = len(groups)
            groups.append([node])
    return groups


def grouped(done: Sequence[ResearchNode], max_sections: int) -> list[SectionPlan]:
    """The outline without a model: a section per thread, neighbours merged to fit."""
    groups = threads(done)
    while len(groups) > max(1, max_sections):
        size = math.ceil(len(groups) / max_sections)
        groups = [[n for g in groups[i : i + size] for n in g] for i in range(0, len(groups), size)]
    return [
        SectionPlan(
            id=f"s{i}",
            title=_title(nodes[0].question),
            question=nodes[0].question,
            node_ids=[n.id for n in nodes],
            points=[n.question for n in nodes[1:]][:KEY_POINTS],
        )
        for i, nodes in enumerate(groups, start=1)
    ]


def repair(
    planned: Sequence[PlannedSection], done: Sequence[ResearchNode], max_sections: int
) -> list[SectionPlan]:
    """The author's sections made sound: known done ids only, each node in one section
    (its first), empty sections dropped, nodes left out added to the section whose words
    they share most, at most ``max_sections`` (neighbours merged). Empty when nothing of
    the plan is usable."""
    known = {n.id: n for n in done}
    taken: set[str] = set()
    sections: list[SectionPlan] = []
    for part in planned:
        ids = [i for i in dict.fromkeys(part.node_ids) if i in known and i not in taken]
        if not ids or not part.title.strip():
            continue
        taken.update(ids)
        sections.append(
            SectionPlan(
                id="",
                title=cap_tokens(" ".join(part.title.split()), POINT_TOKENS // 2),
                question=cap_tokens(" ".join((part.question or part.title).split()), POINT_TOKENS),
                node_ids=ids,
                points=[
                    cap_tokens(" ".join(p.split()), POINT_TOKENS) for p in part.points if p.strip()
                ][:KEY_POINTS],
            )
        )
    if not sections:
        return []
    for node in done:
        if node.id not in taken:
            words = prefix_words(node.question)
            best = max(
                sections, key=lambda s: len(words & prefix_words(s.title + " " + s.question))
            )
            best.node_ids.append(node.id)
    return merged(sections, max_sections)  # numbered there


def merged(sections: list[SectionPlan], most: int) -> list[SectionPlan]:
    """At most ``most`` sections, numbered: the smallest merged into its smaller neighbour."""
    sections = [s.model_copy(deep=True) for s in sections]
    while len(sections) > max(1, most):
        i = min(range(len(sections)), key=lambda k: len(sections[k].node_ids))
        j = (
            i - 1
            if i == len(sections) - 1
            or (i > 0 and len(sections[i - 1].node_ids) <= len(sections[i + 1].node_ids))
            else i + 1
        )
        keep, gone = sorted((i, j))
        a, b = sections[keep], sections[gone]
        a.node_ids += b.node_ids
        a.points += b.points
        a.title = f"{a.title}; {b.title}" if len(a.title) + len(b.title) < 100 else a.title
        a.status, a.text, a.note = "pending", "", ""
        del sections[gone]
    for i, section in enumerate(sections, start=1):
        section.id = f"s{i}"
    return sections


def _title(question: str) -> str:
    words = question.rstrip("?").split()
    return " ".join(words[:10]) + ("…" if len(words) > 10 else "")


def outline_text(writing: Writing) -> str:
    """The outline as the judge reads it: each section's title, question, points."""
    lines = []
    for s in writing.sections:
        lines.append(f"## {s.title}\nAnswers: {s.question}\nDraws on: {', '.join(s.node_ids)}")
        lines += [f"- {p}" for p in s.points]
    return "\n".join(lines)
