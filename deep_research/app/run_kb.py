"""A run's knowledge base: the configured one opened (with no model and none yet, ingested
from ``kb/`` first), searched off the event loop as the KB branch's ``Retriever``, and
offered to every research job as an MCP tool when its public URL is set."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from deep_research.adapters.branches.protocols import Evidence
from deep_research.adapters.web.openai_jobs import KbTool
from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError, KBMissing, KnowledgeBaseError
from deep_research.core.models import SourcePolicy
from deep_research.kb.catalog import open_kb
from deep_research.kb.ingest import IngestProgress, ingest
from deep_research.kb.search import search
from deep_research.kb.store import KBStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoreRetriever:
    """The KB as a ``Retriever``: hybrid search, off the event loop (Chroma is synchronous).

    Whatever the store raises (a restarted server, an unreadable file) is a
    ``KnowledgeBaseError`` here, so it fails the branch that searched and not the run; its
    traceback goes to the log."""

    store: KBStore

    async def retrieve(self, query: str, k: int) -> Sequence[Evidence]:
        try:
            return await asyncio.to_thread(search, self.store, query, k)
        except KnowledgeBaseError:
            raise
        except Exception as exc:
            log.warning("knowledge-base search failed", exc_info=True)
            raise KnowledgeBaseError(
                f"searching the knowledge base failed: {type(exc).__name__}: {exc}"
            ) from exc


def open_default_kb(settings: Settings) -> KBStore | None:
    """The configured KB; None when there is none. Any other failure is raised as it is."""
    try:
        return open_kb(settings.kb)
    except KBMissing:
        return None


def knowledge_base(
    settings: Settings, policy: SourcePolicy, *, extractive: bool, on_info: Callable[[str], None]
) -> KBStore | None:
    """The KB for this run; extractive with no KB yet: ingest ``kb/`` first and say so."""
    if policy == "web_only":
        return None
    kb = open_default_kb(settings)
    if kb is not None or not extractive:
        return kb
    root = settings.kb_path
    if not root.is_dir():
        return None
    on_info(f"knowledge base {settings.kb_name!r} is empty: ingesting {root}/ first")
    store = open_kb(settings.kb, create=True)
    told = [0]

    def progress(state: IngestProgress) -> None:
        # A line at each quarter of the chunks: the first run is not silent for a minute.
        if state.chunks_total and state.chunks_done * 4 >= (told[0] + 1) * state.chunks_total:
            told[0] = state.chunks_done * 4 // state.chunks_total
            on_info(f"embedded {state.chunks_done}/{state.chunks_total} chunks")

    summary = ingest(store, root, progress=progress)
    on_info(f"ingested {summary.chunks} chunks from {root}/ in {summary.seconds:.1f}s")
    return store


def kb_tool(settings: Settings) -> KbTool | None:
    """The knowledge base as an MCP tool of every research job, when its public URL is set;
    never without a token (the URL is reachable from the internet)."""
    if settings.kb_mcp_url is None:
        return None
    if settings.token() is None or settings.api_token is None:
        raise ConfigError(
            "DEEP_RESEARCH_KB_MCP_URL exposes your knowledge base: set DEEP_RESEARCH_API_TOKEN "
            "too (the MCP server asks every request for it)"
        )
    return KbTool(settings.kb_mcp_url, settings.api_token)
