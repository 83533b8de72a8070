"""A team's workers: they research the runs queued in PostgreSQL (``app.queue``, DBOS).

    serve_worker(settings)          # `deep-research worker`: until SIGTERM or Ctrl-C
    work(settings, stopped)         # the same in a server's thread (``RunManager.open``)

DBOS is the queue, the one-runner guarantee and the recovery trigger; the run itself is
not split into DBOS steps. A run is one workflow (its id: the session's) of one step,
``research``, which is today's resume of the session: our own checkpoints decide what is
done, and research jobs already created are re-attached by their saved ids, never created
again. A step that starts over (its worker died) is therefore a resume, not a rerun.

Invariants:
- Workers of one release share ``APP_VERSION`` (never DBOS's default, a hash of the
  source): each recovers the others' workflows.
- Each worker process has its own executor id (``executor_id``): DBOS recovers a workflow
  on the executor id that ran it, so a shared one would run a live worker's runs twice.
- DBOS 3.4 recovers no dead worker by itself. Each worker beats in ``workers``
  (``persistence.workers``) every third of ``worker_timeout_seconds``, and reaps every
  quarter: the one worker that deletes a silent worker's row puts that executor's PENDING
  runs back on the queue, where a live worker takes them up.
- A session's lease lasts ``worker_timeout_seconds`` too (``saved.sessions``): by the time
  a worker is reaped, the leases of the runs it held have lapsed or soon will; the step
  waits for one at most twice that, and the lease's epoch fences the dead worker's writes
  should it come back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from dbos import DBOS, DBOSConfig

from deep_research.app import lifecycle, preparation, runs
from deep_research.app import warm as _warm
from deep_research.app.config import Settings
from deep_research.app.options import BudgetOverrides
from deep_research.app.queue import APP_NAME, APP_VERSION, QUEUE, WORKFLOW, dbos_url
from deep_research.app.saved import database_url, sessions
from deep_research.core.errors import DeepResearchError, SessionLocked, StorageError
from deep_research.persistence.workers import Heartbeats

if TYPE_CHECKING:
    from deep_research.core.models import SessionState
    from deep_research.core.ports import JobEvent
    from deep_research.persistence.port import Sessions

log = logging.getLogger(__name__)

_worker: dict[str, Settings] = {}
"""The settings of this process's worker, set by ``work`` before DBOS launches."""


# --- the workflow -----------------------------------------------------------------------


@DBOS.workflow(name=WORKFLOW)
async def run_session(session_id: str) -> str:
    """One run: one step, the session's resume. Its status when it stopped."""
    return await research(session_id)


@DBOS.step(name="research", preemptible=True)
async def research(session_id: str) -> str:
    settings = _worker["settings"]
    try:
        return await _research(settings, session_id)
    except Exception:
        # Failed before its research began (a setting, a KB, the lease): it reads
        # "interrupted", never "queued" with nothing to take it up (resume queues it), and
        # what its server reserved for it goes. (Stopped, it stays queued: its workflow
        # goes on elsewhere, or its cancel unqueues it.)
        unqueued = await asyncio.to_thread(lifecycle.unqueue, settings, session_id)
        if unqueued and not runs.jobs_out(sessions(settings).load(session_id)):  # a resume's
            await asyncio.to_thread(_release, settings, session_id)
        raise


async def _research(settings: Settings, session_id: str) -> str:
    store = sessions(settings)
    state = store.load(session_id)
    if _finished(state, store):
        log.info("run %s: finished already (%s)", session_id, state.status)
        return state.status
    with ExitStack() as stack:
        run = await _reopened(settings, session_id, stack)
        if _finished(run.state, store):
            log.info("run %s: finished meanwhile (%s)", session_id, run.state.status)
            return run.state.status  # by a worker wrongly thought dead, as it waited
        if await _cancelled():  # as it waited for the lease: never begun, nothing spent
            log.info("run %s: cancelled before it began", session_id)
            return run.state.status
        run.resumed = bool(run.events.opened_after)  # a first run's log starts empty
        try:
            await lifecycle.execute(run, _log_event(session_id))
        except Exception:
            log.exception("run %s failed", session_id)
            raise
        finally:
            if runs.ended(run.state):  # saved: its spend is in its ledger
                await asyncio.to_thread(_release, settings, session_id)
        log.info("run %s: %s (%s)", session_id, run.state.status, run.state.stop_reason)
        return run.state.status
    raise AssertionError("unreachable")  # mypy: ExitStack may swallow exceptions


