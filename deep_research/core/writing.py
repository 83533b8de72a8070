"""The writing phase: an outline, then each section from its own evidence, then the lead.

    writer = SectionedWriter(author, WritingLimits(...))
    writing = await writer.outline(state, meter)       # the judge reads it, rendered
    report = await writer.write(job)                    # when research has ended

The ``Author`` (a model, or the no-model mode's quoting) writes the parts; this module
decides what each part sees and keeps the phase saved and inside the run's limits:

- Outline: the done nodes, one bounded catalog line each (``catalog_tokens`` in all; past
  that, nodes are grouped first, so 30-50 branches never make one call over everything).
  The author's sections are repaired: unknown ids dropped, every done node in exactly one
  section, at most ``max_sections``. If the call fails, nodes are grouped by their thread
  in the tree (a node with the node it follows up).
- Sections: each sees its own nodes' evidence units (``own_evidence_tokens``), the best
  units of the rest for its question (``related_evidence_tokens``), and the other
  sections' titles and points (so sections do not repeat each other). At most
  ``max_parallel`` at a time; each is saved as it is written.
- Condensing (the seed's hierarchical reduction): a section whose own units pass its
  budget does not drop the rest: it reads half its budget of them as they are (a fair
  share of each node), and the rest, cut into chunks of at most the budget (at most
  ``CONDENSE_CHUNKS``), each condensed by a call to its share of the other half, markers
  kept. At most ``condense_calls`` such calls
  in the whole phase (the reserve counts them); past that, or if one fails, the section
  reads its fair share of its units as before (the rest stays in the notes).
- Lead: the direct answer, contradictions and open questions, limits, from the sections'
  key points (the first sentence of each paragraph, with its markers) and the gaps.
- Limits: every call stops at the run's deadline. A part not written by then, or whose call
  failed, is filled at once with its best evidence quoted verbatim and marked (``quoted``),
  so the report is always whole; a resume writes only what is not ``written``. With less
  money left than ``costs`` says the outline needs, it is cut to fewer sections first.

No prompt grows with the number of branches: every input above has a fixed budget.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from deep_research.core import evidence as evidence_units
from deep_research.core.citations import strip_trailing
from deep_research.core.errors import ProviderError
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import (
    EvidenceUnit,
    ResearchNode,
    SectionPlan,
    SessionState,
    Writing,
)
from deep_research.core.ports import Meter, WriteJob
from deep_research.core.report import Report, assemble
from deep_research.core.words import prefix_words

KEY_POINTS = 4
"""Key points of a section the lead reads."""
POINT_TOKENS = 60
"""A planned or key point, or a section title, at most (they are cut to it)."""
CATALOG_LINE_TOKENS = 24
"""The least a catalog line gets: a short question; fewer lines than that share one."""
QUOTED_TOKENS = 600
"""Evidence a section not written quotes instead (its best units first)."""
FRAME_TOKENS = 600
"""A prompt's instructions and headings."""
GAPS_TOKENS = 1200
"""The gaps the lead is told (``context.gaps``: at most 20 of 60 tokens)."""
CONDENSE_CHUNKS = 3
"""Chunks a section's own units are condensed in, at most (past that, a fair cut first)."""


