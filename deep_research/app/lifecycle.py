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
    with start(prepared, on_info) as run:               # session created and locked
        outcome = await execute(run, on_event)          # researched, report written

and a resume replaces the first and third steps with ``reopen``, which loads the session
inside its lock (never a stale snapshot) and replays its ``RunSpec``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING

from deep_research.app import presets
from deep_research.app.config import Settings
from deep_research.app.options import (
    MAX_QUESTION_CHARS,
    OPTION_SETTINGS,
    BudgetOverrides,
    RunOptions,
)
from deep_research.core.errors import ConfigError, SessionLocked, UsageError
from deep_research.core.models import Limits, SessionState, SourcePolicy, Usage, WebEngine
from deep_research.persistence.sessions import SessionStore

if TYPE_CHECKING:
    from deep_research.adapters.web.openai_jobs import JobSpec
    from deep_research.app.preflight import Estimate
    from deep_research.app.wiring import Built
    from deep_research.core.engine import Listener
    from deep_research.core.ports import CancelOutcome, JobEvent
    from deep_research.persistence.events import EventLog

Info = Callable[[str], None]
"""Where a step says what it does (ingesting the KB first, …): one line each."""


@dataclass(frozen=True)
class Prepared:
    """A run's settings and choices, validated, before anything is spent or saved."""

    settings: Settings
    policy: SourcePolicy
    limits: Limits
    spec: JobSpec | None
    question: str = ""
    engine: WebEngine | None = None
    """How web branches are researched; None: the run does not search the web."""
    notices: tuple[str, ...] = ()
    """Choices made for the user (``choose_engine``'s), for the session's event log."""
    engine_choice: str = ""
    """How ``auto`` chose ``engine`` and why, in one line (``choose_engine``'s; "" when the
    engine was named or the run does not search the web): what doctor and the servers say."""
    engine_fallback: bool = False
    """``auto`` chose search-and-read because research jobs cannot be had or asked about
    (servers warn of it)."""

    @property
    def extractive(self) -> bool:
        return not self.settings.has_model


@dataclass
class Run:
    """A session held under its lock, with the engine that researches it."""

    store: SessionStore
    state: SessionState
    prepared: Prepared
    built: Built
    resumed: bool = False
    report_markdown: str | None = field(default=None, init=False)
    """The report, once ``execute`` has written it."""
    events: EventLog = field(init=False)
    """The session's event log; a server adds live listeners before ``execute``."""

    def __post_init__(self) -> None:
        from deep_research.persistence.events import FILE_NAME, EventLog

        self.events = EventLog(self.store.path(self.state.session_id) / FILE_NAME)


def clean_question(question: str) -> str:
    question = " ".join(question.split())
    if not question:
        raise UsageError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(
            f"the question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,} "
            "(put background material in the knowledge base instead)"
        )
    return question


def check_budget(given: Mapping[str, object], names: Mapping[str, str] | None = None) -> None:
    """Refuse a limit no run can have (``Limits.problem``: not finite, not positive, past a
    generous maximum) as a usage error naming its flag (``names``: field -> flag) or field."""
    for field_name, value in given.items():
        problem = None if value is None else Limits.problem(field_name, value)
        if problem:
            flag = (names or {}).get(field_name, field_name)
            raise UsageError(f"{flag} {problem} (got {value})")


def limits_of(settings: Settings) -> Limits:
    return Limits(
        max_iterations=settings.max_iterations,
        max_total_tokens=settings.max_total_tokens,
        max_cost_usd=settings.max_cost_usd,
        max_runtime_seconds=settings.max_runtime_seconds,
    )


