"""Start, resume and cancel research runs: the one way every front-end does it.

The use-cases are split by concern: this module runs research; ``saved`` reads sessions
(list, show, watch, reports), ``maintenance`` removes and prunes them, ``knowledge``
searches the knowledge base, ``doctor`` checks the set-up.

The CLI (and the MCP server and HTTP API after it) parse their input into ``RunOptions``
(``options``, where each option is declared once), call these functions and present what
they return; none of them builds an engine, a guard or a session itself. A run's choices
are its ``RunSpec``, saved with the session, so a resume from any front-end repeats them
exactly.

A run goes through the same steps whoever starts it::

    prepared = prepare(settings, question, options)   # validated; nothing spent or saved
    prepared = await choose_engine(prepared)            # auto: does the server run jobs?
    estimate(prepared); await check_models(prepared)    # before anything is spent
                                                        # (those three: ``preparation``)
    with start(prepared, on_info) as run:               # session created and locked
        outcome = await execute(run, on_event)          # researched, report written

and a resume replaces the first and third steps with ``reopen``, which loads the session
inside its lock (never a stale snapshot) and replays its ``RunSpec``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from deep_research.app import clients, reserves
from deep_research.app.config import Settings
from deep_research.app.options import BudgetOverrides
from deep_research.app.preparation import Info, Prepared, check_budget, estimate
from deep_research.app.saved import sessions
from deep_research.core.errors import EXIT_NO_FINDINGS, ConfigError, SessionLocked
from deep_research.core.events import RunObserver
from deep_research.core.models import SessionState, Usage
from deep_research.core.report import footer
from deep_research.core.tree import ResearchTree
from deep_research.persistence.port import Events, Sessions

# The composition root (``wiring``) and the OpenAI client load LangChain, OpenAI and Chroma:
# imported where a run is built, so a mistake (a bad flag, an unknown session) fails before
# they load (``test_startup``).
if TYPE_CHECKING:
    from deep_research.app.wiring import Runtime
    from deep_research.core.engine import Listener
    from deep_research.core.ports import CancelOutcome, JobEvent


@dataclass
class Run:
    """A session held under its lock, with the runtime that researches it."""

    runtime: Runtime
    resumed: bool = False
    report_markdown: str | None = field(default=None, init=False)
    """The report, once ``execute`` has written it."""
    events: Events = field(init=False)
    """The session's event log; a server adds live listeners before ``execute``."""

    def __post_init__(self) -> None:
        self.events = self.store.events(self.state.session_id)

    @property
    def store(self) -> Sessions:
        return self.runtime.store

    @property
    def state(self) -> SessionState:
        return self.runtime.state

    @property
    def prepared(self) -> Prepared:
        return self.runtime.prepared


@contextmanager
def start(prepared: Prepared, on_info: Info) -> Iterator[Run]:
    """Build the engine, then create the session and hold its lock while the caller runs
    it. A setup error (no KB, bad model) saves nothing."""
    from deep_research.app import wiring  # see above

    runtime = wiring.start_run(prepared, on_info)
    with runtime.store.lock(runtime.state.session_id):
        yield Run(runtime)


@contextmanager
def reopen(
    settings: Settings,
    session_id: str,
    budget: BudgetOverrides,
    *,
    max_parallel: int | None,
    retry_cancelled: bool,
    on_info: Info,
    resubmit_lost: bool = False,
) -> Iterator[Run]:
    """A saved session, loaded inside its lock, with its ``RunSpec`` replayed over today's
    settings; only ``budget`` and ``max_parallel`` override it. An unknown id fails before
    the engine's modules load."""
    check_budget(budget.given())  # before the session is touched: it is saved as given
    store = sessions(settings)
    session_id = store.resolve(session_id)
    # Loaded inside the lock: a resume that finished meanwhile is never overwritten by a
    # stale snapshot (whose done nodes would run, and be paid for, again).
    with store.lock(session_id):
        state = store.load(session_id)
        from deep_research.app import wiring  # see above

        state.limits = state.limits.model_copy(update=budget.given())
        runtime = wiring.reopen_run(
            settings, store, state, max_parallel=max_parallel, on_info=on_info
        )
        if retry_cancelled and ResearchTree(state.nodes).retry_cancelled():
            state.phase = "execute"  # research them now, whatever phase the run had reached
        if resubmit_lost and (lost := ResearchTree(state.nodes).retry_lost()):
            state.phase = "execute"
            per_job = estimate(runtime.prepared).per_job_usd
            on_info(
                f"submitting {len(lost)} research job(s) again whose first create may be "
                f"running at the provider ({', '.join(lost)}): up to ${per_job * len(lost):.2f} "
                "more"
            )
        yield Run(runtime, resumed=True)


