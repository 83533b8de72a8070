"""Model verdicts are data to check: a confidence outside 0-1 is refused (asked again once,
then no verdict), "complete" ends the research only from a confident judge, the judge's gaps
reach the report, and a plan's sub-questions must be questions."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_openai import ChatOpenAI
from pydantic import ValidationError

from deep_research.adapters.llm.judge import LLMJudge
from deep_research.core.errors import StructuredOutputError
from deep_research.core.models import (
    COMPLETE_CONFIDENCE,
    BranchNotes,
    Verdict,
)
from deep_research.core.ports import JudgeRequest
from deep_research.core.tree import PlanPolicy, ResearchTree
from deep_research.core.words import question_words
from tests.fake_openai import FakeOpenAI
from tests.fakes import (
    FakeExecutor,
    FakeJudge,
    FakePlanner,
    RecordingMeter,
    Rig,
    new_state,
    plan,
    task,
)
from tests.test_chat_model import model

QUESTION = "How do Raft and Paxos differ in leader election?"


def judged(
    complete: bool,
    confidence: float,
    missing: tuple[str, ...] = (),
    weak: tuple[str, ...] = (),
) -> Verdict:
    return Verdict(
        is_complete=complete,
        recommend_more_iterations=not complete,
        missing_aspects=list(missing),
        weak_evidence_areas=list(weak),
        overall_confidence=confidence,
    )


def limitations(markdown: str) -> str:
    """The report's "Coverage and limitations" section."""
    section = markdown.split("## Coverage and limitations", 1)[1]
    return section.split("\n## ", 1)[0]


# --- a confidence outside 0-1 is refused, never clamped ---------------------------------


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_a_confidence_is_kept_only_inside_0_to_1(value: float) -> None:
    fields = {
        "is_complete": True,
        "recommend_more_iterations": False,
        "missing_aspects": [],
        "weak_evidence_areas": [],
    }
    inside = 0.0 <= value <= 1.0
    for schema, number, rest in (
        (Verdict, "overall_confidence", fields),
        (BranchNotes, "confidence", {"notes": "Raft elects [1].", "used_evidence": [1]}),
    ):
        if inside:
            assert getattr(schema.model_validate({**rest, number: value}), number) == value
        else:
            with pytest.raises(ValidationError, match="from 0 to 1"):
                schema.model_validate({**rest, number: value})


def test_the_strict_schema_states_the_bounds_of_a_confidence() -> None:
    """OpenAI's strict structured outputs take minimum/maximum on numbers: a server that
    enforces the schema never lets the model write 8 (the check after parsing stays, for
    those that do not)."""
    from deep_research.adapters.llm.llm import strict_format

    for schema, number in ((Verdict, "overall_confidence"), (BranchNotes, "confidence")):
        sent = strict_format(schema)
        assert '"strict": true' in json.dumps(sent)
        fields = json.loads(json.dumps(sent))["json_schema"]["schema"]["properties"]
        assert (fields[number]["minimum"], fields[number]["maximum"]) == (0, 1)


BAD = {
    "is_complete": True,
    "recommend_more_iterations": False,
    "missing_aspects": [],
    "weak_evidence_areas": [],
    "overall_confidence": 1.6e10,
}


async def test_an_out_of_range_verdict_is_asked_again_once_then_fails(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script("Verdict", [BAD, {**BAD, "overall_confidence": 42}])
    # However many repairs the model is allowed elsewhere, a verdict gets one.
    judge = LLMJudge(replace(model(chat_openai), structured_retries=2))
    with pytest.raises(StructuredOutputError, match="overall_confidence"):
        await judge.judge(JudgeRequest("q?", "s", "o", "v"), RecordingMeter())
    first, second = (r.body["messages"] for r in fake_openai.requests)
    assert "from 0 to 1, not 1.6e+10" in second[-1]["content"], "the repair says what was wrong"
    assert second[-2]["role"] == "assistant", "the wrong reply is shown back with it"
    assert second[:-2] == first


async def test_a_verdict_repaired_on_the_second_ask_is_taken_as_given(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script("Verdict", [BAD, {**BAD, "overall_confidence": 0.35}])
    verdict = await LLMJudge(replace(model(chat_openai), structured_retries=2)).judge(
        JudgeRequest("q?", "s", "o", "v"), RecordingMeter()
    )
    assert verdict.overall_confidence == 0.35
    assert fake_openai.count("/v1/chat/completions") == 2


async def test_a_refused_verdict_is_no_verdict_and_the_run_goes_on() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a")), plan(task("b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge(
            [
                StructuredOutputError("gpt-x gave no valid Verdict: overall_confidence"),
                judged(True, 0.9),
            ]
        ),
    )
    state = new_state(QUESTION, max_iterations=3)
    seen: list[str] = []
    orch = rig.orchestrator(state)
    orch._on_event = seen.append
    await orch.run()
    assert state.stop_reason == "complete"
    assert rig.executor.ran() == ["a", "b"], "the run replanned after the refused verdict"
    replan = rig.planner.requests[1]
    assert replan.gaps is None
    assert {n.id for n in replan.catalog} == {"a"}
    first = state.iterations[0]
    assert first.verdict is None
    assert "overall_confidence" in first.verdict_refused
    assert any("verdict was refused" in e for e in seen)
    assert any(e == "replanning (the judge gave no verdict)" for e in seen)


async def test_a_refused_last_verdict_is_said_in_the_report() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([StructuredOutputError("no valid Verdict: confidence *9e9*")]),
    )
    state = new_state(QUESTION, max_iterations=1)
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "max_iterations"
    assert orch.report is not None
    markdown = orch.report.markdown
    assert "- **No verdict:** the judge's reply in iteration 1 was refused" in limitations(markdown)
    assert "confidence \\*9e9\\*" in markdown, "the refusal's text is escaped"
    assert "no judge verdict (refused)" in markdown.splitlines()[2]
    assert "judge confidence" not in markdown


