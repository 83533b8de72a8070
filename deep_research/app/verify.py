"""Check a claim against its source: does the source's text support it? (The MCP server's
``verify_claim``.)

    verify_claim(settings, "Raft elects a leader by majority vote.", "https://raft.github.io/")

reads the source (a URL through the SSRF-safe page reader, a chunk id or a locator through
the knowledge base) and asks the claim verifier (``adapters.verifier.verify``) about its
whole text: a support verdict (supported, partial, unsupported, contradicted,
unverifiable), the best passage verbatim, a calibrated score. With a model configured, a
claim whose score falls in the verifier's uncertain band goes to the judge model, whose
verdict then decides (``adapters.claims.settle``): the caller passes that judge
(``wiring.support_judge``, the composition root's; none, and the text verifier decides).

Invariants:
- ``support`` has the whole verdict and who decided it.
- The judge's call is paid for out of the servers' daily budget
  (``DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD``): its worst case is reserved before it is made
  and its cost booked after; when the day cannot cover it, the judge is not asked, the text
  verifier's verdict stands and ``reason`` says why.
- A source that cannot be read is data (``unverifiable``, with the one-line reason),
  never an error; a bad argument is a ``UsageError``.
- Nothing is fetched but the URL given, and only as the page reader allows (robots.txt, the
  address guard, ``DEEP_RESEARCH_FETCH_ALLOW``, size and time caps).
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pydantic import BaseModel, Field

from deep_research.adapters.claims import (
    Judgements,
    JudgeVerdict,
    SupportJudge,
    ToJudge,
    by_number,
    claims_text,
    judgements_tokens,
    prompt,
    settle,
)
from deep_research.adapters.verifier import Support, verify
from deep_research.app import reserves
from deep_research.app.clients import http_client, reader_settings
from deep_research.app.config import Settings
from deep_research.app.knowledge import CHUNK_ID, KB_SCHEME, kb_fetch, kb_resolve
from deep_research.core.errors import KnowledgeBaseError, UsageError
from deep_research.core.models import Role, Usage
from deep_research.persistence.daily import DailyLedger

# The MCP server publishes this module's models when it starts: the page reader, the ranker
# and the OpenAI client load with the first check, not with the server (``test_startup``).
if TYPE_CHECKING:
    from openai import DefaultAsyncHttpxClient

    from deep_research.adapters.branches.protocols import Reader
    from deep_research.adapters.llm.llm import ChatModel
    from deep_research.core.models import ChatRole

    ChatFactory = Callable[[Settings, ChatRole, DefaultAsyncHttpxClient], ChatModel]

MAX_CLAIM_CHARS = 2000
MAX_QUESTION_CHARS = 2000
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_LOCATOR = re.compile(r".+:\d+-\d+")


# --- the judge model -------------------------------------------------------------------------


class Tally:
    """A meter outside any session: the judge's usage in a verification (its cost booked
    in the servers' daily ledger instead), doctor's probe of a model."""

    def __init__(self) -> None:
        self.usage = Usage()

    def record(self, role: Role, model: str, usage: Usage, **_: object) -> None:
        # Only chat calls are tallied, and the chat path reads no tier: the standard rate.
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
    """The configured judge model (``DEEP_RESEARCH_JUDGE_MODEL``): one call judges a batch
    of claims (``adapters.claims.settle`` sends at most ``JUDGE_BATCH``).

    Each call is paid for out of the servers' daily budget: its worst case is reserved in
    ``daily`` before it is made (``DayIsSpent`` when the day cannot cover it), and what it
    cost is booked there after, whether it answered or failed."""

    settings: Settings
    daily: DailyLedger
    chat_model: ChatFactory
    """Builds the judge model's client (``chat.chat_model``)."""

    async def judge(self, claims: Sequence[ToJudge]) -> list[JudgeVerdict | None]:
        messages = prompt().messages(claims=claims_text(claims))
        prices = reserves.price_book(self.settings)
        worst = reserves.judge_worst_usd(self.settings, messages, prices)
        held = await asyncio.to_thread(
            self.daily.reserve, worst, exact=True, kind="call", purpose="the judge's call"
        )
        tally = Tally()
        try:
            async with http_client() as http:
                model = self.chat_model(self.settings, "judge", http)
                reply = await model.structured(
                    Judgements, messages, tally, reply_tokens=judgements_tokens(len(claims))
                )
        finally:
            cost = prices.cost(self.settings.judge_model, tally.usage)
            await asyncio.to_thread(self.daily.settle, held.id, cost)
        return by_number(reply, len(claims), model.model)


# --- verification ---------------------------------------------------------------------------


