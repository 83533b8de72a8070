"""The tools for the web's clients: verify_claim (does a page or a chunk support a claim?),
with the page reader it builds on its first call; and search and fetch, the knowledge base
as ChatGPT connectors and OpenAI research jobs (DEEP_RESEARCH_KB_MCP_URL) expect it: each
chunk with a title and a URL."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from deep_research.app import knowledge, verify
from deep_research.app.clients import reader_settings
from deep_research.app.config import Settings
from deep_research.app.verify import Verification
from deep_research.frontends.mcp.context import ToolContext, one_line_errors
from deep_research.frontends.mcp.views import Document, SearchResult, SearchResults

if TYPE_CHECKING:
    from deep_research.adapters.web.shared import SharedReader


def register(server: MCPServer[None], context: ToolContext) -> None:
    settings, manager, reader = context.settings, context.runs, context.reader
    reading = context.reading

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def verify_claim(
        claim: Annotated[str, Field(max_length=4000, description="One factual sentence.")],
        source: Annotated[
            str,
            Field(
                max_length=2000,
                description="A URL (http/https), a knowledge-base chunk id (from kb_search) "
                "a KB locator (root/path#heading:start-end, as reports cite them) or a kb:// "
                "URL from search.",
            ),
        ],
        question: Annotated[
            str,
            Field(
                max_length=verify.MAX_QUESTION_CHARS,
                description="What the claim answers, if known (optional): the words the "
                "question already gave weigh less.",
            ),
        ] = "",
    ) -> Verification:
        """Check a claim against its source: does the source's text support it? Returns
        `support` (supported, partial, unsupported, contradicted or unverifiable; its
        calibrated score; what in the claim the source contradicts; who decided: the text
        verifier, or the judge model for a claim it was unsure of, when a model is
        configured), the best passage verbatim, and `verdict` (kept for one release)."""
        # The judge's call is paid out of the day's budget this server's runs share.
        from deep_research.app import wiring  # loads LangChain: not at the server's start

        judge = wiring.support_judge(settings, manager.ledger) if settings.has_model else None
        with one_line_errors():
            return await verify.verify_claim(
                settings, claim, source, question=question, reader=reader.get(), judge=judge
            )

    @server.tool(annotations=reading)
    async def search(
        query: Annotated[str, Field(max_length=knowledge.MAX_QUERY_CHARS, description="A query.")],
    ) -> SearchResults:
        """Search the user's knowledge base. Returns ids, titles and URLs; fetch an id for
        the full text."""
        with one_line_errors():
            hits = await asyncio.to_thread(knowledge.kb_search, settings, query, k=10)
        return SearchResults(
            results=[
                SearchResult(
                    id=h.chunk_id,
                    title=_title(h.title or h.source, h.heading),
                    url=kb_url(h.locator),
                )
                for h in hits
            ]
        )

    @server.tool(annotations=reading)
    async def fetch(
        id: Annotated[str, Field(max_length=64, description="An id from search.")],
    ) -> Document:
        """The full text of a knowledge-base result, by the id search gave."""
        with one_line_errors():
            chunk = await asyncio.to_thread(knowledge.kb_fetch, settings, id)
        return Document(
            id=chunk.chunk_id,
            title=_title(chunk.title or chunk.source, chunk.heading),
            text=chunk.text,
            url=kb_url(chunk.locator),
            metadata={"locator": chunk.locator, "kb": chunk.kb},
        )


def kb_url(locator: str) -> str:
    """A knowledge-base locator as a URL (citations need one): ``kb://root/path#heading:1-9``."""
    return knowledge.KB_SCHEME + quote(locator, safe="/#:-._~")


def _title(title: str, heading: str) -> str:
    return f"{title} › {heading}" if heading and heading != title else title


class LazyReader:
    """The page reader for verify_claim, built by its first call: building it loads the
    fetching stack, which the server's start must not wait for."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._reader: SharedReader | None = None

    def get(self) -> SharedReader:
        if self._reader is None:
            from deep_research.adapters.web.shared import SharedReader  # lazy: trafilatura

            self._reader = SharedReader(reader_settings(self.settings))
        return self._reader

    async def aclose(self) -> None:
        if self._reader is not None:
            await self._reader.aclose()