def prepare(
    settings: Settings,
    question: str,
    options: RunOptions,
    flags: Mapping[str, str] | None = None,
) -> Prepared:
    """A new run's settings (``options`` over its preset's over ``settings``), validated;
    nothing is saved.

    ``flags`` (option -> the command-line flag that gives it) makes a bad value a usage
    error naming its flag. Everything a user can get wrong is checked before the engine's
    modules load (seconds), so a mistake fails at once."""
    flags = flags or {}
    question = clean_question(question)
    check_budget(options.given(), flags)  # ``options`` may have been copied unvalidated
    if options.kb_only and options.web_only:
        raise UsageError("--kb-only and --web-only exclude each other")
    # The preset first: it fills in only what nobody chose, and the options below win over it.
    settings = presets.apply(settings, options.preset)
    overrides: dict[str, object] = {}
    named: dict[str, str] = {}
    for option, targets in OPTION_SETTINGS.items():
        value = getattr(options, option)
        if value is None:
            continue
        for target in targets:
            overrides[target] = value
            named.pop(target, None)
            if option in flags:
                named[target] = flags[option]
    settings = settings.with_flags(named, overrides)
    from deep_research.app import engines, reserves, wiring

    policy: SourcePolicy = (
        "kb_only" if options.kb_only else "web_only" if options.web_only else "auto"
    )
    # With no model only an engine chosen by name that needs none researches the web
    # (search and read quotes pages).
    chosen = None if settings.web_engine == "auto" else engines.engine(settings.web_engine)
    if not settings.has_model and (chosen is None or chosen.needs_model):
        if options.web_only:
            raise ConfigError(
                "web research needs a model (set OPENAI_API_KEY or OPENAI_BASE_URL), or "
                "--web-engine search to quote web pages without one"
            )
        policy = "kb_only"
    limits = limits_of(settings)
    if settings.has_model:
        reserves.check_token_limit(settings, limits)
    engine = wiring.web_engine(settings, policy)
    return Prepared(settings, policy, limits, engines.spec_for(settings, engine), question, engine)


def estimate(prepared: Prepared) -> Estimate:
    """The run's worst case, from prices alone: spends nothing, contacts nobody."""
    from deep_research.app import preflight, reserves, sources

    settings = prepared.settings
    prices = reserves.price_book(settings)
    reserve = reserves.final_reserve_usd(settings, prices, prepared.limits.max_cost_usd)
    registered = list(sources.SOURCES.values()) if prepared.policy == "auto" else []
    return preflight.estimate(
        settings, prepared.spec, prices, reserve, engine=prepared.engine, registered=registered
    )


async def check_models(prepared: Prepared) -> list[str]:
    """Before anything is spent: every model is priced, served and not shut down.

    Raises ``ConfigError`` naming the setting to change; returns warnings (a shutdown
    within 30 days)."""
    from deep_research.app import clients, preflight, reserves

    settings = prepared.settings
    refs = preflight.configured_models(settings, prepared.spec)
    preflight.check_prices(settings, refs, reserves.price_book(settings))
    async with clients.lookup_client(settings) as client:
        return await preflight.check_live_models(settings, client, refs, today=date.today())


async def choose_engine(prepared: Prepared, on_info: Info | None = None) -> Prepared:
    """``auto`` on a server other than OpenAI's: research jobs when the server serves the web
    model (asked once, the answer cached for a day), search-and-read when it does not or
    cannot say, said in one line to ``on_info``. A web model the user chose (a flag, or
    ``DEEP_RESEARCH_WEB_MODEL``) that the server does not serve is a ``ConfigError``: never
    a silent switch. Any other choice is returned as it is. Whatever ``auto`` chose, and
    why, is ``engine_choice``."""
    from deep_research.app import engines
    from deep_research.app.urls import mask_url

    settings = prepared.settings
    if settings.web_engine != "auto" or prepared.engine is None:
        return prepared
    server, model = mask_url(settings.openai_base_url or ""), settings.web_model
    if settings.on_openai:
        return _chose(prepared, engines.OPENAI.name, "as OpenAI's own API runs research jobs")
    if not settings.check_models:
        return _chose(
            prepared,
            engines.SEARCH.name,
            f"as {server} was not asked whether it serves {model} (model checks are off; "
            "--web-engine openai runs research jobs anyway)",
        )
    from deep_research.adapters.llm.lifecycle import CacheLookups, lookup_models
    from deep_research.app import clients
    from deep_research.core.errors import DeepResearchError
    from deep_research.persistence.cache import ResultCache

    cache = ResultCache(settings.cache_dir)
    try:
        async with clients.lookup_client(settings) as client:
            found = await lookup_models(client, [model], cache=CacheLookups(cache))
    except DeepResearchError as exc:  # a refused key: the model check that follows says so
        why = f"as {server} could not be asked about {model}: {exc}"
        return _chose(prepared, engines.SEARCH.name, why)
    finally:
        cache.close()
    status = found[model]
    shut_down = status.shutdown_date is not None and status.shutdown_date <= date.today()
    if status.known is True and not shut_down:
        return _chose(prepared, engines.OPENAI.name, f"as {server} serves {model}")
    if status.known is None:
        why = f"{server} cannot say whether it serves {model}"
        force = "--web-engine openai runs research jobs anyway"
    else:
        if "web_model" in settings.model_fields_set:  # named by the user: never ignored
            raise ConfigError(
                f"{server} does not serve the web model {model} (--web-model, "
                "DEEP_RESEARCH_WEB_MODEL): name a model it serves, or --web-engine search "
                "to search and read pages with the branch model"
            )
        why = f"{server} does not serve {model}"
        force = "--web-model picks one it serves"
    notice = f"web research: {why}, so branches search and read pages instead ({force})"
    if on_info is not None:
        on_info(notice)
    switched = dataclasses.replace(prepared, notices=(*prepared.notices, notice))
    return _chose(switched, engines.SEARCH.name, f"as {why} ({force})")


