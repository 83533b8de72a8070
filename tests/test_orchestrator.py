"""The research loop with scripted fakes: plan -> execute -> draft -> judge -> replan."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field, replace

import pytest

from deep_research.core.engine import RunConfig
from deep_research.core.errors import (
    BudgetExhausted,
    JobCancelled,
    ProviderError,
    StructuredOutputError,
)
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import SessionState, Usage
from deep_research.core.ports import CancelOutcome, CheckJob, JobEvent, Meter, WriteJob
from deep_research.core.report import Report, assemble
from tests.fakes import (
    FakeExecutor,
    FakeJudge,
    FakePlanner,
    Rig,
    new_state,
    plan,
    task,
    verdict,
)


async def test_full_loop_replans_from_gaps_and_completes() -> None:
    rig = Rig(
        planner=FakePlanner(
            [plan(task("a"), task("b"), task("c", "a", "b")), plan(task("d", "c"))]
        ),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(False, "the cost side"), verdict(True)]),
    )
    state = new_state(max_iterations=3)
    orch = rig.orchestrator(state)
    await orch.run()

    assert state.stop_reason == "complete"
    assert state.status == "complete"
    assert state.iteration == 2
    assert {n.id: n.status for n in state.nodes.values()} == dict.fromkeys("abcd", "done")
    # dependencies' findings reach the dependent's branch prompt
    c_task = next(t for t in rig.executor.tasks if t.node_id == "c")
    assert {f.node_id for f in c_task.dependencies} == {"a", "b"}
    assert all("[S" in f.notes for f in c_task.dependencies)
    # the replan saw the judge's gaps and a catalog to depend on
    replan = rig.planner.requests[1]
    assert replan.gaps is not None
    assert replan.gaps.missing_aspects == ["the cost side"]
    assert {n.id for n in replan.catalog} == {"a", "b", "c"}
    # every node's notes reached the rolling summary, with session citation refs
    assert sorted(state.summarized) == ["a", "b", "c", "d"]
    assert all(f"[S{i}]" in state.summary for i in range(1, 5))
    assert len(state.sources) == 4
    # the judge read an outline of every done node; the report is written from it
    assert all("Draws on: " in r.outline for r in rig.judge.requests)
    assert {"a", "b", "c", "d"} <= set(re.findall(r"\b[a-d]\b", rig.judge.requests[-1].outline))
    assert orch.report is not None
    report = orch.report.markdown
    assert "https://example.org/d" in report
    assert state.writing is not None
    assert all(s.status == "written" for s in state.writing.sections)
    assert rig.saver.last().phase == "finished"


async def test_failed_branch_blocks_dependents_and_the_run_goes_on() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"), task("b", "a"), task("c"))]),
        executor=FakeExecutor(fail={"a": "provider said no"}),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state()
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.nodes["a"].status == "failed"
    assert state.nodes["b"].status == "blocked"
    assert state.nodes["c"].status == "done"
    assert sorted(rig.executor.ran()) == ["a", "c"], "b never ran"
    report = orch.report.markdown
    assert "**Failed:** What about a? — provider said no" in report
    assert "**Blocked:** What about b?" in report


async def test_budget_refusal_stops_the_run_and_reports_what_is_missing() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a", priority=9), task("b", "a"))]),
        executor=FakeExecutor(raise_for={"b": BudgetExhausted("deep research needs $1.74")}),
        judge=FakeJudge([]),
    )
    state = new_state()
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "cost_limit"
    assert state.status == "stopped"
    assert state.nodes["b"].status == "pending", "never started work stays queued for resume"
    report = orch.report.markdown
    assert "cost limit" in report
    assert "**Not researched:** What about b?" in report
    assert "https://example.org/a" in report, "the report is written from what exists"


async def test_cost_limit_reached_starts_nothing_new() -> None:
    # Each branch costs 1000 in + 200 out tokens of gpt-4.1-mini = $0.00072.
    rig = Rig(
        planner=FakePlanner([plan(task("a", priority=9), task("b", "a"), task("c", "b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([]),
    )
    state = new_state(max_cost_usd=0.001)
    await rig.orchestrator(state).run()
    assert state.stop_reason == "cost_limit"
    assert [n.id for n in state.nodes.values() if n.status == "done"] == ["a"]
    assert rig.executor.ran() == ["a"]


async def test_token_limit_stops_the_run() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a", priority=9), task("b", "a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([]),
    )
    state = new_state(max_total_tokens=1200)
    await rig.orchestrator(state).run()
    assert state.stop_reason == "token_limit"
    assert rig.executor.ran() == ["a"]


async def test_iteration_limit_stops_after_the_last_judged_round() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a")), plan(task("b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(False, "x"), verdict(False, "y")]),
    )
    state = new_state(max_iterations=2)
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "max_iterations"
    assert state.phase == "replan"
    assert "**Missing:** y" in orch.report.markdown


async def test_time_limit_cancels_in_flight_work_and_requeues_it() -> None:
    never = asyncio.Event()
    rig = Rig(
        planner=FakePlanner([plan(task("slow"))]),
        executor=FakeExecutor(gate={"slow": never}),
        judge=FakeJudge([]),
    )
    # Long enough for the plan's first price lookup (genai-prices loads its data, ~0.4 s).
    state = new_state(max_runtime_seconds=2)
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "time_limit"
    assert rig.executor.ran() == ["slow"], "the limit struck while the branch was running"
    assert state.nodes["slow"].status == "pending"
    assert "time limit" in orch.report.markdown


async def test_the_time_limit_counts_from_the_runs_start_not_the_guards_making() -> None:
    """A server's run is built when it is asked for, then waits for a slot: two hours of
    waiting leave its hour of research whole."""
    waited = [0.0]
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state(max_runtime_seconds=3600)
    orch = rig.orchestrator(state, clock=lambda: time.monotonic() + waited[0])
    waited[0] = 7200.0  # queued behind two long runs
    await orch.run()
    assert state.stop_reason == "complete", state.stop_detail
    assert state.nodes["a"].status == "done"


async def test_interrupt_saves_and_requeues_running_nodes() -> None:
    never = asyncio.Event()
    executor = FakeExecutor(gate={"a": never})
    rig = Rig(planner=FakePlanner([plan(task("a"))]), executor=executor, judge=FakeJudge([]))
    state = new_state()
    run = asyncio.ensure_future(rig.orchestrator(state).run())
    executor.started.setdefault("a", asyncio.Event())
    await executor.started["a"].wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    saved = rig.saver.last()
    assert saved.status == "interrupted"
    assert saved.nodes["a"].status == "pending"
    assert rig.saver.saved_now == 1


async def test_resume_never_reruns_done_nodes_and_takes_a_new_budget() -> None:
    # As in test_cost_limit_reached_starts_nothing_new: a's spend leaves b no room in $0.001.
    executor = FakeExecutor()
    rig = Rig(
        planner=FakePlanner([plan(task("a", priority=9), task("b", "a"))]),
        executor=executor,
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state(max_cost_usd=0.001)
    await rig.orchestrator(state).run()
    assert state.stop_reason == "cost_limit"
    assert executor.ran() == ["a"]

    same_budget = rig.saver.last()
    await rig.orchestrator(same_budget).run()
    assert same_budget.stop_reason == "cost_limit", "the spend so far still counts"
    assert executor.ran() == ["a"]

    resumed = rig.saver.last()
    resumed.limits.max_cost_usd = 10.0
    orch = rig.orchestrator(resumed)
    await orch.run()
    assert executor.ran() == ["a", "b"], "done nodes are never re-run"
    b_task = executor.tasks[1]
    assert [f.node_id for f in b_task.dependencies] == ["a"], "b builds on a's saved notes"
    assert resumed.stop_reason == "complete"
    assert {n.id: n.status for n in resumed.nodes.values()} == {"a": "done", "b": "done"}
    assert len(rig.planner.requests) == 1, "the resume continued the plan, not a new one"


async def test_remote_job_ids_are_saved_before_the_branch_waits() -> None:
    gate = asyncio.Event()
    seen_saved: list[str] = []
    ended: list[bool] = []

    class RemoteExecutor(FakeExecutor):
        async def run(self, task, meter, on_remote_job):  # type: ignore[no-untyped-def]
            await on_remote_job("deep_research", "resp_42")
            seen_saved.append(rig.saver.last().nodes[task.node_id].remote_jobs["deep_research"])
            gate.set()
            result = await super().run(task, meter, on_remote_job)
            snapshots = len(rig.saver.saved)
            await on_remote_job("deep_research", None)
            ended.append(len(rig.saver.saved) > snapshots)
            return result

    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=RemoteExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state()
    await rig.orchestrator(state).run()
    assert seen_saved == ["resp_42"]
    assert rig.saver.saved_jobs == [("a", {"deep_research": "resp_42"})], (
        "a paid job's id is written at once, not queued"
    )
    assert state.nodes["a"].remote_jobs == {}
    assert ended == [True], "a job's end is saved with the whole state (its cost booked)"


async def test_malformed_first_plan_falls_back_to_the_question_itself() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("x", question="   "))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state(question="Why is the sky blue?")
    await rig.orchestrator(state, config=RunConfig(allowed_sources=("internal",))).run()
    [node] = state.nodes.values()
    assert node.question == "Why is the sky blue?"
    assert node.source_hint == "internal"
    assert state.iterations[0].plan_issues[0].reason == "empty question"


async def test_a_first_plan_that_never_parses_researches_the_question_itself() -> None:
    """A small model (or a server with no structured output) may never write a readable
    plan: the question itself is still worth researching, and the run says why."""
    rig = Rig(
        planner=FakePlanner([StructuredOutputError("no valid Plan after 3 attempts")]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state()
    orch = rig.orchestrator(state)
    events: list[object] = []
    orch._on_event = events.append
    await orch.run()
    (researched,) = rig.executor.tasks
    assert researched.question == state.question
    assert any("the plan could not be read" in str(e) for e in events)
    assert state.status == "complete"
    assert orch.report is not None


async def test_a_replan_that_never_parses_stops_the_run_with_a_report() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a")), StructuredOutputError("no valid Plan")]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(False, "b")]),
    )
    state = new_state()
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "error"
    assert orch.report is not None, "what the first iteration found is still reported"


async def test_judge_failure_ends_with_a_written_report_all_the_same() -> None:
    # (a verdict that never validates is no verdict, not a failure: test_model_verdicts.py)
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([ProviderError("the provider failed (HTTP 5xx)")]),
    )
    state = new_state()
    orch = rig.orchestrator(state)
    await orch.run()
    assert state.stop_reason == "error"
    assert state.status == "failed"
    assert orch.report is not None, "the report is still written, from what was found"
    assert "https://example.org/a" in orch.report.markdown


async def test_summary_is_capped_and_folded_in_bounded_batches() -> None:
    tasks = [task(f"n{i}") for i in range(12)]
    rig = Rig(
        planner=FakePlanner([plan(*tasks)]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state()
    config = RunConfig(max_nodes_per_plan=12, summary_cap_tokens=200, max_parallel=12)
    await rig.orchestrator(state, config=config).run()
    folded = [d.node_id for batch in rig.summarizer.calls for d in batch]
    assert sorted(folded) == sorted(state.summarized) == sorted(t.id for t in tasks)
    assert max(len(batch) for batch in rig.summarizer.calls) <= 4
    assert len(state.summary) <= 200 * 4 + 2


async def test_resuming_a_finished_session_changes_nothing() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state()
    await rig.orchestrator(state).run()
    again = rig.saver.last()
    orch = rig.orchestrator(again)
    await orch.run()
    assert again.stop_reason == "complete"
    assert rig.executor.ran() == ["a"]
    assert len(rig.author.sections) == 1, "the written section is kept, not rewritten"
    assert len(rig.author.leads) == 1


@dataclass
class FakeJobControl:
    """Cancels by id; records which nodes were still running when asked."""

    outcome: CancelOutcome
    state: SessionState | None = None
    calls: list[tuple[str, list[str]]] = field(default_factory=list)

    async def cancel(self, job_id: str) -> CancelOutcome:
        assert self.state is not None
        running = [n.id for n in self.state.nodes.values() if n.status == "running"]
        self.calls.append((job_id, running))
        return self.outcome


class HangingRemoteExecutor(FakeExecutor):
    """Starts a remote job and waits on it forever (until cancelled)."""

    async def run(self, task, meter, on_remote_job):  # type: ignore[no-untyped-def]
        await on_remote_job("deep_research", f"resp_{task.node_id}")
        if task.on_event is not None:
            task.on_event(JobEvent(task.node_id, f"resp_{task.node_id}", "m", "queued", 0, 0.0))
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("outcome", "kept"),
    [
        (CancelOutcome("cancelled", Usage(input_tokens=500, output_tokens=100)), False),
        (CancelOutcome("cancelled"), False),
        (CancelOutcome("unreachable", detail="HTTP 503"), True),
        (CancelOutcome("already_finished"), True),
    ],
)
async def test_a_time_limit_cancels_remote_jobs_after_the_branches_unwound(
    outcome: CancelOutcome, kept: bool
) -> None:
    jobs = FakeJobControl(outcome)
    rig = Rig(
        planner=FakePlanner([plan(task("a"), task("b"))]),
        executor=HangingRemoteExecutor(),
        judge=FakeJudge([]),
        jobs=jobs,
    )
    state = new_state(max_runtime_seconds=0.2)
    state.run_spec.web_model = "gpt-5.5"
    jobs.state = state
    events: list[object] = []
    orch = rig.orchestrator(state)
    orch._on_event = events.append
    await orch.run()

    assert state.stop_reason == "time_limit"
    assert sorted(jobs.calls) == [("resp_a", []), ("resp_b", [])], "no branch still running"
    assert sorted(state.nodes) == ["a", "b"]
    for node in state.nodes.values():
        assert node.status == "pending"
        assert bool(node.remote_jobs) is kept
    cancelled = [e for e in state.ledger if e.role == "deep_research"]
    assert len(cancelled) == (0 if kept else 2)
    assert all(e.model == "gpt-5.5" for e in cancelled)
    assert all(e.usage_unknown is (outcome.usage is None) for e in cancelled)
    assert any(isinstance(e, JobEvent) and e.status == "queued" for e in events)


async def test_a_cancelled_job_cancels_its_node_and_blocks_dependents() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"), task("b", "a"), task("c"))]),
        executor=FakeExecutor(raise_for={"a": JobCancelled("cancelled by the user")}),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state()
    await rig.orchestrator(state).run()
    assert {n.id: n.status for n in state.nodes.values()} == {
        "a": "cancelled",
        "b": "blocked",
        "c": "done",
    }
    assert "- **Cancelled:** What about a? — cancelled by the user" in assemble(state).markdown


@dataclass
class FailingSummarizer:
    async def merge(self, question, summary, digests, cap_tokens, meter):  # type: ignore[no-untyped-def]
        raise ProviderError("summarizer down")


async def test_a_failed_summary_keeps_the_newest_findings_when_at_its_cap() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
        summarizer=FailingSummarizer(),  # type: ignore[arg-type]
    )
    state = new_state()
    cap = RunConfig().summary_cap_tokens
    state.summary = "Old finding. " * (cap * 4 // 13)  # already at the cap
    await rig.orchestrator(state).run()
    assert "Finding about a" in state.summary, "the newest notes survive the cap"
    assert state.summary.startswith("Old finding.")
    assert estimate_tokens(state.summary) <= cap + 1


# --- the scripted fakes themselves ----------------------------------------------------------

RIG_TESTS = """
import asyncio

