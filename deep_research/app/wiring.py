"""The composition root: a run's ``Runtime`` built in one call (``start_run``; ``reopen_run``
for a resume), in which the ports the orchestrator sees become LangChain chains (or the
extractive stand-ins, with no model) and the sources ``app/sources.resolve`` chose; and
``verify_claim``'s judge (``support_judge``)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from dataclasses import dataclass

import openai

from deep_research.adapters.branches.router import Route, RoutingExecutor
from deep_research.adapters.claim_check import ClaimChecker
from deep_research.adapters.extractive.roles import (
    ExtractiveAuthor,
    ExtractiveJudge,
    ExtractivePlanner,
    ExtractiveSummarizer,
)
from deep_research.adapters.llm.judge import LLMJudge
from deep_research.adapters.llm.llm import ChatModel
from deep_research.adapters.llm.planning import LLMPlanner
from deep_research.adapters.llm.server import ChatServer
from deep_research.adapters.llm.summary import LLMSummarizer
from deep_research.adapters.prices import PriceTable
from deep_research.app import reserves, run_spec
from deep_research.app.chat import chat_model, chat_server
from deep_research.app.checking import claim_checker, section_author
from deep_research.app.clients import http_client
from deep_research.app.config import Settings
from deep_research.app.preparation import Info, Prepared
from deep_research.app.run_kb import kb_tool, knowledge_base
from deep_research.app.saved import sessions
from deep_research.app.sources import Resolution, SourceRun, resolve, source, spec_for
from deep_research.app.verify import LLMSupportJudge
from deep_research.core.authoring import WritingLimits
from deep_research.core.engine import Engine, Listener, RunConfig
from deep_research.core.errors import ConfigError
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import MIXED, ChatRole, SessionState, SourceHint
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import BranchExecutor, ClaimStore, JobControl, ReportChecker
from deep_research.core.writing import SectionedWriter
from deep_research.kb.store import KBStore
from deep_research.persistence.cache import ResultCache
from deep_research.persistence.checkpoints import Checkpointer
from deep_research.persistence.daily import DailyLedger
from deep_research.persistence.port import Evidence, Sessions


@dataclass
class Runtime:
    """One run's runtime, complete when returned (``start_run`` for a new session,
    ``reopen_run`` for a saved one, both through ``build``): what it runs with, the engine
    its sources make, its session and the session's stores. A use-case that runs it never
    comes back here."""

    prepared: Prepared
    """The run's settings and choices (a resume's: its ``RunSpec`` replayed over today's)."""
    sources: Resolution
    """The sources it researches with (``sources.resolve``'s)."""
    engine: Engine
    config: RunConfig
    store: Sessions
    state: SessionState
    """The session, its ``run_spec`` recorded from the choices above."""
    checkpointer: Checkpointer
    """Saves the session after every step, off the event loop."""
    guard: BudgetGuard
    """The session's budget guard, the final report's share kept back (``guard_for``)."""
    evidence: Evidence
    """The session's evidence units, kept as each branch finishes."""
    claims: ClaimStore
    """The session's claim ledger, written by the claim check."""
    notices: list[str]
    resources: AsyncExitStack
    """Closed (inside the run's event loop) when the run ends."""
    chat_server: ChatServer | None
    """The chat models' server (None: extractive): the run's listener hears its slow calls."""

    def orchestrator(self, on_event: Listener) -> ResearchOrchestrator:
        return ResearchOrchestrator(
            self.state,
            self.engine,
            self.checkpointer,
            self.guard,
            self.config,
            on_event=on_event,
            evidence=self.evidence,
            claims=self.claims,
        )


def run_config(settings: Settings, sources: Resolution) -> RunConfig:
    """The loop's limits and the sources the planner is offered (``sources.hints``)."""
    return RunConfig(
        max_depth=settings.max_depth,
        max_parallel=settings.max_parallel,
        max_nodes_per_plan=settings.max_nodes_per_plan,
        summary_cap_tokens=settings.summary_max_tokens,
        allowed_sources=sources.hints,
        source_descriptions=sources.descriptions,
        finish_grace_seconds=settings.request_timeout_seconds,
        write_allowance_seconds=settings.write_allowance_seconds,
    )


def start_run(prepared: Prepared, on_info: Info) -> Runtime:
    """A new session's runtime: its knowledge base (the sample docs' ingested first when they
    are its KB and missing: ``run_kb.knowledge_base``), its engine, then its session."""
    settings = prepared.settings
    kb = knowledge_base(settings, prepared.policy, on_info=on_info)
    sources = resolve(settings, prepared.policy, kb=kb is not None, web=prepared.engine)
    return build(prepared, sources, kb, sessions(settings))


