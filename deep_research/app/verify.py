"""Check a claim against its source: is there a passage in that page or knowledge-base chunk
that states it? (The MCP server's ``verify_claim`` and ``kb_fetch``.)

    verify_claim(settings, "Raft elects a leader by majority vote.", "https://raft.github.io/")

reads the source (a URL through the SSRF-safe page reader, a chunk id or a locator through
the knowledge base), splits it into passages, ranks them against the claim as the knowledge
base ranks chunks (``kb.rank``: BM25 + the configured embeddings) and scores the best few
on an absolute scale (below). With a model configured, the judge model then says whether the
best passage supports the claim.

Invariants:
- The verdict is retrieval, not entailment: ``passage_found`` means a passage says the same
  things in mostly the same words, with each of the claim's numbers and negations. A changed
  name or an added "not" in the passage can still pass: the judge (``judge``) is the check
  for that; with no model it is None.
- The judge's call is paid for out of the servers' daily budget
  (``DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD``): its worst case is reserved before it is made
  and its cost booked after; when the day cannot cover it, the judge is not asked and
  ``reason`` says why.
- A source that cannot be read is data (``source_unreachable`` with the one-line reason),
  never an error; a bad argument is a ``UsageError``.
- Nothing is fetched but the URL given, and only as the page reader allows (robots.txt, the
  address guard, ``DEEP_RESEARCH_FETCH_ALLOW``, size and time caps).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import unquote

from pydantic import BaseModel, Field

from deep_research.adapters.claims import (
    MIN_COVERAGE,
    PASSAGE_FOUND_SCORE,
    ClaimSupport,
    JudgeVerdict,
    SupportJudge,
    best_passage,
    prompt,
)
from deep_research.app.config import Settings
from deep_research.core.errors import DeepResearchError, KnowledgeBaseError, UsageError
from deep_research.core.models import Role, Usage
from deep_research.persistence.daily import DailyLedger, DayIsSpent

# The MCP server publishes this module's models when it starts: the page reader, the ranker
# and LangChain load with the first check, not with the server (``test_startup``).
if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from deep_research.adapters.branches.protocols import Reader
    from deep_research.core.ports import PriceBook

MAX_CLAIM_CHARS = 2000
PASSAGE_WORDS = 60
"""A claim is a sentence: short passages keep its similarity to the passage undiluted."""
Verdict = Literal["passage_found", "no_matching_passage", "source_unreachable"]
CHUNK_ID = re.compile(r"[0-9a-f]{32}")
KB_SCHEME = "kb://"
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_LOCATOR = re.compile(r".+:\d+-\d+")


# --- the knowledge base's chunks ---------------------------------------------------------


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
    from deep_research.kb.chunking import make_locator
    from deep_research.kb.store import open_kb

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
        locator=make_locator(
            chunk.root, chunk.source, chunk.heading, chunk.start_line, chunk.end_line
        ),
        root=chunk.root,
        source=chunk.source,
        heading=chunk.heading,
        start_line=chunk.start_line,
        end_line=chunk.end_line,
        title=chunk.title,
        text=chunk.text,
    )


def _resolve(settings: Settings, locator: str) -> str:
    from deep_research.kb.search import resolve_locator
    from deep_research.kb.store import open_kb

    return resolve_locator(open_kb(settings.kb), locator)


# --- scoring (pure, but for the embedder) ---------------------------------------------------


class _Tally:
    """The judge's usage (a verification belongs to no session: its cost is booked in the
    servers' daily ledger instead)."""

    def __init__(self) -> None:
        self.usage = Usage()

    def record(
        self,
        role: Role,
        model: str,
        usage: Usage,
        *,
        cached: bool = False,
        usage_unknown: bool = False,
    ) -> None:
        self.usage = self.usage + usage

    # Its worst case is reserved in the daily ledger before the call (``LLMSupportJudge``).
    def remaining_usd(self) -> float:
        return float("inf")

    def remaining_tokens(self) -> int:
        return sys.maxsize

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        return True

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        pass


@dataclass(frozen=True)
class LLMSupportJudge:
    """The configured judge model (``DEEP_RESEARCH_JUDGE_MODEL``), one pool per question.

    Its call is paid for out of the servers' daily budget: the call's worst case is reserved
    in ``daily`` before it is made (``DayIsSpent`` when the day cannot cover it), and what
    it cost is booked there after, whether it answered or failed."""

    settings: Settings
    daily: DailyLedger

    async def judge(self, claim: str, passage: str) -> JudgeVerdict:
        from deep_research.app.clients import http_client
        from deep_research.app.wiring import chat_model, price_book

        messages = prompt().messages(claim=claim, passage=passage)
        prices = price_book(self.settings)
        worst = judge_worst_usd(self.settings, messages, prices)
        held = await asyncio.to_thread(
            self.daily.reserve, worst, exact=True, kind="call", purpose="the judge's call"
        )
        tally = _Tally()
        try:
            async with http_client() as http:
                model = chat_model(self.settings, "judge", http)
                answer = await model.structured(ClaimSupport, messages, tally)
        finally:
            cost = prices.cost(self.settings.judge_model, tally.usage)
            await asyncio.to_thread(self.daily.settle, held.id, cost)
        return JudgeVerdict(model=model.model, **answer.model_dump())


