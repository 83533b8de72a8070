"""Web engines: how a run researches the web, described once.

An engine is registered by name with everything the rest of the tool asks of it: whether
it needs a model, how to build its branch executor from the settings and the run's shared
resources, its worst case per branch (``--estimate`` and the cost prompt), and how it
names itself in the live view, the session's run spec and the report. Wiring, preflight,
the use-cases, doctor and the report ask this registry; only ``auto``'s choice between the
two built-ins names them.

The built-ins are ``openai`` (OpenAI research jobs: a reasoning model with web search in
background mode) and ``search`` (search and read with any model, or quoting pages without
one). ``auto`` is a setting, not an engine: ``wiring.web_engine`` picks one of the two
from the settings alone, and ``preparation.choose_engine`` settles it by asking the server
whether it serves the web model.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deep_research.adapters.branches.search_read import SearchLimits, SearchReadExecutor
from deep_research.adapters.llm.params import nearest_effort
from deep_research.adapters.prices import PriceTable, search_model
from deep_research.adapters.web.passages import split_passages
from deep_research.app.clients import openai_client
from deep_research.app.config import Settings
from deep_research.app.setting_types import ENGINE_NAMES
from deep_research.core.budget import web_job_worst_case
from deep_research.core.errors import ConfigError
from deep_research.core.models import ChatRole, Usage, WebEngine
from deep_research.core.ports import BranchExecutor, JobControl

if TYPE_CHECKING:  # the registry loads with a server (app/runs.py): what an engine builds,
    # OpenAI's client, LangChain, Chroma, the page reader, loads later (``warm_modules``)
    import openai

    from deep_research.adapters.llm.llm import ChatModel
    from deep_research.adapters.web.openai_jobs import JobSpec, KbTool
    from deep_research.adapters.web.reader import ReaderSettings
    from deep_research.persistence.cache import ResultCache


@dataclass(frozen=True)
class WebBuild:
    """What an engine is built from: the run's settings and the resources it shares."""

    settings: Settings
    chat: Callable[[ChatRole], ChatModel] | None
    """A chat model for a role; None: no model is configured (extractive)."""
    http: openai.DefaultAsyncHttpxClient | None
    """The run's connection pool for OpenAI clients (None without a model)."""
    cache: ResultCache
    resources: AsyncExitStack
    """Whatever the engine opens is closed here when the run ends."""
    prices: PriceTable
    spec: JobSpec | None
    kb_tool: KbTool | None


@dataclass(frozen=True)
class BuiltWeb:
    executor: BranchExecutor
    jobs: JobControl | None = None
    """Control of jobs left running at the provider (cancel), when the engine starts any."""


@dataclass(frozen=True)
class WorstCase:
    per_branch_usd: float
    description: str
    unit: str
    """What one branch is called in the estimate: "web research job", "web branch"."""


@dataclass(frozen=True)
class WebEngineKind:
    name: WebEngine
    needs_model: bool
    build: Callable[[WebBuild], BuiltWeb]
    worst_case: Callable[[Settings, PriceTable, float, JobSpec | None], WorstCase]
    """(settings, prices, worst chat call in USD, the job spec) -> one branch's worst case."""
    describe: Callable[[Settings, JobSpec | None], str]
    """How the run names it: the live view's first line, the run spec, the report footer."""
    runs_jobs: bool = False
    """Starts research jobs at the provider: its ``JobSpec`` is saved and replayed."""
    searches: bool = False
    """Searches through ``DEEP_RESEARCH_SEARCH_PROVIDER``: the provider is saved and replayed."""
    warm_modules: tuple[str, ...] = ()
    """Modules its build imports, which a server imports at start so that a run's first
    request does not wait for them."""
    problem: Callable[[Settings], tuple[str, str] | None] = lambda settings: None
    """What keeps it from working with these settings, and the fix (``doctor``)."""


ENGINES: dict[WebEngine, WebEngineKind] = {}


def register(kind: WebEngineKind) -> WebEngineKind:
    """Add (or replace) an engine; ``--web-engine NAME`` then selects it."""
    ENGINES[kind.name] = kind
    if kind.name not in ENGINE_NAMES:  # what the settings accept
        ENGINE_NAMES.append(kind.name)
    return kind


