"""The extractive (no-model) engine: facets, quoting without fabrication, a full offline run."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deep_research.adapters.branches.kb import KBExecutor
from deep_research.adapters.branches.protocols import Passage
from deep_research.adapters.extractive.roles import (
    NO_RELEVANT_PASSAGE,
    RELEVANCE_FLOOR,
    ExtractiveAuthor,
    ExtractiveJudge,
    ExtractivePlanner,
    ExtractiveSummarizer,
    ExtractiveWriter,
)
from deep_research.adapters.extractive.text import facets, quotable_units
from deep_research.adapters.prices import PriceTable
from deep_research.app.wiring import extractive_engine
from deep_research.core.authoring import LeadRequest, SectionRequest
from deep_research.core.engine import RunConfig
from deep_research.core.errors import BranchError
from deep_research.core.guard import BudgetGuard
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import Role, SectionPlan, SessionState, Usage
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import JudgeRequest, NodeDigest, PlanRequest
from deep_research.core.report import assemble

EXAMPLE = (
    "How does deep-research plan, schedule and budget a research run, "
    "and how does it keep every claim traceable to a source?"
)


class NoUsage:
    """A meter that fails the test if anything records usage: there is no model here."""

    def record(
        self,
        role: Role,
        model: str,
        usage: Usage,
        *,
        cached: bool = False,
        usage_unknown: bool = False,
    ) -> None:
        raise AssertionError(f"extractive {role} recorded usage")

    def remaining_usd(self) -> float:
        return 0.0

    def remaining_tokens(self) -> int:
        return 0

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        return False

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        raise AssertionError("nothing was reserved")


def flat(text: str) -> str:
    """Whitespace- and markup-insensitive text, so a quote can be found in its source."""
    return " ".join(re.sub(r"[|#>*`—]", " ", text).split())


def occurs_whole(quote: str, source: str) -> bool:
    """``quote`` appears in ``source`` and starts and ends on word boundaries."""
    return re.search(rf"(?<!\w){re.escape(flat(quote))}(?!\w)", flat(source)) is not None


def request(question: str, max_tasks: int = 8, gaps: object = None) -> PlanRequest:
    return PlanRequest(question, "", (), gaps, max_tasks, 3, ("internal",))  # type: ignore[arg-type]


# --- planner --------------------------------------------------------------------------------


def test_facets_of_the_example_question_are_self_contained() -> None:
    assert facets(EXAMPLE, 8) == [
        EXAMPLE.rstrip("?"),
        "How does deep-research plan a research run",
        "How does deep-research schedule a research run",
        "How does deep-research budget a research run",
        "How does deep-research keep every claim traceable to a source",
    ]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What is BM25?", ["What is BM25"]),
        (
            "Compare Chroma, pgvector and Qdrant for a 10M-chunk KB",
            [
                "Compare Chroma, pgvector and Qdrant for a 10M-chunk KB",
                "Chroma for a 10M-chunk KB",
                "pgvector for a 10M-chunk KB",
                "Qdrant for a 10M-chunk KB",
            ],
        ),
        (
            "What is the research tree? How is it validated?",
            [
                "What is the research tree? How is it validated",
                "What is the research tree",
                "How is the research tree validated",
            ],
        ),
        (
            "What is the difference between Chroma and pgvector?",
            ["What is the difference between Chroma and pgvector"],
        ),
        ("???", []),
        ("and the of it?", []),
    ],
)
def test_facets(question: str, expected: list[str]) -> None:
    assert facets(question, 8) == expected


async def test_plan_is_independent_internal_tasks_capped_at_max_tasks() -> None:
    question = ", ".join(f"how does component{i} handle case{i}" for i in range(20)) + "?"
    plan = await ExtractivePlanner().plan(request(question, max_tasks=5), NoUsage())
    assert [t.id for t in plan.tasks] == ["f1", "f2", "f3", "f4", "f5"]
    assert plan.tasks[0].question == question.rstrip("?")
    assert plan.tasks[1].question == "How does component0 handle case0"
    for task in plan.tasks:
        assert (task.source_hint, task.depends_on, task.parent_id) == ("internal", [], None)
        assert task.parallelizable
    priorities = [t.priority for t in plan.tasks]
    assert priorities == sorted(priorities, reverse=True)


async def test_replan_and_junk_give_empty_plans() -> None:
    planner = ExtractivePlanner()
    assert (await planner.plan(request("???"), NoUsage())).tasks == []
    replan = await planner.plan(request(EXAMPLE, gaps=object()), NoUsage())
    assert replan.tasks == []


# --- writer ---------------------------------------------------------------------------------

PASSAGES = [
    Passage(
        "planning.md › Planning",
        "## Planning\n\nThe planner splits a research question into sub-questions. "
        "Each sub-question becomes a node of the research tree.\n\n"
        "```python\nplan = planner.plan(question)  # the planner splits everything\n```\n\n"
        "| Field | Meaning |\n|---|---|\n"
        "| `priority` | Higher runs first among ready planner tasks |",
    ),
    Passage(
        "budget.md › Budgets",
        "# Budgets\n\n- The budget guard stops a research run before the cost limit is reached.\n"
        "- Every model call is priced when its usage is recorded.\n\n"
        "A very long sentence about budgets "
        + " ".join(f"word{i}" for i in range(80))
        + " that ends here.",
    ),
    Passage("cooking.md › Soup", "Onions should be cooked slowly in butter until golden."),
]


async def test_writer_quotes_verbatim_with_valid_markers() -> None:
    notes = await ExtractiveWriter().write(
        EXAMPLE, "How does deep-research plan and budget a research run", PASSAGES, [], NoUsage()
    )
    lines = notes.notes.splitlines()
    assert lines
    cited: set[int] = set()
    for line in lines:
        match = re.fullmatch(r"- (.+) \[(\d+)\]", line)
        assert match, line
        quote, number = match.group(1).removesuffix(" …"), int(match.group(2))
        assert 1 <= number <= len(PASSAGES)
        assert occurs_whole(quote, PASSAGES[number - 1].text), line
        cited.add(number)
    assert notes.used_evidence == sorted(cited)
    assert 3 not in cited  # the soup passage shares no term with the question
    assert "plan = planner.plan" not in notes.notes  # code is not quoted as prose
    assert "#" not in notes.notes
    assert "|" not in notes.notes
    assert len(notes.notes.split()) < 250
    assert 0.1 <= notes.confidence <= 0.9


async def test_writer_clips_long_sentences_between_words() -> None:
    notes = await ExtractiveWriter().write("q", "budgets word7 word70", PASSAGES, [], NoUsage())
    line = next(ln for ln in notes.notes.splitlines() if "word7" in ln)
    quote = line.removeprefix("- ").removesuffix(" [2]")
    assert quote.endswith(" …")
    assert "word70" not in quote  # cut at 60 words
    assert occurs_whole(quote.removesuffix(" …"), PASSAGES[1].text)


async def test_writer_without_relevant_evidence_fails_the_branch_saying_so() -> None:
    with pytest.raises(BranchError) as failed:
        await ExtractiveWriter().write(
            "Which GPU?", "Which GPU should we buy", PASSAGES, [], NoUsage()
        )
    assert str(failed.value) == NO_RELEVANT_PASSAGE
    assert f"relevance floor {RELEVANCE_FLOOR:.2f}" in NO_RELEVANT_PASSAGE


# --- summarizer, synthesizer, judge -------------------------------------------------------


def digest(i: int, words: int = 30) -> NodeDigest:
    lines = [
        f"- Fact {i}.{j} about planning " + " ".join(["detail"] * words) + f". [S{i}][S{j + 10}]"
        for j in range(3)
    ]
    lines.append("- A shared sentence every branch quotes. [S99]")
    return NodeDigest(f"f{i}", f"Question {i}?", "\n".join(lines))


async def test_summarizer_dedupes_keeps_markers_and_stays_within_cap() -> None:
    summarizer = ExtractiveSummarizer()
    summary = await summarizer.merge("q", "", [digest(1, 5), digest(2, 5)], 2000, NoUsage())
    assert "### Question 1?" in summary
    assert "### Question 2?" in summary
    assert summary.count("A shared sentence") == 1
    assert "- Fact 2.1 about planning detail detail detail detail detail. [S2][S11]" in summary
    for _ in range(5):
        summary = await summarizer.merge("q", summary, [digest(3), digest(4)], 300, NoUsage())
        assert estimate_tokens(summary) <= 300
        assert all(re.fullmatch(r"\[S\d+\]", m) for m in re.findall(r"\[S[^\]]*\]?", summary))
    assert "### Question 1?" in summary  # trimming keeps every section's head


async def test_summarizer_drops_untraceable_lines_and_clips_between_words() -> None:
    long_line = "- " + " ".join(f"w{i}" for i in range(400)) + ". [S7][S8]"
    notes = f"{long_line}\n- a line whose marker a cap cut off …"
    summarizer = ExtractiveSummarizer()
    summary = await summarizer.merge("q", "", [NodeDigest("f1", "Q?", notes)], 60, NoUsage())
    assert estimate_tokens(summary) <= 60
    assert "cut off" not in summary
    line = summary.splitlines()[1]
    assert line.endswith(" … [S7][S8]")
    assert occurs_whole(line.removesuffix(" … [S7][S8]"), long_line)
    empty = await summarizer.merge("q", "", [NodeDigest("f2", "Q2?", "no cites")], 60, NoUsage())
    verdict = await ExtractiveJudge().judge(JudgeRequest("q", empty, "", ""), NoUsage())
    assert verdict.missing_aspects == ["Q2?"]


SUMMARY = (
    "### How does planning work?\n- The planner splits a question into sub-questions. [S1]\n"
    "- Nodes run in parallel. [S2]\n\n"
    "### What does a run cost?\n- The budget guard stops a run at the cost limit. [S3][S1]\n\n"
    "### What about soup?\n_Answered by the passages quoted above._\n\n"
    "### Which GPU?\nNothing found."
)


LINES = (
    "The planner splits a question into sub-questions. [S1]",
    "Nodes run in parallel. [S2]",
    "The budget guard stops a run at the cost limit. [S3][S1]",
    "Nodes run in parallel. [S2]",
    "A line without a marker is nobody's quote.",
)


async def test_the_author_quotes_cited_lines_once_best_first_and_deterministically() -> None:
    section = SectionPlan(
        id="s1", title="Planning", question="How does planning split a question?", node_ids=["f1"]
    )
    request = SectionRequest("How does planning work?", section, (), LINES, (), max_words=12)
    first = await ExtractiveAuthor().section(request, NoUsage())
    assert first == await ExtractiveAuthor().section(request, NoUsage())
    lines = first.splitlines()
    assert lines[0] == "- The planner splits a question into sub-questions. [S1]", "best first"
    assert len(lines) == 1, "within its words (the best line always)"
    wide = await ExtractiveAuthor().section(
        SectionRequest("q", section, (), LINES, (), max_words=500), NoUsage()
    )
    assert wide.splitlines() == [f"- {line}" for line in LINES[:3]], "in order, each once"

    lead = await ExtractiveAuthor().lead(
        LeadRequest("How does planning split a question?", (("Planning", LINES),), (), 500),
        NoUsage(),
    )
    assert "xtractive" in lead
    assert "- The planner splits a question into sub-questions. [S1]" in lead
    assert set(re.findall(r"\[S\d+\]", lead)) <= {"[S1]", "[S2]", "[S3]"}


async def test_judge_reports_unanswered_facets() -> None:
    overview = "done: 3, failed: 1\n- f4 [failed, internal] What is the SLA?\n- f1 [done, web] x"
    verdict = await ExtractiveJudge().judge(JudgeRequest("q", SUMMARY, "", overview), NoUsage())
    assert not verdict.is_complete, "a facet answered by nothing: the research is not complete"
    assert not verdict.recommend_more_iterations
    assert verdict.missing_aspects == ["Which GPU?", "What is the SLA?"]
    assert 0.0 < verdict.overall_confidence < 1.0
    answered = SUMMARY.split("### Which GPU?")[0]
    done = "done: 3\n- f1 [done, internal] x"
    verdict = await ExtractiveJudge().judge(JudgeRequest("q", answered, "", done), NoUsage())
    assert verdict.is_complete
    assert verdict.missing_aspects == []


# --- a whole run, in process --------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    locator: str
    source: str
    heading: str
    text: str
    title: str = ""
    tags: tuple[str, ...] = ()


class FixedRetriever:
    def __init__(self, hits: Sequence[Hit]) -> None:
        self.hits, self.queries = list(hits), list[str]()

    async def retrieve(self, query: str, k: int) -> Sequence[Hit]:
        self.queries.append(query)
        return self.hits[:k]


class MemorySaver:
    def __init__(self) -> None:
        self.saves = 0

    async def save(self, state: SessionState) -> None:
        self.saves += 1

    def save_now(self, state: SessionState) -> None:
        self.saves += 1

    def save_jobs(self, state: SessionState, node_id: str) -> None:
        self.saves += 1


HITS = [
    Hit(f"c{i}", f"{name}#{heading}:{i}-{i + 5}", name, heading, text)
    for i, (name, heading, text) in enumerate(
        [
            ("planning.md", "Planning", PASSAGES[0].text),
            ("budget.md", "Budgets", PASSAGES[1].text),
            (
                "citations.md",
                "Traceability",
                "Every claim in the report carries a marker "
                "that points to a numbered source, so each claim is traceable to a passage.",
            ),
            (
                "scheduling.md",
                "Scheduling",
                "The scheduler starts a node as soon as its "
                "dependencies are done, and runs independent nodes in parallel.",
            ),
        ]
    )
]


async def test_an_extractive_run_writes_a_report_whose_citations_resolve() -> None:
    state = SessionState(session_id="s1", question=EXAMPLE, mode="extractive")
    retriever = FixedRetriever(HITS)
    engine = extractive_engine(KBExecutor(retriever, ExtractiveWriter(), k=4))
    saver = MemorySaver()
    guard, config = (
        BudgetGuard(state, state.limits, prices=PriceTable()),
        RunConfig(allowed_sources=("internal",)),
    )
    orch = ResearchOrchestrator(state, engine, saver, guard, config)
    await orch.run()

    assert (state.status, state.stop_reason, state.iteration) == ("complete", "complete", 1)
    # The first facet, the question itself, is no section of its own: the answer is.
    assert [n.status for n in state.nodes.values()] == ["done"] * 4
    assert retriever.queries[:1] == ["How does deep-research plan a research run"]
    assert [i.task_id for i in state.iterations[0].plan_issues] == ["f1"]
    assert state.ledger == []
    assert saver.saves > 0
    assert orch.report is not None
    assert state.writing is not None
    assert state.writing.outlined_by == "grouping"
    assert [s.status for s in state.writing.sections] == ["written"] * len(state.writing.sections)
    assert orch.report.lead.startswith("_Extractive answer")

    report = assemble(state).markdown
    assert report == orch.report.markdown
    assert "## Answer" in report
    body, rest = report.split("## Sources", 1)
    sources = dict(re.findall(r"^(\d+)\. `([^`]+)`", rest, re.M))
    by_locator = {h.locator: h for h in HITS}
    assert sources
    assert set(sources.values()) <= set(by_locator)
    quoted = re.findall(r"^- (.+?) \[(\d+)\]$", body, re.M)
    assert quoted
    for quote, number in quoted:
        hit = by_locator[sources[number]]
        assert occurs_whole(quote.removesuffix(" …"), hit.text), quote
    assert "traceable to a passage" in body  # the traceability facet found its passage


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=8)
_sentence = st.lists(_word, min_size=4, max_size=9).map(lambda w: " ".join(w).capitalize() + ".")
_block = st.one_of(
    st.lists(_sentence, min_size=1, max_size=3).map(" ".join),
    st.lists(_sentence, min_size=1, max_size=3).map(lambda s: "\n".join(f"- {x}" for x in s)),
    _sentence.map(lambda s: f"## {s}"),
    st.lists(_sentence, min_size=1, max_size=3).map(lambda s: "```\n" + "\n".join(s) + "\n```"),
    _sentence.map(lambda s: f"> {s}"),
)


@given(blocks=st.lists(_block, min_size=1, max_size=6), cut=st.integers(0, 30))
def test_a_quoted_unit_is_one_run_of_the_passage_even_cut_inside_code(
    blocks: list[str], cut: int
) -> None:
    """A passage of a code-heavy page, possibly cut mid-fence as a chunk is: every unit quoted
    from it is contiguous passage text, never code and prose joined."""
    lines = "\n\n".join(blocks).split("\n")
    passage = "\n".join(lines[cut % len(lines) :])
    flat = " ".join(passage.split())
    for unit in quotable_units(passage):
        assert unit.removesuffix(" …") in flat, unit
