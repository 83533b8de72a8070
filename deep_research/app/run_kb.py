"""A run's knowledge base: chosen before anything is spent (``choose_kb``), opened (the
shipped sample docs ingested from ``kb/`` first when they are its KB and not yet ingested),
searched off the event loop as the KB branch's ``Retriever``, and offered to every research
job as an MCP tool when its public URL is set.

Invariants: a run creates no KB but ``sample``, which holds the shipped docs alone; the
user's KBs are filled by ``kb ingest`` only, so a typo in ``--kb`` never builds one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from deep_research.adapters.branches.protocols import Evidence
from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError, KBMissing, KnowledgeBaseError
from deep_research.core.models import SourcePolicy
from deep_research.kb.catalog import list_kbs, missing_kb, open_kb
from deep_research.kb.search import search
from deep_research.kb.store import KBStore

if TYPE_CHECKING:
    from deep_research.adapters.web.openai_jobs import KbTool
    from deep_research.kb.ingest import IngestProgress

log = logging.getLogger(__name__)

SAMPLE_KB = "sample"
"""The KB of the shipped sample docs (``settings.kb_path``): a run with no model answers from
it until the user has a default KB of their own."""


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


def choose_kb(settings: Settings, policy: SourcePolicy, *, named: bool) -> Settings:
    """``settings`` with the KB this run reads, checked before anything is spent.

    A KB named for the run (``named``: ``--kb``, a server's ``kb_name``) must exist, or be
    ``sample`` with its docs at hand: anything else is ``KBMissing`` naming the KBs there are.
    With no model and no default KB, the run reads ``sample``. With a model and no default
    KB, nothing changes: the run researches the web only and says so (``sources.resolve``)."""
    name, sample = settings.kb_name, settings.kb_path.is_dir()
    fallback = policy != "web_only" and not settings.has_model and sample
    if not (named or fallback) or name in list_kbs(settings.kb):
        return settings  # (asking Chroma only when the answer changes something)
    if named and not (name == SAMPLE_KB and sample):
        raise missing_kb(settings.kb, name)
    return settings.with_overrides(kb_name=SAMPLE_KB) if fallback else settings


def kb_ready(settings: Settings) -> bool:
    """The run's KB (``choose_kb``'s) is there, or is ``sample``, which a run ingests first."""
    sample = settings.kb_name == SAMPLE_KB and settings.kb_path.is_dir()
    return sample or settings.kb_name in list_kbs(settings.kb)


def knowledge_base(
    settings: Settings, policy: SourcePolicy, *, on_info: Callable[[str], None]
) -> KBStore | None:
    """The KB for this run (``choose_kb``'s); None when there is none. ``sample``, the one KB a
    run may create, is ingested from ``settings.kb_path`` first when missing, and the run
    says it answers from it. A KB saved by another version is refused before any spending."""
    if policy == "web_only":
        return None
    kb = open_default_kb(settings)
    if settings.kb_name != SAMPLE_KB:
        return kb
    if kb is None:
        kb = _ingest_sample(settings, on_info)
    if kb is not None:
        on_info(
            f"answering from the sample docs in KB {SAMPLE_KB!r}; "
            "`deep-research kb ingest PATH` adds your own"
        )
    return kb


def _ingest_sample(settings: Settings, on_info: Callable[[str], None]) -> KBStore | None:
    root = settings.kb_path
    if not root.is_dir():
        return None
    from deep_research.kb.ingest import ingest  # a run that finds its KB ingests nothing

    on_info(f"KB {SAMPLE_KB!r} is new: ingesting {root}/ first")
    store = open_kb(settings.kb, SAMPLE_KB, create=True)
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
    from deep_research.adapters.web.openai_jobs import KbTool  # research jobs: openai's types

    return KbTool(settings.kb_mcp_url, settings.api_token)
