"""The knowledge base as the front-ends search it (``kb search``, the servers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deep_research.app.config import Settings
from deep_research.core.errors import UsageError

if TYPE_CHECKING:
    from deep_research.kb.search import Hit


MAX_QUERY_CHARS = 1000


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
