"""The claim verifier: does a source's text support a claim? One pure function for the whole
tool (``verify``): the report's claim check (``adapters/claim_check.py``), MCP
``verify_claim`` and ``bench/verify.py`` call it.

How it decides, with no model:
- The claim loses its citation markers (``[1]``, ``[2, 3]``); the source is cut into
  sentences, and windows of neighbouring sentences (up to ``WINDOW_WORDS`` words) are
  ranked by how many of the claim's content words they hold; the best ``CANDIDATES`` are
  embedded with the shipped MiniLM (``kb.onnx_embeddings.OnnxEmbeddings``, always that one: the
  weights were fitted on its cosines, whatever the knowledge base embeds with).
- ``read`` measures, over the whole source and over the best windows: content-word and
  word-pair coverage, the coverage of the words the question did not already give, the
  claim's numbers and capitalized names found, cosine similarities, lengths.
- A gradient-boosted classifier (``verifier_weights.json``: trees fitted by
  ``scripts/train_verifier.py`` on AttributionBench's dev split, with its provenance and
  cross-validated figures; stumps, an additive model, because deeper trees transfer worse to
  a dataset left out, ``scripts/verifier_lodo.py``) turns them into the probability that the
  source supports the claim; ``supported`` at ``threshold`` or above, ``partial`` from
  ``partial_threshold`` when one window holds half the claim's words (``PARTIAL``), else
  ``unsupported``.
- ``contradicted`` when the passage that states the claim (the claim's words nearly all in
  one window) differs from it in a detail (``adapters.claim_details``): a number, a
  negation, a code identifier. Its score is the classifier's, capped at the share of dev
  rows with such a conflict that were supported (``conflict_rate``).
- ``unsupported`` whatever the score when the claim is specific (a number, a name past its
  first word, a code identifier) and the source states none of its details
  (``specifics_unstated``: on AttributionBench dev it fires on 64 of 1,198 rows, 19 of them
  labelled supported, and costs 0.4 macro-F1; it is what keeps a figure its source never
  gives from being supported, by the classifier or by a judge).
- ``unverifiable``: an empty source or claim (nothing but spaces, punctuation, markers).

A judge model settles the claims whose score falls in ``uncertain_band`` (``SupportJudge``,
``app/verify.py``); ``SupportVerdict.decided_by`` records that it did.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from deep_research.adapters.claim_details import POLARITY, flipped, identifiers_in, number_words
from deep_research.adapters.verifier_model import model, shipped_embedder
from deep_research.core.words import CLAIM_FUNCTION_WORDS
from deep_research.kb.words import english_stemmer

if TYPE_CHECKING:
    from deep_research.kb.embeddings import Embedder

Support = Literal["supported", "partial", "unsupported", "contradicted", "unverifiable"]
TEXT_VERIFIER = "text"
"""``SupportVerdict.verifier`` when the shipped classifier decided (no model)."""

CANDIDATES = 4
"""Windows embedded per claim (the lexical pre-filter's best)."""
WINDOW_WORDS = 70
"""A window: neighbouring sentences up to this many words (a longer sentence is one)."""
ALIGNED = 0.8
"""The share of the claim's content words one window must hold for it to be the passage
that states the claim, whose details (numbers, negations, identifiers) must then agree."""
PARTIAL = 0.5
"""A claim not supported is ``partial`` when its score is at least ``partial_threshold`` and
one window holds this share of its content words (the source states part of it)."""
QUOTED = 0.9
QUOTED_WORDS = 6
"""A claim of at least ``QUOTED_WORDS`` words whose longest run in the source, word for word
and in order, holds ``QUOTED`` of them is quoted: its score is at least ``quoted_rate``."""

_MARKER = re.compile(r"\s*(?:\[\s*\d+(?:\s*[,;–-]\s*\d+)*\s*\])+")
_ORDINAL = re.compile(r"^\s*\d{1,2}[.)]\s+")
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*%?|[A-Za-z_][\w'’-]*\w|[A-Za-z]")
_SENTENCE_END = re.compile(
    r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[`*_])"  # a sentence's end
    r"|\n\s*\n\s*"  # a blank line
    r"|\s*\n(?=\s*(?:[-*+>#|]|\d+[.)]\s|```))"  # a line that opens a list item, a heading...
)
"""Where the source's sentences end: a wrapped line (a single line break) goes on."""


@dataclass(frozen=True)
class SupportVerdict:
    support: Support
    score: float
    """Calibrated probability that the source supports the claim (0 with no source text)."""
    passages: tuple[str, ...]
    """The source's best passage(s) for the claim, verbatim (neighbours merged)."""
    verifier: str
    """Who decided: ``TEXT_VERIFIER`` or the judge model's name."""
    conflicts: tuple[str, ...] = ()
    """What in the claim the source contradicts, one phrase each (a number, a negation)."""
    uncertain: bool = False
    """The score fell in the band a judge model settles (``Model.uncertain_band``)."""

    def decided_by(self, support: Support, verifier: str) -> SupportVerdict:
        """This verdict, as a judge settled it."""
        return replace(self, support=support, verifier=verifier, uncertain=False)


def strip_markers(claim: str) -> str:
    """The claim without its citation markers ("[1]", "[2, 3]", "[4][5]") and a list
    item's number ("4. Turn it on")."""
    return " ".join(_ORDINAL.sub("", _MARKER.sub("", claim)).split())


@dataclass
class _Words:
    """Tokens as the features compare them: numbers whole ("1,000" → "1000"), words
    stemmed, any "n't" as "not"; ``content`` without function words."""

    stems: dict[str, str] = field(default_factory=dict)

    def tokens(self, text: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        stemmer = None
        for raw in _TOKEN.findall(text):
            low = raw.lower().replace("’", "'")
            if low.endswith("n't") or low == "cannot":
                out.append(("not", raw))
            elif low[0].isdigit():
                out.append((low.replace(",", "").rstrip("%"), raw))
            else:
                stem = self.stems.get(low)
                if stem is None:
                    stemmer = stemmer or english_stemmer()
                    stem = self.stems[low] = stemmer.stemWord(low)
                out.append((stem, raw))
        return out

    def content(self, tokens: Sequence[tuple[str, str]]) -> list[str]:
        return [
            stem
            for stem, raw in tokens
            if raw.lower() not in CLAIM_FUNCTION_WORDS and (len(stem) > 1 or stem.isdigit())
        ]


def claim_words(text: str) -> set[str]:
    """The stemmed words that carry a sentence's meaning: not function words, not single
    letters; numbers kept whole ("3.10", "1,000" as "1000"), any "n't" counted as "not"."""
    words = _Words()
    return set(words.content(words.tokens(text)))


def content_tokens(text: str) -> list[tuple[str, str]]:
    """``claim_words``, in order, each with the word as written: (stem, word)."""
    words = _Words()
    return [(stem, raw) for stem, raw in words.tokens(text) if words.content([(stem, raw)])]


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The source's sentences (and lines) as (start, end) slices, blank ones left out."""
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in _SENTENCE_END.finditer(text):
        if text[start : cut.start()].strip():
            spans.append((start, cut.start()))
        start = cut.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    return spans


@dataclass(frozen=True)
class _Window:
    start: int
    end: int
    words: frozenset[str]
    """Its content stems."""


@dataclass(frozen=True)
class _Read:
    features: dict[str, float]
    windows: tuple[_Window, ...]
    """The candidates, best first (by the classifier's cosine, then coverage)."""
    conflicts: tuple[str, ...]
    quoted: bool


def _windows(
    spans: Sequence[tuple[int, int]], words: Sequence[set[str]], text: str
) -> list[_Window]:
    lengths = [len(text[a:b].split()) for a, b in spans]
    out: list[_Window] = []
    for i in range(len(spans)):
        j, count, held = i, 0, set()
        while j < len(spans) and (count == 0 or count + lengths[j] <= WINDOW_WORDS):
            count += lengths[j]
            held |= words[j]
            j += 1
        out.append(_Window(spans[i][0], spans[j - 1][1], frozenset(held)))
    return out


def read(claim: str, source: str, question: str, embedder: Embedder) -> _Read:
    """The classifier's features of (claim, source, question), and the details the passage
    that states the claim contradicts."""
    words = _Words()
    claim_tokens = words.tokens(claim)
    claim_words = set(words.content(claim_tokens))
    given = set(words.content(words.tokens(question)))
    novel = claim_words - given
    numbers = number_words(claim_words)
    names = {stem for stem, raw in claim_tokens[1:] if raw[:1].isupper() and not stem[0].isdigit()}
    pairs = set(itertools.pairwise(words.content(claim_tokens)))

    spans = sentence_spans(source)
    sentence_tokens = [words.tokens(source[a:b]) for a, b in spans]
    sentence_words = [set(words.content(t)) for t in sentence_tokens]
    held: set[str] = set().union(*sentence_words) if sentence_words else set()
    held_pairs = {p for t in sentence_tokens for p in itertools.pairwise(words.content(t))}

    n = len(claim_words) or 1
    windows = _windows(spans, sentence_words, source)
    candidates = sorted(windows, key=lambda w: -len(claim_words & w.words))[:CANDIDATES]
    best_sentence = max((len(claim_words & w) / n for w in sentence_words), default=0.0)

    f: dict[str, float] = {
        "cov_all": len(claim_words & held) / n,
        "cov_novel": len(novel & held) / len(novel) if novel else 1.0,
        "n_novel_missing": math.log1p(len(novel - held)),
        "n_missing": math.log1p(len(claim_words - held)),
        "pairs": len(pairs & held_pairs) / len(pairs) if pairs else 1.0,
        "cov_window": len(claim_words & candidates[0].words) / n if candidates else 0.0,
        "cov_sentence": best_sentence,
        "numbers_missing": float(bool(numbers - held)),
        "numbers_found": len(numbers & held) / len(numbers) if numbers else 1.0,
        "has_numbers": float(bool(numbers)),
        "names_found": len(names & held) / len(names) if names else 1.0,
        "log_claim": math.log1p(len(claim_words)),
        "log_source": math.log1p(sum(len(t) for t in sentence_tokens)),
        "given": len(claim_words & given) / n,
        "verbatim": _verbatim(claim, source),
    }
    cosines, question_cosines, claim_question = [0.0], [0.0], 1.0
    if candidates:
        asked = [question] if question else []
        texts = [claim, *asked, *(source[w.start : w.end] for w in candidates)]
        vectors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        passages = vectors[1 + len(asked) :]
        cosines = [float(v @ vectors[0]) for v in passages]
        question_cosines = [float(v @ vectors[1]) for v in passages] if question else cosines
        claim_question = float(vectors[0] @ vectors[1]) if question else 1.0
        order = sorted(range(len(candidates)), key=lambda i: -cosines[i])
        candidates = [candidates[i] for i in order]
    f["cos_max"] = max(cosines)
    f["cos_mean"] = sum(cosines) / len(cosines)
    f["cos_question"] = claim_question
    f["cos_gain"] = max(cosines) - max(question_cosines)
    conflicts = _conflicts(
        claim, claim_tokens, claim_words, windows, spans, sentence_tokens, sentence_words, source
    )
    quoted = f["verbatim"] >= QUOTED and len(_TOKEN.findall(claim)) >= QUOTED_WORDS
    return _Read(f, tuple(candidates), conflicts, quoted)


def _verbatim(claim: str, source: str) -> float:
    """The longest run of the claim's words (all of them, lower-cased) that the source holds
    in the same order, as a share of the claim's words: 1.0 for a quoted sentence."""
    wanted = [w.lower() for w in _TOKEN.findall(claim)]
    if not wanted:
        return 0.0
    held = " " + " ".join(w.lower() for w in _TOKEN.findall(source)) + " "
    best, start = 0, 0
    for end in range(1, len(wanted) + 1):  # the run ending at `end`, slid along
        while start < end and f" {' '.join(wanted[start:end])} " not in held:
            start += 1
        best = max(best, end - start)
    return best / len(wanted)


def _conflicts(
    claim: str,
    claim_tokens: Sequence[tuple[str, str]],
    claim_words: set[str],
    windows: Sequence[_Window],
    spans: Sequence[tuple[int, int]],
    sentence_tokens: Sequence[Sequence[tuple[str, str]]],
    sentence_words: Sequence[set[str]],
    source: str,
) -> tuple[str, ...]:
    """The claim's details that every passage stating it gives otherwise. A passage states
    the claim when it holds nearly all of its other words (``ALIGNED``): a number must be in
    one such window; the polarity (a "not", a "never") and the code identifiers must be as
    in one such sentence (in one such window, when no single sentence states it)."""
    rest = claim_words - number_words(claim_words) - POLARITY
    if not rest:
        return ()
    need = ALIGNED * len(rest)
    aligned = [w for w in windows if len(rest & w.words) >= need]
    if not aligned:
        return ()
    found: list[str] = []
    numbers = number_words(claim_words)
    missing = set.intersection(*(numbers - w.words for w in aligned)) if numbers else set()
    if missing:
        found.append("number " + ", ".join(sorted(missing)))
    stating = [i for i in range(len(spans)) if len(rest & sentence_words[i]) >= need]
    if stating and all(flipped(claim_tokens, sentence_tokens[i]) for i in stating):
        found.append("negation")
    passages = (
        [source[spans[i][0] : spans[i][1]].lower() for i in stating]
        if stating
        else [source[w.start : w.end].lower() for w in aligned]
    )
    names = sorted(n for n in identifiers_in(claim) if not any(n in p for p in passages))
    if names:
        found.append("identifier " + ", ".join(names))
    return tuple(found)


def unheld_details(claim: str, text: str) -> list[str]:
    """The claim's details that ``text`` does not hold, one phrase each: a number, a code
    identifier, a name (any capitalized word but a function word, the first one included),
    or its polarity (a "not" the text lacks, or holds where the claim has none). What a
    quoted passage must hold to support the claim (``adapters.claims``)."""
    words = _Words()
    claim_tokens, text_tokens = words.tokens(strip_markers(claim)), words.tokens(text)
    held = set(words.content(text_tokens))
    out = [f"number {n}" for n in sorted(number_words(set(words.content(claim_tokens))) - held)]
    lowered = " ".join(text.lower().split())
    out += [f"identifier {n}" for n in sorted(identifiers_in(claim)) if n not in lowered]
    known = CLAIM_FUNCTION_WORDS | {raw.lower() for _, raw in text_tokens}
    names = {raw for _, raw in claim_tokens if raw[:1].isupper()}
    out += [f"name {n}" for n in sorted(names) if n.lower() not in known]
    if flipped(claim_tokens, text_tokens):
        out.append("negation")
    return out


def specifics_unstated(claim: str, text: str) -> list[str]:
    """The claim's specific details (its numbers, code identifiers and names: a capitalized
    word past the first) when ``text`` states none of them, else []. A claim with such
    details is never supported by a text that states none (a general claim has none)."""
    words = _Words()
    tokens = words.tokens(strip_markers(claim))
    numbers = sorted(number_words(set(words.content(tokens))))
    names = sorted({raw for i, (_, raw) in enumerate(tokens) if i > 0 and raw[:1].isupper()})
    identifiers = sorted(identifiers_in(claim))
    if not (numbers or names or identifiers):
        return []
    held = set(words.content(words.tokens(text)))
    lowered = " ".join(text.lower().split())
    stated = any(n in held for n in numbers) or any(i in lowered for i in identifiers)
    if stated or any(n.lower() in lowered for n in names):
        return []
    return [*numbers, *identifiers, *names]


def verify(
    claim: str, source: str, question: str = "", *, embedder: Embedder | None = None
) -> SupportVerdict:
    """Does ``source`` support ``claim``? (``question``: what the claim answers, if known.)
    Pure but for the embedder, which is the shipped MiniLM unless a test gives another."""
    claim = strip_markers(claim)
    if not re.search(r"\w", source) or not re.search(r"\w", claim):  # no word in one
        return SupportVerdict("unverifiable", 0.0, (), TEXT_VERIFIER)
    asked = " ".join(question.split()) if isinstance(question, str) else ""
    found = read(claim, source, asked, embedder or shipped_embedder())
    weights = model()
    score = weights.probability(found.features)
    unstated = () if found.conflicts else tuple(specifics_unstated(claim, source))
    conflicts = (*found.conflicts, *(f"not stated: {d}" for d in unstated))
    if conflicts:
        score = min(score, weights.conflict_rate)
    elif found.quoted:
        score = max(score, weights.quoted_rate)
    score = round(score, 4)  # the verdict's support and band follow the score it reports
    passages = tuple(source[w.start : w.end].strip() for w in found.windows[:1])
    support: Support
    if found.conflicts:
        support = "contradicted"
    elif unstated:
        support = "unsupported"
    elif score >= weights.threshold:
        support = "supported"
    elif score >= weights.partial_threshold and found.features["cov_window"] >= PARTIAL:
        support = "partial"
    else:
        support = "unsupported"
    low, high = weights.uncertain_band
    return SupportVerdict(support, score, passages, TEXT_VERIFIER, conflicts, low <= score < high)