from tests.fakes import FakeExecutor, FakeJudge, FakePlanner, Rig, new_state, plan, task, verdict


def rig(plans=1, verdicts=1, **executor):
    plans = [plan(task(f"t{i}")) for i in range(plans)]
    return Rig(FakePlanner(plans), FakeExecutor(**executor), FakeJudge([verdict(True)] * verdicts))


def run(rig):
    asyncio.run(rig.orchestrator(new_state()).run())


def test_a_judge_reply_left_over():
    run(rig(verdicts=2))


def test_an_executor_error_for_a_node_never_planned():
    run(rig(fail={"zz": "boom"}))


def test_leftovers_allowed_with_a_reason():
    r = rig(plans=2)
    r.allow_leftovers("the judge approves the first round: no second plan")
    run(r)


def test_leftovers_allowed_but_none_left():
    r = rig()
    r.allow_leftovers("stale")
    run(r)


def test_every_step_used():
    run(rig())


def test_a_failing_test_is_not_reported_twice():
    rig(verdicts=3)
    assert False, "the test's own failure"
"""


def test_a_scripted_step_left_over_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        "from tests.conftest import pytest_runtest_makereport, rigs_use_up_their_scripts"
    )
    pytester.makepyfile(test_rigs=RIG_TESTS)
    recorded = pytester.inline_run("-p", "no:asyncio", "-p", "no:cacheprovider")
    failures = {
        (report.nodeid.rpartition("::")[2], report.when): report.longreprtext
        for report in recorded.getreports("pytest_runtest_logreport")
        if report.failed
    }
    assert sorted(failures) == [
        ("test_a_failing_test_is_not_reported_twice", "call"),
        ("test_a_judge_reply_left_over", "teardown"),
        ("test_an_executor_error_for_a_node_never_planned", "teardown"),
        ("test_leftovers_allowed_but_none_left", "teardown"),
    ]
    assert (
        "judge reply never asked for: Verdict("
        in failures[("test_a_judge_reply_left_over", "teardown")]
    )
    assert (
        "executor error for zz never raised: 'boom'"
        in failures[("test_an_executor_error_for_a_node_never_planned", "teardown")]
    )
    assert (
        "allow_leftovers('stale'), but every step was used"
        in failures[("test_leftovers_allowed_but_none_left", "teardown")]
    )


@dataclass
class StampingChecker:
    """A phase after the writer: sees the written report, returns it with a line added."""

    seen: list[str] = field(default_factory=list)

    async def check(self, job: CheckJob) -> Report:
        self.seen.append(job.report.lead)
        return job.report.model_copy(update={"footer": job.report.footer + "\n\n_checked_"})


class OneLineWriter:
    async def outline(self, state: SessionState, meter: Meter) -> None:
        return None

    async def write(self, job: WriteJob) -> Report:
        return Report(title=job.state.question, status="", lead=f"{len(job.state.nodes)} node")


def one_task_rig() -> Rig:
    return Rig(
        planner=FakePlanner([plan(task("a"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )


async def test_a_writer_and_checkers_plug_in_after_the_loop_as_phases() -> None:
    state = new_state()
    orch = one_task_rig().orchestrator(state)
    assert orch.report is None
    await orch.run()
    assert orch.report is not None, "the default writer: the report as assemble builds it"
    assert orch.report.markdown == assemble(state).markdown

    first, second = StampingChecker(), StampingChecker()
    state = new_state()
    orch = one_task_rig().orchestrator(state)
    orch.engine = replace(orch.engine, writer=OneLineWriter(), checkers=(first, second))
    await orch.run()
    assert first.seen == ["1 node"]
    assert second.seen == first.seen, "each checker gets the report the one before returned"
    assert orch.report is not None
    assert orch.report.footer == "\n\n_checked_\n\n_checked_"


async def test_the_judge_reads_every_finding_folded_in_and_the_writer_starts_after_the_stop() -> (
    None
):
    """One step after the other: a wave's findings are folded into the summary before the
    judge reads it (beside the outline, which reads the nodes), and the report is written
    once the run has stopped, with what it left unanswered."""

    class StoppedWriter(OneLineWriter):
        async def write(self, job: WriteJob) -> Report:
            assert job.state.status == "complete", "the stop is recorded before writing"
            assert job.gaps == ()
            return await super().write(job)

    rig = Rig(
        planner=FakePlanner([plan(task("a"), task("b"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state(max_iterations=1)
    orch = rig.orchestrator(state)
    orch.engine = replace(orch.engine, writer=StoppedWriter())
    await asyncio.wait_for(orch.run(), timeout=10)
    asked = rig.judge.requests[0]
    assert all(f"[S{i}]" in asked.summary for i in (1, 2))
    assert asked.unmerged == ""
    assert orch.report is not None
    assert orch.report.lead == "2 node"
    assert sorted(state.summarized) == ["a", "b"]


@dataclass
class StuckSummarizer:
    """A summarizer whose merges never answer (a hung model)."""

    calls: int = 0

    async def merge(self, question, summary, digests, cap_tokens, meter):  # type: ignore[no-untyped-def]
        self.calls += 1
        await asyncio.Event().wait()


async def test_a_time_limit_while_the_review_waits_for_the_fold_still_writes_the_report() -> None:
    """The fold beside research hangs; the judge does not wait for it (it reads the notes
    not folded in), the review does; the time limit cancels that wait (and the fold), the
    report is written from what was researched, and the last fold gives up within its grace:
    no cancellation escapes the run (it once crashed the run after its report was paid for)."""
    judge = FakeJudge([verdict(True)])
    rig = Rig(
        planner=FakePlanner([plan(task("a"), task("b"))]),
        executor=FakeExecutor(),
        judge=judge,
        summarizer=StuckSummarizer(),  # type: ignore[arg-type]
    )
    state = new_state(max_iterations=1, max_runtime_seconds=2.0)
    config = RunConfig(write_allowance_seconds=0.5, finish_grace_seconds=0.4)
    orch = rig.orchestrator(state, config=config)
    await asyncio.wait_for(orch.run(), timeout=30)
    assert state.stop_reason == "time_limit"
    assert orch.report is not None, "written"
    assert orch._folding is None or orch._folding.done(), "no fold outlives the run"
    (asked,) = judge.requests  # while the fold hung, from the notes it had not folded
    assert "What about a?" in asked.unmerged
    assert "What about b?" in asked.unmerged
    assert not asked.summary
