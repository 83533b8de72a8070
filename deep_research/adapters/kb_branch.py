"""The ``internal`` branch executor: knowledge-base retrieval + a notes writer.

Retrieval runs for the node's question and, when it has dependencies, once more with
their findings as context. The writer (an LLM chain, or the extractive one when no model
is configured) cites passages by number; only the passages it cites become citations,
each pointing at an exact chunk (``path#heading:lines``) that resolves back to its text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from deep_research.adapters.llm.branch import Passage
from deep_research.core.errors import BranchError
from deep_research.core.memory import cap_tokens
from deep_research.core.models import BranchNotes, Citation
from deep_research.core.ports import BranchResult, BranchTask, Finding, Meter, RemoteJobHook

_MARKER = re.compile(r"\[(\d{1,3})\]")


class Evidence(Protocol):
    @property
    def chunk_id(self) -> str: ...
    @property
    def locator(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def heading(self) -> str: ...
    @property
    def text(self) -> str: ...


class Retriever(Protocol):
    async def retrieve(self, query: str, k: int) -> Sequence[Evidence]: ...


class EvidenceWriter(Protocol):
    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes: ...


@dataclass(frozen=True)
class KBExecutor:
    retriever: Retriever
    writer: EvidenceWriter
    k: int = 8

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        hits = list(await self.retriever.retrieve(task.question, self.k))
        if task.dependencies:
            context = " ".join(cap_tokens(d.notes, 60) for d in task.dependencies[:3])
            seen = {h.chunk_id for h in hits}
            extra = await self.retriever.retrieve(f"{task.question} {context}", self.k // 2 or 1)
            hits += [h for h in extra if h.chunk_id not in seen]
        if not hits:
            raise BranchError("the knowledge base has no passages on this question")
        passages = [Passage(label=f"{h.source} › {h.heading}", text=h.text) for h in hits]
        notes = await self.writer.write(
            task.root_question, task.question, passages, task.dependencies, meter
        )
        text, citations = cite_used(notes.notes, hits)
        if not citations:
            raise BranchError("the notes cite no knowledge-base passage")
        return BranchResult(notes=text, citations=tuple(citations), confidence=notes.confidence)


def cite_used(notes: str, hits: Sequence[Evidence]) -> tuple[str, list[Citation]]:
    """Keep only the passages the notes cite, renumbered ``[1]..[n]``; drop bad markers."""
    renumbered: dict[int, int] = {}
    citations: list[Citation] = []
    for match in _MARKER.finditer(notes):
        number = int(match.group(1))
        if 1 <= number <= len(hits) and number not in renumbered:
            hit = hits[number - 1]
            renumbered[number] = len(citations) + 1
            citations.append(
                Citation(
                    kind="kb",
                    title=f"{hit.source} › {hit.heading}" if hit.heading else hit.source,
                    locator=hit.locator,
                    quote=cap_tokens(plain_text(hit.text), 120),
                )
            )

    def rewrite(match: re.Match[str]) -> str:
        new = renumbered.get(int(match.group(1)))
        return f"[{new}]" if new else ""

    return _MARKER.sub(rewrite, notes), citations


def plain_text(markdown: str) -> str:
    """A chunk as prose for a source quote: no heading lines, fences or table rules."""
    lines = []
    for line in markdown.splitlines():
        stripped = line.strip()
        if stripped.startswith(("#", "```", "~~~")) or set(stripped) <= set("|-: "):
            continue
        lines.append(stripped.strip("|").replace(" | ", " — "))
    return " ".join(" ".join(lines).split())
