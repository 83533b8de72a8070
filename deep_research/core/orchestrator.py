"""A research run from start to end: the module to read first.

``ResearchOrchestrator.run`` drives a session: plan, research the ready sub-questions in
waves (at most ``max_parallel`` at once, each as soon as its dependencies are done), fold
the wave into the rolling summary beside the report's outline, judge the outline, and
replan from the judge's gaps, until the judge calls it complete or a limit is reached.
Then the report is written (outline, sections, lead: ``core.writing``), each checker
checks it (the claim check), and what a limit cut short is folded into the summary. The
phases themselves are in ``phases.py``; ``app/lifecycle.py`` builds a run and starts it.

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

from deep_research.core import context
from deep_research.core.errors import ProviderError
from deep_research.core.models import SessionState
from deep_research.core.phases import Phases
from deep_research.core.ports import CheckJob, WriteJob
from deep_research.core.remote_jobs import cancel_remote_jobs
from deep_research.core.report import Report
from deep_research.core.stops import LIMIT_DETAIL, Phase, Step, Stop


class ResearchOrchestrator(Phases):
    """Drives a session through its phases (``phases.py``) to a stop, then writes and checks
    its report: the run's whole flow, in order."""

    # --- the loop -----------------------------------------------------------

    async def run(self) -> SessionState:
        """Drive the session to a stop, then write its report (``report``)."""
        state = self.state
        self.guard.start()
        previous = Stop(state.stop_reason, state.stop_detail) if state.stop_reason else None
        state.status = "running"
        state.stop_reason = None
        self.tree.recover_interrupted()
        await self._save()
        try:
            async with asyncio.timeout_at(self._loop_deadline()):
                stop = await self._loop(previous)
        except ProviderError as exc:
            state.status, state.stop_reason, state.stop_detail = "failed", "error", str(exc)
            self.saver.save_now(state)
            raise
        except TimeoutError:
            stop = self._announce(Stop("time_limit", LIMIT_DETAIL["time_limit"]))
            await cancel_remote_jobs(
                self.state, self.engine.jobs, self.guard, self._on_event, self._save
            )
        except asyncio.CancelledError:
            self._announce(Stop("interrupted", "interrupted by the user"))
            for node in self.tree.with_status("running"):
                self.tree.requeue(node)
            state.status = "interrupted"
            state.stop_reason = "interrupted"
            self.saver.save_now(state)
            raise
        finally:
            self._drop_fold()  # what it had not folded is folded after the report
        await self._record(stop)
        self.report = await self._write_report()
        await self._fold_last()
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

    def _announce(self, stop: Stop) -> Stop:
        self._on_event(f"stopping: {stop.reason} ({stop.detail})")
        return stop

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

    def _finish_deadline(self) -> float:
        """When a phase after research must end: the run's deadline; a run stopped by its
        time limit still gets part of its grace period to write and check."""
        loop_time = asyncio.get_running_loop().time()
        return max(self._run_deadline(), loop_time + self.config.finish_grace_seconds / 4)

    # --- stop ---------------------------------------------------------------

    async def _record(self, stop: Stop) -> None:
        """Record why the run stopped."""
        state = self.state
        state.stop_reason, state.stop_detail = stop.reason, stop.detail
        state.status = (
            "complete"
            if stop.reason == "complete"
            else ("failed" if stop.reason == "error" else "stopped")
        )
        await self._save()

    async def _fold_last(self) -> None:
        """Fold what is left into the summary (findings of a wave a limit cut short), within
        a grace period past any limit; a resume folds in whatever this could not."""
        try:
            async with asyncio.timeout(self.config.finish_grace_seconds):
                await self._folded()
        except (ProviderError, TimeoutError) as exc:
            self._on_event(f"the last summary merge failed ({exc or 'timed out'})")
        await self._save()

    async def _write_report(self) -> Report:
        """The phases after research: the writer (a saved phase, inside the run's time and
        money; the lead says what the research left unanswered), then each checker in turn."""
        if self.tree.with_status("done"):
            self._on_event("writing the report")
        written = WriteJob(
            state=self.state,
            meter=self.guard.meter(),
            save=self._save,
            deadline=self._finish_deadline(),
            money=self.guard.remaining_usd() + self.guard.final_reserve_usd,
            gaps=tuple(context.gaps(self.state)),
            spare_usd=self.guard.remaining_usd(),
            spare_tokens=self.guard.remaining_tokens(),
        )
        report = await self.engine.writer.write(written)
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
