"""The knowledge base as the front-ends search it (``kb search``, the servers) and read it
(``kb_fetch``: one chunk by its id; ``kb_resolve``: the text a locator cites)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from deep_research.app.config import Settings
from deep_research.core.errors import KnowledgeBaseError, UsageError

# The functions import the knowledge base (Chroma, bm25s) when called: the servers publish
# this module's models when they start (``test_startup``).
if TYPE_CHECKING:
    from deep_research.kb.search import Hit


MAX_QUERY_CHARS = 1000
CHUNK_ID = re.compile(r"[0-9a-f]{32}")
KB_SCHEME = "kb://"


def kb_search(settings: Settings, query: str, *, k: int = 8, kb: str | None = None) -> list[Hit]:
    """The knowledge base's best chunks for ``query`` (hybrid ranking)."""
    # Lazy: Chroma; the servers import this module at start and answer before it loads.
    from deep_research.kb.catalog import open_kb
    from deep_research.kb.search import search

    query = " ".join(query.split())
    if not query:
        raise UsageError("the query is empty")
    if len(query) > MAX_QUERY_CHARS:
        raise UsageError(f"the query is over {MAX_QUERY_CHARS:,} characters")
    if not 1 <= k <= 100:
        raise UsageError(f"k must be 1-100, got {k}")
    return search(open_kb(settings.kb, kb), query, k=k)


class KbChunk(BaseModel):
    """One chunk of the knowledge base, exactly as ingested."""

    chunk_id: str
    kb: str = Field(description="The knowledge base's name.")
    locator: str = Field(
        description="root/path#heading:start-end: the file, heading and lines the text comes "
        "from (what a report cites)."
    )
    root: str = Field(description="The name of the folder the file was ingested from.")
    source: str = Field(description="The file's path in that folder.")
    heading: str
    start_line: int
    end_line: int
    title: str
    text: str = Field(description="The chunk's exact text.")


def kb_fetch(settings: Settings, chunk_id: str, *, kb: str | None = None) -> KbChunk:
    """A chunk by its id (as ``kb search`` gives it). Synchronous: Chroma is."""
    from deep_research.kb.catalog import open_kb

    chunk_id = chunk_id.strip()
    if not CHUNK_ID.fullmatch(chunk_id):
        raise UsageError(f"{chunk_id[:80]!r} is not a chunk id (32 hex digits, from kb_search)")
    store = open_kb(settings.kb, kb)
    chunk = store.get_chunks([chunk_id]).get(chunk_id)
    if chunk is None:
        raise KnowledgeBaseError(
            f"no chunk {chunk_id} in knowledge base {store.name!r} (re-ingested since? search "
            "again for its new id)"
        )
    return KbChunk(
        chunk_id=chunk.id,
        kb=store.name,
        locator=chunk.locator,
        root=chunk.root,
        source=chunk.source,
        heading=chunk.heading,
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        title=chunk.title,
        text=chunk.text,
    )


def kb_resolve(settings: Settings, locator: str) -> str:
    from deep_research.kb.catalog import open_kb
    from deep_research.kb.search import resolve_locator

    return resolve_locator(open_kb(settings.kb), locator)
