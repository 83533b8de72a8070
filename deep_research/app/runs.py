"""Runs started by a server process (the HTTP API, the MCP server), executed in it.

Each run is an asyncio task that owns its session's lock from the moment the session is
created until the run ends, exactly as a CLI run does (``lifecycle.start`` / ``reopen`` and
``execute``), so the CLI can watch, cancel and later resume what a server started, and
the other way round.

Invariants:
- ``start`` and ``resume`` return the session id as soon as the session is saved (and
  locked); the research goes on in the task.
- At most ``max_runs`` research at once in the process; the others wait their turn and
  say so in their event log.
- A request above the server's caps is refused before anything is saved: its ``max_cost``
  over ``max_cost_per_run``, or one that does not fit in what is left of the UTC day's
  ``daily_budget``. Admitting a run reserves its cost limit in the daily ledger every server
  process shares (``persistence.daily``), so what the day's sessions spent plus what the
  admitted runs may still spend never passes the budget, however many runs arrive at once
  and at however many servers. A run given no ``max_cost`` gets the least of the configured
  limit, the cap and what today has left; a resume may spend at most the least of the cap
  and what today has left, on top of what the session spent before, and reserves that.
- A run's reservation is released when it ends with nothing left running at the provider
  (its spend is then in its session's ledger); otherwise (interrupted, jobs still out) it is
  held until the end of its UTC day, and a resume reserves again.
- ``cancel`` stops the local task (the run is saved as interrupted, its lock released),
  then cancels the session's research jobs at the provider and records the cancelled
  nodes, which ``resume`` leaves alone. ``shutdown`` saves every run as interrupted.
- In a team (``settings.database_url``), ``start`` and ``resume`` save the run as queued
  and put it on the team's queue (``app.queue``) instead; its workers research it (this
  process too, with ``local_worker``: ``open``); ``cancel`` takes it off the queue or
  stops it on the worker that holds it.
- How ``auto`` chose the web engine is logged once (``say_engine``): at start by the HTTP
  server's warm-up, at the first run by the MCP server (which starts without the engine);
  a run records it in its event log and run spec as a CLI run does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import AsyncGenerator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deep_research.app import lifecycle, preparation, saved
from deep_research.app.config import Settings
from deep_research.app.options import ResumeRequest, RunOptions
from deep_research.app.saved import sessions
from deep_research.core.budget import totals
from deep_research.core.errors import BudgetTooSmall, DeepResearchError, StorageError, UsageError
from deep_research.core.events import RunEvent
from deep_research.core.models import SessionState
from deep_research.persistence.daily import DIR, DailyLedger, Reservation, open_book
from deep_research.persistence.port import Events, team_extra

if TYPE_CHECKING:
    from deep_research.app.queue import RunQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caps:
    max_runs: int = 2
    """Runs researching at once in this process; more wait their turn."""
    max_cost_per_run: float = 5.0
    daily_budget: float = 50.0
    """USD all sessions may spend in one UTC day (what is in their ledgers), reservations
    of admitted runs included."""


class RunManager:
    def __init__(
        self, settings: Settings, caps: Caps | None = None, *, local_worker: bool = True
    ) -> None:
        self.settings = settings
        self.caps = caps or Caps(
            settings.server_max_runs, settings.server_max_cost_usd, settings.server_daily_budget_usd
        )
        self.ledger = daily_ledger(settings, self.caps.daily_budget)
        self.team = settings.database_url is not None  # runs go to the team's queue
        self.local_worker = local_worker and self.team  # this process is a worker too
        self._queue: RunQueue | None = None
        self._opening = asyncio.Lock()
        self._worker: threading.Thread | None = None
        self._worker_stop = threading.Event()
        self._slots = asyncio.Semaphore(self.caps.max_runs)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._logs: dict[str, Events] = {}
        self._closing = False
        self._engine_said = ""

    def open(self) -> None:
        """As the server starts: in a team, with ``local_worker``, this process starts
        researching the team's queued runs in a thread (``team.work``) until ``shutdown``."""
        if self.local_worker and self._worker is None:
            with team_extra():
                from deep_research.app import team  # DBOS: a team's only

            self._worker = team.in_thread(self.settings, self._worker_stop)

    def say_engine(self, prepared: preparation.Prepared) -> None:
        """Log how ``auto`` chose the web engine, and why, once per choice: a fallback to
        search-and-read as a warning, research jobs as information."""
        choice = prepared.engine_choice
        if choice and choice != self._engine_said:
            self._engine_said = choice
            level = logging.WARNING if prepared.engine_fallback else logging.INFO
            log.log(level, "%s", choice)

    async def start(self, question: str, options: RunOptions) -> str:
        """Prepare, check and save a new run, then research it in the background. Its cost
        limit is reserved in today's budget first; any failure before the run is launched
        gives it back."""
        asked = options.max_cost_usd
        self._admit({"max_cost_usd": asked})
        queue = await self._team_queue() if self.team else None  # out of reach: refused now
        wanted = asked or min(self.settings.max_cost_usd, self.caps.max_cost_per_run)
        held = await self._reserve(wanted, exact=asked is not None)
        stack = ExitStack()
        try:
            options = options.model_copy(update={"max_cost_usd": held.amount_usd})
            prepared = preparation.prepare(self.settings, question, options)
            prepared = await preparation.choose_engine(prepared)
            estimate = await asyncio.to_thread(preparation.estimate, prepared)
            refused = await asyncio.to_thread(preparation.refusal, prepared, estimate)
            if refused is not None:  # as the CLI refuses it: before anything is spent
                raise BudgetTooSmall(refused)
            self.say_engine(prepared)
            if not prepared.extractive:
                await preparation.check_models(prepared)
            run = stack.enter_context(lifecycle.start(prepared, _say_nothing))
            await asyncio.to_thread(self.ledger.attach, held.id, run.state.session_id)
        except BaseException:
            stack.close()
            self._release(held.id, "not started")
            raise
        if queue is not None:
            return await self._hand_over(run, stack, queue, held.id)
        return self._launch(run, stack, held.id)

    async def resume(self, session_id: str, request: ResumeRequest) -> str:
        self._admit(request.given())
        queue = await self._team_queue() if self.team else None
        # What it may spend now: the per-run cap and today's budget bound the new spend.
        state = saved.status(self.settings, session_id)
        spent = totals(state.ledger).cost_usd
        limit = request.max_cost_usd or state.limits.max_cost_usd
        wanted = max(0.0, min(limit - spent, self.caps.max_cost_per_run))
        held = await self._reserve(wanted, exact=False, replacing=state.session_id)
        budget = request.model_copy(update={"max_cost_usd": min(limit, spent + held.amount_usd)})
        stack = ExitStack()
        try:
            run = stack.enter_context(
                lifecycle.reopen(
                    self.settings,
                    state.session_id,
                    budget,
                    max_parallel=request.max_parallel,
                    retry_cancelled=request.retry_cancelled,
                    resubmit_lost=request.resubmit_lost,
                    on_info=_say_nothing,
                )
            )
            queued = run.state.status == "queued"  # no worker to take it: queued again
            if queue and queued and await asyncio.to_thread(queue.active, state.session_id):
                raise UsageError(f"session {state.session_id} is queued already")
            await asyncio.to_thread(self.ledger.attach, held.id, run.state.session_id)
        except BaseException:
            stack.close()
            self._release(held.id, state.session_id)
            raise
        if queue is not None:  # (queued, and no worker to take it: queued again)
            return await self._hand_over(run, stack, queue, held.id)
        return self._launch(run, stack, held.id)

    async def _hand_over(
        self, run: lifecycle.Run, stack: ExitStack, queue: RunQueue, reservation: str
    ) -> str:
        """Queue ``run`` for the team's workers: saved as queued, let go of, then put on
        ``queue``. Should the queue refuse it, its reservation is given back; a caller that
        goes away meanwhile does not stop the put."""
        session_id = run.state.session_id
        try:
            with stack:
                await lifecycle.hand_over(run)
        except BaseException:  # not saved as queued: nothing will run it
            self._release(reservation, session_id)
            raise
        put = asyncio.ensure_future(asyncio.to_thread(queue.put, session_id, again=run.resumed))

        def refused(done: asyncio.Future[str]) -> None:
            if done.cancelled() or done.exception() is not None:
                self._release(reservation, session_id)

        try:
            await asyncio.shield(put)
        except asyncio.CancelledError:
            put.add_done_callback(refused)
            raise
        except BaseException:
            self._release(reservation, session_id)
            raise
        return session_id

    async def _team_queue(self) -> RunQueue:
        """The team's queue, opened at first use (off the loop: it may migrate its tables)."""
        async with self._opening:
            if (queue := self._queue) is None:
                with team_extra():
                    from deep_research.app import queue as team_queue  # DBOS: a team's only

                queue = self._queue = await asyncio.to_thread(team_queue.RunQueue, self.settings)
        return queue

    async def _reserve(self, amount: float, **how: Any) -> Reservation:
        """``ledger.reserve`` off the loop. A caller cancelled meanwhile (a client going
        away) cannot stop the thread: what it reserves is given back when it ends, never
        held for the rest of the day by a run that was not started."""
        pending = asyncio.ensure_future(asyncio.to_thread(self.ledger.reserve, amount, **how))
        try:
            return await asyncio.shield(pending)
        except asyncio.CancelledError:
            pending.add_done_callback(self._give_back)
            raise

    def _give_back(self, reserved: asyncio.Future[Reservation]) -> None:
        if not reserved.cancelled() and reserved.exception() is None:
            self._release(reserved.result().id, "not started")

    def _admit(self, given: dict[str, Any]) -> None:
        """Refuse, before anything is saved, a request while the server shuts down, a limit
        no run can have, or a ``max_cost_usd`` over the per-run cap."""
        if self._closing:
            raise UsageError("the server is shutting down: it starts no new runs")
        preparation.check_budget(given)
        asked = given.get("max_cost_usd")
        if asked is not None and asked > self.caps.max_cost_per_run:
            raise UsageError(
                f"max_cost ${asked:.2f} is over this server's cap of "
                f"${self.caps.max_cost_per_run:.2f} a run (DEEP_RESEARCH_SERVER_MAX_COST_USD)"
            )

    def _launch(self, run: lifecycle.Run, stack: ExitStack, reservation: str) -> str:
        """Research ``run`` in a task. ``stack`` holds the session's lock, from its creation
        to the end of the task, however it ends: even cancelled before its first step.
        ``reservation`` (its share of today's budget) is released once the session's last
        state is saved, if nothing of it is left running at the provider."""
        session_id = run.state.session_id
        began = asyncio.Event()
        task = asyncio.create_task(
            self._research(run, began, reservation), name=f"research {session_id}"
        )
        self._tasks[session_id] = task
        self._logs[session_id] = run.events

        def finished(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(session_id, None)
            self._logs.pop(session_id, None)
            with stack:
                if not began.is_set():  # stopped while queued: nothing researched or spent
                    lifecycle.interrupt_unstarted(run)
            if not began.is_set() and not jobs_out(run.state):  # (a resume's may be out)
                self._release(reservation, session_id)

        task.add_done_callback(finished)
        return session_id

    def _release(self, reservation: str | None, session_id: str) -> None:
        """End ``reservation`` (None: every reservation of ``session_id``)."""
        try:
            if reservation is None:
                self.ledger.release_session(session_id)
            else:
                self.ledger.release(reservation)
        except (DeepResearchError, OSError):  # then held until its day ends: the safe side
            log.exception("could not release the reservation of run %s", session_id)

    async def _research(self, run: lifecycle.Run, began: asyncio.Event, reservation: str) -> None:
        if self._slots.locked():
            run.events.append(
                RunEvent(
                    type="message",
                    message=f"queued: {self.caps.max_runs} runs are researching "
                    f"({len(self.running()) - 1} waiting); this one starts when one ends",
                )
            )
        async with self._slots:
            began.set()
            try:
                await lifecycle.execute(run, _say_nothing)
            except asyncio.CancelledError:
                lifecycle.save_interrupted(run)
                raise
            except Exception:
                # In the session's event log already; a server has no one to raise it to.
                log.exception("run %s failed", run.state.session_id)
                lifecycle.save_interrupted(run)
        # Saved above: what it spent is on disk before its reservation goes. Off the loop,
        # as the ledger's lock may be held by another process counting the day.
        if ended(run.state):
            await asyncio.to_thread(self._release, reservation, run.state.session_id)

    async def watch(
        self, session_id: str, *, after: int | None = None
    ) -> AsyncGenerator[RunEvent, None]:
        """The run's events (``saved.watch``): pushed as they happen from a run of this
        process; in a team, followed while a worker runs it or will (a dead worker's run
        too, until another resumes it: its ids go on)."""
        session_id = sessions(self.settings).resolve(session_id)
        pending = None
        if self.team:
            pending = functools.partial((await self._team_queue()).active, session_id)
        live = self._logs.get(session_id)
        watching = saved.watch(self.settings, session_id, after=after, live=live, pending=pending)
        async with contextlib.aclosing(watching):
            async for event in watching:
                yield event

    def running(self) -> list[str]:
        return [sid for sid, task in self._tasks.items() if not task.done()]

    async def wait(self, session_id: str) -> None:
        """Until the run of ``session_id`` in this process has ended (at once if none).
        Cancelling the waiter leaves the run alone."""
        if (task := self._tasks.get(session_id)) is not None:
            await asyncio.wait({task})

    async def cancel(self, session_id: str) -> lifecycle.CancelResult:
        session_id = sessions(self.settings).resolve(session_id)
        await self._stop(session_id)
        never_begun, failure = (await self._stop_queued(session_id)) if self.team else (False, None)
        result = await lifecycle.cancel(self.settings, session_id)
        if never_begun and not jobs_out(saved.status(self.settings, session_id)):
            await asyncio.to_thread(self._release, None, session_id)  # nothing spent
        if failure is not None:  # said after the jobs' cancels, which went ahead
            raise StorageError(f"{failure}: its research jobs were cancelled; the run may go on")
        return result

    async def _stop_queued(self, session_id: str) -> tuple[bool, StorageError | None]:
        """Off the team's queue, or stopped on the worker that holds it (``RunQueue.stop``):
        whether it had never begun, or why the queue could not be asked."""
        try:
            return await asyncio.to_thread((await self._team_queue()).stop, session_id), None
        except StorageError as exc:
            return False, exc

    async def shutdown(self) -> None:
        """Stop every run (each saved as interrupted; resume picks them up), and refuse new
        ones: a run launched meanwhile (its start was checking models) is stopped too."""
        self._closing = True
        while self._tasks:
            await asyncio.gather(*(self._stop(sid) for sid in list(self._tasks)))
        if self._worker is not None:  # its runs saved as interrupted; another worker's next
            self._worker_stop.set()
            await asyncio.to_thread(self._worker.join)
        if self._queue is not None:
            self._queue.close()
            self._queue = None

    async def _stop(self, session_id: str) -> None:
        """Cancel the run's task and wait until it has saved the run and let go of its lock
        (its done callback has run)."""
        if (task := self._tasks.get(session_id)) is not None:
            task.cancel()
        await self.wait(session_id)


def ended(state: SessionState) -> bool:
    """The run has ended with nothing left running at the provider: its reservation of the
    day's budget may go (what it spent is in its ledger)."""
    return state.status in ("complete", "stopped", "failed") and not jobs_out(state)


def jobs_out(state: SessionState) -> bool:
    """Research jobs of the session may still be running (and billing) at the provider."""
    return any(node.remote_jobs for node in state.nodes.values())


def daily_ledger(settings: Settings, budget_usd: float | None = None) -> DailyLedger:
    """The daily budget's ledger, shared by every server process: in the data directory,
    or in a team's database when the sessions are there (every machine's servers)."""
    budget = settings.server_daily_budget_usd if budget_usd is None else budget_usd
    url = settings.database_url.get_secret_value() if settings.database_url else None
    return DailyLedger(open_book(settings.home / DIR, url), sessions(settings), budget)


def _say_nothing(_message: object) -> None:
    """A server's runs report through their event log, not a terminal."""