def _finished(state: SessionState, store: Sessions) -> bool:
    """Its run has ended and written its report: a step started again has nothing to do.
    (A queued resume has, whatever its last run wrote; so has an interrupted one.)"""
    if state.status not in ("complete", "stopped", "failed"):
        return False
    return store.report_location(state.session_id) is not None


async def _cancelled() -> bool:
    """This step's workflow was cancelled (``RunQueue.cancel``) before DBOS's own check
    (once a second) stopped it."""
    workflow = DBOS.workflow_id
    status = await DBOS.get_workflow_status_async(workflow) if workflow else None
    return status is not None and status.status == "CANCELLED"


def _release(settings: Settings, session_id: str) -> None:
    """End the daily-budget reservation the server that queued the run made for it."""
    try:
        runs.daily_ledger(settings).release_session(session_id)
    except (DeepResearchError, OSError):  # then held until its day ends: the safe side
        log.exception("could not release the reservation of run %s", session_id)


async def _reopened(settings: Settings, session_id: str, stack: ExitStack) -> lifecycle.Run:
    """The session, reopened under its lease: while another holds it (a dead worker's,
    lapsing), asked again for at most twice ``worker_timeout_seconds``."""
    patience = 2 * settings.worker_timeout_seconds
    deadline = time.monotonic() + patience
    while True:
        try:
            return stack.enter_context(
                lifecycle.reopen(
                    settings,
                    session_id,
                    BudgetOverrides(),
                    max_parallel=None,
                    retry_cancelled=False,
                    on_info=lambda message: log.info("run %s: %s", session_id, message),
                )
            )
        except SessionLocked as exc:
            if time.monotonic() >= deadline:
                raise SessionLocked(
                    f"{exc}, still after {patience:.0f} s (twice "
                    "DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS): is that process alive and "
                    "running it outside the workers?"
                ) from None
            await asyncio.sleep(settings.worker_timeout_seconds / 6)


def _log_event(session_id: str) -> Callable[[str | JobEvent], None]:
    def event(message: str | JobEvent) -> None:
        if isinstance(message, str):
            log.debug("run %s: %s", session_id, message)

    return event


# --- the worker -------------------------------------------------------------------------


