"""Builds everything a run needs from ``Settings`` in one call (``build_run``; ``reopen_run``
for a resume): the ports the orchestrator sees become LangChain chains (or the extractive
stand-ins, with no model) and the sources ``app/sources.resolve`` chose; and
``verify_claim``'s judge (``support_judge``)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import openai
from langchain_openai import ChatOpenAI

from deep_research.adapters.branches.router import Route, RoutingExecutor
from deep_research.adapters.claim_check import ClaimChecker
from deep_research.adapters.claims import JUDGE_BATCH, RunSupportJudge, ToJudge, claims_text, prompt
from deep_research.adapters.extractive.roles import (
    ExtractiveAuthor,
    ExtractiveJudge,
    ExtractivePlanner,
    ExtractiveSummarizer,
)
from deep_research.adapters.llm.judge import LLMJudge
from deep_research.adapters.llm.lifecycle import CacheLookups
from deep_research.adapters.llm.llm import ChatModel
from deep_research.adapters.llm.params import model_params
from deep_research.adapters.llm.planning import LLMPlanner
from deep_research.adapters.llm.probe import read_limits
from deep_research.adapters.llm.server import ChatServer
from deep_research.adapters.llm.summary import LLMSummarizer
from deep_research.adapters.llm.writing import LLMAuthor
from deep_research.adapters.prices import PriceTable
from deep_research.app import reserves, run_spec
from deep_research.app.clients import api_key, client_settings, http_client, reader_settings
from deep_research.app.config import Settings
from deep_research.app.run_kb import kb_tool, knowledge_base
from deep_research.app.sources import Resolution, SourceRun, resolve, source, spec_for
from deep_research.app.verify import LLMSupportJudge
from deep_research.core.authoring import Reviser, WritingLimits
from deep_research.core.engine import Engine, RunConfig
from deep_research.core.errors import ConfigError
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import (
    MIXED,
    ChatRole,
    RunSpec,
    SessionState,
    SourceHint,
    SourcePolicy,
    WebEngine,
)
from deep_research.core.ports import BranchExecutor, JobControl, PriceBook, ReportChecker
from deep_research.core.writing import SectionedWriter
from deep_research.kb.store import KBStore
from deep_research.persistence.cache import ResultCache
from deep_research.persistence.checkpoints import Checkpointer
from deep_research.persistence.claims import SessionClaims
from deep_research.persistence.daily import DailyLedger
from deep_research.persistence.evidence import SessionEvidence
from deep_research.persistence.sessions import SessionStore

if TYPE_CHECKING:
    from deep_research.adapters.branches.protocols import Page
    from deep_research.adapters.web.openai_jobs import JobSpec
    from deep_research.adapters.web.shared import SharedReader

log = logging.getLogger(__name__)
Info = Callable[[str], None]
OPENAI_URL = "https://api.openai.com/v1"


@dataclass
class Built:
    """Everything a run needs, built in one call (``build_run``, or ``reopen_run`` for a
    saved session): a use-case that runs it never comes back here."""

    engine: Engine
    config: RunConfig
    guard: Callable[[SessionState], BudgetGuard]
    """The session's budget guard, the final report's share kept back (``guard_for``)."""
    settings: Settings
    """What the run runs with (a resume's: its ``RunSpec`` replayed over today's)."""
    spec: JobSpec | None
    web_engine: WebEngine | None
    run_spec: RunSpec
    """What the session records of the run's choices (``run_spec.record``)."""
    sources: Resolution
    """The sources it researches with (``sources.resolve``'s)."""
    notices: list[str] = field(default_factory=list)
    resources: AsyncExitStack = field(default_factory=AsyncExitStack)
    """Closed (inside the run's event loop) when the run ends."""
    chat_server: ChatServer | None = None
    """The chat models' server (None: extractive): the run's listener hears its slow calls."""

    @staticmethod
    def checkpointer(store: SessionStore) -> Checkpointer:
        """Saves the session after every step, off the event loop."""
        return Checkpointer(store)

    @staticmethod
    def evidence(session_dir: Path) -> SessionEvidence:
        """The session's evidence units, kept as each branch finishes."""
        return SessionEvidence(session_dir)

    @staticmethod
    def claims(session_dir: Path) -> SessionClaims:
        """The session's claim ledger, written by the claim check."""
        return SessionClaims(session_dir)


