"""What the writing phase asks of its author, and what it may spend.

The ``Author`` (a model, or the no-model mode's quoting) writes the outline, the sections and
the lead; a ``Condenser`` shortens a section's overflowing evidence; a ``Reviser`` rewrites a
sentence the claim check found unsupported. ``WritingLimits`` holds every call's budget (so no
prompt grows with the number of branches) and ``WriteCosts`` their worst-case prices, from
which the final reserve is kept back when the run starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from deep_research.core.models import SectionPlan
from deep_research.core.ports import Meter

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
REVISION_PROMPT_TOKENS = 2000
"""A revision's prompt at most: the claim, its sources' passages (``REVISION_PASSAGES``,
each cut to ``REVISION_PASSAGE_CHARS``), what differs, and the instructions."""
REVISION_REPLY_TOKENS = 1500
"""A revision's reply cap (one sentence, reasoning included), or a section's if lower."""
REVISION_PASSAGES = 3
REVISION_PASSAGE_CHARS = 1200
CONDENSE_CHUNKS = 3
"""Chunks a section's own units are condensed in, at most (past that, a fair cut first)."""


@dataclass(frozen=True)
class WriteCosts:
    """Worst-case USD of each call (its prompt budget and reply cap at the writer's price)."""

    outline: float = 0.0
    section: float = 0.0
    lead: float = 0.0
    revisions: float = 0.0
    """Every revision the claim check may ask for (``WritingLimits.max_revisions``), one
    attempt each, as a section is counted."""

    condense: float = 0.0
    """One condensing call (paid from what research left over, never from the reserve)."""

    def sections_affordable(self, money: float) -> int:
        """How many sections ``money`` pays for, after the outline and the lead."""
        if self.section <= 0:
            return 10**6
        return max(1, math.floor((money - self.outline - self.lead) / self.section))

    def reserve(self, max_sections: int, *, revisions: bool = True) -> float:
        """What the whole phase may cost, the claim check's revisions included (unless
        not ``revisions``): kept back from research when the run starts."""
        written = self.outline + self.lead + max_sections * self.section
        return written + (self.revisions if revisions else 0.0)


@dataclass(frozen=True)
class WritingLimits:
    max_sections: int = 8
    section_words: int = 900
    lead_words: int = 350
    own_evidence_tokens: int = 1500
    related_evidence_tokens: int = 500
    catalog_tokens: int = 2500
    max_parallel: int = 4
    max_revisions: int = 6
    """Claims the claim check may send back to be rewritten once (``Reviser``)."""
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

    @property
    def condense_tokens(self) -> int:
        """One condensing call at its ceilings."""
        return self.condense_prompt_tokens + self.condense_reply_tokens

    def reserve_tokens(self, reply_tokens: int) -> int:
        """Tokens the writing calls may use at their ceilings, each reply at ``reply_tokens``.
        The claim check's revisions are kept back in money only (``WriteCosts.revisions``):
        counted in tokens too, they would leave room for one web job fewer at the defaults.
        Condensing is not kept back at all: it spends only what research left over."""
        calls = self.outline_prompt_tokens + self.lead_prompt_tokens + 2 * reply_tokens
        return calls + self.max_sections * (self.section_prompt_tokens + reply_tokens)


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

    async def lead(self, request: LeadRequest, meter: Meter) -> str: ...


@dataclass(frozen=True)
class RevisionRequest:
    """One claim the claim check found unsupported or contradicted, back to its writer."""

    question: str
    section: str
    sentence: str
    """As the report states it, citing with ``[N]``."""
    passages: tuple[tuple[int, str], ...]
    """The cited sources' best passages: (N, verbatim text)."""
    problems: tuple[str, ...]
    """What the check found: each source's verdict and what differs."""


class Reviser(Protocol):
    """The section's writer, asked once to rewrite a sentence its sources do not support."""

    async def revise(self, request: RevisionRequest, meter: Meter) -> str:
        """The sentence rewritten to state only what the passages do, citing with ``[N]``."""


@runtime_checkable
class Condenser(Protocol):
    """An author that can condense a chunk of evidence (a model; the no-model mode quotes
    instead, so a section of it reads its fair share)."""

    async def condense(self, request: CondenseRequest, meter: Meter) -> str:
        """The chunk's facts, shorter, each with its markers exactly as given."""