async def execute(run: Run, on_event: Listener) -> SessionState:
    """Research the session until it stops, then write its report. Ctrl-C (cancellation)
    saves it as interrupted and re-raises. Every step is also appended to the session's
    event log (``events.jsonl``), which any process can follow."""
    state, runtime = run.state, run.runtime
    observer = RunObserver(state, run.events.append)

    def listener(message: str | JobEvent) -> None:
        on_event(message)
        observer(message)

    observer.start(resumed=run.resumed)
    if runtime.chat_server is not None:
        runtime.chat_server.on_slow = listener  # "waiting on the planner call: 40 s so far"
    for notice in run.prepared.notices:
        observer(notice)  # the log's; whoever prepared the run has shown them already
    failure = ""
    try:
        for notice in runtime.notices:
            listener(notice)
        orchestrator = runtime.orchestrator(listener)
        async with runtime.resources:
            await orchestrator.run()
        built_report = orchestrator.report
        assert built_report is not None, "written when the run returns"
        # The footer was made before the claim check paid its judge: the spend as it stands.
        built_report = built_report.model_copy(update={"footer": footer(state)})
        run.report_markdown = built_report.markdown
        written = run.store.write_report(
            state.session_id, built_report.markdown, built_report.model_dump_json()
        )
        state.report_path = str(written)
        run.store.save(state)
    except Exception as exc:
        failure = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        report = state.report_path if run.report_markdown else None
        observer.end(report_path=report, failure=failure)
        run.events.close()
    return state


def exit_code(state: SessionState) -> int:
    """What a finished run's end means to a script: 0 when it found something (or had
    nothing left to do after an earlier run did), ``EXIT_NO_FINDINGS`` when no sub-question
    was ever researched (its report says why: a limit, a failed plan, failed branches)."""
    return 0 if any(node.status == "done" for node in state.nodes.values()) else EXIT_NO_FINDINGS


def save_interrupted(run: Run) -> int:
    """Save a run stopped by Ctrl-C; the number of research jobs still running remotely."""
    run.store.save(run.state)
    return sum(len(n.remote_jobs) for n in run.state.nodes.values())


def interrupt_unstarted(run: Run) -> None:
    """Save a run stopped before ``execute`` began (queued in a server) as interrupted, and
    end its event log, so that its followers stop and ``resume`` takes it up."""
    run.state.status, run.state.stop_reason = "interrupted", "interrupted"
    run.store.save(run.state)
    RunObserver(run.state, run.events.append).end(report_path=None)
    run.events.close()


async def hand_over(run: Run) -> None:
    """Save ``run`` as queued for a team's workers (``app.team``): it researches elsewhere,
    and what was built here to check and save it is closed."""
    await run.runtime.resources.aclose()
    run.state.status = "queued"
    run.store.save(run.state)


def unqueue(settings: Settings, session_id: str) -> bool:
    """A session saved as queued whose run no worker will take (the queue refused it, or it
    was taken off): saved as interrupted, so ``resume`` queues it again; whether it was.
    Left alone while a worker holds it: that worker saves it."""
    store = sessions(settings)
    with contextlib.suppress(SessionLocked), store.lock(session_id):
        state = store.load(session_id)
        if state.status == "queued":
            state.status = "interrupted"
            store.save(state)
            return True
    return False


@dataclass(frozen=True)
class CancelResult:
    session_id: str
    jobs: list[tuple[str, str, CancelOutcome]]
    """(node id, job id, outcome) for each research job the session had in flight."""
    recorded: bool
    """The cancelled nodes were recorded now; False when another process runs the session
    (it records them when it next polls their jobs)."""


async def cancel(settings: Settings, session_id: str) -> CancelResult:
    """Cancel a session's research jobs at the provider, also while another process runs
    it; cancelled nodes are recorded as such and not researched again by ``resume``
    (unless asked)."""
    store = sessions(settings)
    state = store.load(session_id)
    owned = [(n.id, name, jid) for n in state.nodes.values() for name, jid in n.remote_jobs.items()]
    if not owned:
        return CancelResult(state.session_id, [], recorded=True)
    if not settings.has_model:
        raise ConfigError(
            "cancelling jobs needs the provider: set OPENAI_API_KEY or OPENAI_BASE_URL"
        )
    from deep_research.adapters.web.openai_jobs import ResponsesJobs  # see above

    async with clients.openai_client(settings, "jobs") as client:
        jobs = ResponsesJobs(client)
        outcomes = list(await asyncio.gather(*(jobs.cancel(jid) for _, _, jid in owned)))
    recorded = _record_cancels(settings, store, state.session_id, owned, outcomes)
    rows = [(nid, jid, o) for (nid, _, jid), o in zip(owned, outcomes, strict=True)]
    return CancelResult(state.session_id, rows, recorded)


def _record_cancels(
    settings: Settings,
    store: Sessions,
    session_id: str,
    owned: list[tuple[str, str, str]],
    outcomes: list[CancelOutcome],
) -> bool:
    """Record cancelled nodes (and their jobs' usage) unless another process drives the
    session — that process sees the cancels on its next poll and records them itself.
    (No run is built: the guard only books the cancelled jobs' usage.)"""
    with ExitStack() as stack:
        try:
            stack.enter_context(store.lock(session_id))
        except SessionLocked:
            return False
        state = store.load(session_id)  # fresh, under the lock
        tree = ResearchTree(state.nodes)
        guard = reserves.guard_for(settings, state)
        model = state.run_spec.web_model or "unknown"
        for (nid, name, jid), outcome in zip(owned, outcomes, strict=True):
            node = state.nodes[nid]
            if outcome.status != "cancelled" or node.remote_jobs.get(name) != jid:
                continue  # unreachable or finished: the id stays for resume to read
            guard.record(
                "deep_research",
                model,
                outcome.usage or Usage(),
                node_id=nid,
                usage_unknown=outcome.usage is None,
                tier=state.run_spec.web_tier or "default",  # the tier it was sent to
            )
            tree.cancel(node, "cancelled by the user (deep-research sessions cancel)")
        store.save(state)
    return True
