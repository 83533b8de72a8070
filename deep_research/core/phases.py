"""The phases of a run (``ResearchOrchestrator`` drives them, in ``orchestrator.py``): plan
(or replan from the judge's gaps), research the ready nodes concurrently (the scheduling:
``run_dag``), and review (fold the wave into the summary beside the outline, then judge the
outline). Each returns the next phase, or a ``Stop``.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from deep_research.core import context
from deep_research.core.engine import Engine, Listener, RunConfig, SessionSaver
from deep_research.core.errors import (
    BranchError,
    BudgetExhausted,
    JobCancelled,
    ProviderError,
    SettingRefused,
    StructuredOutputError,
)
from deep_research.core.guard import BudgetGuard
from deep_research.core.intake import take_result
from deep_research.core.memory import cap_tokens
from deep_research.core.models import (
    COMPLETE_CONFIDENCE,
    MIXED,
    IterationRecord,
    PlannedTask,
    ResearchNode,
    SessionState,
    Verdict,
    utcnow,
)
from deep_research.core.outline import outline_text as writing_text
from deep_research.core.ports import (
    CREATE_INTENT,
    BranchTask,
    ClaimStore,
    EvidenceSink,
    JudgeRequest,
    PlanRequest,
)
from deep_research.core.remote_jobs import lost_job_reason
from deep_research.core.report import Report
from deep_research.core.scheduler import run_dag
from deep_research.core.stops import Step, Stop, limit_stop
from deep_research.core.summary import fold_summary
from deep_research.core.tree import MIN_QUESTION_WORDS, PlanPolicy, ResearchTree


class Phases:
    """A session's research phases, over its tree, engine, budget guard and saver."""

    def __init__(
        self,
        state: SessionState,
        engine: Engine,
        saver: SessionSaver,
        guard: BudgetGuard,
        config: RunConfig,
        on_event: Listener | None = None,
        evidence: EvidenceSink | None = None,
        claims: ClaimStore | None = None,
    ) -> None:
        self.state = state
        self.engine = engine
        self.saver = saver
        self.evidence = evidence
        """Where finished nodes' findings are kept (None: nowhere, as in most tests)."""
        self.claims = claims
        """Where the claim check reads the evidence and keeps its ledger (None: nowhere)."""
        self.guard = guard
        self.config = config
        self.tree = ResearchTree(state.nodes)
        self.report: Report | None = None
        """The report, written and checked, once ``run`` returns."""
        self._on_event = on_event or (lambda _message: None)
        self._summary_lock = asyncio.Lock()
        self._folding: asyncio.Task[None] | None = None
        """The fold running beside research (``_fold_soon``)."""

    async def _save(self) -> None:
        await self.saver.save(self.state)

    async def _plan(self, gaps: Verdict | None, *, replan: bool) -> Step:
        """Plan (``replan``: from the last verdict, None when the judge gave none)."""
        if (stop := limit_stop(self.guard)) is not None:
            return stop
        state = self.state
        iteration = state.iteration + 1
        if not replan:
            self._on_event("planning")
        elif gaps is None:
            self._on_event("replanning (the judge gave no verdict)")
        else:
            self._on_event("replanning from the judge's gaps")
        request = PlanRequest(
            question=state.question,
            summary=state.summary,
            catalog=tuple(context.catalog(state.nodes.values())),
            gaps=gaps,
            max_tasks=self.config.max_nodes_per_plan,
            max_depth=self.config.max_depth,
            allowed_sources=self.config.allowed_sources,
            source_descriptions=self.config.source_descriptions,
        )
        try:
            tasks = (await self.engine.planner.plan(request, self.guard.meter())).tasks
        except ProviderError as exc:  # a StructuredOutputError too
            if replan:
                return Stop("error", f"replanning failed: {exc}")
            if not isinstance(exc, StructuredOutputError):
                raise
            # A plan the model could not write (a small model, a server without structured
            # output): the question itself is still worth researching, as after an empty plan.
            self._on_event(f"the plan could not be read ({exc})")
            tasks = []
        policy = PlanPolicy(
            max_depth=self.config.max_depth,
            max_tasks=self.config.max_nodes_per_plan,
            allowed_sources=self.config.allowed_sources,
            # The extractive planner is code: its facets are parts of the user's question.
            min_words=0 if state.mode == "extractive" else MIN_QUESTION_WORDS,
            question=state.question,
        )
        added, issues = self.tree.add_plan(tasks, iteration=iteration, policy=policy)
        if not added and not replan:
            # An unusable first plan (none, unreadable, every task dropped) still leaves
            # the question itself worth researching; a replan with nothing new is just that.
            self._on_event("no sub-question to research: researching the question itself")
            sources = policy.allowed_sources
            fallback = PlannedTask(
                id="q1",
                question=state.question,
                depends_on=[],
                parallelizable=True,
                priority=5,
                source_hint=MIXED if MIXED in sources else sources[0],
                parent_id=None,
            )
            # The user's question is researched as asked, however short.
            asked = replace(policy, min_words=0)
            added, more = self.tree.add_plan([fallback], iteration=iteration, policy=asked)
            issues += more
        state.iteration = iteration
        state.iterations.append(
            IterationRecord(number=iteration, planned=added, plan_issues=issues)
        )
        for issue in issues:
            self._on_event(f"plan: {issue.action} {issue.task_id}: {issue.reason}")
        state.phase = "execute" if added else "finished"
        await self._save()
        if not added:
            return Stop("nothing_to_do", "the planner proposed no new sub-questions")
        return "execute"

    # --- execute ------------------------------------------------------------

    async def _execute(self) -> Step:
        """Research every ready node; a node that finds the budget spent stops the phase
        (branches in flight finish first), as does a limit reached between starts."""
        self._on_event(f"researching (iteration {self.state.iteration})")
        stops: list[Stop] = []

        def may_start(_node: ResearchNode) -> bool:
            if not stops and (stop := limit_stop(self.guard)) is not None:
                stops.append(stop)
            return not stops

        async def run_node(node: ResearchNode) -> None:
            stop = await self._run_node(node)
            if stop is not None and not stops:
                stops.append(stop)

        await run_dag(
            self.tree,
            run_node,
            limit=self.config.max_parallel,
            may_start=may_start,
            after=self._fold_soon,
        )
        if stops:  # the last findings are folded in after the report (``_fold_last``)
            return stops[0]
        return await self._review()

    async def _run_node(self, node: ResearchNode) -> Stop | None:
        """Research one node; a ``Stop`` when the budget cannot cover it (it is requeued)."""
        if node.job_intents:  # an earlier process sent a paid create and lost its id
            blocked = self.tree.fail(node, lost_job_reason(node, self.state.session_id))
            self._on_event(f"failed {node.id}: {node.error}{_blocked(blocked)}")
            await self._save()
            return None
        self.tree.start(node)
        self._on_event(f"started {node.id}")
        await self._save()

        async def on_remote_job(name: str, response_id: str | None) -> None:
            if response_id is None:  # the job ended: its cost is booked, save it all
                node.remote_jobs.pop(name, None)
                node.job_intents.pop(name, None)
                await self._save()
                return
            # A paid create about to leave, or its id: on disk before this returns (a line
            # of the job journal, not a snapshot: eight replies at once wait eight small
            # appends, not eight full states in a row).
            if response_id == CREATE_INTENT:
                node.job_intents[name] = utcnow()
            else:
                node.remote_jobs[name] = response_id
                node.job_intents.pop(name, None)
            self.saver.save_jobs(self.state, node.id)

        task = BranchTask(
            node_id=node.id,
            question=node.question,
            root_question=self.state.question,
            source_hint=node.source_hint,
            dependencies=tuple(
                context.findings(self.state.nodes, node, self.config.summary_cap_tokens)
            ),
            remote_jobs=dict(node.remote_jobs),
            session_id=self.state.session_id,
            on_event=self._on_event,
        )
        try:
            result = await self.engine.executor.run(task, self.guard.meter(node.id), on_remote_job)
        except BudgetExhausted as exc:
            self.tree.requeue(node)
            await self._save()
            return Stop(exc.reason, str(exc))
        except JobCancelled as exc:
            blocked = self.tree.cancel(node, str(exc))
            self._on_event(f"cancelled {node.id}{_blocked(blocked)}")
        except SettingRefused:  # every node would be refused alike: the run stops (``run``)
            self.tree.requeue(node)
            raise
        except (BranchError, ProviderError) as exc:
            blocked = self.tree.fail(node, str(exc))
            self._on_event(f"failed {node.id}: {exc}{_blocked(blocked)}")
        except asyncio.CancelledError:
            self.tree.requeue(node)
            raise
        else:
            await take_result(self.state, node, result, self.evidence)
            self.tree.finish(node)
            self._on_event(f"done {node.id}")
        await self._save()
        return None

    async def _fold_soon(self, _node: ResearchNode) -> None:
        """Fold finished nodes into the summary beside research, as they finish: a wave of
        48 branches left the review 19 one-call latencies to wait when folded after it, 6.6
        with this (``bench/report.py``'s write wall, 2026-11-27)."""
        task = self._folding
        if task is not None and (not task.done() or _failed(task)):
            return  # one at a time; a failed fold's error is the review's (``_folded``)
        self._folding = asyncio.create_task(self._fold_summary())

    async def _folded(self) -> None:
        """The summary with every done node folded in: the fold beside research (its error
        raised here), then the rest. A fold cancelled by ``_drop_fold`` is no error; this
        call's own cancellation is."""
        task, self._folding = self._folding, None
        if task is not None:
            try:
                await task
            except asyncio.CancelledError:
                if (current := asyncio.current_task()) is not None and current.cancelling():
                    raise
        await self._fold_summary()

    def _drop_fold(self) -> None:
        """Stop the fold beside research: it never outlives the research loop (the writer is
        given the money left when it starts; what is left is folded after the report)."""
        if self._folding is not None:
            self._folding.cancel()

    async def _fold_summary(self) -> None:
        """Merge finished nodes' notes into the rolling summary, a bounded batch per call."""
        async with self._summary_lock:
            await fold_summary(
                self.state,
                self.engine.summarizer,
                self.guard,
                self.config.summary_cap_tokens,
                self._save,
                self._on_event,
            )

    # --- review: draft + judge ----------------------------------------------

    async def _review(self) -> Step:
        """Outline the report and judge the outline: complete, or replan from its gaps."""
        state = self.state
        if (stop := limit_stop(self.guard)) is not None:
            return stop
        if not self.tree.with_status("done"):
            state.phase = "finished"
            await self._save()
            why = {n.error for n in self.tree.with_status("failed") if n.error}
            shared = f": {why.pop()}" if len(why) == 1 else ""  # the reason every branch gave
            return Stop("nothing_to_do", f"no sub-question could be researched{shared}")
        self._on_event("outlining the report")
        try:
            # Neither the outline (it reads the nodes) nor the judge (it reads the notes not
            # yet folded beside the summary) waits for the wave to be folded in.
            _, judged = await asyncio.gather(self._folded(), self._outline_and_judge())
        except ProviderError as exc:
            return Stop("error", f"review failed: {exc}")
        if isinstance(judged, Stop):
            return judged
        verdict = judged
        complete = verdict is not None and self._ends_research(verdict)
        # Extractive research is one round: what its passages left unanswered stays so.
        once = state.mode == "extractive" and verdict is not None
        state.phase = "finished" if complete or once else "replan"
        await self._save()
        if verdict is None or not (complete or once):
            return "replan"
        score = verdict.overall_confidence
        if not complete:
            missing = len(verdict.missing_aspects)
            return Stop(
                "nothing_to_do",
                f"{missing} part(s) of the question found no relevant passage, and with no "
                f"model nothing more can be researched (passage coverage {score:.2f})",
            )
        if state.mode == "extractive":  # no model judged it: say what was measured
            return Stop("complete", f"passage coverage {score:.2f}")
        return Stop("complete", f"judge confidence {score:.2f}")

    async def _outline_and_judge(self) -> Verdict | Stop | None:
        """The report's outline, then the judge's verdict on it (None: it gave none), or the
        limit that stopped the run between them."""
        state = self.state
        writing = await self.engine.writer.outline(state, self.guard.meter())
        if writing is not None:
            state.writing = writing
        await self._save()
        if (stop := limit_stop(self.guard)) is not None:
            return stop
        self._on_event("judging the outline")
        outline = writing_text(writing) if writing is not None else "(no outline)"
        return await self._judge(
            JudgeRequest(
                state.question,
                state.summary,
                cap_tokens(outline, 2 * self.config.summary_cap_tokens),
                context.overview(state.nodes.values()),
                context.unmerged(state, self.config.summary_cap_tokens // 2),
            ),
            state.iterations[-1],
        )

    async def _judge(self, request: JudgeRequest, record: IterationRecord) -> Verdict | None:
        """The judge's verdict, recorded; None when its reply was refused (it never
        validated, even when asked again): the run goes on as if the judge gave none."""
        verdict: Verdict | None
        try:
            verdict, refused = await self.engine.judge.judge(request, self.guard.meter()), ""
        except StructuredOutputError as exc:
            verdict, refused = None, str(exc)
            self._on_event(f"the judge's verdict was refused ({exc}): going on without one")
        record.verdict, record.verdict_refused = verdict, refused
        return verdict

    def _ends_research(self, verdict: Verdict) -> bool:
        """Whether ``verdict`` ends the research as complete: the judge says complete, wants
        no more rounds and, if a model judged, is confident of it (``COMPLETE_CONFIDENCE``)."""
        if not verdict.is_complete or verdict.recommend_more_iterations:
            return False
        score = verdict.overall_confidence
        if self.state.mode == "extractive" or score >= COMPLETE_CONFIDENCE:
            return True
        self._on_event(
            f"the judge calls the research complete at confidence {score:.2f}, below "
            f"{COMPLETE_CONFIDENCE:.2f}: not taken as complete"
        )
        return False


def _blocked(ids: list[str]) -> str:
    return f" (blocked {', '.join(ids)})" if ids else ""


def _failed(task: asyncio.Task[None]) -> bool:
    return not task.cancelled() and task.exception() is not None
