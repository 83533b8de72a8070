"""How well a passage states a claim: the claim checker's scoring (``best_passage``) and
the judge model's contract (``SupportJudge``, ``ClaimSupport``). ``app/verify.py`` reads the
source and asks; this module scores what it read.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from deep_research.adapters.llm.llm import Prompt

CANDIDATES = 5
"""The best passages by ``kb.rank`` that are scored on the absolute scale."""
MAX_RANKED = 200
"""Passages of a long page ranked at most (the local embedder embeds ~50 a second)."""

# Calibration (the local MiniLM embedder and its static distillate, 2026-11): 22 claims
# against the Python docs pages of tests/web_fixtures and the notes of tests/conftest.py —
# 12 the text states (some reworded), 10 it does not (off-topic, same topic but unstated,
# contradicted figures). score = (cosine + coverage) / 2. The stated claims scored 0.62-0.91
# with coverage >= 0.71; the others 0.00-0.63 with coverage <= 0.60. Coverage separates
# them; the score floor keeps out passages that share the words but not the meaning.
PASSAGE_FOUND_SCORE = 0.6
MIN_COVERAGE = 2 / 3
"""Of the claim's content words (stemmed, function words left out), the share the passage
must hold. Numbers are words ("3.10" does not match "2.7") and negations are kept; each of the
claim's numbers and negations must be in the passage."""


@dataclass(frozen=True)
class Match:
    passage: str
    similarity: float
    """Cosine similarity of claim and passage (the configured embedder), floored at 0."""
    coverage: float
    """The share of the claim's content words the passage holds."""
    missing_exact: frozenset[str] = frozenset()
    """The claim's numbers and negations the passage lacks (a changed figure, a "not")."""

    @property
    def score(self) -> float:
        return (self.similarity + self.coverage) / 2

    @property
    def found(self) -> bool:
        return (
            self.score >= PASSAGE_FOUND_SCORE
            and self.coverage >= MIN_COVERAGE
            and not self.missing_exact
        )


def best_passage(claim: str, passages: Sequence[str], embedder: Embeddings) -> Match | None:
    """The passage that best states ``claim``: of the ``MAX_RANKED`` passages that hold most
    of its content words, the ``CANDIDATES`` best by ``kb.rank``, scored on an absolute
    scale (the fused rank score is relative to the other passages). A passage that passes
    (``found``) beats a higher score that does not: a changed figure loses to the same one."""
    from deep_research.kb.words import claim_words

    wanted = claim_words(claim)
    held = [claim_words(text) for text in passages]
    if len(passages) > MAX_RANKED:  # a long page: embed only the likely passages
        kept = sorted(range(len(passages)), key=lambda i: -len(wanted & held[i]))[:MAX_RANKED]
        passages, held = [passages[i] for i in kept], [held[i] for i in kept]
    from deep_research.kb.rank import cosine_similarities, rank

    ranked = rank(claim, passages, embedder)[:CANDIDATES]
    if not ranked:
        return None
    top = [i for i, _ in ranked]
    cosine = cosine_similarities(claim, [passages[i] for i in top], embedder)
    exact = {word for word in wanted if word == "not" or word[0].isdigit()}
    matches = [
        Match(
            passage=passages[i],
            similarity=max(0.0, float(similarity)),
            coverage=len(wanted & held[i]) / len(wanted) if wanted else 0.0,
            missing_exact=frozenset(exact - held[i]),
        )
        for i, similarity in zip(top, cosine, strict=True)
    ]
    return max(matches, key=lambda m: (m.found, m.score))  # of equals, the better ranked


class ClaimSupport(BaseModel):
    """The judge model's answer (structured output)."""

    verdict: Literal["supported", "contradicted", "not_enough_information"] = Field(
        description="supported: the passage states the claim or plainly entails it; "
        "contradicted: it states something incompatible with the claim; "
        "not_enough_information: it does not settle the claim."
    )
    explanation: str = Field(
        description="One sentence: why, quoting the passage's decisive words if any."
    )


class JudgeVerdict(ClaimSupport):
    model: str = Field(description="The model that judged.")


class SupportJudge(Protocol):
    async def judge(self, claim: str, passage: str) -> JudgeVerdict:
        """Raises ``ProviderError`` when the model cannot answer."""
        ...


@functools.cache
def prompt() -> Prompt:
    from deep_research.adapters.llm.llm import load_prompt

    return load_prompt("verify")
