"""Citations, in one place: marker forms, identity, registration, renumbering and checking.

Marker forms, from a branch to the report:
- ``[n]`` — a branch's notes cite the n-th citation of their own list (``LOCAL``);
- ``[S#]`` — the session registry's ref, used in notes, summary and drafts (``SESSION``);
- ``[n]`` again in the report, numbered by first use (``renumber_all``).

A bracketed number we did not write — ``[2024]`` in a model's prose, a ``[2]`` in a draft
that cites with ``[S#]`` — is *literal*: it is escaped as ``\\[2024\\]`` (markdown shows
``[2024]``) the moment it is seen, so no later step can take it for a citation. A local
marker that points past its list is literal too, never silently dropped.

Identity (``identity``): a knowledge-base chunk is its locator, whatever cites it; a web
source with its own text is (url, passage hash), so two passages of one page stay two
citations; a web source without text (OpenAI research jobs) is (url, claim), so a page
cited for two claims is two citations and one claim cited twice is one.

The checker (``check``) is plain Python, so it cannot hallucinate: unknown markers,
factual sentences without a marker, and citations whose source text shares no content
word with the sentence citing it. Support is judged only against what the source says —
its ``quote`` and title — never against ``Citation.claim``: that is our own sentence, and
a sentence always "supports" itself. Citations without source text are counted instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deep_research.core.models import Citation
from deep_research.core.words import prefix_words

LOCAL = re.compile(r"(?<!\\)\[(\d{1,4})\](?!\()")
"""``[n]``, not escaped and not a markdown link's text (``[2](url)``)."""
SESSION = re.compile(r"\[(S\d{1,5})\]")
TRAILING = re.compile(r"\s*(?:(?<!\\)\[S?\d{1,5}\])+\s*$")
"""Markers of either form at the end of a line."""


# --- identity -----------------------------------------------------------------------


def identity(citation: Citation) -> str:
    """What makes two citations one source (see the module docstring)."""
    where = citation.url or citation.locator
    if citation.kind != "web":
        return f"{citation.kind}:{where}"
    if citation.quote.strip():
        passage = " ".join(citation.quote.split())
        return f"web:{where}#passage:{hashlib.sha256(passage.encode()).hexdigest()[:16]}"
    if citation.claim:
        return f"web:{where}#{' '.join(citation.claim.lower().split())}"
    return f"web:{where}"


# --- marker forms -------------------------------------------------------------------


def escape_literal(text: str) -> str:
    """Every ``[n]`` in ``text`` marked as literal text (``\\[n\\]``)."""
    return LOCAL.sub(lambda m: rf"\[{m.group(1)}\]", text)


def keep_cited(notes: str, available: int) -> tuple[str, list[int]]:
    """Renumber the local markers of ``notes`` ``[1]..[k]`` by first use.

    Returns the text and the 0-based indexes (into a list of ``available`` items) of what
    was cited, in the new order; markers past the list are left as literal text."""
    renumbered: dict[int, int] = {}
    for match in LOCAL.finditer(notes):
        number = int(match.group(1))
        if 1 <= number <= available:
            renumbered.setdefault(number, len(renumbered) + 1)

    def rewrite(match: re.Match[str]) -> str:
        new = renumbered.get(int(match.group(1)))
        return f"[{new}]" if new else rf"\[{match.group(1)}\]"

    return LOCAL.sub(rewrite, notes), [number - 1 for number in renumbered]


def shift(notes: str, offset: int) -> str:
    """Local markers moved ``offset`` places on: notes whose list is appended to another."""
    return LOCAL.sub(lambda m: f"[{int(m.group(1)) + offset}]", notes)


def strip_trailing(line: str) -> str:
    """``line`` without the markers it ends with."""
    return TRAILING.sub("", line)


def has_session_marker(text: str) -> bool:
    return SESSION.search(text) is not None


