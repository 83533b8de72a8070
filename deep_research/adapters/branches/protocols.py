"""What branch executors are made of: the protocols every executor and provider shares.

An executor (``kb``, ``search_read``, ``openai_research``) researches one node; it gets its
evidence from a `Retriever` (the knowledge base) or a `Searcher` and a `Reader` (the web),
and writes notes from numbered `Passage`s with an `EvidenceWriter` (a model, or the
extractive writer without one). A search provider implements `Searcher` and imports its
data types from here, never from an executor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from deep_research.core.models import BranchNotes
from deep_research.core.ports import Finding, Meter


@dataclass(frozen=True)
class Passage:
    """One numbered piece of evidence as the model sees it."""

    label: str
    text: str


class Evidence(Protocol):
    @property
    def chunk_id(self) -> str: ...
    @property
    def locator(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def heading(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def title(self) -> str:
        """The file's front-matter title ("" when it has none)."""
        ...

    @property
    def tags(self) -> tuple[str, ...]: ...


class Retriever(Protocol):
    async def retrieve(self, query: str, k: int) -> Sequence[Evidence]: ...


class EvidenceWriter(Protocol):
    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes: ...


@dataclass(frozen=True)
class SearchHit:
    url: str
    title: str
    snippet: str = ""


@dataclass(frozen=True)
class SearchResults:
    hits: list[SearchHit]
    cached: bool = False
    """Served from the result cache: no fee."""


class Searcher(Protocol):
    """A web search provider (duckduckgo, searxng, tavily, …)."""

    @property
    def name(self) -> str: ...

    @property
    def price_usd(self) -> float:
        """What one search costs at the provider (a cache hit costs nothing)."""
        ...

    async def search(self, query: str, max_results: int) -> SearchResults:
        """Raises ``BranchError`` with a one-line reason when the provider fails."""
        ...


@dataclass(frozen=True)
class Page:
    url: str
    """Where the text was read, after redirects."""
    title: str
    text: str
    """The page's main text, as markdown."""
    fetched_at: datetime
    published: date | None = None
    """When the page says it was published (its markup: meta tags, JSON-LD, its URL)."""
    undated: bool = False
    """Read under a ``since`` window with no publication date found: kept, and said so."""


class Reader(Protocol):
    async def read(self, url: str) -> Page:
        """Raises ``PageSkipped`` (a ``BranchError``) with the reason a page is not read."""
        ...


class QueryWriter(Protocol):
    async def queries(
        self,
        root_question: str,
        question: str,
        dependencies: Sequence[Finding],
        tried: Sequence[str],
        max_queries: int,
        meter: Meter,
    ) -> list[str]: ...


Ranker = Callable[[str, Sequence[str]], list[tuple[int, float]]]
"""(query, passages) -> (index, score) for each passage, best first (``kb.rank``)."""


Splitter = Callable[[str], list[str]]
"""A page's text -> its passages."""
