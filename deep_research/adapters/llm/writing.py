"""The report's author: the outline, each section and the lead, each from a bounded prompt
(``core.writing`` decides what each sees)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from deep_research.adapters.llm.llm import ChatModel, load_prompt, outline_tokens, words_tokens
from deep_research.core.authoring import (
    REVISION_REPLY_TOKENS,
    CondenseRequest,
    LeadRequest,
    OutlineRequest,
    PlannedSection,
    RevisionRequest,
    SectionRequest,
)
from deep_research.core.ports import Meter


class OutlinedSection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = Field(description="A few specific words.")
    question: str = Field(description="The one question the section answers.")
    node_ids: list[str] = Field(description="The catalog ids it draws on.")
    points: list[str] = Field(description="Two to four points it makes, a sentence each.")


class Outline(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sections: list[OutlinedSection]


@dataclass(frozen=True)
class LLMAuthor:
    """Every part from the writer model, its reply capped per call
    (``DEEP_RESEARCH_SECTION_MAX_TOKENS``); also the claim check's ``Reviser``."""

    model: ChatModel

    async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]:
        catalog = "\n".join(
            f"- {'+'.join(e.node_ids)}: {e.question}" + (f" — found: {e.gist}" if e.gist else "")
            for e in request.catalog
        )
        messages = load_prompt("outline").messages(
            max_sections=request.max_sections, question=request.question, catalog=catalog
        )
        outline = await self.model.structured(
            Outline, messages, meter, reply_tokens=outline_tokens(request.max_sections)
        )
        return [
            PlannedSection(s.title, s.question, _ids(s.node_ids), tuple(s.points))
            for s in outline.sections
        ]

    async def section(self, request: SectionRequest, meter: Meter) -> str:
        section = request.section
        messages = load_prompt("section").messages(
            max_words=request.max_words,
            question=request.question,
            title=section.title,
            section_question=section.question,
            points="\n".join(f"- {p}" for p in section.points) or "(none)",
            others="\n".join(
                f"- {title}" + (f": {'; '.join(points)}" if points else "")
                for title, points in request.others
            )
            or "(none: this is the only section)",
            evidence="\n".join(f"- {e}" for e in request.evidence) or "(none)",
            related="\n".join(f"- {e}" for e in request.related) or "(none)",
        )
        return await self.model.text(
            messages,
            meter,
            reply_tokens=words_tokens(request.max_words),
            sized_by="DEEP_RESEARCH_REPORT_SECTION_WORDS",
        )

    async def lead(self, request: LeadRequest, meter: Meter) -> str:
        sections = "\n".join(
            f"{title}:\n" + "\n".join(f"- {p}" for p in points)
            for title, points in request.sections
        )
        messages = load_prompt("lead").messages(
            max_words=request.max_words,
            question=request.question,
            sections=sections or "(no section was written)",
            gaps="\n".join(f"- {g}" for g in request.gaps) or "(none)",
        )
        return await self.model.text(messages, meter, reply_tokens=words_tokens(request.max_words))

    async def revise(self, request: RevisionRequest, meter: Meter) -> str:
        """One sentence the claim check found unsupported, rewritten from its sources'
        passages (the reply capped at ``REVISION_REPLY_TOKENS``, or the sections' cap if lower)."""
        messages = load_prompt("revise").messages(
            question=request.question,
            section=request.section,
            sentence=request.sentence,
            problems="\n".join(f"- {p}" for p in request.problems) or "(none)",
            passages="\n".join(f"[{n}] {text}" for n, text in request.passages) or "(none)",
        )
        return await self.model.text(messages, meter, reply_tokens=REVISION_REPLY_TOKENS)

    async def condense(self, request: CondenseRequest, meter: Meter) -> str:
        messages = load_prompt("condense").messages(
            max_tokens=request.max_tokens,
            question=request.question,
            title=request.section.title,
            section_question=request.section.question,
            evidence="\n".join(f"- {e}" for e in request.evidence),
        )
        return await self.model.text(messages, meter, reply_tokens=request.max_tokens)


def _ids(ids: list[str]) -> tuple[str, ...]:
    """Catalog ids as given, a grouped line's ``a+b`` split back into its nodes."""
    return tuple(part.strip() for i in ids for part in i.split("+") if part.strip())
