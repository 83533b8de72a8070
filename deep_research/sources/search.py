"""Search and read: each web branch searches the configured provider, reads the pages
(politely, within the web scope), ranks their passages and writes notes with the branch
model, or, with no model, quotes the best passages verbatim."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pydantic import SecretStr

from deep_research.adapters.branches.search_read import SearchLimits, SearchReadExecutor
from deep_research.adapters.prices import PriceTable, search_model
from deep_research.adapters.web.passages import split_passages
from deep_research.adapters.web.search import make_provider
from deep_research.adapters.web.search import provider as find
from deep_research.app.clients import reader_settings
from deep_research.app.config import Settings
from deep_research.app.sources import Executor, Source, SourceRun, WorstCase
from deep_research.core.errors import ConfigError
from deep_research.core.models import Usage

if TYPE_CHECKING:
    from deep_research.adapters.web.openai_jobs import JobSpec


def _build(run: SourceRun) -> Executor:
    # Lazy: LangChain, ddgs, trafilatura and Chroma load when a run builds the source.
    from deep_research.adapters.llm.branch import LLMEvidenceWriter
    from deep_research.adapters.llm.queries import LLMQueryWriter
    from deep_research.adapters.web.shared import SharedRateLimits, SharedReader
    from deep_research.kb.embeddings import MemoEmbeddings, make_embeddings
    from deep_research.kb.rank import rank

    settings, resources = run.settings, run.resources
    if (problem := _problem(settings)) is not None:
        raise ConfigError(f"{problem[0]}: {problem[1]}")
    name = settings.search_provider
    defaults = find(name)
    limits = SharedRateLimits(settings.search_rate_per_second)
    resources.callback(limits.release)
    searcher = make_provider(
        name,
        limits=limits,
        cache=run.cache,
        api_key=search_key(settings, name, defaults.key_env),
        base_url=search_url(settings, name, defaults.url_env),
        price_usd=run.prices.search_fees.get(name, 0.0),
        timeout=settings.search_timeout_seconds,
        scope=settings.web_scope(),
    )
    resources.push_async_callback(searcher.aclose)
    reader = SharedReader(reader_settings(settings), settings.web_scope())
    resources.push_async_callback(reader.aclose)
    embedder = MemoEmbeddings(make_embeddings(settings.kb))  # a passage is embedded once a run
    branch = run.chat("branch") if run.chat is not None else None
    executor = SearchReadExecutor(
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
    return Executor(executor)


def _worst_case(
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


def _problem(settings: Settings) -> tuple[str, str] | None:
    provider = settings.search_provider
    defaults = find(provider)  # its module alone
    if defaults.key_env and search_key(settings, provider, defaults.key_env) is None:
        return f"the {provider} search provider needs {defaults.key_env}", f"set {defaults.key_env}"
    if defaults.url_env and not search_url(settings, provider, defaults.url_env):
        return (
            f"the {provider} search provider needs its server",
            f"set {defaults.url_env} (e.g. http://localhost:8080)",
        )
    return None


def _describe(settings: Settings, spec: JobSpec | None) -> str:
    quoted = "" if settings.has_model else " (pages quoted verbatim)"
    return f"search and read via {settings.search_provider}{quoted}"


SOURCE = Source(
    name="search",
    serves="web",
    title="web",
    build=_build,
    worst_case=_worst_case,
    describe=_describe,
    searches=True,
    warm_modules=(
        "deep_research.adapters.llm.queries",
        "deep_research.adapters.web.shared",
        "deep_research.kb.rank",
    ),
    problem=_problem,
)


def search_key(settings: Settings, provider: str, env: str | None = None) -> SecretStr | None:
    """The API key of ``provider``: its setting (``<provider>_api_key``), else, for a
    plugin's provider, the variable its ``key_env`` names (``env``)."""
    key: SecretStr | None = getattr(settings, f"{provider}_api_key", None)
    if key is None and env and os.environ.get(env, "").strip():
        key = SecretStr(os.environ[env])
    return key


def search_url(settings: Settings, provider: str, env: str | None = None) -> str | None:
    """The URL of the user's own server for ``provider`` (``<provider>_url``; for a
    plugin's provider, the variable ``env``), if any."""
    url: str | None = getattr(settings, f"{provider}_url", None)
    return url or (os.environ.get(env, "").strip() or None if env else None)