def reopen_run(
    settings: Settings,
    store: Sessions,
    state: SessionState,
    *,
    max_parallel: int | None,
    on_info: Info,
) -> Runtime:
    """A saved session's runtime: its ``RunSpec`` replayed over today's settings (only
    ``max_parallel``, and the limits already on ``state``, override it), checked as a new
    run is, and built as ``start_run`` builds one."""
    settings = run_spec.replay(settings, state.run_spec, max_parallel=max_parallel)
    # The session's limits size its report (``reserves.writing_limits``), as at its start.
    limits = state.limits
    settings = settings.with_overrides(
        max_cost_usd=limits.max_cost_usd, max_total_tokens=limits.max_total_tokens
    )
    if state.mode == "llm" and not settings.has_model:
        raise ConfigError("this session needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
    if state.mode != "extractive":
        reserves.check_token_limit(settings, state.limits)
    policy = state.source_policy
    engine = state.run_spec.web_engine if policy != "kb_only" else None
    kb = knowledge_base(settings, policy, on_info=on_info)
    sources = resolve(settings, policy, kb=kb is not None, web=engine)
    has_kb = any(s.needs_kb for s in sources.used)
    spec = spec_for(settings, engine)
    prepared = Prepared(settings, policy, limits, spec, state.question, engine, has_kb=has_kb)
    return build(prepared, sources, kb, store, state)


def build(
    prepared: Prepared,
    sources: Resolution,
    kb: KBStore | None,
    store: Sessions,
    state: SessionState | None = None,
) -> Runtime:
    """A run's runtime: the LLM chains, or the extractive stand-ins (no model), with the
    sources ``resolve`` chose, each built from what the run shares (``SourceRun``); then its
    session (``state``, or a new one: created once the engine is built, so a setup error
    saves nothing) and the session's stores."""
    settings, spec = prepared.settings, prepared.spec
    extractive = not settings.has_model
    notices = ["extractive mode: no model configured"] if extractive else []
    notices += sources.said()
    resources = AsyncExitStack()
    http: openai.DefaultAsyncHttpxClient | None = None
    if not extractive:
        http = http_client()
        resources.push_async_callback(http.aclose)
    cache = ResultCache(settings.cache_dir)
    resources.callback(cache.close)
    server = chat_server(settings, cache)
    prices = reserves.price_book(settings)

    def chat(role: ChatRole) -> ChatModel:
        assert http is not None
        return chat_model(settings, role, http, server)

    web = sources.web
    tool = kb_tool(settings) if web is not None and not extractive else None
    run = SourceRun(
        settings, None if extractive else chat, http, cache, resources, prices, spec, kb, tool
    )
    routes: dict[SourceHint, Route] = {}
    jobs: JobControl | None = None
    for found in sources.used:
        made = found.build(run)
        routes[found.serves] = Route(made.executor, found.title)
        jobs = jobs or made.jobs
    if web is not None:
        scope = settings.web_scope().describe()
        shown = source(web).shown(settings, spec)
        notices.append(f"web research: {shown}" + (f"; scope: {scope}" if scope else ""))
    executor = RoutingExecutor(routes)
    if extractive:
        hint = MIXED if MIXED in sources.hints else sources.hints[0]
        limits = reserves.writing_limits(settings, PriceTable())
        checker = ClaimChecker()  # every claim is a quoted passage: nothing to verify
        engine = extractive_engine(executor, hint, limits, checkers=(checker,))
    else:
        author = section_author(settings, chat("synthesizer"))
        engine = Engine(
            planner=LLMPlanner(chat("planner")),
            executor=executor,
            summarizer=LLMSummarizer(chat("summarizer")),
            judge=LLMJudge(chat("judge")),
            jobs=jobs,
            writer=SectionedWriter(author, reserves.writing_limits(settings, prices)),
            checkers=(claim_checker(settings, chat("judge"), prices, resources, reviser=author),),
        )
    recorded = run_spec.record(settings, spec, web)
    if state is None:
        state = store.create(
            prepared.question,
            mode="extractive" if extractive else "llm",
            source_policy=prepared.policy,  # the user's: a resume resolves its sources again
            limits=prepared.limits,
            run_spec=recorded,
        )
    state.run_spec = recorded
    return Runtime(
        prepared,
        sources,
        engine,
        run_config(settings, sources),
        store,
        state,
        Checkpointer(store),
        reserves.guard_for(settings, state),
        store.evidence(state.session_id),
        store.claims(state.session_id),
        notices,
        resources,
        None if extractive else server,
    )


def support_judge(settings: Settings, daily: DailyLedger) -> LLMSupportJudge:
    """The judge model of ``verify_claim``, paid for out of ``daily`` (the servers' ledger)."""
    return LLMSupportJudge(settings, daily, chat_model)


def extractive_engine(
    executor: BranchExecutor,
    source_hint: SourceHint = "internal",
    limits: WritingLimits | None = None,
    checkers: tuple[ReportChecker, ...] = (),
) -> Engine:
    """The no-model engine: ``executor`` quotes passages (``KBExecutor(..., ExtractiveWriter())``,
    or a search executor with no writer); the planner sends every facet to ``source_hint``;
    the report is written through the same outline and sections, by quoting."""
    return Engine(
        planner=ExtractivePlanner(source_hint),
        executor=executor,
        summarizer=ExtractiveSummarizer(),
        judge=ExtractiveJudge(),
        writer=SectionedWriter(ExtractiveAuthor(), limits),
        checkers=checkers,
    )