# --- "complete" from an unconfident judge does not end the run ---------------------------


async def test_complete_below_the_floor_goes_on_researching() -> None:
    low = COMPLETE_CONFIDENCE - 0.3
    rig = Rig(
        planner=FakePlanner([plan(task("a")), plan(task("b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, low), judged(True, COMPLETE_CONFIDENCE)]),
    )
    state = new_state(QUESTION, max_iterations=3)
    seen: list[str] = []
    orch = rig.orchestrator(state)
    orch._on_event = seen.append
    await orch.run()
    assert rig.executor.ran() == ["a", "b"]
    assert (state.stop_reason, state.status) == ("complete", "complete")
    assert state.stop_detail == f"judge confidence {COMPLETE_CONFIDENCE:.2f}"
    assert rig.planner.requests[1].gaps == judged(True, low), "the replan reads the verdict"
    assert any("not taken as complete" in e for e in seen)


async def test_complete_below_the_floor_stops_for_the_iteration_limit_not_complete() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a")), plan(task("b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, 0.12), judged(True, 0.26)]),
    )
    state = new_state(QUESTION, max_iterations=2)
    orch = rig.orchestrator(state)
    await orch.run()
    assert (state.stop_reason, state.status) == ("max_iterations", "stopped")
    assert orch.report is not None
    section = limitations(orch.report.markdown)
    assert "- The run stopped: the iteration limit was reached" in section
    assert "complete at confidence 0.26, below the 0.50 needed to end it" in section
    assert "judge confidence 0.26" in orch.report.markdown.splitlines()[2]


async def test_complete_below_the_floor_stops_for_the_token_budget_not_complete() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a")), plan(task("b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, 0.2)]),
    )
    # a's branch is 1,200 tokens of 1,500: the replan fits, b does not.
    state = new_state(QUESTION, max_iterations=3, max_total_tokens=1500)
    await rig.orchestrator(state).run()
    assert rig.executor.ran() == ["a"]
    assert (state.stop_reason, state.status) == ("token_limit", "stopped")


async def test_the_extractive_judge_measures_coverage_and_is_not_held_to_the_floor() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, 0.1)]),
    )
    state = new_state(QUESTION, max_iterations=3)
    state.mode = "extractive"
    await rig.orchestrator(state).run()
    assert (state.stop_reason, state.stop_detail) == ("complete", "passage coverage 0.10")


# --- the judge's gaps reach the report -----------------------------------------------------


async def test_the_judges_gaps_reach_the_limitations_escaped_even_when_complete() -> None:
    gaps = judged(
        True,
        0.8,
        missing=("# Cost at *10M* chunks", "", "# Cost at *10M* chunks"),
        weak=("Latency rests on [one](http://x.example) blog",),
    )
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([gaps]),
    )
    state = new_state(QUESTION)
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "complete"
    assert orch.report is not None
    section = limitations(orch.report.markdown)
    missing = [line for line in section.splitlines() if line.startswith("- **Missing:**")]
    assert missing == ["- **Missing:** \\# Cost at \\*10M\\* chunks"], "once, escaped, no blank"
    assert "- **Weak evidence:** Latency rests on \\[one\\](http://x.example) blog" in section


# --- a plan's sub-questions must be questions ----------------------------------------------

JUNK = ("[4]", "10/23", "—", "[S1] [S2]", "(3)", "...", "2024", "【1】")


async def test_junk_sub_questions_are_dropped_and_the_question_is_researched_itself() -> None:
    tasks = [task(f"t{i}", question=q) for i, q in enumerate(JUNK)]
    rig = Rig(
        planner=FakePlanner([plan(*tasks)]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, 0.9)]),
    )
    state = new_state(QUESTION)
    await rig.orchestrator(state).run()
    assert rig.executor.ran() == ["q1"]
    assert rig.executor.tasks[0].question == QUESTION
    issues = state.iterations[0].plan_issues
    assert [i.task_id for i in issues] == [t.id for t in tasks]
    assert all(i.action == "dropped" and "not a question" in i.reason for i in issues)


