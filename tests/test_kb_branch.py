"""Internal branches: failures stay on the node, notes without markers quote passages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from deep_research.adapters.branches.kb import FALLBACK_NOTE, KBExecutor, citation_of
from deep_research.adapters.branches.protocols import Passage
from deep_research.adapters.prices import PriceTable
from deep_research.app.wiring import extractive_engine
from deep_research.core.engine import RunConfig
from deep_research.core.errors import BranchError, KnowledgeBaseError, StructuredOutputError
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import BranchNotes, SessionState
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import BranchTask, Finding, Meter
from tests.fakes import RecordingMeter


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    locator: str
    source: str
    heading: str
    text: str
    title: str = ""
    tags: tuple[str, ...] = ()


HITS = [
    Hit("c1", "notes/a.md#Deletes:1-4", "a.md", "Deletes", "Deletes write tombstones [3]."),
    Hit("c2", "notes/b.md#Compaction:1-4", "b.md", "Compaction", "Compaction merges segments."),
    Hit("c3", "notes/c.md#Reads:1-4", "c.md", "Reads", "Reads skip tombstoned rows."),
    Hit("c4", "notes/d.md#Other:1-4", "d.md", "Other", "Unrelated text."),
]


class FixedRetriever:
    async def retrieve(self, query: str, k: int) -> Sequence[Hit]:
        return HITS[:k]


class BrokenRetriever:
    def __init__(self) -> None:
        self.calls = 0

    async def retrieve(self, query: str, k: int) -> Sequence[Hit]:
        self.calls += 1
        raise KnowledgeBaseError("searching failed: Could not connect to a Chroma server")


@dataclass
class ScriptedWriter:
    notes: str
    used: tuple[int, ...] = ()

    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes:
        return BranchNotes(notes=self.notes, confidence=0.8, used_evidence=list(self.used))


def task() -> BranchTask:
    return BranchTask(
        node_id="n1",
        root_question="How are deletes handled?",
        question="How are deletes handled?",
        source_hint="internal",
    )


async def ignore(job_id: str) -> None:
    return None


async def test_notes_citing_passages_keep_only_what_they_cite() -> None:
    executor = KBExecutor(FixedRetriever(), ScriptedWriter("Reads skip them [3]; see [1]."), k=4)
    result = await executor.run(task(), RecordingMeter(), ignore)
    assert result.notes == "Reads skip them [1]; see [2]."
    assert [c.locator for c in result.citations] == [HITS[2].locator, HITS[0].locator]
    assert result.confidence == 0.8


async def test_notes_without_markers_fall_back_to_quoting_the_best_passages() -> None:
    executor = KBExecutor(FixedRetriever(), ScriptedWriter("Deletes are handled lazily."), k=4)
    result = await executor.run(task(), RecordingMeter(), ignore)
    assert result.notes.startswith(FALLBACK_NOTE)
    assert [c.locator for c in result.citations] == [h.locator for h in HITS[:3]]
    assert [c.quote for c in result.citations][1] == "Compaction merges segments."
    assert "> Compaction merges segments. [2]" in result.notes
    # the passage's own bracketed number is literal, not a fourth citation
    assert r"> Deletes write tombstones \[3\]. [1]" in result.notes
    assert result.confidence < 0.5


async def test_the_fallback_quotes_the_passages_the_model_said_it_used() -> None:
    writer = ScriptedWriter("Compaction merges segments.", used=(2, 2, 9))
    result = await KBExecutor(FixedRetriever(), writer, k=4).run(task(), RecordingMeter(), ignore)
    assert [c.locator for c in result.citations] == [HITS[1].locator]
    assert result.notes.startswith(FALLBACK_NOTE)


class UnreadableWriter:
    """A notes writer whose model never wrote notes that parse (a confidence of 8)."""

    async def write(self, *args: object) -> BranchNotes:
        raise StructuredOutputError(
            "smollm2 gave no valid BranchNotes after 3 attempts: 1 problem(s), first "
            "confidence: must be a number from 0 to 1, not 8"
        )


async def test_notes_that_cannot_be_read_fall_back_to_quoting_the_passages() -> None:
    result = await KBExecutor(FixedRetriever(), UnreadableWriter(), k=4).run(
        task(), RecordingMeter(), ignore
    )
    assert result.notes.startswith("_The branch model's notes could not be read (smollm2")
    assert "not 8), so the best passages are quoted verbatim._" in result.notes
    assert [c.locator for c in result.citations] == [h.locator for h in HITS[:3]]
    assert "> Compaction merges segments. [2]" in result.notes


async def test_a_knowledge_base_failure_fails_the_branch() -> None:
    executor = KBExecutor(BrokenRetriever(), ScriptedWriter("unused"), k=4)
    with pytest.raises(BranchError, match="knowledge base: searching failed"):
        await executor.run(task(), RecordingMeter(), ignore)


async def test_a_knowledge_base_failure_mid_run_fails_nodes_not_the_run() -> None:
    state = SessionState(session_id="s1", question="How are deletes handled and why?")
    retriever = BrokenRetriever()
    engine = extractive_engine(KBExecutor(retriever, ScriptedWriter("unused"), k=4))
    guard, config = (
        BudgetGuard(state, state.limits, prices=PriceTable()),
        RunConfig(allowed_sources=("internal",)),
    )

    class Saver:
        async def save(self, state: SessionState) -> None:
            pass

        def save_now(self, state: SessionState) -> None:
            pass

        def save_jobs(self, state: SessionState, node_id: str) -> None:
            pass

    await ResearchOrchestrator(state, engine, Saver(), guard, config).run()

    assert retriever.calls >= 1
    assert state.nodes, "the run planned nodes"
    assert {n.status for n in state.nodes.values()} == {"failed"}
    assert all("Could not connect" in (n.error or "") for n in state.nodes.values())
    assert state.stop_reason is not None, "the run ended on its own terms, with a reason"


def test_citations_carry_the_files_front_matter_title_and_tags() -> None:
    titled = Hit(
        "c9", "notes/e.md#Deletes:1-4", "e.md", "Deletes", "Text.", "Storage notes", ("db",)
    )
    assert (citation_of(titled).title, citation_of(titled).tags) == (
        "Storage notes › Deletes",
        ("db",),
    )
    untitled = Hit("c8", "notes/f.md#Deletes:1-4", "f.md", "Deletes", "Text.")
    assert (citation_of(untitled).title, citation_of(untitled).tags) == ("f.md › Deletes", ())
    same = Hit("c7", "notes/g.md#Guide:1-4", "g.md", "Guide", "Text.", "Guide")
    assert citation_of(same).title == "Guide"  # not "Guide › Guide"
