"""Search-and-read web research: a branch executor that works with any chat model, or none.

For one sub-question: write 1-3 search queries (the branch model; with no model, the
question itself), search, read the most promising pages concurrently, split them into
passages and rank those against the sub-question the way the knowledge base ranks chunks
(``kb.rank``), then write notes citing passages by number (the branch model; with no model,
the best passages quoted verbatim). When the model judges the evidence thin, one more round
of searching is allowed (``extra_rounds``).

Every citation carries the page's url and title, the time it was read, the claim it
supports and the verbatim passage it rests on (``quote``): two passages of one page stay two
citations (``citations.identity``), and every claim can be checked against the exact text.

Failures stay small: a page that cannot be read is skipped and said (the live view shows
why); a search provider that fails, or no readable page at all, fails the branch with a
one-line reason and the run goes on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from deep_research.adapters.branches.protocols import (
    EvidenceWriter,
    Page,
    Passage,
    QueryWriter,
    Ranker,
    Reader,
    Searcher,
    SearchResults,
    Splitter,
)
from deep_research.adapters.prices import search_model
from deep_research.core import markdown as md
from deep_research.core.citations import cited_refs, keep_cited, sentence_of
from deep_research.core.errors import BranchError, BudgetExhausted, StructuredOutputError
from deep_research.core.models import Citation, Usage
from deep_research.core.ports import (
    BranchResult,
    BranchTask,
    JobEvent,
    Meter,
    RemoteJobHook,
)

THIN_EVIDENCE = 0.5
"""Below this confidence the notes are thin: search once more, if a round is left."""


@dataclass(frozen=True)
class SearchLimits:
    max_queries: int = 3
    results_per_query: int = 5
    pages_per_round: int = 4
    passages: int = 8
    """Ranked passages the notes are written from."""
    extra_rounds: int = 1


@dataclass(frozen=True)
class WebPassage:
    page: Page
    text: str


@dataclass
class _Round:
    tried: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    evidence: list[WebPassage] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """"<url>: <reason>" of each page not read."""


@dataclass(frozen=True)
class SearchReadExecutor:
    searcher: Searcher
    reader: Reader
    rank: Ranker
    split: Splitter
    writer: EvidenceWriter | None
    """The branch model's notes writer; None: quote the best passages verbatim."""
    query_writer: QueryWriter | None
    limits: SearchLimits = SearchLimits()
    model: str = ""

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        state = _Round()
        written: BranchResult | None = None
        for round_number in range(1 + self.limits.extra_rounds):
            queries = await self._queries(task, state.tried, meter)
            fresh = [q for q in queries if q not in state.tried]
            if not fresh:
                break
            state.tried += fresh
            try:
                await self._search_and_read(task, fresh, state, meter)
            except BranchError as exc:
                if written is None:
                    raise
                _say(task, f"the extra search failed, keeping the notes so far: {exc}")
                break
            best = await self._best(task.question, state.evidence)
            if not best:
                continue
            written = await self._write(task, best, meter)
            written = dataclasses.replace(written, skipped=tuple(state.skipped))
            last = round_number == self.limits.extra_rounds
            if self.writer is None or written.confidence >= THIN_EVIDENCE or last:
                return written
            _say(task, f"evidence thin ({written.confidence:.2f}): searching once more")
        if written is not None:
            return written
        skips = state.skipped
        why = f" ({len(skips)} page(s) not read; the first: {skips[0]})" if skips else ""
        raise BranchError(
            f"no readable page found for: {'; '.join(state.tried) or task.question}{why}"
        )

    async def _queries(self, task: BranchTask, tried: list[str], meter: Meter) -> list[str]:
        if self.query_writer is None:
            return [task.question]
        found = await self.query_writer.queries(
            task.root_question,
            task.question,
            task.dependencies,
            tried,
            self.limits.max_queries,
            meter,
        )
        return [" ".join(q.split()) for q in found if q.strip()][: self.limits.max_queries]

    async def _search_and_read(
        self, task: BranchTask, queries: list[str], state: _Round, meter: Meter
    ) -> None:
        results = await self._search(task, queries, meter)
        urls = [hit.url for outcome in results for hit in outcome.hits]
        picked = [u for u in dict.fromkeys(urls) if u not in state.seen]
        picked = picked[: self.limits.pages_per_round]
        state.seen.update(picked)
        _say(
            task,
            f"searched {'; '.join(repr(q) for q in queries)}: reading {len(picked)} page(s)",
            status=f"reading {len(picked)} page(s)",
        )
        pages = await asyncio.gather(*(self.reader.read(u) for u in picked), return_exceptions=True)
        for url, page in zip(picked, pages, strict=True):
            if isinstance(page, BranchError):
                _say(task, f"skipped {url}: {page}")
                state.skipped.append(f"{url}: {page}")
                continue
            if isinstance(page, BaseException):
                raise page
            state.evidence += [WebPassage(page, text) for text in self.split(page.text)]

    async def _search(
        self, task: BranchTask, queries: list[str], meter: Meter
    ) -> list[SearchResults]:
        """Every query at once, its fee reserved first and booked under the provider."""
        fees = self.searcher.price_usd * len(queries)
        if fees > 0 and not await meter.reserve(fees):
            raise BudgetExhausted(
                f"{len(queries)} {self.searcher.name} searches (${fees:.3f}) do not fit in "
                f"what the budget has left (${meter.remaining_usd():.3f})"
            )
        try:
            results = await asyncio.gather(
                *(self.searcher.search(q, self.limits.results_per_query) for q in queries),
                return_exceptions=True,
            )
        finally:
            if fees > 0:
                meter.release(fees)
        found = [r for r in results if isinstance(r, SearchResults)]
        model = search_model(self.searcher.name)
        for outcome in found:
            meter.record("search", model, Usage(web_search_calls=1), cached=outcome.cached)
        for error in results:
            if isinstance(error, BaseException) and not isinstance(error, BranchError):
                raise error
        failed = [r for r in results if isinstance(r, BranchError)]
        if not found:
            raise failed[0]
        for error in failed:
            _say(task, f"a search failed: {error}")
        return found

    async def _best(self, question: str, evidence: list[WebPassage]) -> list[WebPassage]:
        """The passages to write from: ranked off the event loop (embedding is CPU work)."""
        ranked = await asyncio.to_thread(self.rank, question, [p.text for p in evidence])
        return [evidence[i] for i, _ in ranked[: self.limits.passages]]

    async def _write(self, task: BranchTask, best: list[WebPassage], meter: Meter) -> BranchResult:
        researched_by = f"search ({self.searcher.name}) + {self.model or 'no model'}"
        if self.writer is None:
            return quote_passages(best, researched_by)
        passages = [Passage(label=f"{p.page.title} — {p.page.url}", text=p.text) for p in best]
        try:
            notes = await self.writer.write(
                task.root_question, task.question, passages, task.dependencies, meter
            )
        except StructuredOutputError as exc:  # a tiny model's: the pages read are not lost
            problem = md.text(md.clip(str(exc), 200))
            note = f"_The branch model's notes could not be read ({problem}): {UNREAD}_"
            return quote_passages(best[:3], researched_by, note)
        shown = [ref for d in task.dependencies for ref in cited_refs(d.notes)]
        text, used = keep_cited(notes.notes, len(best), shown)
        if not used:
            return quote_passages(best[:3], researched_by)
        citations = [
            citation_of(best[index], claim=sentence_of(text, number))
            for number, index in enumerate(used, start=1)
        ]
        return BranchResult(text, tuple(citations), notes.confidence, researched_by)