class SupportView(BaseModel):
    """The claim verifier's verdict (``adapters.verifier``), and who decided it."""

    verdict: Support = Field(
        description="supported: the source states the claim; partial: it states part of it; "
        "unsupported: it does not; contradicted: a number, date, unit, negation or code "
        "identifier of the claim differs from the passage that states it; unverifiable: the "
        "source has no text."
    )
    verifier: str = Field(
        description="Who decided: 'text' (the shipped classifier, no model) or the judge "
        "model's name (it settles the claims the classifier is unsure of)."
    )
    score: float = Field(
        description="Calibrated probability (0-1) that the source supports the claim, from "
        "the text alone."
    )
    conflicts: list[str] = Field(
        default_factory=list, description="What in the claim the source contradicts."
    )
    explanation: str = Field(default="", description="The judge's reason, when it decided.")


class Verification(BaseModel):
    support: SupportView
    passage: str = Field(description="The source's best passage for the claim, verbatim.")
    score: float = Field(description="As `support.score`.")
    source: str = Field(description="The source as given.")
    location: str = Field(
        default="", description="Where the text was read: the page's URL, or the KB locator."
    )
    title: str = ""
    reason: str = Field(
        default="",
        description="Why the source could not be read, or why the judge was not asked or its "
        "answer not taken.",
    )


@dataclass(frozen=True)
class _Text:
    title: str
    location: str
    text: str


async def _read(settings: Settings, source: str, reader: Reader | None) -> _Text:
    """The source's text. Raises ``PageSkipped`` or ``KnowledgeBaseError`` when it cannot be
    read, ``UsageError`` when it is not a source at all."""
    if source.startswith(KB_SCHEME):  # what the connector tools `search` / `fetch` give
        locator = unquote(source.removeprefix(KB_SCHEME))
        return _Text(locator, locator, await asyncio.to_thread(kb_resolve, settings, locator))
    if _URL.match(source):
        if reader is not None:
            page = await reader.read(source)
        else:
            from deep_research.adapters.web.shared import SharedReader  # see above

            async with aclosing(SharedReader(reader_settings(settings))) as own:
                page = await own.read(source)
        return _Text(page.title, page.url, page.text)
    if CHUNK_ID.fullmatch(source):
        chunk = await asyncio.to_thread(kb_fetch, settings, source)
        return _Text(chunk.title or chunk.source, chunk.locator, chunk.text)
    if _LOCATOR.fullmatch(source):
        return _Text(source, source, await asyncio.to_thread(kb_resolve, settings, source))
    raise UsageError(
        "the source must be a URL, a knowledge-base chunk id (32 hex digits, from kb_search), "
        "a KB locator (root/path#heading:start-end) or a kb:// URL"
    )


async def verify_claim(
    settings: Settings,
    claim: str,
    source: str,
    *,
    question: str = "",
    reader: Reader | None = None,
    judge: SupportJudge | None = None,
) -> Verification:
    """Does ``source`` (a URL, a KB chunk id, a KB locator or a ``kb://`` URL) support
    ``claim``? (``question``: what the claim answers, if known.)

    ``reader``: the page reader (default: the event loop's shared one); ``judge``: the model
    that settles an uncertain verdict (``wiring.support_judge``; none: the text verifier
    decides)."""
    from deep_research.adapters.web.reader import PageSkipped  # see above

    claim, source = " ".join(claim.split()), source.strip()
    if not claim:
        raise UsageError("the claim is empty")
    if len(claim) > MAX_CLAIM_CHARS:
        raise UsageError(f"the claim is over {MAX_CLAIM_CHARS:,} characters: check one at a time")
    question = " ".join(question.split())
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(f"the question is over {MAX_QUESTION_CHARS:,} characters")
    try:
        text = await _read(settings, source, reader)
    except (PageSkipped, KnowledgeBaseError) as exc:
        return Verification(
            support=SupportView(verdict="unverifiable", verifier="text", score=0.0),
            passage="",
            score=0.0,
            source=source,
            reason=" ".join(str(exc).split()),
        )
    found = await asyncio.to_thread(verify, claim, text.text, question)
    problem = explanation = ""
    if found.uncertain and judge is not None:
        settled = await settle([ToJudge(claim, found.passages, question)], [found], judge)
        found, problem = settled.verdicts[0], settled.problem or settled.overruled[0]
        opinion = settled.opinions[0]
        explanation = opinion.explanation if opinion is not None else ""
    return Verification(
        support=SupportView(
            verdict=found.support,
            verifier=found.verifier,
            score=found.score,
            conflicts=list(found.conflicts),
            explanation=explanation,
        ),
        passage=found.passages[0] if found.passages else "",
        score=found.score,
        source=source,
        location=text.location,
        title=text.title,
        reason=problem,
    )