def unregister(name: WebEngine) -> None:
    ENGINES.pop(name, None)
    if name in ENGINE_NAMES:
        ENGINE_NAMES.remove(name)


def engine(name: WebEngine) -> WebEngineKind:
    try:
        return ENGINES[name]
    except KeyError:
        known = ", ".join(["auto", *ENGINES])
        raise ConfigError(f"unknown web engine {name!r}: use one of {known}") from None


def job_spec(settings: Settings) -> JobSpec:
    """The research job a branch starts, from the settings."""
    from deep_research.adapters.web.openai_jobs import JobSpec  # lazy: openai

    summary = settings.web_reasoning_summary
    return JobSpec(
        model=settings.web_model,
        # The nearest effort the web model takes: `--web-effort minimal` on gpt-6-astra is low.
        reasoning_effort=nearest_effort(settings.web_model, settings.web_reasoning_effort),
        max_tool_calls=settings.web_max_tool_calls,
        max_output_tokens=settings.web_max_output_tokens,
        reasoning_summary=None if summary == "off" else summary,
        scope=settings.web_scope(),
        service_tier=settings.web_tier,
    )


def spec_for(settings: Settings, name: WebEngine | None) -> JobSpec | None:
    """The research job an engine's branches start (saved in the run spec and replayed on
    resume); None for an engine that starts none, or no web research."""
    return job_spec(settings) if name is not None and engine(name).runs_jobs else None


# --- OpenAI research jobs ------------------------------------------------------------


def _build_jobs(run: WebBuild) -> BuiltWeb:
    # Lazy: openai and LangChain load when a run builds the engine, not with a server.
    from deep_research.adapters.branches.openai_research import DeepResearchExecutor
    from deep_research.adapters.llm.compress import LLMCompressor
    from deep_research.adapters.web.openai_jobs import ResponsesJobs

    assert run.chat is not None, "research jobs need a model"
    settings = run.settings
    client = openai_client(settings, "jobs", run.http)
    executor = DeepResearchExecutor(
        client,
        spec=run.spec or job_spec(settings),
        prices=run.prices,
        max_wait_seconds=settings.web_max_wait_seconds,
        poll_seconds=settings.web_poll_seconds,
        compressor=LLMCompressor(run.chat("summarizer")),
        cache=run.cache,
        kb_tool=run.kb_tool,
    )
    return BuiltWeb(executor, ResponsesJobs(client))


def _jobs_worst_case(
    settings: Settings, prices: PriceTable, chat_usd: float, spec: JobSpec | None
) -> WorstCase:
    spec = spec or job_spec(settings)
    per_job = web_job_worst_case(  # at the default tier, as the reservation (flex or not)
        prices,
        spec.model,
        max_tool_calls=spec.max_tool_calls,
        max_output_tokens=spec.max_output_tokens,
    )
    return WorstCase(per_job, spec.describe(), "web research job")


def _jobs_describe(settings: Settings, spec: JobSpec | None) -> str:
    return f"OpenAI research jobs ({(spec or job_spec(settings)).model})"


OPENAI = register(
    WebEngineKind(
        name="openai",
        needs_model=True,
        build=_build_jobs,
        worst_case=_jobs_worst_case,
        describe=_jobs_describe,
        runs_jobs=True,
        warm_modules=(
            "deep_research.adapters.branches.openai_research",
            "deep_research.adapters.llm.compress",
        ),
    )
)


# --- search and read ------------------------------------------------------------------