def executor_id() -> str:
    """This process's DBOS executor id: its machine, pid and a random part."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"


def serve_worker(settings: Settings, executor: str | None = None) -> int:
    """``work`` until SIGTERM or Ctrl-C (a second one ends the process at once)."""
    signalled = _Signalled()
    with _signals(signalled):
        return work(settings, lambda: signalled.yes, executor)


def work(
    settings: Settings,
    stopped: Callable[[], bool],
    executor: str | None = None,
    *,
    warm: bool = True,
) -> int:
    """Research queued runs, ``worker_concurrency`` at once, until ``stopped``; and resume
    a dead worker's runs. 0 when stopped; 1 when this worker was declared dead (its runs
    are another's now). One per process (DBOS is the process's)."""
    conninfo = database_url(settings)
    url = dbos_url(conninfo)
    executor = executor or executor_id()
    timeout = settings.worker_timeout_seconds
    stop = threading.Event()
    dead = threading.Event()
    _worker["settings"] = settings
    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url,
        "executor_id": executor,
        "application_version": APP_VERSION,
    }
    if warm:  # what a run imports and builds (~3 s cold), before this worker takes one: a
        # run it takes over from a dead worker starts at once (recovery was 5.4-6.5 s, cold)
        _warm.warm_up(settings, _say_engine)
    with Heartbeats(conninfo, executor, timeout) as beats:
        health = _Health(timeout)  # its row was just written: a beat
        beating = threading.Thread(
            target=_beat, args=(beats, stop, dead, health), name="worker-heartbeat", daemon=True
        )
        beating.start()
        DBOS(config=config)
        try:
            DBOS.launch()
            DBOS.register_queue(
                QUEUE,
                worker_concurrency=settings.worker_concurrency,
                polling_interval_sec=min(1.0, timeout / 4),  # a run waits at most that
            )
            log.info("worker %s: up (%d runs at once)", executor, settings.worker_concurrency)
            while not (stop.is_set() or stopped()):
                if health.steady(timeout):
                    _reap(beats)
                _sleep(timeout / 4, lambda: stop.is_set() or stopped())
        finally:
            DBOS.destroy()  # cancels the running steps: each saves its run, interrupted
            stop.set()  # beating until then: never reaped while it saves them
            beating.join()
        if dead.is_set():
            beats.mourn(executor)  # runs taken after it was reaped: the next reap hands on
        else:
            beats.leave()  # its unfinished runs go on elsewhere at the next reap
    log.info("worker %s: stopped", executor)
    return 1 if dead.is_set() else 0


def in_thread(settings: Settings, stop: threading.Event) -> threading.Thread:
    """``work`` in a thread of a server (``RunManager.open``) until ``stop`` is set; its
    warm-up is the server's own (``warm.start_warm_up``)."""

    def run() -> None:
        try:
            work(settings, stop.is_set, warm=False)
        except Exception:  # the server goes on: it queues runs for the other workers
            log.exception("this server's worker stopped")

    thread = threading.Thread(target=run, name="team-worker", daemon=True)
    thread.start()
    return thread


class _Health:
    """When this worker's heartbeats last failed: one cut off from the database for a
    while does not reap the others, silent as it was through the same outage."""

    def __init__(self, timeout: float) -> None:
        self.failed_at = time.monotonic() - timeout

    def steady(self, timeout: float) -> bool:
        """Beating without a failure for at least ``timeout``."""
        return time.monotonic() - self.failed_at >= timeout


def _say_engine(prepared: preparation.Prepared) -> None:
    if prepared.engine_choice:
        log.info("%s", prepared.engine_choice)


def _beat(beats: Heartbeats, stop: threading.Event, dead: threading.Event, health: _Health) -> None:
    while not stop.wait(beats.timeout_seconds / 3):
        try:
            alive = beats.beat()
        except StorageError as exc:  # the next beat tries again
            health.failed_at = time.monotonic()
            log.warning("worker %s: heartbeat failed (%s)", beats.executor_id, exc)
            continue
        if not alive:
            log.error("worker %s: declared dead by another; stopping", beats.executor_id)
            dead.set()
            stop.set()


def _reap(beats: Heartbeats) -> None:
    """Put the PENDING runs of every worker found dead back on the queue."""
    try:
        beats.reap(_hand_on)
    except StorageError as exc:  # the next round reaps again
        log.warning("worker %s: reaping failed (%s)", beats.executor_id, exc)


def _hand_on(gone: str) -> None:
    pending = DBOS.list_workflows(
        status="PENDING", executor_id=gone, name=WORKFLOW, load_input=False
    )
    ids = [workflow.workflow_id for workflow in pending]
    log.warning("worker %s is dead: resuming its runs %s", gone, ids)
    if ids:
        DBOS.resume_workflows(ids, queue_name=QUEUE)


class _Signalled:
    """Set by the signal handler: a plain flag (taking a lock in a handler can deadlock)."""

    yes = False


def _sleep(seconds: float, done: Callable[[], bool]) -> None:
    """Sleep ``seconds``, waking every 0.1 s to see whether ``done``."""
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


@contextmanager
def _signals(signalled: _Signalled) -> Iterator[None]:
    """The first SIGTERM or Ctrl-C stops the worker (``signalled``); a second one ends the
    process as the default handler does."""
    handled = (signal.SIGTERM, signal.SIGINT)
    before = {sig: signal.getsignal(sig) for sig in handled}

    def first(sig: int, _frame: object) -> None:
        signalled.yes = True
        signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else signal.default_int_handler)

    for sig in handled:
        signal.signal(sig, first)
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
