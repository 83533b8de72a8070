"""The judge model's part in checking claims: the claims the text verifier
(``adapters.verifier``) was unsure of go to it, many per call, and its verdict decides.

- ``SupportJudge``: the contract (``app/verify.py`` has the model behind it, metered and
  paid for); ``Judgements``: its structured reply; ``prompt``: what it is told.
- ``RunSupportJudge``: the judge model of a research run, billed to the run's meter.
- ``settle``: hands the uncertain verdicts over, ``JUDGE_BATCH`` claims a call, and keeps
  what the code can take of its answers (``bound``). A batch it cannot answer keeps the text
  verifier's verdicts, with the reason.

A judge adds evidence, never removes what the code found: its "supported" counts only with a
quote the code finds word for word in the source and holding the claim's numbers, identifiers,
polarity, names and clauses (``unchecked_quote``); a contradiction the code found stands
unless such a quote resolves it. Otherwise the text verdict stands, and the claim check says
the judge disagreed without evidence.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field

from deep_research.adapters.unstated import unstated
from deep_research.adapters.verifier import SupportVerdict, sentence_spans, unheld_details
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
    quote: str = Field(
        description="For 'supported': the words of the claim's passage that state it, "
        "copied exactly (the whole sentence, with its figures and names); else ''."
    )


class Judgements(BaseModel):
    """The judge model's answer (structured output)."""

    judgements: list[JudgedClaim] = Field(description="One per claim, in the order given.")


class JudgeVerdict(BaseModel):
    verdict: Judged
    explanation: str
    model: str = Field(description="The model that judged.")
    quote: str = Field(default="", description="The passage it quoted for 'supported'.")


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
                verdict=judged.verdict,
                explanation=judged.explanation,
                model=model,
                quote=judged.quote,
            )
    return out


# --- what the code takes of a judge's answer -----------------------------------------------

_MARKS = "\"'“”‘’«» "
_QUOTE_MARKS = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "«": '"', "»": '"'})


def _plain(text: str) -> str:
    """``text`` for a verbatim comparison: NFKC, straight quotation marks, one space."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(_QUOTE_MARKS).split())


def unchecked_quote(item: ToJudge, quote: str) -> str:
    """Why ``quote`` is not evidence the code can check for ``item``'s claim (one phrase), or
    "" when it is: one run of the words of one of the claim's passages, word for word
    (spaces and quotation marks aside; no elision, no part of a word: "1500" is not in
    "15000"), holding all the claim's numbers and code identifiers, its names, a share of
    each of its clauses (``adapters.unstated``), and its polarity, in the quote and in the
    sentences the quote stands in ("guarantees ordering" out of "does not guarantee
    ordering" is no evidence of it)."""
    said = _plain(quote).strip(_MARKS)
    if not re.search(r"\w", said):
        return "quoting nothing"
    for passage in item.passages:
        plain = _plain(passage)
        found = _run_in(said, plain)
        if found is not None:
            break
    else:
        return "quoting words its source does not hold"
    start, end = found
    around = " ".join(plain[a:b] for a, b in sentence_spans(plain) if a < end and b > start)
    missing = unheld_details(item.claim, said) + unstated(item.claim, said)
    if "negation" not in missing and "negation" in unheld_details(item.claim, around):
        missing.append("negation")
    if missing:
        return "quoting a passage that does not hold its " + ", ".join(missing)
    return ""


_WORD = re.compile(r"\w+|[^\w\s]")


def _run_in(quote: str, text: str) -> tuple[int, int] | None:
    """Where the words of ``quote`` stand in ``text`` as one run, whole words only: its
    first word's start and its last word's end; None when they do not."""
    wanted = _WORD.findall(quote)
    words = list(_WORD.finditer(text))
    held = [w.group() for w in words]
    for i in range(len(held) - len(wanted) + 1):
        if held[i : i + len(wanted)] == wanted:
            return words[i].start(), words[i + len(wanted) - 1].end()
    return None


def bound(
    item: ToJudge, verdict: SupportVerdict, answer: JudgeVerdict
) -> tuple[SupportVerdict, str]:
    """What the code takes of the judge's ``answer`` about an uncertain text ``verdict``, and
    why the text verdict stands against it ("" when it does not). A judge adds evidence,
    never removes what the code found: its "supported" is taken only with a quote the code
    checks (``unchecked_quote``), which then is the verdict's passage; a contradiction the
    code found stands unless such a quote resolves it; any other answer is taken."""
    if answer.verdict == "supported":
        why = unchecked_quote(item, answer.quote)
        if not why:
            return SupportVerdict(
                "supported", verdict.score, (answer.quote.strip(_MARKS),), answer.model
            ), ""
        said = f"the judge model ({answer.model}) said supported, {why}: the text verdict stands"
        return replace(verdict, uncertain=False), said
    if verdict.support == "contradicted":
        return replace(verdict, uncertain=False), ""
    return verdict.decided_by(answer.verdict, answer.model), ""


@dataclass(frozen=True)
class Settled:
    verdicts: list[SupportVerdict]
    opinions: list[JudgeVerdict | None]
    """What the judge said of each claim (None: it was not asked, or did not answer)."""
    problem: str = ""
    """Why some uncertain claims were left to the text verifier (one line), or ""."""
    overruled: list[str] = field(default_factory=list)
    """By claim: why the text verdict stood against the judge's answer ("" when it did not)."""

    @property
    def unproven(self) -> int:
        """The judge's answers the code did not take."""
        return sum(1 for why in self.overruled if why)


async def settle(
    claims: Sequence[ToJudge], verdicts: Sequence[SupportVerdict], judge: SupportJudge
) -> Settled:
    """``verdicts`` (one per claim), with those the text verifier was unsure of decided by
    ``judge``, ``JUDGE_BATCH`` a call, one call after another (each is paid for before the
    next is asked). A batch that fails keeps its text verdicts and ends the asking."""
    out = list(verdicts)
    opinions: list[JudgeVerdict | None] = [None] * len(out)
    overruled = [""] * len(out)
    unsure = [i for i, verdict in enumerate(out) if verdict.uncertain]
    for start in range(0, len(unsure), JUDGE_BATCH):
        batch = unsure[start : start + JUDGE_BATCH]
        try:
            answers = await judge.judge([claims[i] for i in batch])
        except DeepResearchError as exc:
            problem = f"the judge model was not asked or failed: {' '.join(str(exc).split())}"
            return Settled(out, opinions, problem, overruled)
        for i, answer in zip(batch, answers, strict=True):
            opinions[i] = answer
            if answer is not None:
                out[i], overruled[i] = bound(claims[i], out[i], answer)
    return Settled(out, opinions, overruled=overruled)


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