@dataclass(frozen=True)
class WriteCosts:
    """Worst-case USD of each call (its prompt budget and reply cap at the writer's price)."""

    outline: float = 0.0
    section: float = 0.0
    lead: float = 0.0

    condense: float | None = None
    """A condensing call; ``None``: counted as a section call, whose prompt and reply
    bound it."""

    @property
    def condense_call(self) -> float:
        return self.section if self.condense is None else self.condense

    def sections_affordable(self, money: float) -> int:
        """How many sections ``money`` pays for: the most whose ``reserve`` it covers."""
        if self.section <= 0:
            return 10**6
        most = max(1, math.floor((money - self.outline - self.lead) / self.section))
        while most > 1 and self.reserve(most) > money:
            most -= 1
        return most

    def reserve(self, max_sections: int) -> float:
        """What the whole phase may cost: kept back from research when the run starts
        (``condense_calls`` is ``max_sections // 2`` at most, see ``WritingLimits``)."""
        condensing = (max_sections // 2) * self.condense_call
        return self.outline + self.lead + max_sections * self.section + condensing


@dataclass(frozen=True)
class WritingLimits:
    max_sections: int = 8
    section_words: int = 900
    lead_words: int = 350
    own_evidence_tokens: int = 1500
    related_evidence_tokens: int = 500
    catalog_tokens: int = 2500
    max_parallel: int = 4
    costs: WriteCosts = field(default_factory=WriteCosts)

    @property
    def outline_prompt_tokens(self) -> int:
        return self.catalog_tokens + FRAME_TOKENS

    @property
    def section_prompt_tokens(self) -> int:
        others = self.max_sections * (KEY_POINTS + 1) * POINT_TOKENS
        return self.own_evidence_tokens + self.related_evidence_tokens + others + FRAME_TOKENS

    @property
    def lead_prompt_tokens(self) -> int:
        points = self.max_sections * (KEY_POINTS + 1) * POINT_TOKENS
        return points + GAPS_TOKENS + FRAME_TOKENS

    @property
    def condense_calls(self) -> int:
        """Condensing calls the whole phase may make: one for every second section."""
        return self.max_sections // 2

    @property
    def condense_prompt_tokens(self) -> int:
        return self.own_evidence_tokens + FRAME_TOKENS

    @property
    def condense_reply_tokens(self) -> int:
        """The condensed half of a section's budget (chunks share it)."""
        return self.own_evidence_tokens - self.own_evidence_tokens // 2

    def reserve_tokens(self, reply_tokens: int) -> int:
        """Tokens the whole phase may use at its ceilings, each reply at ``reply_tokens``."""
        calls = self.outline_prompt_tokens + self.lead_prompt_tokens + 2 * reply_tokens
        condensing = self.condense_calls * (
            self.condense_prompt_tokens + min(reply_tokens, self.condense_reply_tokens)
        )
        return calls + condensing + self.max_sections * (self.section_prompt_tokens + reply_tokens)


@dataclass(frozen=True)
class CatalogEntry:
    """A line of the outline's catalog: a node (or a group of nodes) and what it found."""

    node_ids: tuple[str, ...]
    question: str
    gist: str


@dataclass(frozen=True)
class OutlineRequest:
    question: str
    catalog: tuple[CatalogEntry, ...]
    max_sections: int


@dataclass(frozen=True)
class PlannedSection:
    """A section as the author plans it (the writer numbers and repairs them)."""

    title: str
    question: str
    node_ids: tuple[str, ...]
    points: tuple[str, ...] = ()


@dataclass(frozen=True)
class SectionRequest:
    question: str
    """The research question (the report's)."""
    section: SectionPlan
    others: tuple[tuple[str, tuple[str, ...]], ...]
    """Every other section's title and points: what not to repeat."""
    evidence: tuple[str, ...]
    """The section's own units (findings with their ``[S#]`` markers)."""
    related: tuple[str, ...]
    """The best units of the rest of the research for this section's question."""
    max_words: int


@dataclass(frozen=True)
class CondenseRequest:
    question: str
    """The research question (the report's)."""
    section: SectionPlan
    evidence: tuple[str, ...]
    """A chunk of the section's own units (findings with their ``[S#]`` markers)."""
    max_tokens: int
    """The condensed text's length, at most."""


@dataclass(frozen=True)
class LeadRequest:
    question: str
    sections: tuple[tuple[str, tuple[str, ...]], ...]
    """Each section's title and key points (with their markers)."""
    gaps: tuple[str, ...]
    max_words: int


class Author(Protocol):
    """Writes the report's parts (a model's prompts, or the no-model mode's quotes)."""

    async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]: ...

    async def section(self, request: SectionRequest, meter: Meter) -> str:
        """The section's markdown body (no heading), citing with the ``[S#]`` it was given."""
        ...

    async def lead(self, request: LeadRequest, meter: Meter) -> str: ...


@runtime_checkable
class Condenser(Protocol):
    """An author that can condense a chunk of evidence (a model; the no-model mode quotes
    instead, so a section of it reads its fair share)."""

    async def condense(self, request: CondenseRequest, meter: Meter) -> str:
        """The chunk's facts, shorter, each with its markers exactly as given."""
        ...