def citation_of(passage: WebPassage, claim: str = "") -> Citation:
    page = passage.page
    return Citation(
        kind="web",
        url=page.url,
        title=page.title,
        locator=page.url,
        quote=passage.text,
        claim=claim,
        accessed_at=page.fetched_at,
        undated=page.undated,
    )


UNREAD = "the best passages of the pages read, quoted verbatim."
NOTE = f"_{UNREAD.capitalize()}_"


def quote_passages(
    best: Sequence[WebPassage], researched_by: str, note: str = NOTE
) -> BranchResult:
    """Notes that are the best passages themselves, verbatim, each citing its page, under
    ``note`` (why)."""
    # Written as text: a passage that opens with its page's title (``# Raft versus Paxos``),
    # a list or a fence still reads as the one quoted paragraph it is.
    lines = [f"> {md.text(p.text)} [{n}]" for n, p in enumerate(best, 1)]
    return BranchResult(
        "\n\n".join([note, *lines]),
        tuple(citation_of(p) for p in best),
        confidence=0.3,
        researched_by=researched_by,
    )


def _say(task: BranchTask, note: str, status: str = "searching") -> None:
    """A line in the live view: what the branch is searching and reading, what it skipped;
    ``status`` is what its row shows meanwhile."""
    if task.on_event is not None:
        task.on_event(JobEvent(task.node_id, "", "search", status, 0, 0.0, note))