def judge_worst_usd(
    settings: Settings, messages: Sequence[BaseMessage], prices: PriceBook
) -> float:
    """The most the judge's structured call can cost: a reply cut off at the token cap, then
    every attempt ``ChatModel.structured`` may make at twice the cap. The prompt is counted
    as one token a byte, which no byte-level tokenizer exceeds."""
    from deep_research.adapters.llm.llm import MAX_CAP_TOKENS
    from deep_research.core.guard import call_cost_estimate

    prompt = sum(len(str(m.content).encode("utf-8")) for m in messages) + 100
    cap = settings.max_tokens_per_call
    attempts = settings.structured_output_retries + 1
    model = settings.judge_model
    cut_off = call_cost_estimate(model, prompt, cap, prices)
    enlarged = call_cost_estimate(model, prompt, min(2 * cap, MAX_CAP_TOKENS), prices)
    return cut_off + attempts * enlarged


# --- verification ---------------------------------------------------------------------------


class Verification(BaseModel):
    verdict: Verdict = Field(
        description="passage_found: a passage of the source states the claim in mostly the "
        "same words (retrieval, not proof: read `passage` and `judge`); no_matching_passage: "
        "none does; source_unreachable: the source could not be read (see `reason`)."
    )
    passage: str = Field(description="The source's best passage for the claim, verbatim.")
    score: float = Field(
        description=f"0-1: (cosine similarity + content-word coverage) / 2; passage_found "
        f"needs >= {PASSAGE_FOUND_SCORE}, coverage >= {MIN_COVERAGE:.2f} and every number "
        "and negation of the claim in the passage."
    )
    coverage: float = Field(description="The share of the claim's content words in the passage.")
    judge: JudgeVerdict | None = Field(
        description="The judge model's reading of the passage; null with no model configured."
    )
    source: str = Field(description="The source as given.")
    location: str = Field(
        default="", description="Where the text was read: the page's URL, or the KB locator."
    )
    title: str = ""
    reason: str = Field(
        default="", description="Why the source could not be read, or why the judge failed."
    )


@dataclass(frozen=True)
class _Text:
    title: str
    location: str
    text: str


def _clean(claim: str) -> str:
    claim = " ".join(claim.split())
    if not claim:
        raise UsageError("the claim is empty")
    if len(claim) > MAX_CLAIM_CHARS:
        raise UsageError(f"the claim is over {MAX_CLAIM_CHARS:,} characters: check one at a time")
    return claim


async def _read(settings: Settings, source: str, reader: Reader | None) -> _Text:
    """The source's text. Raises ``PageSkipped`` or ``KnowledgeBaseError`` when it cannot be
    read, ``UsageError`` when it is not a source at all."""
    if source.startswith(KB_SCHEME):  # what the connector tools `search` / `fetch` give
        locator = unquote(source.removeprefix(KB_SCHEME))
        return _Text(locator, locator, await asyncio.to_thread(_resolve, settings, locator))
    if _URL.match(source):
        if reader is not None:
            page = await reader.read(source)
        else:
            from deep_research.adapters.web.shared import SharedReader
            from deep_research.app.engines import reader_settings

            own = SharedReader(reader_settings(settings))
            try:
                page = await own.read(source)
            finally:
                await own.aclose()
        return _Text(page.title, page.url, page.text)
    if CHUNK_ID.fullmatch(source):
        chunk = await asyncio.to_thread(kb_fetch, settings, source)
        return _Text(chunk.title or chunk.source, chunk.locator, chunk.text)
    if _LOCATOR.fullmatch(source):
        return _Text(source, source, await asyncio.to_thread(_resolve, settings, source))
    raise UsageError(
        "the source must be a URL, a knowledge-base chunk id (32 hex digits, from kb_search), "
        "a KB locator (root/path#heading:start-end) or a kb:// URL"
    )


async def verify_claim(
    settings: Settings,
    claim: str,
    source: str,
    *,
    reader: Reader | None = None,
    judge: SupportJudge | None = None,
) -> Verification:
    """Does ``source`` (a URL, a KB chunk id, a KB locator or a ``kb://`` URL) hold a passage
    stating ``claim``?

    ``reader``: the page reader (default: the event loop's shared one); ``judge``: the model
    that reads the best passage (default: the judge model, when one is configured)."""
    from deep_research.adapters.web.reader import PageSkipped, split_passages
    from deep_research.kb.embeddings import MemoEmbeddings, make_embeddings

    claim, source = _clean(claim), source.strip()
    try:
        text = await _read(settings, source, reader)
    except (PageSkipped, KnowledgeBaseError) as exc:
        return Verification(
            verdict="source_unreachable",
            passage="",
            score=0.0,
            coverage=0.0,
            judge=None,
            source=source,
            reason=" ".join(str(exc).split()),
        )
    embedder = MemoEmbeddings(make_embeddings(settings.kb))  # each passage is embedded once
    passages = split_passages(text.text, max_words=PASSAGE_WORDS)
    match = await asyncio.to_thread(best_passage, claim, passages, embedder)
    if judge is None and settings.has_model:
        from deep_research.app.runs import daily_ledger

        judge = LLMSupportJudge(settings, daily_ledger(settings))
    opinion: JudgeVerdict | None = None
    problem = ""
    if match is not None and judge is not None:
        try:
            opinion = await judge.judge(claim, match.passage)
        except DayIsSpent as exc:
            problem = f"the judge model was not asked: {exc}"
        except DeepResearchError as exc:  # the retrieval's answer stands without it
            problem = f"the judge model failed: {' '.join(str(exc).split())}"
    found = match is not None and match.found
    return Verification(
        verdict="passage_found" if found else "no_matching_passage",
        passage=match.passage if match else "",
        score=round(match.score, 4) if match else 0.0,
        coverage=round(match.coverage, 4) if match else 0.0,
        judge=opinion,
        source=source,
        location=text.location,
        title=text.title,
        reason=problem,
    )