class SectionedWriter:
    """The report writer (``ports.ReportWriter``): outline -> sections -> lead."""

    def __init__(self, author: Author, limits: WritingLimits | None = None) -> None:
        self.author = author
        self.limits = limits or WritingLimits()

    # --- outline ----------------------------------------------------------------------

    async def outline(self, state: SessionState, meter: Meter) -> Writing:
        """The outline of what is done: the saved one while it is current, else a new one."""
        done = _done(state)
        ids = [n.id for n in done]
        if state.writing is not None and not state.writing.stale(ids):
            return state.writing
        limit = self.limits.max_sections
        request = OutlineRequest(state.question, tuple(self._catalog(done)), limit)
        try:
            planned = await self.author.outline(request, meter)
        except ProviderError:
            planned = []
        sections = repair(planned, done, limit)
        by = "model" if planned and sections else "grouping"
        if not sections:
            sections = grouped(done, limit)
        return Writing(covers=ids, outlined_by=by, sections=sections)

    def _catalog(self, done: Sequence[ResearchNode]) -> list[CatalogEntry]:
        """One line per node within ``catalog_tokens``; past that, threads of the tree, and
        then neighbouring threads, share a line (the seed's hierarchical reduction)."""
        budget = self.limits.catalog_tokens
        groups = [[n] for n in done]
        if len(groups) * CATALOG_LINE_TOKENS > budget:
            groups = _threads(done)
        while len(groups) * CATALOG_LINE_TOKENS > budget and len(groups) > 1:
            groups = [[n for g in groups[i : i + 2] for n in g] for i in range(0, len(groups), 2)]
        share = max(CATALOG_LINE_TOKENS, budget // max(1, len(groups)))
        entries = []
        for nodes in groups:
            question = cap_tokens(" / ".join(n.question for n in nodes), share // 2)
            gist = " ".join(evidence_units.findings(nodes[0].notes)[:2])
            entries.append(
                CatalogEntry(tuple(n.id for n in nodes), question, cap_tokens(gist, share // 2))
            )
        return entries

    # --- write ------------------------------------------------------------------------

    async def write(self, job: WriteJob) -> Report:
        state = job.state
        if not _done(state):
            return assemble(state)  # nothing was found: nothing to write from
        writing = await self.outline(state, job.meter)
        fits = self.limits.costs.sections_affordable(job.money)
        if len(writing.sections) > fits:
            writing.sections = merged(writing.sections, fits)
        state.writing = writing
        await job.save()
        units = [
            u for node in _done(state) for u in evidence_units.units_of(node, state.sources, {})
        ]
        limit = asyncio.Semaphore(self.limits.max_parallel)
        condensing = [self.limits.condense_calls]  # calls left to the whole phase

        async def one(section: SectionPlan) -> None:
            request = self._section_request(state, writing, section, units)
            try:
                async with asyncio.timeout_at(job.deadline), limit:
                    _in_time(job.deadline)
                    own = [u for u in units if u.node_id in section.node_ids]
                    # A quote (below) is of the units themselves, never of a condensing.
                    reads = await self._condensed(request, own, condensing, job.meter)
                    section.text = await self.author.section(reads, job.meter)
                    section.status, section.note = "written", ""
            except TimeoutError:
                _quote(
                    section, request.evidence, "the time limit was reached before it was written"
                )
            except ProviderError as exc:
                _quote(section, request.evidence, f"writing it failed ({exc})")
            await job.save()

        await asyncio.gather(*(one(s) for s in writing.sections if s.status != "written"))
        if writing.lead_status != "written":
            await self._lead(job, writing)
        return assemble(state)

    def _section_request(
        self,
        state: SessionState,
        writing: Writing,
        section: SectionPlan,
        units: Sequence[EvidenceUnit],
    ) -> SectionRequest:
        limits = self.limits
        own = [u for u in units if u.node_id in section.node_ids]
        mine = {u.id for u in own}
        rest = [u for u in units if u.id not in mine]
        query = prefix_words(" ".join([section.title, section.question, *section.points]))
        ranked = sorted(rest, key=lambda u: -len(query & prefix_words(strip_trailing(u.finding))))
        related = [u for u in ranked if query & prefix_words(u.finding)]
        return SectionRequest(
            question=state.question,
            section=section,
            others=tuple((s.title, tuple(s.points)) for s in writing.sections if s is not section),
            evidence=tuple(fair_within(own, limits.own_evidence_tokens)),
            related=tuple(within([u.finding for u in related], limits.related_evidence_tokens)),
            max_words=limits.section_words,
        )

    async def _condensed(
        self,
        request: SectionRequest,
        own: Sequence[EvidenceUnit],
        calls_left: list[int],
        meter: Meter,
    ) -> SectionRequest:
        """``request`` reading half its budget of its own units as they are and the rest
        condensed into the other half, when they pass its budget and the phase has the
        calls left; else as it is (its fair share of its units)."""
        budget = self.limits.own_evidence_tokens
        author = self.author
        if not isinstance(author, Condenser):
            return request
        if sum(estimate_tokens(u.finding) + 1 for u in own) <= budget:
            return request
        kept = fair_within(own, budget // 2)
        rest = [u for u in own if u.finding not in set(kept)]
        chunks = chunked(fair_within(rest, CONDENSE_CHUNKS * budget), budget)[:CONDENSE_CHUNKS]
        if calls_left[0] < len(chunks):
            return request
        calls_left[0] -= len(chunks)
        share = (budget - budget // 2) // len(chunks)
        replies = await asyncio.gather(
            *(
                author.condense(
                    CondenseRequest(request.question, request.section, tuple(chunk), share),
                    meter,
                )
                for chunk in chunks
            ),
            return_exceptions=True,
        )
        texts: list[str] = []
        for reply in replies:
            if isinstance(reply, ProviderError):
                return request  # the fair share, as if there had been no calls left
            if isinstance(reply, BaseException):
                raise reply
            texts.append(cap_tokens(reply, share))
        condensed = [line.strip() for text in texts for line in text.splitlines() if line.strip()]
        return dataclasses.replace(request, evidence=(*kept, *condensed))

    async def _lead(self, job: WriteJob, writing: Writing) -> None:
        points = tuple(
            (s.title, tuple(key_points(s.text))) for s in writing.sections if s.text.strip()
        )
        gaps = await job.gaps()
        request = LeadRequest(job.state.question, points, gaps, self.limits.lead_words)
        try:
            async with asyncio.timeout_at(job.deadline):
                _in_time(job.deadline)
                writing.lead = await self.author.lead(request, job.meter)
            writing.lead_status, writing.lead_note = "written", ""
        except (TimeoutError, ProviderError) as exc:
            why = (
                "the time limit was reached before it was written"
                if isinstance(exc, TimeoutError)
                else f"writing it failed ({exc})"
            )
            flat = [p for _title, ps in points for p in ps[:1]]
            writing.lead = "\n".join(f"- {p}" for p in flat)
            writing.lead_status, writing.lead_note = "quoted", why
        await job.save()


# --- pure helpers ---------------------------------------------------------------------


def _in_time(deadline: float) -> None:
    """Raise ``TimeoutError`` past ``deadline``: no call starts that could not finish."""
    if asyncio.get_running_loop().time() >= deadline:
        raise TimeoutError


def _done(state: SessionState) -> list[ResearchNode]:
    nodes = sorted(state.nodes.values(), key=lambda n: (n.iteration, n.created_at))
    return [n for n in nodes if n.status == "done"]


def _threads(nodes: Sequence[ResearchNode]) -> list[list[ResearchNode]]:
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
    groups = _threads(done)
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
    sections = merged(sections, max_sections)
    for i, section in enumerate(sections, start=1):
        section.id = f"s{i}"
    return sections


def merged(sections: list[SectionPlan], most: int) -> list[SectionPlan]:
    """At most ``most`` sections: the smallest merged into its smaller neighbour."""
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


_PARAGRAPH = re.compile(r"\n\s*\n")
_FIRST_SENTENCE = re.compile(r"^(.+?[.!?](?:\s*\[S\d{1,5}\])*)(?:\s|$)", re.DOTALL)


def key_points(text: str) -> list[str]:
    """A section's key points: the first sentence of each paragraph or bullet that cites,
    with its markers, at most ``KEY_POINTS``."""
    points: list[str] = []
    for block in _PARAGRAPH.split(text):
        for line in (
            block.strip().splitlines() if block.lstrip().startswith(("-", "*")) else [block]
        ):
            line = evidence_units.BULLET.sub("", line.strip())
            if not line or line.startswith("#") or "[S" not in line:
                continue
            found = _FIRST_SENTENCE.match(" ".join(line.split()))
            points.append(cap_tokens(found.group(1) if found else line, POINT_TOKENS))
            if len(points) >= KEY_POINTS:
                return points
    return points


def _quote(section: SectionPlan, evidence: Sequence[str], why: str) -> None:
    """Fill ``section`` with its best evidence, verbatim, and say why."""
    lines = within(list(evidence), QUOTED_TOKENS) or ["No evidence was found for this section."]
    section.text = "\n".join(f"- {line}" for line in lines)
    section.status, section.note = "quoted", why


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
