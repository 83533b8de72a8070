"""The judge model's part in checking claims: the claims the text verifier
(``adapters.verifier``) was unsure of go to it, many per call, and its verdict decides.

- ``SupportJudge``: the contract (``app/verify.py`` has the model behind it, metered and
  paid for); ``Judgements``: its structured reply; ``prompt``: what it is told.
- ``RunSupportJudge``: the judge model of a research run, billed to the run's meter.
- ``settle``: hands the uncertain verdicts over, ``JUDGE_BATCH`` claims a call, and keeps
  what it decides (``SupportVerdict.decided_by``). A batch it cannot answer keeps the text
  verifier's verdicts, with the reason.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field

from deep_research.adapters.verifier import SupportVerdict
from deep_research.core.errors import DeepResearchError

if TYPE_CHECKING:
    from deep_research.adapters.llm.llm import ChatModel, Prompt
    from deep_research.core.ports import Meter

JUDGE_BATCH = 8
"""Claims per judge call: one reply carries them all; a batch stays well inside the reply's
token cap (an explanation is one sentence)."""
PASSAGE_CHARS = 2000
"""Of each claim's passages, what the judge reads (a window is ~70 words, ~450 characters)."""

Judged = Literal["supported", "partial", "unsupported", "contradicted"]


class JudgedClaim(BaseModel):
    claim: int = Field(description="The claim's number, as given.")
    verdict: Judged = Field(
        description="supported: the passages state the claim or plainly entail it; "
        "partial: they state part of it and leave the rest unsaid; "
        "unsupported: they do not settle it; "
        "contradicted: they state something incompatible with it (another figure, date, "
        "name, or the opposite)."
    )
    explanation: str = Field(
        description="One sentence: why, quoting the passages' decisive words if any."
    )


class Judgements(BaseModel):
    """The judge model's answer (structured output)."""

    judgements: list[JudgedClaim] = Field(description="One per claim, in the order given.")


class JudgeVerdict(BaseModel):
    verdict: Judged
    explanation: str
    model: str = Field(description="The model that judged.")


@dataclass(frozen=True)
class ToJudge:
    claim: str
    passages: tuple[str, ...]
    """The source's passages the text verifier found best (verbatim)."""
    question: str = ""


class SupportJudge(Protocol):
    async def judge(self, claims: Sequence[ToJudge]) -> list[JudgeVerdict | None]:
        """One verdict per claim, in order (None: the reply left that claim out). Raises
        ``DeepResearchError`` when the model cannot answer or the budget cannot pay."""
        ...


def claims_text(claims: Sequence[ToJudge]) -> str:
    """The numbered claims with their passages, as the prompt's user text lists them."""
    blocks = []
    for number, item in enumerate(claims, 1):
        lines = [f"Claim {number}: {item.claim}"]
        if item.question:
            lines.append(f"It answers: {item.question}")
        passages = item.passages or ("(no passage: the source holds nothing like it)",)
        lines.append("Passages:")
        lines += [f"> {' '.join(p.split())[:PASSAGE_CHARS]}" for p in passages]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def by_number(reply: Judgements, count: int, model: str) -> list[JudgeVerdict | None]:
    """The reply's verdicts in the claims' order; a number out of range or repeated is
    ignored (the first one counts)."""
    out: list[JudgeVerdict | None] = [None] * count
    for judged in reply.judgements:
        if 1 <= judged.claim <= count and out[judged.claim - 1] is None:
            out[judged.claim - 1] = JudgeVerdict(
                verdict=judged.verdict, explanation=judged.explanation, model=model
            )
    return out


@dataclass(frozen=True)
class Settled:
    verdicts: list[SupportVerdict]
    opinions: list[JudgeVerdict | None]
    """What the judge said of each claim (None: it was not asked, or did not answer)."""
    problem: str = ""
    """Why some uncertain claims were left to the text verifier (one line), or ""."""


async def settle(
    claims: Sequence[ToJudge], verdicts: Sequence[SupportVerdict], judge: SupportJudge
) -> Settled:
    """``verdicts`` (one per claim), with those the text verifier was unsure of decided by
    ``judge``, ``JUDGE_BATCH`` a call, one call after another (each is paid for before the
    next is asked). A batch that fails keeps its text verdicts and ends the asking."""
    out = list(verdicts)
    opinions: list[JudgeVerdict | None] = [None] * len(out)
    unsure = [i for i, verdict in enumerate(out) if verdict.uncertain]
    for start in range(0, len(unsure), JUDGE_BATCH):
        batch = unsure[start : start + JUDGE_BATCH]
        try:
            answers = await judge.judge([claims[i] for i in batch])
        except DeepResearchError as exc:
            problem = f"the judge model was not asked or failed: {' '.join(str(exc).split())}"
            return Settled(out, opinions, problem)
        for i, answer in zip(batch, answers, strict=True):
            opinions[i] = answer
            if answer is not None:
                out[i] = out[i].decided_by(answer.verdict, answer.model)
    return Settled(out, opinions)


def judgements_tokens(claims: int) -> int:
    """How long the judge's reply on ``claims`` claims runs (a verdict and a sentence each)."""
    return 100 + 150 * claims


@functools.cache
def prompt() -> Prompt:
    from deep_research.adapters.llm.llm import load_prompt  # lazy: LangChain

    return load_prompt("verify")


@dataclass(frozen=True)
class RunSupportJudge:
    """The judge model of a run (a ``SupportJudge``): its calls are billed to the run's meter
    (``core.guard``), as every other call of the run is."""

    model: ChatModel
    meter: Meter

    async def judge(self, claims: Sequence[ToJudge]) -> list[JudgeVerdict | None]:
        messages = prompt().messages(claims=claims_text(claims))
        reply = await self.model.structured(
            Judgements, messages, self.meter, reply_tokens=judgements_tokens(len(claims))
        )
        return by_number(reply, len(claims), self.model.model)