def run_config(settings: Settings, sources: Resolution) -> RunConfig:
    """The loop's limits and the sources the planner is offered (``sources.hints``)."""
    return RunConfig(
        max_depth=settings.max_depth,
        max_parallel=settings.max_parallel_branches,
        max_nodes_per_plan=settings.max_nodes_per_plan,
        summary_cap_tokens=settings.summary_max_tokens,
        allowed_sources=sources.hints,
        source_descriptions=sources.descriptions,
        finish_grace_seconds=settings.request_timeout_seconds,
        write_allowance_seconds=settings.write_allowance_seconds,
    )


def chat_server(settings: Settings, cache: ResultCache | None = None) -> ChatServer:
    """What a run's (or a check's, or doctor's) chat models share about their server: its
    limits (settings first, else what a local server says of itself), the structured-output
    shapes it takes (remembered in ``cache``), and how a request is sent and retried."""
    url = settings.openai_base_url or OPENAI_URL
    lookups = CacheLookups(cache) if cache is not None else None
    asks = not settings.on_openai and (
        settings.max_concurrent_calls is None or settings.context_tokens is None
    )

    async def discover() -> tuple[int | None, int | None]:
        limits = await read_limits(url, api_key(settings), lookups)
        return limits.slots, limits.context_tokens

    return ChatServer(
        url=url,
        on_openai=settings.on_openai,
        context_tokens=settings.context_tokens,
        max_concurrent=settings.max_concurrent_calls,
        timeout_seconds=settings.request_timeout_seconds,
        rate_limit_retries=settings.max_retries,
        shapes=lookups,
        discover=discover if asks else None,
    )


def chat_model(
    settings: Settings,
    role: ChatRole,
    http: openai.DefaultAsyncHttpxClient,
    server: ChatServer | None = None,
) -> ChatModel:
    model: str = getattr(settings, f"{role}_model")
    effort: str | None = getattr(settings, f"{role}_reasoning_effort")
    params = model_params(model, effort, settings.temperature)
    made = client_settings(settings, "chat")
    chat = ChatOpenAI(
        model=model,
        api_key=made.api_key,
        base_url=made.base_url,
        temperature=params.temperature,
        reasoning_effort=params.reasoning_effort,
        timeout=made.timeout,
        max_retries=made.max_retries,
        use_responses_api=False,
        # Our own pool: langchain-openai's default one is cached per process and bound to
        # the first event loop that used it.
        http_async_client=http,
    )
    return ChatModel(
        chat,
        model,
        role,
        settings.structured_output_retries,
        server or chat_server(settings),
        max_tokens=settings.max_tokens_per_call,
    )


def build_run(
    settings: Settings,
    policy: SourcePolicy,
    *,
    spec: JobSpec | None,
    engine: WebEngine | None,
    on_info: Callable[[str], None],
) -> Built:
    """Everything a run needs: its knowledge base (the sample docs' ingested first when they
    are its KB and missing: ``run_kb.knowledge_base``) and its engine."""
    kb = knowledge_base(settings, policy, on_info=on_info)
    return build(settings, resolve(settings, policy, kb=kb is not None, web=engine), kb, spec=spec)


def reopen_run(
    settings: Settings, state: SessionState, *, max_parallel: int | None, on_info: Info
) -> Built:
    """A saved session's run: its ``RunSpec`` replayed over today's settings (only
    ``max_parallel``, and the limits already on ``state``, override it), checked as a new
    run is, and built as ``build_run`` builds one."""
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
    spec = spec_for(settings, engine)
    return build_run(settings, policy, spec=spec, engine=engine, on_info=on_info)