def search_executor(
    settings: Settings,
    branch: ChatModel | None,
    cache: ResultCache,
    resources: AsyncExitStack,
    prices: PriceTable,
) -> BranchExecutor:
    """The search-and-read executor: the configured provider under the process's rate
    limits, the process's page reader, the KB's ranking; notes by ``branch`` (None: the
    best passages quoted). Searches and reads stay within the run's web scope."""
    # Lazy: LangChain, ddgs, trafilatura and Chroma load when a run builds the engine.
    from deep_research.adapters.llm.branch import LLMEvidenceWriter
    from deep_research.adapters.llm.queries import LLMQueryWriter
    from deep_research.adapters.web.search import make_provider
    from deep_research.adapters.web.shared import SharedRateLimits, SharedReader
    from deep_research.kb.embeddings import MemoEmbeddings, make_embeddings
    from deep_research.kb.rank import rank

    name = settings.search_provider
    if (problem := _search_problem(settings)) is not None:
        raise ConfigError(f"{problem[0]}: {problem[1]}")
    limits = SharedRateLimits(settings.search_rate_per_second)
    resources.callback(limits.release)
    searcher = make_provider(
        name,
        limits=limits,
        cache=cache,
        api_key=settings.search_key(name),
        base_url=settings.search_url(name),
        price_usd=prices.search_fees.get(name, 0.0),
        timeout=settings.search_timeout_seconds,
        scope=settings.web_scope(),
    )
    resources.push_async_callback(searcher.aclose)
    reader = SharedReader(reader_settings(settings), settings.web_scope())
    resources.push_async_callback(reader.aclose)
    embedder = MemoEmbeddings(make_embeddings(settings.kb))  # a passage is embedded once a run
    return SearchReadExecutor(
        searcher,
        reader,
        rank=lambda query, passages: rank(query, passages, embedder),
        split=split_passages,
        writer=LLMEvidenceWriter(branch, evidence_source="web pages") if branch else None,
        query_writer=LLMQueryWriter(branch) if branch else None,
        limits=SearchLimits(
            max_queries=settings.search_max_queries,
            results_per_query=settings.search_results_per_query,
            pages_per_round=settings.search_pages_per_round,
            passages=settings.search_passages,
            extra_rounds=settings.search_extra_rounds,
        ),
        model=branch.model if branch else "",
    )


def reader_settings(settings: Settings) -> ReaderSettings:
    """The page reader's settings: every reader of a process is made with these, so that
    they share one reader and its per-host politeness (``adapters/web/shared.py``)."""
    from deep_research.adapters.web.reader import ReaderSettings  # lazy: trafilatura

    return ReaderSettings(
        allow=settings.fetch_allow_list,
        page_timeout=settings.fetch_timeout_seconds,
        max_bytes=settings.fetch_max_bytes,
        per_host_concurrency=settings.fetch_per_host_concurrency,
        per_host_rate=settings.fetch_per_host_rate,
    )


def _build_search(run: WebBuild) -> BuiltWeb:
    branch = run.chat("branch") if run.chat is not None else None
    return BuiltWeb(search_executor(run.settings, branch, run.cache, run.resources, run.prices))


def _search_worst_case(
    settings: Settings, prices: PriceTable, chat_usd: float, spec: JobSpec | None
) -> WorstCase:
    provider = settings.search_provider
    rounds = 1 + settings.search_extra_rounds
    searches = rounds * settings.search_max_queries
    fee = prices.cost(search_model(provider), Usage(web_search_calls=searches))
    # Each round: its queries and its notes, both by the branch model.
    calls = 2 * rounds if settings.has_model else 0
    described = f"search and read via {provider}, up to {searches} searches"
    return WorstCase(fee + calls * chat_usd, described, "web branch")


def _search_problem(settings: Settings) -> tuple[str, str] | None:
    from deep_research.adapters.web.search import DEFAULTS  # lazy: ddgs (doctor asks)

    provider = settings.search_provider
    defaults = DEFAULTS[provider]
    if defaults.key_env and settings.search_key(provider) is None:
        return f"the {provider} search provider needs {defaults.key_env}", f"set {defaults.key_env}"
    if defaults.url_env and not settings.search_url(provider):
        return (
            f"the {provider} search provider needs its server",
            f"set {defaults.url_env} (e.g. http://localhost:8080)",
        )
    return None


def _search_describe(settings: Settings, spec: JobSpec | None) -> str:
    quoted = "" if settings.has_model else " (pages quoted verbatim)"
    return f"search and read via {settings.search_provider}{quoted}"


SEARCH = register(
    WebEngineKind(
        name="search",
        needs_model=False,
        build=_build_search,
        worst_case=_search_worst_case,
        describe=_search_describe,
        searches=True,
        warm_modules=(
            "deep_research.adapters.llm.queries",
            "deep_research.adapters.web.shared",
            "deep_research.kb.rank",
        ),
        problem=_search_problem,
    )
)
