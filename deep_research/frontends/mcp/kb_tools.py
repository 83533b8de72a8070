"""The knowledge-base tools: kb_search (the best chunks for a query) and kb_fetch (one chunk
by its id)."""

from __future__ import annotations

import asyncio
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from deep_research.app import knowledge
from deep_research.app.knowledge import KbChunk
from deep_research.frontends.common import hit_json
from deep_research.frontends.mcp.context import ToolContext, one_line_errors
from deep_research.frontends.mcp.views import KbHit, KbHits


def register(server: MCPServer[None], context: ToolContext) -> None:
    settings, reading = context.settings, context.reading

    @server.tool(annotations=reading)
    async def kb_search(
        query: Annotated[
            str, Field(max_length=knowledge.MAX_QUERY_CHARS, description="What to look for.")
        ],
        k: Annotated[int, Field(ge=1, le=100, description="How many chunks.")] = 8,
    ) -> KbHits:
        """The user's markdown knowledge base: the best chunks for a query (hybrid BM25 +
        embeddings), each with its text, file, title and tags, heading, lines, chunk_id and a
        score from 0 to 1 (1: the best match of this search)."""
        with one_line_errors():
            hits = await asyncio.to_thread(knowledge.kb_search, settings, query, k=k)
        return KbHits(hits=[KbHit.model_validate(hit_json(hit)) for hit in hits])

    @server.tool(annotations=reading)
    async def kb_fetch(
        chunk_id: Annotated[str, Field(max_length=64, description="An id from kb_search.")],
    ) -> KbChunk:
        """One knowledge-base chunk by its id: its exact text and where it is (locator)."""
        with one_line_errors():
            return await asyncio.to_thread(knowledge.kb_fetch, settings, chunk_id)