def _chose(prepared: Prepared, engine: WebEngine, why: str) -> Prepared:
    """``prepared`` with the engine ``auto`` chose, and the line that says so."""
    from deep_research.app import engines

    settings = prepared.settings
    shown = engines.engine(engine).describe(settings, None)
    return dataclasses.replace(
        prepared,
        engine=engine,
        spec=engines.spec_for(settings, engine),
        engine_choice=f"web engine auto: {engine} ({shown}), {why}",
        engine_fallback=engine != engines.OPENAI.name,
    )


@contextmanager
def start(prepared: Prepared, on_info: Info) -> Iterator[Run]:
    """Build the engine, then create the session and hold its lock while the caller runs
    it. A setup error (no KB, bad model) saves nothing."""
    from deep_research.app import wiring

    settings = prepared.settings
    built = wiring.build_run(
        settings, prepared.policy, spec=prepared.spec, engine=prepared.engine, on_info=on_info
    )
    store = SessionStore(settings.sessions_dir)
    state = store.create(
        prepared.question,
        mode="extractive" if prepared.extractive else "llm",
        source_policy=prepared.policy,
        limits=prepared.limits,
        run_spec=wiring.run_spec(settings, prepared.spec, prepared.engine),
    )
    with store.lock(state.session_id):
        yield Run(store, state, prepared, built)


