"""ResearchOrchestrator: plan -> execute -> outline -> judge -> replan, until done or out of
budget; then the report is written (outline -> sections -> lead, ``core.writing``).

Invariants:
- the session is checkpointed after every state change; a node's remote job id is saved
  the moment it exists, before any wait on it;
- done nodes are never re-run; a resumed session continues from its saved ``phase``;
- no model call's prompt grows with the number of nodes: planner and judge read the
  capped rolling summary and a bounded catalog (the judge: and the report's outline),
  branches read their dependencies' notes capped to one budget, the summarizer folds a
  bounded batch at a time, and each writing call has its own budget;
- research starts nothing once less than the writing allowance is left of the run; the
  report is written inside the run's time, from the money kept back for it at the start;
- guardrails are checked before anything new starts; once a limit is reached nothing
  new starts and the report is written from what exists, saying what is missing;
- a branch failure is data (the node fails, its dependents are blocked); a planner,
  outline or judge failure ends the loop cleanly with stop reason ``error``, and the report
  is still written;
- a verdict is data to check: a judge reply that never validates (a confidence outside
  0-1, even when asked again) is no verdict, and the run goes on as if the judge gave none;
  "complete" ends the research only from a confident judge (``COMPLETE_CONFIDENCE``), so a
  run that stops otherwise names the limit it reached, not "complete"; an extractive run
  is one round, "complete" only when every sub-question found a relevant passage;
- the first plan always researches something: a plan left with no task (none proposed,
  unreadable, or every task dropped as no question) researches the question itself;
- stopping is data too: each phase returns the next phase or a ``Stop``, and the first
  ``Stop`` ends the loop.
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
    CheckJob,
    ClaimStore,
    EvidenceSink,
    JudgeRequest,
    PlanRequest,
    WriteJob,
)
from deep_research.core.remote_jobs import cancel_remote_jobs, lost_job_reason
from deep_research.core.report import Report
from deep_research.core.scheduler import run_dag
from deep_research.core.stops import LIMIT_DETAIL, Phase, Step, Stop, limit_stop
from deep_research.core.summary import fold_summary
from deep_research.core.tree import MIN_QUESTION_WORDS, PlanPolicy, ResearchTree


class ResearchOrchestrator:
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
        """The summary fold running beside research (see ``_fold_soon``)."""
        self._writing: asyncio.Task[Report] | None = None
        """The report, started beside the last judge when no verdict can add research."""
        self._gaps: asyncio.Future[tuple[str, ...]] | None = None
        """What the research did not cover, known once the run has stopped."""

    # --- the loop -----------------------------------------------------------

    async def run(self) -> SessionState:
        """Drive the session to a stop, then write its report (``report``)."""
        state = self.state
        previous = Stop(state.stop_reason, state.stop_detail) if state.stop_reason else None
        state.status = "running"
        state.stop_reason = None
        self.tree.recover_interrupted()
        await self._save()
        try:
            async with asyncio.timeout_at(self._loop_deadline()):
                stop = await self._loop(previous)
        except ProviderError as exc:
            self._drop_background()
            state.status, state.stop_reason, state.stop_detail = "failed", "error", str(exc)
            self.saver.save_now(state)
            raise
        except TimeoutError:
            stop = self._announce(Stop("time_limit", LIMIT_DETAIL["time_limit"]))
            await cancel_remote_jobs(
                self.state, self.engine.jobs, self.guard, self._on_event, self._save
            )
        except asyncio.CancelledError:
            self._drop_background()
            self._announce(Stop("interrupted", "interrupted by the user"))
            for node in self.tree.with_status("running"):
                self.tree.requeue(node)
            state.status = "interrupted"
            state.stop_reason = "interrupted"
            self.saver.save_now(state)
            raise
        await self._record(stop)
        # The writer never reads the summary: the report is written while the last
        # findings are folded in, and the run ends when both are done.
        folding = asyncio.create_task(self._fold_last())
        try:
            self.report = await self._write_report()
            await folding
        finally:
            folding.cancel()  # a failed or interrupted phase: a resume folds the rest in
        return state

    async def _loop(self, previous: Stop | None) -> Stop:
        step: Step = self.state.phase
        while not isinstance(step, Stop):
            step = await self._next(step, previous)
        return self._announce(step)

    async def _next(self, phase: Phase, previous: Stop | None) -> Step:
        state = self.state
        if phase == "plan":
            return await self._plan(None, replan=False)
        if phase == "execute":
            return await self._execute()
        if phase == "replan":
            if state.iteration >= state.limits.max_iterations:
                return Stop("max_iterations", f"{state.iteration} iterations done")
            verdict = state.iterations[-1].verdict if state.iterations else None
            return await self._plan(verdict, replan=True)
        # finished: research is over; a resume only writes what the report still lacks
        return previous or Stop("complete", state.stop_detail)

    def _run_deadline(self) -> float:
        """Loop time at which ``max_runtime_seconds`` is reached."""
        loop_now = asyncio.get_running_loop().time()
        return loop_now + max(0.0, self.state.limits.max_runtime_seconds - self.guard.elapsed)

    def _loop_deadline(self) -> float:
        """When research stops: the run's limit, less the time kept for writing (at most a
        quarter of the run)."""
        allowance = min(
            self.config.write_allowance_seconds, self.state.limits.max_runtime_seconds / 4
        )
        return self._run_deadline() - allowance

    def _announce(self, stop: Stop) -> Stop:
        self._on_event(f"stopping: {stop.reason} ({stop.detail})")
        return stop

    def _finish_deadline(self) -> float:
        """When a phase after research must end: the run's deadline; a run stopped by its
        time limit still gets part of its grace period to write and check."""
        loop_time = asyncio.get_running_loop().time()
        return max(self._run_deadline(), loop_time + self.config.finish_grace_seconds / 4)

    async def _save(self) -> None:
        await self.saver.save(self.state)

    # --- plan ---------------------------------------------------------------

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
            plan = await self.engine.planner.plan(request, self.guard.meter())
            tasks = plan.tasks
        except StructuredOutputError as exc:
            if replan:
                return Stop("error", f"replanning failed: {exc}")
            # A plan the model could not write (a small model, a server without structured
            # output): the question itself is still worth researching, as after an empty plan.
            self._on_event(f"the plan could not be read ({exc})")
            tasks = []
        except ProviderError as exc:
            if replan:
                return Stop("error", f"replanning failed: {exc}")
            raise
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
            fallback = PlannedTask(
                id="q1",
                question=state.question,
                depends_on=[],
                parallelizable=True,
                priority=5,
                source_hint="mixed"
                if "mixed" in policy.allowed_sources
                else policy.allowed_sources[0],
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
        if stops:  # the last findings are folded in while the report is written
            return stops[0]
        return await self._review()

    async def _run_node(self, node: ResearchNode) -> Stop | None:
        """Research one node; a ``Stop`` when the budget cannot cover it (it is requeued)."""
        if node.job_intents:  # an earlier process sent a paid create and lost its id
            blocked = self.tree.fail(node, lost_job_reason(node, self.state.session_id))
            self._on_event(
                f"failed {node.id}: {node.error}"
                + (f" (blocked {', '.join(blocked)})" if blocked else "")
            )
            await self._save()
            return None
        self.tree.start(node)
        self._on_event(f"started {node.id}")
        await self._save()

        async def on_remote_job(name: str, response_id: str | None) -> None:
            if response_id is None:
                node.remote_jobs.pop(name, None)
                node.job_intents.pop(name, None)
                await self._save()
                return
            # A paid create about to leave, or its id: written synchronously, ahead of any
            # queued checkpoint.
            if response_id == CREATE_INTENT:
                node.job_intents[name] = utcnow()
            else:
                node.remote_jobs[name] = response_id
                node.job_intents.pop(name, None)
            self.saver.save_now(self.state)

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
            self._on_event(
                f"cancelled {node.id}" + (f" (blocked {', '.join(blocked)})" if blocked else "")
            )
        except SettingRefused:  # every node would be refused alike: the run stops (``run``)
            self.tree.requeue(node)
            raise
        except (BranchError, ProviderError) as exc:
            blocked = self.tree.fail(node, str(exc))
            self._on_event(
                f"failed {node.id}: {exc}" + (f" (blocked {', '.join(blocked)})" if blocked else "")
            )
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
        """Fold finished nodes into the summary beside research: nothing waits for it until
        the review, where the last fold runs beside the outline (and, at the last
        iteration, beside the judge too: ``_fold_rest_soon``)."""
        if self._folding is None or self._folding.done():
            self._folding = asyncio.create_task(self._fold_summary())

    def _fold_rest_soon(self) -> None:
        """Fold every done node in, beside what follows (``_folded`` waits for it)."""
        previous = self._folding

        async def rest() -> None:
            if previous is not None:
                await previous
            await self._fold_summary()

        self._folding = asyncio.create_task(rest())

    async def _folded(self) -> None:
        """The summary with every done node folded in."""
        if self._folding is not None:
            await self._folding
        await self._fold_summary()

    def _drop_background(self) -> None:
        for task in (self._folding, self._writing):
            if task is not None:
                task.cancel()

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
        record = state.iterations[-1]
        final = state.iteration >= state.limits.max_iterations
        try:
            # The outline reads the nodes, not the summary: it is made while the last
            # findings are folded in.
            outlining = self.engine.writer.outline(state, self.guard.meter())
            if final:
                # No verdict can add research now: the judge reads the outline (every
                # done node), the summary as it stands and the notes it does not hold yet,
                # while those are folded in beside it; the run's end waits for that fold.
                self._fold_rest_soon()
                writing = await outlining
            else:
                _, writing = await asyncio.gather(self._folded(), outlining)
            if writing is not None:
                state.writing = writing
            await self._save()
            if (stop := limit_stop(self.guard)) is not None:
                return stop
            if final:  # the sections are written beside the judge
                self._start_writing()
            self._on_event("judging the outline")
            outline = writing_text(writing) if writing is not None else "(no outline)"
            verdict = await self._judge(
                JudgeRequest(
                    state.question,
                    state.summary,
                    cap_tokens(outline, 2 * self.config.summary_cap_tokens),
                    context.overview(state.nodes.values()),
                    context.unmerged(state, self.config.summary_cap_tokens // 2),
                ),
                record,
            )
        except ProviderError as exc:
            return Stop("error", f"review failed: {exc}")
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

    # --- stop ---------------------------------------------------------------

    async def _record(self, stop: Stop) -> None:
        """Record why the run stopped, and start writing (if the last iteration has not):
        what the research left unanswered, which the lead says, is known now."""
        state = self.state
        state.stop_reason, state.stop_detail = stop.reason, stop.detail
        state.status = (
            "complete"
            if stop.reason == "complete"
            else ("failed" if stop.reason == "error" else "stopped")
        )
        self._start_writing()
        assert self._gaps is not None
        self._gaps.set_result(tuple(context.gaps(state)))
        await self._save()

    async def _fold_last(self) -> None:
        """Fold what is left into the summary, within a grace period past any limit (a
        resume folds in whatever this could not)."""
        try:
            async with asyncio.timeout(self.config.finish_grace_seconds):
                await self._folded()
        except (ProviderError, TimeoutError) as exc:
            self._on_event(f"the last summary merge failed ({exc or 'timed out'})")
        await self._save()

    async def _write_report(self) -> Report:
        """The phases after research: the writer (a saved phase, inside the run's time and
        money), then each checker in turn."""
        assert self._writing is not None, "started when the run stopped (_record)"
        report = await self._writing
        for checker in self.engine.checkers:
            job = CheckJob(
                state=self.state,
                report=report,
                meter=self.guard.meter(),
                save=self._save,
                deadline=self._finish_deadline(),
                money=self.guard.remaining_usd() + self.guard.final_reserve_usd,
                store=self.claims,
            )
            report = await checker.check(job)
        return report

    def _start_writing(self) -> None:
        """Start the writer (once): its sections need only the outline; it waits for the
        gaps, known when the run has stopped, before the lead."""
        if self._writing is not None:
            return
        if self.tree.with_status("done"):
            self._on_event("writing the report")
        loop = asyncio.get_running_loop()
        gaps = self._gaps = loop.create_future()

        async def known_gaps() -> tuple[str, ...]:
            return await asyncio.shield(gaps)

        job = WriteJob(
            state=self.state,
            meter=self.guard.meter(),
            save=self._save,
            deadline=self._finish_deadline(),
            money=self.guard.remaining_usd() + self.guard.final_reserve_usd,
            gaps=known_gaps,
            spare_usd=self.guard.remaining_usd(),
            spare_tokens=self.guard.remaining_tokens(),
        )
        self._writing = asyncio.create_task(self.engine.writer.write(job))