async def test_a_short_question_of_the_users_own_is_still_researched() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("t1", question="[4]"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, 0.9)]),
    )
    state = new_state("Raft?")
    await rig.orchestrator(state).run()
    assert [t.question for t in rig.executor.tasks] == ["Raft?"]


async def test_junk_beside_real_questions_is_dropped_alone() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("t1", question="10/23"), task("t2"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(True, 0.9)]),
    )
    state = new_state(QUESTION)
    await rig.orchestrator(state).run()
    assert rig.executor.ran() == ["t2"]


async def test_a_replan_of_junk_is_no_new_work() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a")), plan(task("t9", question="[4]"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([judged(False, 0.4)]),
    )
    state = new_state(QUESTION, max_iterations=3)
    await rig.orchestrator(state).run()
    assert rig.executor.ran() == ["a"]
    assert state.stop_reason == "nothing_to_do"


def test_question_words_count_words_not_markers() -> None:
    assert [question_words(q) for q in JUNK] == [0] * len(JUNK)
    assert question_words("GPT-4 vs Claude?") == 3
    assert question_words("Raft与Paxos的区别是什么？") >= 3, "each CJK character is a word"


# Generated plans: real questions (words, perhaps with markers or numbers in them) mixed
# with junk (markers, numbers, punctuation, whitespace, nothing); exactly the junk goes.
WORDS = st.sampled_from(
    ["how", "does", "Raft", "elect", "a", "leader", "GPT-4", "latency", "p99", "in", "Zürich",
     "cost", "per", "query", "Qdrant", "pgvector", "why", "is", "it", "slow", "区别"]
)  # fmt: skip
MARKERS = st.one_of(
    st.integers(0, 99).map(lambda n: f"[{n}]"),
    st.integers(0, 99).map(lambda n: f"[S{n}]"),
    st.integers(0, 99).map(lambda n: f"(S{n})"),
    st.integers(0, 99).map(lambda n: f"【{n}】"),
)
NUMBERS = st.one_of(
    st.integers(0, 9999).map(str),
    st.tuples(st.integers(1, 12), st.integers(1, 31)).map(lambda d: f"{d[0]}/{d[1]}"),
    st.floats(0, 1e12, allow_nan=False).map(lambda x: f"{x:g}"),
    st.integers(0, 100).map(lambda n: f"{n}%"),
)
SCIENTIFIC = st.tuples(st.integers(1, 99), st.integers(-12, 12)).map(
    lambda t: f"{t[0] / 10}e{t[1]}"
)  # 1.6e10: a number with a letter in it
PUNCTUATION = st.sampled_from(["—", "-", "...", "?", "!?", "*", "#", "|", ":", "/", "–"])
SPACE = st.sampled_from([" ", "  ", "\n", "\t"])
JUNK_PIECE = st.one_of(MARKERS, NUMBERS, SCIENTIFIC, PUNCTUATION)


@st.composite
def junk_text(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from([MARKERS, NUMBERS, SCIENTIFIC, PUNCTUATION, JUNK_PIECE]))
    pieces = draw(st.lists(kind, max_size=5))
    return "".join(p + draw(SPACE) for p in pieces)


@st.composite
def real_question(draw: st.DrawFn) -> str:
    words = draw(st.lists(WORDS, min_size=3, max_size=9))
    extras = draw(st.lists(st.one_of(MARKERS, NUMBERS, SCIENTIFIC), max_size=3))
    tokens = words + extras
    order = draw(st.permutations(range(len(tokens))))
    return " ".join(tokens[i] for i in order) + draw(st.sampled_from(["?", "", " [2]", "."]))


PLANS = st.lists(
    st.one_of(real_question().map(lambda q: (True, q)), junk_text().map(lambda q: (False, q))),
    min_size=1,
    max_size=12,
)


@given(PLANS)
def test_generated_plans_lose_exactly_their_junk(oracle: list[tuple[bool, str]]) -> None:
    tasks = [task(f"t{i}", question=q) for i, (_real, q) in enumerate(oracle)]
    tree = ResearchTree({})
    policy = PlanPolicy(max_depth=3, max_tasks=len(tasks))
    added, issues = tree.add_plan(tasks, iteration=1, policy=policy)
    assert added == [f"t{i}" for i, (real, _q) in enumerate(oracle) if real]
    dropped = {i.task_id for i in issues if i.action == "dropped"}
    assert dropped == {f"t{i}" for i, (real, _q) in enumerate(oracle) if not real}
    for index, (real, question) in enumerate(oracle):
        if real:
            assert tree.nodes[f"t{index}"].question == " ".join(question.split())


def test_nan_is_no_confidence() -> None:
    with pytest.raises(ValidationError):
        judged(True, math.nan)
