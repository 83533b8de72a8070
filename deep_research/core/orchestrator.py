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
- stopping is data too: each phase returns the next phase or a ``Stop``, and the first
  ``Stop`` ends the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeAlias

from deep_research.core import context, evidence
from deep_research.core.citations import register
from deep_research.core.errors import (
    BranchError,
    BudgetExhausted,
    JobCancelled,
    ProviderError,
)
from deep_research.core.guard import BudgetGuard
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import (
    IterationRecord,
    PlannedTask,
    ResearchNode,
    SessionState,
    SourceHint,
    StopReason,
    Usage,
    Verdict,
)
from deep_research.core.ports import (
    BUILTIN_SOURCES,
    BranchExecutor,
    BranchTask,
    CheckJob,
    ClaimStore,
    EvidenceSink,
    JobControl,
    JobEvent,
    Judge,
    JudgeRequest,
    NodeDigest,
    Planner,
    PlanRequest,
    ReportChecker,
    ReportWriter,
    Summarizer,
    WriteJob,
)
from deep_research.core.report import AssembledReport, Report
from deep_research.core.scheduler import run_dag
from deep_research.core.tree import PlanPolicy, ResearchTree
from deep_research.core.writing import outline_text as writing_text


@dataclass(frozen=True)
class RunConfig:
    max_depth: int = 3
    max_parallel: int = 4
    max_nodes_per_plan: int = 8
    summary_cap_tokens: int = 2000
    allowed_sources: tuple[SourceHint, ...] = ("web", "internal", "mixed")
    source_descriptions: Mapping[SourceHint, str] = field(
        default_factory=lambda: dict(BUILTIN_SOURCES)
    )
    """What each source holds, as the planner reads it (built-ins and registered ones)."""
    finish_grace_seconds: float = 120.0
    write_allowance_seconds: float = 0.0
    """Time kept for writing the report: research starts nothing once less is left."""


@dataclass(frozen=True)
class Engine:
    """The ports one run talks to, built from Settings in ``wiring.py`` (or fakes in tests)."""

    planner: Planner
    executor: BranchExecutor
    summarizer: Summarizer
    judge: Judge
    jobs: JobControl | None = None
    """Cancels remote jobs left in flight by a time limit; None when there are none."""
    writer: ReportWriter = field(default_factory=AssembledReport)
    """Outlines what is done (the judge reads it), and writes the report after research."""
    checkers: tuple[ReportChecker, ...] = ()
    """The phases after the writer, in order: each checks the report and returns it."""


class SessionSaver(Protocol):
    """What the orchestrator needs from a session store (``sessions.Checkpointer`` fits)."""

    async def save(self, state: SessionState) -> None: ...

    def save_now(self, state: SessionState) -> None: ...


Listener = Callable[[str | JobEvent], None]
"""Receives what the run is doing: one-line messages, and each remote job's latest state."""

Phase = Literal["plan", "execute", "replan", "finished"]


@dataclass(frozen=True)
class Stop:
    """Why the loop ends, and the detail a reader of the report needs."""

    reason: StopReason
    detail: str