@contextmanager
def reopen(
    settings: Settings,
    session_id: str,
    budget: BudgetOverrides,
    *,
    max_parallel: int | None,
    retry_cancelled: bool,
    on_info: Info,
) -> Iterator[Run]:
    """A saved session, loaded inside its lock, with its ``RunSpec`` replayed over today's
    settings; only ``budget`` and ``max_parallel`` override it. An unknown id fails before
    the engine's modules load."""
    check_budget(budget.given())  # before the session is touched: it is saved as given
    store = SessionStore(settings.sessions_dir)
    session_id = store.resolve(session_id)
    # Loaded inside the lock: a resume that finished meanwhile is never overwritten by a
    # stale snapshot (whose done nodes would run, and be paid for, again).
    with store.lock(session_id):
        state = store.load(session_id)
        from deep_research.app import engines, reserves, wiring
        from deep_research.core.tree import ResearchTree

        settings = wiring.replay(settings, state.run_spec, max_parallel=max_parallel)
        state.limits = state.limits.model_copy(update=budget.given())
        if state.mode == "llm" and not settings.has_model:
            raise ConfigError("this session needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
        extractive = state.mode == "extractive"
        if not extractive:
            reserves.check_token_limit(settings, state.limits)
        policy = state.source_policy
        engine = state.run_spec.engine_used() if policy != "kb_only" else None
        spec = engines.spec_for(settings, engine)
        state.run_spec = wiring.run_spec(settings, spec, engine)
        if retry_cancelled and ResearchTree(state.nodes).retry_cancelled():
            state.phase = "execute"  # research them now, whatever phase the run had reached
        prepared = Prepared(settings, policy, state.limits, spec, state.question, engine)
        built = wiring.build_run(settings, policy, spec=spec, engine=engine, on_info=on_info)
        yield Run(store, state, prepared, built, resumed=True)


async def execute(run: Run, on_event: Listener) -> SessionState:
    """Research the session until it stops, then write its report. Ctrl-C (cancellation)
    saves it as interrupted and re-raises. Every step is also appended to the session's
    event log (``events.jsonl``), which any process can follow."""
    from deep_research.core.events import RunObserver
    from deep_research.core.orchestrator import ResearchOrchestrator
    from deep_research.persistence.claims import SessionClaims
    from deep_research.persistence.evidence import SessionEvidence

    state, built = run.state, run.built
    observer = RunObserver(state, run.events.append)

    def listener(message: str | JobEvent) -> None:
        on_event(message)
        observer(message)

    observer.start(resumed=run.resumed)
    for notice in run.prepared.notices:
        observer(notice)  # the log's; whoever prepared the run has shown them already
    failure = ""
    try:
        for notice in built.notices:
            listener(notice)
        orchestrator = ResearchOrchestrator(
            state,
            built.engine,
            built.checkpointer(run.store),
            built.guard(state),
            built.config,
            on_event=listener,
            evidence=SessionEvidence(run.store.path(state.session_id)),
            claims=SessionClaims(run.store.path(state.session_id)),
        )
        async with built.resources:
            await orchestrator.run()
        built_report = orchestrator.report
        assert built_report is not None, "written when the run returns"
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


def save_interrupted(run: Run) -> int:
    """Save a run stopped by Ctrl-C; the number of research jobs still running remotely."""
    run.store.save(run.state)
    return sum(len(n.remote_jobs) for n in run.state.nodes.values())


def interrupt_unstarted(run: Run) -> None:
    """Save a run stopped before ``execute`` began (queued in a server) as interrupted, and
    end its event log, so that its followers stop and ``resume`` takes it up."""
    from deep_research.core.events import RunObserver

    run.state.status, run.state.stop_reason = "interrupted", "interrupted"
    run.store.save(run.state)
    RunObserver(run.state, run.events.append).end(report_path=None)
    run.events.close()


# --- sessions -------------------------------------------------------------------------


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
    store = SessionStore(settings.sessions_dir)
    state = store.load(session_id)
    owned = [(n.id, name, jid) for n in state.nodes.values() for name, jid in n.remote_jobs.items()]
    if not owned:
        return CancelResult(state.session_id, [], recorded=True)
    if not settings.has_model:
        raise ConfigError(
            "cancelling jobs needs the provider: set OPENAI_API_KEY or OPENAI_BASE_URL"
        )
    import asyncio

    from deep_research.adapters.web.openai_jobs import ResponsesJobs
    from deep_research.app import clients

    async with clients.openai_client(settings, "jobs") as client:
        jobs = ResponsesJobs(client)
        outcomes = list(await asyncio.gather(*(jobs.cancel(jid) for _, _, jid in owned)))
    recorded = _record_cancels(settings, store, state.session_id, owned, outcomes)
    rows = [(nid, jid, o) for (nid, _, jid), o in zip(owned, outcomes, strict=True)]
    return CancelResult(state.session_id, rows, recorded)


def _record_cancels(
    settings: Settings,
    store: SessionStore,
    session_id: str,
    owned: list[tuple[str, str, str]],
    outcomes: list[CancelOutcome],
) -> bool:
    """Record cancelled nodes (and their jobs' usage) unless another process drives the
    session — that process sees the cancels on its next poll and records them itself."""
    from deep_research.app import reserves
    from deep_research.core.tree import ResearchTree

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
            )
            tree.cancel(node, "cancelled by the user (deep-research sessions cancel)")
        store.save(state)
    return True
