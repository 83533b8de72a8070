"""A sub-question that asks the user's question again is no section of its own: the answer
already is. The tree drops it when it reads a plan; a plan left with nothing researches the
question itself, once."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from deep_research.core.tree import PlanPolicy, ResearchTree
from deep_research.core.words import same_question
from tests.fakes import FakeExecutor, FakeJudge, FakePlanner, Rig, new_state, plan, task, verdict

QUESTION = "How does deep-research plan, schedule and budget a research run?"
WORDS = ["How", "does", "deep", "research", "plan", "schedule", "and", "budget", "a", "run"]

_case: st.SearchStrategy[Callable[[str], str]] = st.sampled_from(
    [str.lower, str.upper, str.title, lambda w: w]
)
_gap = st.sampled_from([" ", "  ", "\t", " - ", ", ", "\n", " / "])
_end = st.sampled_from(["", "?", "??", ".", " ?", "!"])


@st.composite
def restated(draw: st.DrawFn) -> str:
    """``QUESTION`` with its case, punctuation and spacing changed (a model's echo of it)."""
    words: list[str] = [
        draw(_case)(w) for w in QUESTION.rstrip("?").replace("-", " ").replace(",", "").split()
    ]
    text = words[0]
    for word in words[1:]:
        text += draw(_gap) + word
    return text + draw(_end)


def read(*questions: str, asked: str = QUESTION) -> tuple[list[str], list[str]]:
    """The questions the tree keeps of a plan, and the reasons of those it drops."""
    tree = ResearchTree({})
    tasks = [task(f"t{i}", question=q) for i, q in enumerate(questions)]
    policy = PlanPolicy(max_depth=3, max_tasks=8, question=asked)
    added, issues = tree.add_plan(tasks, iteration=1, policy=policy)
    return [tree.nodes[i].question for i in added], [i.reason for i in issues]


@given(restated())
def test_the_question_restated_is_dropped_with_a_reason(echo: str) -> None:
    kept, reasons = read(echo, "How does deep-research budget a research run?")
    assert kept == ["How does deep-research budget a research run?"]
    assert reasons == ["the question itself: the answer is its section"]


@given(st.lists(st.sampled_from(WORDS), min_size=3, max_size=12))
def test_a_question_with_other_words_is_kept(words: list[str]) -> None:
    """Fewer, more or other words than the question's, stop words aside, ask something else."""
    question = " ".join(words) + "?"
    content = [w.lower() for w in words if w.lower() not in ("how", "does", "and", "a")]
    if content == ["deep", "research", "plan", "schedule", "budget", "run"]:
        return  # the question itself, its stop words moved: dropped, as the test above says
    kept, _ = read(question)
    assert kept == [question]


def test_near_equal_by_content_words_but_not_other_scripts_or_none() -> None:
    assert same_question("deep-research: plan, schedule, budget research run", QUESTION)
    assert not same_question("How does deep-research plan a research run?", QUESTION)
    assert same_question("研究 の 計画？", "研究の計画") is False  # other words (no spaces)
    assert same_question("研究の計画？", "研究の計画")
    assert not same_question("???", "!!!"), "no words: nothing to be the same as"
    assert not same_question(QUESTION, ""), "no question given: every task is kept"


async def test_a_plan_of_only_the_question_researches_it_once() -> None:
    """Nothing else to research: the first asking is kept (with the planner's source), the
    others are dropped; one node, one section."""
    rig = Rig(
        planner=FakePlanner(
            [
                plan(
                    task("a", question=QUESTION.upper(), source="internal"),
                    task("b", question=QUESTION),
                    task("c", question="[4]"),
                )
            ]
        ),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state(question=QUESTION)
    await rig.orchestrator(state).run()
    (researched,) = rig.executor.tasks
    assert researched.question == QUESTION.upper()
    assert [(n.id, n.source_hint) for n in state.nodes.values()] == [("a", "internal")]
    issues = state.iterations[0].plan_issues
    assert [(i.task_id, i.reason) for i in issues] == [
        ("b", "the question itself: the answer is its section"),
        ("c", "not a question: '[4]' has 0 word(s)"),
    ]


def test_a_plan_that_asks_something_else_keeps_no_restatement() -> None:
    kept, reasons = read(QUESTION, QUESTION.lower(), "[4]", "How is a research run budgeted?")
    assert kept == ["How is a research run budgeted?"]
    assert reasons.count("the question itself: the answer is its section") == 2


def test_a_question_asked_twice_is_researched_once_and_its_dependents_wait_for_the_twin() -> None:
    """A small model repeats its sub-questions: each repeat would pay for one section twice
    (llama.cpp served four identical branch calls at once in CI)."""
    tree = ResearchTree({})
    policy = PlanPolicy(max_depth=3, max_tasks=8, question=QUESTION)
    tasks = [
        task("a", question="How is a research run budgeted?"),
        task("b", question="how is a research run BUDGETED"),
        task("c", question="What does the budget guard reserve?", depends_on=["b"]),
    ]
    added, issues = tree.add_plan(tasks, iteration=1, policy=policy)
    assert added == ["a", "c"]
    assert tree.nodes["c"].depends_on == ["a"]
    assert [(i.task_id, i.reason) for i in issues] == [("b", "asks what a asks")]


def test_a_replan_asking_what_a_live_node_asks_is_dropped_but_a_failed_one_is_retried() -> None:
    tree = ResearchTree({})
    policy = PlanPolicy(max_depth=3, max_tasks=8, question=QUESTION)
    tree.add_plan(
        [
            task("a", question="How is a research run budgeted?"),
            task("f", question="Who pays the bill?"),
        ],
        iteration=1,
        policy=policy,
    )
    tree.nodes["a"].status = "done"
    tree.nodes["f"].status = "failed"
    again = [
        task("x", question="How is a research run budgeted?"),
        task("y", question="Who pays the bill?", depends_on=["x"]),
    ]
    added, issues = tree.add_plan(again, iteration=2, policy=policy)
    assert added == ["y"]
    assert tree.nodes["y"].depends_on == ["a"]
    assert [(i.task_id, i.reason) for i in issues] == [("x", "asks what a asks")]