Step: TypeAlias = Phase | Stop
"""What a phase returns: the phase to run next, or the stop."""


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
            stop = self._announce(Stop("time_limit", _LIMIT_DETAIL["time_limit"]))
            await self._cancel_remote_jobs()
        except asyncio.CancelledError:
            self._drop_background()
            self._announce(Stop("interrupted", "interrupted by the user"))
            for node in self.tree.with_status("running"):
                self.tree.requeue(node)
            state.status = "interrupted"
            state.stop_reason = "interrupted"
            self.saver.save_now(state)
            raise
        await self._finish(stop)
        self.report = await self._write_report()
        return state

    async def _loop(self, previous: Stop | None) -> Stop:
        step: Step = self.state.phase
        while not isinstance(step, Stop):
            step = await self._next(step, previous)
        return self._announce(step)

    async def _next(self, phase: Phase, previous: Stop | None) -> Step:
        state = self.state
        if phase == "plan":
            return await self._plan(None)
        if phase == "execute":
            return await self._execute()
        if phase == "replan":
            if state.iteration >= state.limits.max_iterations:
                return Stop("max_iterations", f"{state.iteration} iterations done")
            return await self._plan(state.iterations[-1].verdict if state.iterations else None)
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

    def _limit_stop(self) -> Stop | None:
        reason = self.guard.stop_reason()
        return Stop(reason, _LIMIT_DETAIL[reason]) if reason is not None else None

    def _finish_deadline(self) -> float:
        """When a phase after research must end: the run's deadline; a run stopped by its
        time limit still gets part of its grace period to write and check."""
        loop_time = asyncio.get_running_loop().time()
        return max(self._run_deadline(), loop_time + self.config.finish_grace_seconds / 4)

    async def _save(self) -> None:
        await self.saver.save(self.state)

    # --- plan ---------------------------------------------------------------

    async def _plan(self, gaps: Verdict | None) -> Step:
        if (stop := self._limit_stop()) is not None:
            return stop
        state = self.state
        iteration = state.iteration + 1
        self._on_event("planning" if gaps is None else "replanning from the judge's gaps")
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
        except ProviderError as exc:
            if gaps is not None:
                return Stop("error", f"replanning failed: {exc}")
            raise
        policy = PlanPolicy(
            max_depth=self.config.max_depth,
            max_tasks=self.config.max_nodes_per_plan,
            allowed_sources=self.config.allowed_sources,
        )
        added, issues = self.tree.add_plan(tasks, iteration=iteration, policy=policy)
        if not added and gaps is None:
            # An unusable first plan still leaves the question itself worth researching.
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
            added, more = self.tree.add_plan([fallback], iteration=iteration, policy=policy)
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
            if not stops and (stop := self._limit_stop()) is not None:
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
        if stops:
            await self._folded()
            return stops[0]
        return await self._review()

    async def _run_node(self, node: ResearchNode) -> Stop | None:
        """Research one node; a ``Stop`` when the budget cannot cover it (it is requeued)."""
        self.tree.start(node)
        self._on_event(f"started {node.id}")
        await self._save()

        async def on_remote_job(name: str, response_id: str | None) -> None:
            if response_id is None:
                node.remote_jobs.pop(name, None)
                await self._save()
            else:
                # A paid job's id: written synchronously, ahead of any queued checkpoint.
                node.remote_jobs[name] = response_id
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
        except (BranchError, ProviderError) as exc:
            blocked = self.tree.fail(node, str(exc))
            self._on_event(
                f"failed {node.id}: {exc}" + (f" (blocked {', '.join(blocked)})" if blocked else "")
            )
        except asyncio.CancelledError:
            self.tree.requeue(node)
            raise
        else:
            notes, citations = register(self.state.sources, result.notes, result.citations)
            node.notes, node.citations = notes, citations
            node.researched_by = result.researched_by
            node.confidence = min(1.0, max(0.0, result.confidence))
            if self.evidence is not None:  # kept before the session counts them
                texts = evidence.source_texts(citations, result.source_texts)
                units = evidence.units_of(node, self.state.sources, texts)
                await self.evidence.keep(node.id, units)
                self.state.evidence_units += len(units)
            self.tree.finish(node)
            self._on_event(f"done {node.id}")
        await self._save()
        return None

    async def _fold_soon(self, _node: ResearchNode) -> None:
        """Fold finished nodes into the summary beside research: nothing waits for it until
        the review, where the last fold runs beside the outline."""
        if self._folding is None or self._folding.done():
            self._folding = asyncio.create_task(self._fold_summary())

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
            state = self.state
            while True:
                folded = set(state.summarized)
                todo = [
                    n for n in state.nodes.values() if n.status == "done" and n.id not in folded
                ]
                if not todo or self.guard.stop_reason() in ("token_limit", "cost_limit"):
                    return
                cap = self.config.summary_cap_tokens
                batch = context.take_batch(todo, cap // 2)
                digests = [
                    NodeDigest(n.id, n.question, cap_tokens(n.notes, cap // 2)) for n in batch
                ]
                try:
                    merged = await self.engine.summarizer.merge(
                        state.question, state.summary, digests, cap, self.guard.meter()
                    )
                except ProviderError as exc:
                    # Keep going on a plain merge: losing the summary would blind the judge.
                    # The newest findings go in whole; the old summary gives up the room.
                    self._on_event(f"summarizer failed ({exc}); appending notes instead")
                    new = "\n\n".join(d.notes for d in digests)
                    room = cap - estimate_tokens(new)
                    old = cap_tokens(state.summary, room) if room > 0 else ""
                    merged = "\n\n".join(part for part in (old, new) if part).strip()
                state.summary = cap_tokens(merged, cap)
                state.summarized.extend(n.id for n in batch)
                await self._save()

    # --- review: draft + judge ----------------------------------------------

    async def _review(self) -> Step:
        """Outline the report and judge the outline: complete, or replan from its gaps."""
        state = self.state
        if (stop := self._limit_stop()) is not None:
            return stop
        if not self.tree.with_status("done"):
            state.phase = "finished"
            await self._save()
            return Stop("nothing_to_do", "no sub-question could be researched")
        self._on_event("outlining the report")
        record = state.iterations[-1]
        try:
            # The outline reads the nodes, not the summary: it is made while the last
            # findings are folded in.
            _, writing = await asyncio.gather(
                self._folded(), self.engine.writer.outline(state, self.guard.meter())
            )
            if writing is not None:
                state.writing = writing
            await self._save()
            if (stop := self._limit_stop()) is not None:
                return stop
            if state.iteration >= state.limits.max_iterations:
                # No verdict can add research now: write the sections beside the judge.
                self._start_writing()
            self._on_event("judging the outline")
            outline = writing_text(writing) if writing is not None else "(no outline)"
            record.verdict = await self.engine.judge.judge(
                JudgeRequest(
                    state.question,
                    state.summary,
                    cap_tokens(outline, 2 * self.config.summary_cap_tokens),
                    context.overview(state.nodes.values()),
                ),
                self.guard.meter(),
            )
        except ProviderError as exc:
            return Stop("error", f"review failed: {exc}")
        complete = record.verdict.is_complete and not record.verdict.recommend_more_iterations
        state.phase = "finished" if complete else "replan"
        await self._save()
        if complete:
            score = record.verdict.overall_confidence
            if state.mode == "extractive":  # no model judged it: say what was measured
                return Stop("complete", f"passage coverage {score:.2f}")
            return Stop("complete", f"judge confidence {score:.2f}")
        return "replan"

    # --- stop ---------------------------------------------------------------

    async def _finish(self, stop: Stop) -> None:
        """Fold what is left into the summary (within a grace period past any limit) and
        record why the run stopped."""
        state = self.state
        try:
            async with asyncio.timeout(self.config.finish_grace_seconds):
                await self._folded()
        except (ProviderError, TimeoutError) as exc:
            self._on_event(f"the last summary merge failed ({exc or 'timed out'})")
        state.stop_reason, state.stop_detail = stop.reason, stop.detail
        state.status = (
            "complete"
            if stop.reason == "complete"
            else ("failed" if stop.reason == "error" else "stopped")
        )
        await self._save()

    async def _write_report(self) -> Report:
        """The phases after research: the writer (a saved phase, inside the run's time and
        money), then each checker in turn."""
        state = self.state
        self._start_writing()
        assert self._writing is not None
        assert self._gaps is not None
        if not self._gaps.done():
            self._gaps.set_result(tuple(context.gaps(state)))
        report = await self._writing
        for checker in self.engine.checkers:
            job = CheckJob(
                state=state,
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
        )
        self._writing = asyncio.create_task(self.engine.writer.write(job))

    async def _cancel_remote_jobs(self) -> None:
        """After a time limit: cancel the jobs the unwound branches left running, by their
        saved ids. An id is forgotten only when the provider confirms; the node stays pending
        (``resume`` researches it anew, or re-attaches where the cancel was not confirmed)."""
        jobs = self.engine.jobs
        owned = [
            (node, name, jid)
            for node in self.state.nodes.values()
            for name, jid in node.remote_jobs.items()
        ]
        if jobs is None or not owned:
            return
        outcomes = await asyncio.gather(*(jobs.cancel(jid) for _, _, jid in owned))
        model = self.state.run_spec.web_model or "unknown"
        for (node, name, jid), outcome in zip(owned, outcomes, strict=True):
            self._on_event(f"{node.id}: research job {jid} {outcome.status.replace('_', ' ')}")
            if outcome.status != "cancelled":
                # Unreachable: the id stays. Already finished: it stays too, so that resume
                # reads (and records) the finished result instead of paying for it again.
                continue
            self.guard.record(
                "deep_research",
                model,
                outcome.usage or Usage(),
                node_id=node.id,
                usage_unknown=outcome.usage is None,
            )
            node.remote_jobs.pop(name, None)
        await self._save()


_LIMIT_DETAIL: dict[StopReason, str] = {
    "time_limit": "the run reached max_runtime_seconds",
    "token_limit": "the run reached max_total_tokens",
    "cost_limit": "the run reached its cost limit",
}
