"""The ``internal`` branch executor: knowledge-base retrieval + a notes writer.

Retrieval runs for the node's question and, when it has dependencies, once more with
their findings as context. The writer (an LLM chain, or the extractive one when no model
is configured) cites passages by number; only the passages it cites become citations,
each pointing at an exact chunk (``path#heading:lines``) that resolves back to its text.

Failures stay on the node: a knowledge base that cannot be read (a restarted Chroma
server, an unreadable store) fails this branch, not the run. Notes that cite no passage
(small local models often drop the markers), or notes the model could not write in a form
that reads (``StructuredOutputError`` after its repairs: a tiny model's confidence of 8), are
replaced by the best passages quoted verbatim with their citations, and say so: what was
retrieved is never lost to the notes writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.adapters.branches.protocols import Evidence, EvidenceWriter, Passage, Retriever
from deep_research.core import markdown as md
from deep_research.core.citations import cited_refs, keep_cited
from deep_research.core.errors import BranchError, KnowledgeBaseError, StructuredOutputError
from deep_research.core.memory import cap_tokens
from deep_research.core.models import Citation
from deep_research.core.ports import BranchResult, BranchTask, Meter, RemoteJobHook

FALLBACK_PASSAGES = 3
FALLBACK_NOTE = (
    "_The branch model's notes cited no passage, so the best passages are quoted verbatim._"
)
UNREAD_NOTE = (
    "_The branch model's notes could not be read ({problem}), so the best passages are "
    "quoted verbatim._"
)


@dataclass(frozen=True)
class KBExecutor:
    retriever: Retriever
    writer: EvidenceWriter
    k: int = 8

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        try:
            hits = await self._retrieve(task)
        except KnowledgeBaseError as exc:
            raise BranchError(f"knowledge base: {exc}") from exc
        if not hits:
            raise BranchError("the knowledge base has no passages on this question")
        passages = [Passage(label=f"{h.source} › {h.heading}", text=h.text) for h in hits]
        try:
            notes = await self.writer.write(
                task.root_question, task.question, passages, task.dependencies, meter
            )
        except StructuredOutputError as exc:
            return quote_best(hits, UNREAD_NOTE.format(problem=md.text(md.clip(str(exc), 200))))
        shown = [ref for d in task.dependencies for ref in cited_refs(d.notes)]
        text, used = keep_cited(notes.notes, len(hits), shown)
        if not used:
            named = [hits[n - 1] for n in dict.fromkeys(notes.used_evidence) if 0 < n <= len(hits)]
            return quote_best(named or hits)
        return BranchResult(
            notes=text,
            citations=tuple(citation_of(hits[i]) for i in used),
            confidence=notes.confidence,
            source_texts=tuple(plain_text(hits[i].text) for i in used),
        )

    async def _retrieve(self, task: BranchTask) -> list[Evidence]:
        hits = list(await self.retriever.retrieve(task.question, self.k))
        if task.dependencies:
            context = " ".join(cap_tokens(d.notes, 60) for d in task.dependencies[:3])
            seen = {h.chunk_id for h in hits}
            extra = await self.retriever.retrieve(f"{task.question} {context}", self.k // 2 or 1)
            hits += [h for h in extra if h.chunk_id not in seen]
        return hits


def quote_best(hits: Sequence[Evidence], note: str = FALLBACK_NOTE) -> BranchResult:
    """The best passages quoted verbatim, each citing itself, under ``note`` (why): what
    notes without a marker, or unreadable notes, are replaced by. The best are those the
    model said it used, else the top-ranked."""
    best = hits[:FALLBACK_PASSAGES]
    citations = [citation_of(hit) for hit in best]
    quotes = (f"> {md.text(c.quote)} [{n}]" for n, c in enumerate(citations, 1))
    return BranchResult(
        notes="\n\n".join([note, *quotes]),
        citations=tuple(citations),
        confidence=0.3,
        source_texts=tuple(plain_text(hit.text) for hit in best),
    )


def citation_of(hit: Evidence) -> Citation:
    name = hit.title or hit.source  # the front-matter title when the file has one
    return Citation(
        kind="kb",
        title=f"{name} › {hit.heading}" if hit.heading and hit.heading != name else name,
        locator=hit.locator,
        quote=cap_tokens(plain_text(hit.text), 120),
        tags=hit.tags,
    )


def plain_text(markdown: str) -> str:
    """A chunk as prose for a source quote: the text of its blocks in order, read as
    markdown with the markup left out (a table row's cells joined by " — ", code as written,
    its ``#`` comments too), so that a quote of it is contiguous chunk text; only the
    headings that open it (where it stands in its document) are not its text."""
    parts: list[str] = []
    cells: list[str] | None = None
    heading = False
    for token in md.parser().parse(markdown):
        if token.type in ("heading_open", "heading_close"):
            heading = token.type == "heading_open"
        elif token.type in ("fence", "code_block"):
            parts.append(token.content)
        elif token.type == "tr_open":
            cells = []
        elif token.type == "tr_close" and cells is not None:
            parts.append(" — ".join(cells))
            cells = None
        elif token.type == "inline":
            text = "".join(
                " " if c.type in ("softbreak", "hardbreak") else c.content
                for c in token.children or []
                if c.type in ("text", "code_inline", "softbreak", "hardbreak")
            )
            if cells is not None:
                cells.append(text.strip())
            elif not (heading and not parts):
                parts.append(text)
    return " ".join(" ".join(parts).split())
