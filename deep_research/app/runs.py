"""Runs started by a server process (the HTTP API, the MCP server), executed in it.

Each run is an asyncio task that owns its session's lock from the moment the session is
created until the run ends, exactly as a CLI run does (``service.start`` / ``reopen`` and
``execute``), so the CLI can watch, cancel and later resume what a server started, and
the other way round.

Invariants:
- ``start`` and ``resume`` return the session id as soon as the session is saved (and
  locked); the research goes on in the task.
- At most ``max_runs`` research at once in the process; the others wait their turn and
  say so in their event log.
- A request above the server's caps is refused before anything is saved: its ``max_cost``
  over ``max_cost_per_run``, or a run whose cost limit would take today's spend (every
  session's ledger entries of the UTC day) over ``daily_budget``. A run given no
  ``max_cost`` gets the least of the configured limit, the cap and what today has left; a
  resume may spend at most the least of the cap and what today has left, on top of what
  the session spent before.
- ``cancel`` stops the local task (the run is saved as interrupted, its lock released),
  then cancels the session's research jobs at the provider and records the cancelled
  nodes, which ``resume`` leaves alone. ``shutdown`` saves every run as interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from deep_research.app import service
from deep_research.app.config import Settings
from deep_research.core.budget import totals
from deep_research.core.errors import SessionError, UsageError
from deep_research.core.events import RunEvent
from deep_research.core.models import SessionState
from deep_research.persistence.events import EventLog
from deep_research.persistence.sessions import SessionStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caps:
    max_runs: int = 2
    """Runs researching at once in this process; more wait their turn."""
    max_cost_per_run: float = 5.0
    daily_budget: float = 50.0
    """USD all sessions may spend in one UTC day (what is in their ledgers)."""

    @classmethod
    def of(cls, settings: Settings) -> Caps:
        return cls(
            settings.server_max_runs,
            settings.server_max_cost_usd,
            settings.server_daily_budget_usd,
        )


class RunManager:
    def __init__(self, settings: Settings, caps: Caps | None = None) -> None:
        self.settings = settings
        self.caps = caps or Caps.of(settings)
        self._slots = asyncio.Semaphore(self.caps.max_runs)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._logs: dict[str, EventLog] = {}
        self._closing = False

    # --- starting ------------------------------------------------------------------------

    async def start(self, question: str, options: service.RunOptions) -> str:
        """Prepare, check and save a new run, then research it in the background."""
        self._check_open()
        prepared = service.prepare(self.settings, question, self._capped(options))
        prepared = await service.choose_engine(prepared)
        if not prepared.extractive:
            await service.check_models(prepared)
        stack = ExitStack()
        run = stack.enter_context(service.start(prepared, _say_nothing))
        return self._launch(run, stack)

    async def resume(
        self, session_id: str, budget: service.BudgetOverrides, *, retry_cancelled: bool = False
    ) -> str:
        self._check_open()
        cost = budget.max_cost_usd
        if cost is not None and cost > self.caps.max_cost_per_run:
            raise UsageError(self._over_cap(cost))
        # What it may spend now: the per-run cap and today's budget bound the new spend.
        state = service.status(self.settings, session_id)
        spent = totals(state.ledger).cost_usd
        left = self.caps.daily_budget - spent_today(self.settings)
        room = min(self.caps.max_cost_per_run, left)
        if room <= 0:
            raise UsageError(self._no_budget_left(left))
        limit = min(cost or state.limits.max_cost_usd, spent + room)
        budget = replace(budget, max_cost_usd=limit)
        stack = ExitStack()
        run = stack.enter_context(
            service.reopen(
                self.settings,
                session_id,
                budget,
                max_parallel=None,
                retry_cancelled=retry_cancelled,
                on_info=_say_nothing,
            )
        )
        return self._launch(run, stack)

    def _check_open(self) -> None:
        if self._closing:
            raise UsageError("the server is shutting down: it starts no new runs")

    def _capped(self, options: service.RunOptions) -> service.RunOptions:
        asked = options.max_cost_usd
        if asked is not None and asked > self.caps.max_cost_per_run:
            raise UsageError(self._over_cap(asked))
        left = self.caps.daily_budget - spent_today(self.settings)
        limit = min(asked or self.settings.max_cost_usd, self.caps.max_cost_per_run, left)
        if limit <= 0 or (asked is not None and asked > left):
            raise UsageError(self._no_budget_left(left))
        return replace(options, max_cost_usd=limit)

    def _no_budget_left(self, left: float) -> str:
        return (
            f"today's server budget of ${self.caps.daily_budget:.2f} has "
            f"${max(0.0, left):.2f} left: not enough for this run "
            "(DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD)"
        )

    def _over_cap(self, asked: float) -> str:
        return (
            f"max_cost ${asked:.2f} is over this server's cap of "
            f"${self.caps.max_cost_per_run:.2f} a run (DEEP_RESEARCH_SERVER_MAX_COST_USD)"
        )

    def _launch(self, run: service.Run, stack: ExitStack) -> str:
        """Research ``run`` in a task. ``stack`` holds the session's lock, from its creation
        to the end of the task, however it ends: even cancelled before its first step."""
        session_id = run.state.session_id
        began = asyncio.Event()
        task = asyncio.create_task(self._research(run, began), name=f"research {session_id}")
        self._tasks[session_id] = task
        self._logs[session_id] = run.events

        def finished(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(session_id, None)
            self._logs.pop(session_id, None)
            with stack:
                if not began.is_set():  # stopped while queued: nothing researched or spent
                    service.interrupt_unstarted(run)

        task.add_done_callback(finished)
        return session_id

    async def _research(self, run: service.Run, began: asyncio.Event) -> None:
        if self._slots.locked():
            waiting = sum(1 for t in self._tasks.values() if not t.done())
            run.events.append(
                RunEvent(
                    type="message",
                    message=f"queued: {self.caps.max_runs} runs are researching "
                    f"({waiting - 1} waiting); this one starts when one ends",
                )
            )
        async with self._slots:
            began.set()
            try:
                await service.execute(run, _say_nothing)
            except asyncio.CancelledError:
                service.save_interrupted(run)
                raise
            except Exception:
                # In the session's event log already; a server has no one to raise it to.
                log.exception("run %s failed", run.state.session_id)
                service.save_interrupted(run)

    # --- following and stopping ------------------------------------------------------------

    def live_log(self, session_id: str) -> EventLog | None:
        """The event log of a run this process runs now (None: it runs no such run)."""
        return self._logs.get(SessionStore(self.settings.sessions_dir).resolve(session_id))

    def running(self) -> list[str]:
        return [sid for sid, task in self._tasks.items() if not task.done()]

    async def wait(self, session_id: str) -> None:
        """Until the run of ``session_id`` in this process has ended (at once if none).
        Cancelling the waiter leaves the run alone."""
        task = self._tasks.get(session_id)
        if task is not None:
            await asyncio.wait({task})

    async def cancel(self, session_id: str) -> service.CancelResult:
        """Stop the run here (saved as interrupted), then its research jobs at the provider;
        the cancelled nodes are recorded, and ``resume`` leaves them alone."""
        session_id = SessionStore(self.settings.sessions_dir).resolve(session_id)
        await self._stop(session_id)
        return await service.cancel(self.settings, session_id)

    async def shutdown(self) -> None:
        """Stop every run (each saved as interrupted; resume picks them up), and refuse new
        ones: a run launched meanwhile (its start was checking models) is stopped too."""
        self._closing = True
        while self._tasks:
            await asyncio.gather(*(self._stop(sid) for sid in list(self._tasks)))

    async def _stop(self, session_id: str) -> None:
        """Cancel the run's task and wait until it has saved the run and let go of its lock
        (its done callback has run)."""
        task = self._tasks.get(session_id)
        if task is not None:
            task.cancel()
            await asyncio.wait({task})


def spent_today(settings: Settings, now: datetime | None = None) -> float:
    """USD in every session's ledger entries of today (UTC)."""
    today = (now or datetime.now(UTC)).date()
    store = SessionStore(settings.sessions_dir)
    total = 0.0
    for state in _states(store):
        total += sum(e.cost_usd for e in state.ledger if e.at.astimezone(UTC).date() == today)
    return total


def _states(store: SessionStore) -> Iterator[SessionState]:
    for summary in store.list():
        with contextlib.suppress(SessionError):
            yield store.load(summary.session_id)


def _say_nothing(_message: object) -> None:
    """A server's runs report through their event log, not a terminal."""