def build(
    settings: Settings,
    sources: Resolution,
    kb: KBStore | None,
    *,
    spec: JobSpec | None = None,
) -> Built:
    """The engine for one run: the LLM chains, or the extractive stand-ins (no model), with
    the sources ``resolve`` chose, each built from what the run shares (``SourceRun``)."""
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
    config = run_config(settings, sources)
    guard = functools.partial(reserves.guard_for, settings)
    recorded = run_spec.record(settings, spec, web)
    if extractive:
        hints = sources.hints
        hint = MIXED if MIXED in hints else hints[0]
        limits = reserves.writing_limits(settings, PriceTable())
        checker = ClaimChecker()  # every claim is a quoted passage: nothing to verify
        engine_ = extractive_engine(executor, hint, limits, checkers=(checker,))
        return Built(
            engine_, config, guard, settings, spec, web, recorded, sources, notices, resources
        )
    author = LLMAuthor(
        chat("synthesizer").capped(settings.section_max_tokens, "DEEP_RESEARCH_SECTION_MAX_TOKENS")
    )
    engine_ = Engine(
        planner=LLMPlanner(chat("planner")),
        executor=executor,
        summarizer=LLMSummarizer(chat("summarizer")),
        judge=LLMJudge(chat("judge")),
        jobs=jobs,
        writer=SectionedWriter(author, reserves.writing_limits(settings, prices)),
        checkers=(claim_checker(settings, chat("judge"), prices, resources, reviser=author),),
    )
    return Built(
        engine_, config, guard, settings, spec, web, recorded, sources, notices, resources, server
    )


def claim_checker(
    settings: Settings,
    judge: ChatModel,
    prices: PriceBook,
    resources: AsyncExitStack,
    reviser: Reviser | None = None,
) -> ClaimChecker:
    """The claim check of a run with a model: cited pages read through the process's page
    reader (unless ``DEEP_RESEARCH_CHECK_FETCH=off``), uncertain verdicts settled by the judge
    model, and claims not supported sent back once to ``reviser`` (the sections' writer),
    out of what the run has left."""
    reader = None
    if settings.check_fetch:
        reader = FirstReadReader(settings)
        resources.push_async_callback(reader.aclose)

    def worst(claims: Sequence[ToJudge]) -> float:
        batches = [claims[i : i + JUDGE_BATCH] for i in range(0, len(claims), JUDGE_BATCH)]
        return sum(
            reserves.judge_worst_usd(settings, prompt().messages(claims=claims_text(b)), prices)
            for b in batches
        )

    return ClaimChecker(
        reader=reader,
        judge=lambda meter: RunSupportJudge(judge, meter),
        judge_worst_usd=worst,
        reviser=reviser,
        revise_worst_usd=reserves.revision_worst_usd(settings, prices),
        max_revisions=WritingLimits().max_revisions,
        scope=settings.web_scope(),
    )


@dataclass
class FirstReadReader:
    """The process's shared page reader (``adapters/web/shared.py``), loaded on the first page
    read: a run that cites no page (``--kb-only``) never imports trafilatura and its HTML
    parsers (~0.25 s of start-up)."""

    settings: Settings
    _reader: SharedReader | None = field(default=None, init=False)

    async def read(self, url: str) -> Page:
        if self._reader is None:
            from deep_research.adapters.web.shared import SharedReader  # trafilatura

            made = reader_settings(self.settings)
            self._reader = SharedReader(made, self.settings.web_scope())
        return await self._reader.read(url)

    async def aclose(self) -> None:
        if self._reader is not None:
            await self._reader.aclose()


def build_check(
    settings: Settings, state: SessionState, resources: AsyncExitStack
) -> tuple[ReportChecker, BudgetGuard]:
    """What ``deep-research check ID`` runs on a saved session (``settings`` replayed from
    it): its claim check, with a judge and a reviser when the session was written by a
    model (else every claim is a quoted passage), and its budget guard. What the check
    opens is closed with ``resources``."""
    guard = reserves.guard_for(settings, state)
    if state.mode != "llm" or not settings.has_model:
        return ClaimChecker(), guard
    http = http_client()
    resources.push_async_callback(http.aclose)
    cache = ResultCache(settings.cache_dir)
    resources.callback(cache.close)
    server = chat_server(settings, cache)
    judge = chat_model(settings, "judge", http, server)
    author = LLMAuthor(
        chat_model(settings, "synthesizer", http, server).capped(
            settings.section_max_tokens, "DEEP_RESEARCH_SECTION_MAX_TOKENS"
        )
    )
    prices = reserves.price_book(settings)
    return claim_checker(settings, judge, prices, resources, reviser=author), guard


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
