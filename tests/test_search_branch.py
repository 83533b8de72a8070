"""The search-and-read branch, with scripted search results and pages (no network)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from deep_research.adapters.branches.protocols import Page, Passage, SearchHit, SearchResults
from deep_research.adapters.branches.search_read import SearchLimits, SearchReadExecutor
from deep_research.core.citations import identity
from deep_research.core.errors import BranchError, BudgetExhausted, StructuredOutputError
from deep_research.core.models import BranchNotes
from deep_research.core.ports import BranchTask, Finding, JobEvent, Meter
from deep_research.kb.onnx_embeddings import OnnxEmbeddings
from deep_research.kb.rank import rank
from tests.fakes import RecordingMeter

READ_AT = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)
RAFT = "https://raft.example/paper"
PAXOS = "https://paxos.example/made-simple"
ADS = "https://ads.example/"
PAGES = {
    RAFT: Page(
        RAFT,
        "In Search of an Understandable Consensus Algorithm",
        "Raft elects a leader with randomized election timeouts.\n\n"
        "A candidate becomes leader once a majority of servers vote for it.\n\n"
        "Cookie settings: accept all cookies.",
        READ_AT,
    ),
    PAXOS: Page(
        PAXOS,
        "Paxos Made Simple",
        "Basic Paxos has no distinguished leader; Multi-Paxos elects a stable leader.",
        READ_AT,
    ),
}
EMBEDDER = OnnxEmbeddings()


class PageSkipped(BranchError):
    pass


@dataclass
class FakeSearcher:
    results: dict[str, list[str]]
    cached: bool = False
    fail: str = ""
    queries: list[str] = field(default_factory=list)
    name: str = "searxng"
    price_usd: float = 0.0
    fail_queries: tuple[str, ...] = ()

    async def search(self, query: str, max_results: int) -> SearchResults:
        self.queries.append(query)
        if self.fail or query in self.fail_queries:
            raise BranchError(self.fail or f"searxng: HTTP 502 for {query!r}")
        urls = self.results[query][:max_results]
        return SearchResults([SearchHit(u, f"title of {u}") for u in urls], cached=self.cached)


@dataclass
class FakeReader:
    read_urls: list[str] = field(default_factory=list)

    async def read(self, url: str) -> Page:
        self.read_urls.append(url)
        if url not in PAGES:
            raise PageSkipped(f"refused address: {url}")
        return PAGES[url]


@dataclass
class ScriptedQueries:
    rounds: list[list[str]]
    tried_seen: list[list[str]] = field(default_factory=list)

    async def queries(
        self,
        root_question: str,
        question: str,
        dependencies: Sequence[Finding],
        tried: Sequence[str],
        max_queries: int,
        meter: Meter,
    ) -> list[str]:
        self.tried_seen.append(list(tried))
        return self.rounds.pop(0)


@dataclass
class ScriptedWriter:
    replies: list[BranchNotes]
    seen: list[list[str]] = field(default_factory=list)

    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes:
        self.seen.append([p.text for p in passages])
        return self.replies.pop(0)


def executor(searcher: FakeSearcher, reader: FakeReader, **kw: object) -> SearchReadExecutor:
    options: dict[str, object] = {
        "rank": lambda q, ps: rank(q, ps, EMBEDDER),
        "split": lambda text: [p.strip() for p in text.split("\n\n") if p.strip()],
        "writer": None,
        "query_writer": None,
    } | kw
    return SearchReadExecutor(searcher, reader, **options)  # type: ignore[arg-type]


def task(events: list[JobEvent] | None = None) -> BranchTask:
    return BranchTask(
        node_id="w1",
        question="How does Raft elect a leader?",
        root_question="How do Raft and Paxos differ in leader election?",
        source_hint="web",
        on_event=events.append if events is not None else None,
    )


async def nothing(name: str, response_id: str | None) -> None:
    raise AssertionError("a search branch starts no remote job")


async def test_with_no_model_the_best_passages_are_quoted_verbatim() -> None:
    searcher = FakeSearcher({"How does Raft elect a leader?": [RAFT, PAXOS]})
    meter = RecordingMeter()
    result = await executor(searcher, FakeReader()).run(task(), meter, nothing)

    assert searcher.queries == ["How does Raft elect a leader?"], "the question is the query"
    assert result.citations, "cited"
    for citation in result.citations:
        assert citation.quote in PAGES[citation.url or ""].text, "the quote is verbatim"
        assert citation.accessed_at == READ_AT
        assert citation.title == PAGES[citation.url or ""].title
    assert result.citations[0].quote.startswith("Raft elects a leader")
    assert result.researched_by == "search (searxng) + no model"
    assert [(r[0], r[1], r[2].web_search_calls, r[3]) for r in meter.records] == [
        ("search", "search:searxng", 1, False)
    ]


async def test_notes_cite_passages_with_their_claims_and_verbatim_quotes() -> None:
    searcher = FakeSearcher({"raft leader election": [RAFT], "paxos leader": [PAXOS]})
    writer = ScriptedWriter(
        [
            BranchNotes(
                notes="Raft uses randomized timeouts [2]. A majority elects the leader [3].",
                confidence=0.8,
                used_evidence=[2, 3],
            )
        ]
    )
    queries = ScriptedQueries([["raft leader election", "paxos leader"]])
    ex = executor(searcher, FakeReader(), writer=writer, query_writer=queries, model="qwen3:8b")
    result = await ex.run(task(), RecordingMeter(), nothing)

    passages = writer.seen[0]
    assert result.notes == "Raft uses randomized timeouts [1]. A majority elects the leader [2]."
    first, second = result.citations
    assert first.quote == passages[1]
    assert second.quote == passages[2]
    assert first.claim == "Raft uses randomized timeouts."
    assert second.claim == "A majority elects the leader."
    assert identity(first) != identity(second)
    assert result.researched_by == "search (searxng) + qwen3:8b"


async def test_two_passages_of_one_page_are_two_citations() -> None:
    searcher = FakeSearcher({"q": [RAFT]})
    writer = ScriptedWriter(
        [BranchNotes(notes="Timeouts [1]. Majority [2].", confidence=0.9, used_evidence=[1, 2])]
    )
    queries = ScriptedQueries([["q"]])
    ex = executor(searcher, FakeReader(), writer=writer, query_writer=queries)
    result = await ex.run(task(), RecordingMeter(), nothing)
    first, second = result.citations
    assert first.url == second.url == RAFT
    assert identity(first) != identity(second)


async def test_thin_evidence_searches_once_more_with_new_queries() -> None:
    searcher = FakeSearcher({"raft": [RAFT], "paxos leader": [PAXOS]})
    thin = BranchNotes(notes="Little found [1].", confidence=0.2, used_evidence=[1])
    good = BranchNotes(notes="Paxos differs [1]. Raft too [2].", confidence=0.7, used_evidence=[])
    writer = ScriptedWriter([thin, good])
    queries = ScriptedQueries([["raft"], ["raft", "paxos leader"]])
    events: list[JobEvent] = []
    ex = executor(searcher, FakeReader(), writer=writer, query_writer=queries)
    result = await ex.run(task(events), RecordingMeter(), nothing)

    assert queries.tried_seen == [[], ["raft"]], "the second round knows what was tried"
    assert searcher.queries == ["raft", "paxos leader"], "a query is never searched twice"
    assert result.confidence == 0.7
    assert any("evidence thin" in e.note for e in events)
    assert len(writer.seen[1]) > len(writer.seen[0]), "the second round adds the new pages"


async def test_rounds_are_bounded() -> None:
    searcher = FakeSearcher({"a": [RAFT], "b": [PAXOS]})
    thin = BranchNotes(notes="Thin [1].", confidence=0.1, used_evidence=[1])
    writer = ScriptedWriter([thin, thin])
    queries = ScriptedQueries([["a"], ["b"]])
    ex = executor(
        searcher, FakeReader(), writer=writer, query_writer=queries, limits=SearchLimits()
    )
    result = await ex.run(task(), RecordingMeter(), nothing)
    assert result.confidence == 0.1, "after the extra round the thin notes are the answer"
    assert writer.replies == []
    assert queries.rounds == []


async def test_unreadable_pages_are_skipped_and_said() -> None:
    searcher = FakeSearcher({"How does Raft elect a leader?": [ADS, RAFT]})
    events: list[JobEvent] = []
    reader = FakeReader()
    result = await executor(searcher, reader).run(task(events), RecordingMeter(), nothing)
    assert reader.read_urls == [ADS, RAFT]
    assert any(f"skipped {ADS}: refused address" in e.note for e in events)
    assert {c.url for c in result.citations} == {RAFT}


async def test_no_readable_page_fails_the_branch_with_the_queries_tried() -> None:
    searcher = FakeSearcher({"How does Raft elect a leader?": [ADS]})
    with pytest.raises(BranchError, match="no readable page found for: How does Raft"):
        await executor(searcher, FakeReader()).run(task(), RecordingMeter(), nothing)


async def test_a_failing_provider_fails_the_branch_with_its_reason() -> None:
    searcher = FakeSearcher({}, fail="tavily: the API key was refused (HTTP 401)")
    with pytest.raises(BranchError, match="HTTP 401"):
        await executor(searcher, FakeReader()).run(task(), RecordingMeter(), nothing)


async def test_a_cached_search_is_recorded_as_free() -> None:
    searcher = FakeSearcher({"How does Raft elect a leader?": [RAFT]}, cached=True)
    meter = RecordingMeter()
    await executor(searcher, FakeReader()).run(task(), meter, nothing)
    assert [r[3] for r in meter.records] == [True]


async def test_searches_are_booked_under_their_provider_and_their_fee_reserved_first() -> None:
    searcher = FakeSearcher(
        {"raft election": [RAFT], "paxos leader": [PAXOS]}, name="tavily", price_usd=0.008
    )
    meter = RecordingMeter()
    queries = ScriptedQueries([["raft election", "paxos leader"]])
    await executor(searcher, FakeReader(), query_writer=queries).run(task(), meter, nothing)
    assert [(r[0], r[1], r[2].web_search_calls) for r in meter.records] == [
        ("search", "search:tavily", 1),
        ("search", "search:tavily", 1),
    ]
    assert meter.reserved == pytest.approx(0.0)  # released once booked


async def test_searches_the_budget_cannot_pay_for_are_not_made() -> None:
    searcher = FakeSearcher({"How does Raft elect a leader?": [RAFT]}, price_usd=0.008)
    meter = RecordingMeter(budget=0.005)
    with pytest.raises(BudgetExhausted, match="searches"):
        await executor(searcher, FakeReader()).run(task(), meter, nothing)
    assert searcher.queries == []


async def test_one_failed_query_of_several_is_said_and_the_others_are_used() -> None:
    searcher = FakeSearcher({"raft election": [RAFT]}, fail_queries=("paxos leader",))
    events: list[JobEvent] = []
    queries = ScriptedQueries([["raft election", "paxos leader"]])
    result = await executor(searcher, FakeReader(), query_writer=queries).run(
        task(events), RecordingMeter(), nothing
    )
    assert {c.url for c in result.citations} == {RAFT}
    assert any("a search failed: searxng: HTTP 502" in e.note for e in events)


async def test_a_failed_extra_round_keeps_the_notes_of_the_first() -> None:
    thin = BranchNotes(notes="Raft uses timeouts [1].", confidence=0.2, used_evidence=[1])
    searcher = FakeSearcher({"raft election": [RAFT]}, fail_queries=("raft timeouts",))
    writer = ScriptedWriter([thin])
    queries = ScriptedQueries([["raft election"], ["raft timeouts"]])
    result = await executor(searcher, FakeReader(), writer=writer, query_writer=queries).run(
        task(), RecordingMeter(), nothing
    )
    assert result.notes == "Raft uses timeouts [1]."
    assert writer.replies == []  # written once, not again after the failed round


@dataclass
class UnreadableWriter:
    """A tiny model's notes writer: every reply fails its schema after the repairs."""

    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes:
        raise StructuredOutputError("qwen3:0.6b gave no valid BranchNotes: confidence 8")


async def test_notes_the_model_cannot_write_leave_the_pages_read_quoted() -> None:
    searcher = FakeSearcher({"How does Raft elect a leader?": [RAFT, PAXOS]})
    ex = executor(searcher, FakeReader(), writer=UnreadableWriter(), model="qwen3:0.6b")
    result = await ex.run(task(), RecordingMeter(), nothing)

    assert result.notes.startswith("_The branch model's notes could not be read (")
    assert "confidence 8): the best passages of the pages read, quoted verbatim._" in result.notes
    assert result.citations, "what was read is kept, each passage citing its page"
    for citation in result.citations:
        assert citation.quote in PAGES[citation.url or ""].text
