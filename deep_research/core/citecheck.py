"""The citation checker: plain-Python checks of a report body after synthesis (pure).

A model asked "is this claim supported?" can be as wrong as the model that wrote it; these
checks are lookups and token comparisons, so they cannot hallucinate:
- unknown markers (a ref no source has) — counted; ``memory.renumber`` removes them;
- factual sentences (numbers, dates, names, comparisons) that carry no marker;
- citations whose source text shares no content word with the sentence citing it
  (only judged when the source's quote is long enough to say).

Support is judged only against what the source says — its ``quote`` (verbatim text) and
title — never against ``Citation.claim``: that is our own sentence, and a sentence always
"supports" itself. Web research jobs return no source text, so their citations cannot be
judged at all; they are counted instead.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from deep_research.core.models import Citation

_MARKER = re.compile(r"\[(\d{1,4})\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]+|\d[\d.,%]*")
_COMPARISON = re.compile(
    r"\b(more|less|fewer|faster|slower|better|worse|higher|lower|larger|smaller|most|least)\b"
    r"|%|\bx\d|\d+x\b",
    re.IGNORECASE,
)
# One string reads better than ninety one-word lines of a list literal.
_STOP = frozenset(
    """about above after again also among and any are because been before being between
    both but can could does doing down during each from further had has have having here
    how into its itself just more most much must not now off once only other our out
    over own same should some such than that the their them then there these they this
    those through too under until very was were what when where which while who whom why
    will with would your yours""".split()  # noqa: SIM905
)
MIN_QUOTE_WORDS = 8


@dataclass
class CheckResult:
    cited: int = 0
    unknown: int = 0
    no_source_text: int = 0
    """Citations whose source has no quote (web research): their support was not judged."""
    uncited: list[str] = field(default_factory=list)
    unsupported: list[tuple[str, int]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.unknown or self.uncited or self.unsupported)


def check(body: str, sources: Sequence[Citation], *, unknown: int = 0) -> CheckResult:
    """Check a renumbered body (``[1]`` = ``sources[0]``)."""
    result = CheckResult(unknown=unknown)
    for sentence in sentences(body):
        numbers = [int(n) for n in _MARKER.findall(sentence)]
        text = _MARKER.sub("", sentence).strip()
        if not numbers:
            if is_factual(text):
                result.uncited.append(text)
            continue
        result.cited += len(numbers)
        known = [n for n in numbers if 1 <= n <= len(sources)]
        result.no_source_text += sum(1 for n in known if not sources[n - 1].quote.strip())
        claim = content_words(text)
        evidence = [
            (n, content_words(_source_text(sources[n - 1])))
            for n in known
            if sources[n - 1].quote.strip()
        ]
        judged = [(n, words) for n, words in evidence if len(words) >= MIN_QUOTE_WORDS]
        if judged and all(not claim & words for _, words in judged):
            result.unsupported.append((text, judged[0][0]))
    return result


def sentences(body: str) -> list[str]:
    """Prose sentences of a markdown body: headings, tables, code and short bits skipped."""
    found: list[str] = []
    in_code = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            continue
        if in_code or not stripped or stripped.startswith(("#", "|", ">", "_")):
            continue
        stripped = re.sub(r"^([-*+]|\d+\.)\s+", "", stripped)
        for piece in _SENTENCE_END.split(stripped):
            if len(piece.split()) >= 6:
                found.append(piece.strip())
    return found


def is_factual(sentence: str) -> bool:
    """Numbers, dates, proper nouns past the first word, or comparisons: worth a citation."""
    words = sentence.split()
    if any(ch.isdigit() for ch in sentence) or _COMPARISON.search(sentence):
        return True
    return any(w[:1].isupper() and w.strip("(\"'").isalpha() for w in words[1:])


def content_words(text: str) -> set[str]:
    """Lower-cased content words cut to 5 letters: a stemmer's job, done crudely."""
    return {
        w.lower().rstrip(".,%")[:5]
        for w in _WORD.findall(text)
        if len(w) > 3 and w.lower() not in _STOP
    }


def _source_text(source: Citation) -> str:
    """What the source itself says; ``claim`` is ours and proves nothing."""
    return f"{source.title} {source.quote}"