_CLAIM_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_of(text: str, number: int) -> str:
    """The sentence of ``text`` that cites local marker ``[number]``, without its markers:
    the claim that citation supports. Empty when no sentence cites it."""
    for sentence in _CLAIM_END.split(text):
        if any(int(m.group(1)) == number for m in LOCAL.finditer(sentence)):
            claim = " ".join(LOCAL.sub("", sentence).split()).lstrip("-*> ").strip()
            return re.sub(r"\s+([.,;:!?])", r"\1", claim)
    return ""


# --- the session registry and the report --------------------------------------------


def register(
    sources: dict[str, Citation], notes: str, citations: Sequence[Citation]
) -> tuple[str, list[Citation]]:
    """Add ``citations`` to the session registry and rewrite ``[n]`` markers to ``[S#]``.

    Citations are de-duplicated by ``identity`` across the whole session. A marker that
    points past the list stays in the notes as literal text."""
    by_identity = {identity(c): ref for ref, c in sources.items()}
    local_to_ref: dict[int, str] = {}
    registered: list[Citation] = []
    for index, citation in enumerate(citations, start=1):
        key = identity(citation)
        ref = by_identity.get(key)
        if ref is None:
            ref = f"S{len(sources) + 1}"
            sources[ref] = citation.model_copy(update={"ref": ref})
            by_identity[key] = ref
        local_to_ref[index] = ref
        registered.append(sources[ref])

    def rewrite(match: re.Match[str]) -> str:
        ref = local_to_ref.get(int(match.group(1)))
        return f"[{ref}]" if ref else rf"\[{match.group(1)}\]"

    return LOCAL.sub(rewrite, notes), registered


def cited_refs(text: str) -> list[str]:
    """Session refs cited in ``text``, in order of first use."""
    return list(dict.fromkeys(match.group(1) for match in SESSION.finditer(text)))


def renumber_all(
    texts: Sequence[str], sources: Mapping[str, Citation]
) -> tuple[list[str], list[Citation]]:
    """Rewrite ``[S#]`` markers to ``[1]``, ``[2]`` … by first use across ``texts`` read in
    order (a report's parts): one numbering; unknown refs are removed. Bracketed numbers
    already in the texts are literal and escaped first. Returns the texts and the cited
    sources in their new order (a report's numbered list)."""
    order: dict[str, int] = {}
    for text in texts:
        for ref in cited_refs(text):
            if ref in sources and ref not in order:
                order[ref] = len(order) + 1

    def rewrite(match: re.Match[str]) -> str:
        number = order.get(match.group(1))
        return f"[{number}]" if number else ""

    return [SESSION.sub(rewrite, escape_literal(t)) for t in texts], [sources[r] for r in order]


# --- checking -----------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_COMPARISON = re.compile(
    r"\b(more|less|fewer|faster|slower|better|worse|higher|lower|larger|smaller|most|least)\b"
    r"|%|\bx\d|\d+x\b",
    re.IGNORECASE,
)
MIN_QUOTE_WORDS = 8


@dataclass
class CheckResult:
    cited: int = 0
    """Citation markers in the body (one source is often cited many times)."""
    cited_sources: set[int] = field(default_factory=set)
    """The distinct sources those markers point to."""
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
        numbers = [int(n) for n in LOCAL.findall(sentence)]
        text = LOCAL.sub("", sentence).strip()
        if not numbers:
            if is_factual(text):
                result.uncited.append(text)
            continue
        result.cited += len(numbers)
        known = [n for n in numbers if 1 <= n <= len(sources)]
        result.cited_sources.update(known)
        result.no_source_text += sum(1 for n in known if not sources[n - 1].quote.strip())
        claim = prefix_words(text)
        evidence = [
            (n, prefix_words(_source_text(sources[n - 1])))
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


def _source_text(source: Citation) -> str:
    """What the source itself says; ``claim`` is ours and proves nothing."""
    return f"{source.title} {source.quote}"
