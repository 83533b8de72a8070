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
- Sections: every finding is given to one section at most (``packing.given``): a section
  sees the units of its own nodes (``own_evidence_tokens``; a finding several nodes state
  alike goes to the section it fits best), as related evidence only units that no section
  reads — those its own section's fair cut left out — given to the one other section
  sharing most of their words (``related_evidence_tokens``), and the other sections'
  titles and points. So what a section is given no other section is, and a small run does
  not repeat its best units in every section; a section whose nodes found only what others
  are given is not written (its nodes join the section given most of their findings). At
  most ``max_parallel`` at a time; each is saved as it is written.
- Condensing (the seed's hierarchical reduction): a section whose own units pass its
  budget does not drop the rest: it reads half its budget of them as they are (a fair
  share of each node), and the rest, cut into chunks of at most the budget (at most
  ``CONDENSE_CHUNKS``), each condensed by a call to its share of the other half, markers
  kept; each paragraph, list item or table row of a reply is an entry the section reads
  (its headings none). Condensing spends only what research left beyond the final reserve
  (``WriteJob.spare_usd`` and ``spare_tokens``), at most ``condense_calls`` calls a phase,
  so it never costs research a job; past that, or if a call fails, the section reads its
  fair share of its units (the rest stays in the notes).
- Lead: the direct answer, contradictions and open questions, limits, from the sections'
  key points (the first sentence of each paragraph, with its markers) and the gaps.
- Markers: every reply is read against the evidence its prompt showed
  (``citations.read_reply``): a ``[3]`` written for ``[S3]``, or for the third entry it
  was shown, is tied when it can mean nothing else; any other marker a model wrote stays
  literal text, tied to nothing.
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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.core import evidence as evidence_units
from deep_research.core import markdown as md
from deep_research.core.authoring import (
    CATALOG_LINE_TOKENS,
    CONDENSE_CHUNKS,
    QUOTED_TOKENS,
    Author,
    CatalogEntry,
    Condenser,
    CondenseRequest,
    LeadRequest,
    OutlineRequest,
    SectionRequest,
    WritingLimits,
)
from deep_research.core.citations import read_reply, strip_trailing
from deep_research.core.errors import ProviderError
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import (
    EvidenceUnit,
    ResearchNode,
    SectionPlan,
    SessionState,
    Writing,
)
from deep_research.core.outline import grouped, merged, repair, threads
from deep_research.core.packing import (
    chunked,
    fair_units,
    fair_within,
    finding_key,
    given,
    key_points,
    within,
)
from deep_research.core.ports import Meter, WriteJob
from deep_research.core.report import Report, assemble
from deep_research.core.words import prefix_words


class SectionedWriter:
    """The report writer (``ports.ReportWriter``): outline -> sections -> lead."""

    def __init__(self, author: Author, limits: WritingLimits | None = None) -> None:
        self.author = author
        self.limits = limits or WritingLimits()

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
            groups = threads(done)
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
        words = {u.id: prefix_words(strip_trailing(u.finding)) for u in units}
        mine = given(writing.sections, units, words)
        if (kept := _absorbed(writing.sections, units, mine)) != writing.sections:
            writing.sections = kept
            mine = given(writing.sections, units, words)
        todo = [
            (section, own)
            for section, own in zip(writing.sections, mine, strict=True)
            if section.status != "written"
        ]
        calls = [self._condense_calls(job)]  # calls left to the whole phase
        plans = [self._condensing(own, calls) for _section, own in todo]
        spare = [
            unit
            for (_section, own), plan in zip(todo, plans, strict=True)
            if plan is None
            for unit in self._left_out(own)
        ]
        related = self._related([section for section, _own in todo], spare, words)
        limit = asyncio.Semaphore(self.limits.max_parallel)

        async def one(
            section: SectionPlan, own: list[EvidenceUnit], plan: _Condensing | None
        ) -> None:
            request = SectionRequest(
                question=state.question,
                section=section,
                others=tuple(
                    (s.title, tuple(s.points)) for s in writing.sections if s is not section
                ),
                evidence=tuple(fair_within(own, self.limits.own_evidence_tokens)),
                related=tuple(related[section.id]),
                max_words=self.limits.section_words,
            )
            try:
                async with asyncio.timeout_at(job.deadline), limit:
                    _in_time(job.deadline)
                    # A quote (below) is of the units themselves, never of a condensing.
                    reads = await self._condensed(request, plan, job.meter)
                    written = await self.author.section(reads, job.meter)
                    section.text = read_reply(written, reads.evidence, reads.related).text
                    section.status, section.note = "written", ""
            except (TimeoutError, ProviderError) as exc:
                _quote(section, request.evidence, _unwritten(exc))
            await job.save()

        await asyncio.gather(
            *(one(s, own, plan) for (s, own), plan in zip(todo, plans, strict=True))
        )
        if writing.lead_status != "written":
            await self._lead(job, writing)
        return assemble(state)

    def _condense_calls(self, job: WriteJob) -> int:
        """Condensing calls the phase may make: at most ``condense_calls``, as many as what
        research left beyond the final reserve pays for."""
        limits = self.limits
        most = min(limits.condense_calls, job.spare_tokens // limits.condense_tokens)
        if limits.costs.condense > 0:
            most = min(most, math.floor(job.spare_usd / limits.costs.condense))
        return max(0, most)

    def _left_out(self, own: Sequence[EvidenceUnit]) -> list[EvidenceUnit]:
        """The units past a section's budget that its fair cut leaves out."""
        kept = {u.id for u in fair_units(own, self.limits.own_evidence_tokens)}
        return [u for u in own if u.id not in kept]

    def _related(
        self,
        sections: Sequence[SectionPlan],
        spare: Sequence[EvidenceUnit],
        words: dict[str, frozenset[str]],
    ) -> dict[str, list[str]]:
        """Each spare unit (left out of its own section) given to the one other section whose
        title, question and points share most of its ``words`` and whose related budget has
        room (none when no section shares a word), in reading order."""
        asks = [prefix_words(" ".join([s.title, s.question, *s.points])) for s in sections]
        room = dict.fromkeys((s.id for s in sections), self.limits.related_evidence_tokens)
        out: dict[str, list[str]] = {s.id: [] for s in sections}
        for unit in spare:
            cost = estimate_tokens(unit.finding) + 1
            scored = [
                (len(ask & words[unit.id]), -i, section)
                for i, (section, ask) in enumerate(zip(sections, asks, strict=True))
                if unit.node_id not in section.node_ids
            ]
            for shared, _order, section in sorted(scored, key=lambda t: t[:2], reverse=True):
                if shared and room[section.id] >= cost:
                    out[section.id].append(unit.finding)
                    room[section.id] -= cost
                    break
        return out

    def _condensing(self, own: Sequence[EvidenceUnit], calls_left: list[int]) -> _Condensing | None:
        """How a section whose own units pass its budget reads them: half its budget as they
        are, the rest in chunks to condense, when the phase has the calls left (taken from
        ``calls_left``); None when they fit, the author does not condense, or no calls are
        left (it reads its fair share)."""
        budget = self.limits.own_evidence_tokens
        if not isinstance(self.author, Condenser):
            return None
        if sum(estimate_tokens(u.finding) + 1 for u in own) <= budget:
            return None
        kept = fair_within(own, budget // 2)
        taken = set(kept)
        rest = [u for u in own if u.finding not in taken]
        chunks = chunked(fair_within(rest, CONDENSE_CHUNKS * budget), budget)[:CONDENSE_CHUNKS]
        if calls_left[0] < len(chunks):
            return None
        calls_left[0] -= len(chunks)
        return _Condensing(tuple(kept), tuple(tuple(c) for c in chunks))

    async def _condensed(
        self, request: SectionRequest, plan: _Condensing | None, meter: Meter
    ) -> SectionRequest:
        """``request`` reading ``plan``'s kept units as they are and its chunks condensed
        into the other half of its budget; as it is (its fair share) without a plan or if a
        condensing call fails."""
        author = self.author
        if plan is None or not isinstance(author, Condenser):
            return request
        budget = self.limits.own_evidence_tokens
        share = (budget - budget // 2) // len(plan.chunks)
        replies = await asyncio.gather(
            *(
                author.condense(
                    CondenseRequest(request.question, request.section, chunk, share), meter
                )
                for chunk in plan.chunks
            ),
            return_exceptions=True,
        )
        texts: list[str] = []
        for reply, chunk in zip(replies, plan.chunks, strict=True):
            if isinstance(reply, ProviderError):
                return request  # the fair share, as if there had been no calls left
            if isinstance(reply, BaseException):
                raise reply
            texts.append(cap_tokens(read_reply(reply, chunk).text, share))
        # Read as markdown: a heading (ATX or setext) is no entry, so no [n] counts it.
        condensed = [p.text for text in texts for p in md.paragraphs(text)]
        return dataclasses.replace(request, evidence=(*plan.kept, *condensed))

    async def _lead(self, job: WriteJob, writing: Writing) -> None:
        points = tuple(
            (s.title, tuple(key_points(s.text))) for s in writing.sections if s.text.strip()
        )
        request = LeadRequest(job.state.question, points, job.gaps, self.limits.lead_words)
        try:
            async with asyncio.timeout_at(job.deadline):
                _in_time(job.deadline)
                lead = await self.author.lead(request, job.meter)
                writing.lead = read_reply(lead, *(ps for _title, ps in points)).text
            writing.lead_status, writing.lead_note = "written", ""
        except (TimeoutError, ProviderError) as exc:
            flat = [p for _title, ps in points for p in ps[:1]]
            writing.lead = "\n".join(f"- {p}" for p in flat)
            writing.lead_status, writing.lead_note = "quoted", _unwritten(exc)
        await job.save()


@dataclass(frozen=True)
class _Condensing:
    """A section's own units as it reads them when condensed."""

    kept: tuple[str, ...]
    """Half its budget of them, as they are (a fair share of each node)."""
    chunks: tuple[tuple[str, ...], ...]
    """The rest, in chunks, each condensed by a call."""


def _in_time(deadline: float) -> None:
    """Raise ``TimeoutError`` past ``deadline``: no call starts that could not finish."""
    if asyncio.get_running_loop().time() >= deadline:
        raise TimeoutError


def _unwritten(exc: TimeoutError | ProviderError) -> str:
    """Why a part is quoted instead of written."""
    if isinstance(exc, TimeoutError):
        return "the time limit was reached before it was written"
    return f"writing it failed ({exc})"


def _done(state: SessionState) -> list[ResearchNode]:
    nodes = sorted(state.nodes.values(), key=lambda n: (n.iteration, n.created_at))
    return [n for n in nodes if n.status == "done"]


def _absorbed(
    sections: list[SectionPlan], units: Sequence[EvidenceUnit], mine: list[list[EvidenceUnit]]
) -> list[SectionPlan]:
    """``sections`` without those not yet written whose nodes found only what other sections
    are given (two branches quoting the same passages): such a section's nodes join the
    section given most of their findings, so it is not written to say nothing new."""
    holder = {finding_key(u.finding): i for i, own in enumerate(mine) for u in own}
    out = list(sections)
    for i, section in enumerate(sections):
        found = [u for u in units if u.node_id in section.node_ids]
        if mine[i] or not found or section.status == "written":
            continue
        votes = Counter(holder[k] for u in found if (k := finding_key(u.finding)) in holder)
        if not votes:
            continue
        to = sections[max(votes, key=lambda j: (votes[j], -j))]
        to.node_ids = [*to.node_ids, *section.node_ids]
        out.remove(section)
    return out


def _quote(section: SectionPlan, evidence: Sequence[str], why: str) -> None:
    """Fill ``section`` with its best evidence, verbatim, and say why."""
    lines = within(list(evidence), QUOTED_TOKENS) or ["No evidence was found for this section."]
    section.text = "\n".join(f"- {line}" for line in lines)
    section.status, section.note = "quoted", why
