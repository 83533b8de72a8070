"""Text tools of the no-model mode, all pure: stems, question facets, quotable units
(sentences, bullets and table rows of a passage) and the summary's sections."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import partial

from deep_research.core import markdown as md
from deep_research.core.citations import TRAILING, strip_trailing
from deep_research.core.memory import estimate_tokens
from deep_research.core.words import ALNUM_RUN
from deep_research.kb.words import question_stems

_WH = frozenset({"how", "what", "why", "when", "where", "which", "who", "whom", "whose"})
_AUX = frozenset(
    {"does", "do", "did", "is", "are", "was", "were", "can", "could", "should", "would", "will"}
)
_COPULA = frozenset({"is", "are", "was", "were"})
_DETERMINERS = frozenset({"the", "a", "an", "our", "your", "their", "its", "this", "these"})
_CLAUSE = re.compile(
    r"\s*;\s*|(?:,\s*(?:and|or|but)?|\s(?:and|or|but))\s+(?=(?:how|what|why|when|where|which|who)\b)",
    re.I,
)
_CONJ = re.compile(r"\s(?:and|or|vs\.?|versus)\s", re.I)
_COMPARE = re.compile(r"^(?:compare(?:\s+and\s+contrast)?|contrast)\s+", re.I)
_PRONOUN = re.compile(r"\b(it|they|them|its|their)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z0-9`\"(\[*_])")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|no|fig)\.|\b[A-Z]\.)$", re.I)
UNIT_WORDS = 60
"""A unit longer than this is cut (between words, ending " …")."""
ENUMERATION_WORDS = 2 * UNIT_WORDS
"""The same for an enumeration: "First, … Second, … Third, …" cut after its first reads as
the dangling "First" it is quoted whole to avoid."""


# --- text helpers -------------------------------------------------------------------


def idf_weights(docs: Sequence[set[str]]) -> dict[str, float]:
    df = Counter(t for doc in docs for t in doc)
    n = len(docs)
    return {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}


def weighted_coverage(
    query: Iterable[str], found: set[str], idf: dict[str, float], n: int
) -> float:
    """The idf-weighted share of query terms in ``found``; terms no doc has weigh most."""
    weight = {t: idf.get(t, math.log(1 + (n + 0.5) / 0.5)) for t in query}
    total = sum(weight.values())
    return sum(w for t, w in weight.items() if t in found) / total if total else 0.0


def line_key(line: str) -> str:
    """A line's identity for de-duplication: its words, without bullet or markers."""
    return " ".join(ALNUM_RUN.findall(strip_trailing(line).lower()))


# --- question facets --------------------------------------------------------------


def facets(question: str, max_facets: int) -> list[str]:
    """The question itself, then its parts (questions, clauses, list items), self-contained."""
    text = " ".join(question.split())
    found: list[str] = [text.rstrip(" ?.!")]
    subject: str | None = None
    for sentence in re.split(r"(?<=[?!.])\s+", text):
        for clause in _CLAUSE.split(sentence):
            clause = clause.strip(" ,;?.!")
            if not clause:
                continue
            if subject is None:
                subject = _subject(clause)
            elif subject:
                clause = _PRONOUN.sub(partial(_replace, subject), clause, 1)
            found += _expand(clause)
    kept: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for index, facet in enumerate(found):
        key = tuple(ALNUM_RUN.findall(facet.lower()))
        if question_stems(facet) and key not in seen:
            seen.add(key)
            first = facet.split(" ", 1)[0].lower()
            fragment = index > 0 and first in _WH | _AUX
            kept.append(facet[:1].upper() + facet[1:] if fragment else facet)
    return kept[: max(0, max_facets)]


def _replace(subject: str, pronoun: re.Match[str]) -> str:
    return f"{subject}'s" if pronoun.group(1).lower() in ("its", "their") else subject


def _subject(clause: str) -> str:
    """The main subject of a 'how does X …' / 'what is X' clause, or '' if none is evident."""
    words = clause.split()
    start = 2 if len(words) > 2 and words[0].lower() in _WH and words[1].lower() in _AUX else 0
    if start == 0 and not (len(words) > 1 and words[0].lower() in _AUX):
        return ""
    start = max(start, 1)
    rest = words[start:]
    if words[start - 1].lower() in _COPULA and words[0].lower() in ("what", "which", "who"):
        return " ".join(rest[:6])
    take = 2 if len(rest) > 1 and rest[0].lower() in _DETERMINERS else 1
    while take < len(rest) and rest[take][:1].isupper():
        take += 1
    return " ".join(rest[:take]).strip(",")


def _expand(clause: str) -> list[str]:
    """Distribute a coordinated list: 'how does X plan, schedule and budget a run' gives
    'how does X plan a run', '… schedule a run', '… budget a run'. Otherwise the clause."""
    compare = _COMPARE.match(clause)
    body = clause[compare.end() :] if compare else clause
    conj = _CONJ.search(body)
    if conj is None:
        return [clause]
    left = body[: conj.start()].rstrip(", ")
    right = body[conj.end() :].split()
    parts = [p.split() for p in left.split(", ")]
    if not right or not parts[0] or any(not p or len(p) > 4 for p in parts[1:]):
        return [clause]
    head = parts[0]
    if "between" in (w.lower() for w in head[-4:]):
        return [clause]
    if len(parts) > 1:
        k = len(parts[-1])
    else:
        k = 2 if len(right) > 1 and right[0].lower() in _DETERMINERS else 1
    first = len(head) - k
    if k == 2 and right[0].lower() in _DETERMINERS:
        window = range(max(0, len(head) - 4), len(head))
        first = max((i for i in window if head[i].lower() in _DETERMINERS), default=first)
    if first < 0:
        return [clause]
    items = [head[first:], *parts[1:], right[:k]]
    prefix = head[:first] if not compare else []
    suffix = right[k:]
    return [" ".join([*prefix, *item, *suffix]) for item in items]


# --- quotable units -----------------------------------------------------------------


def quotable_units(text: str) -> list[str]:
    """Sentences, list items and table body rows of a markdown passage, read from a
    markdown-it parse (``core.markdown.paragraphs``): each unit is one run of the passage's
    text (a body row's cells joined by " — "); headings, code and a table's header row are
    none, and a unit never joins text across them.

    Only what reads as a statement on its own is a unit (`_stands_alone`): never data (JSON,
    a table torn from its header), a list fragment that continues an introduction ("- a
    report in which …;"), nor a piece of a sentence cut where a chunk starts or ends. An
    enumeration ("First, … Second, …", in one paragraph or in consecutive items) is one unit,
    whole, with the sentence that introduces it ("… in three steps."); a "First, …" with
    nothing after it in the passage is none."""
    units: list[tuple[str, bool]] = []  # (unit, an enumeration)
    items: list[str] = []  # consecutive list items: an enumeration may run across them
    for paragraph in [*md.paragraphs(text), None]:
        if paragraph is None or paragraph.kind != "item":
            units.extend(_enumerations(items, item=True))
            items = []
        if paragraph is None:
            break
        if paragraph.kind == "row":
            units.append((paragraph.text.replace(" | ", " — "), False))
        elif paragraph.kind == "item":
            items.append(paragraph.text)
        else:
            units.extend(_enumerations(_sentences(paragraph.text), item=False))
    # Too few distinct words (a table row like "x — yes — yes") says nothing quotable.
    return [
        _clip(" ".join(u.split()), ENUMERATION_WORDS if whole else UNIT_WORDS)
        for u, whole in units
        if u and len(set(question_stems(u))) > 2
    ]


_ORDINAL = re.compile(
    r"^(?:first(?:ly)?|second(?:ly)?|third(?:ly)?|fourth|fifth|sixth|seventh|eighth|ninth|"
    r"tenth|next|then|finally|lastly)\b[,:]",
    re.I,
)
_OPENS_ENUMERATION = re.compile(r"^first(?:ly)?\b", re.I)
_CLOSERS = re.compile(r"""(?:\s*\[[^\]]*\]|[\s"'”’)\]*_`])+$""")
"""What may follow a sentence's full stop: markers ``[3]``, quotes, brackets, emphasis."""
_CONTINUATION = re.compile(r"^[a-z]+(?![\w.\-])")
"""A first word all in lower-case letters ("to", "a", "job,"): the text continues a sentence
begun before it. A name ("deep-research", "gpt-5", "iOS") is no such word."""
_DATA_CHARS = frozenset('{}[]"')


def _stands_alone(text: str, *, item: bool) -> bool:
    """Whether ``text`` (a sentence of a paragraph, or a list item) reads as a statement on
    its own: not data, not begun mid-sentence, not ended mid-enumeration (";", ",", ":",
    "and"); a sentence also ends as one (".", "!", "?", "…")."""
    if not text or _is_data(text) or _CONTINUATION.match(text):
        return False
    end = _CLOSERS.sub("", text)
    if not end or end[-1] in ";,:" or end.rsplit(None, 1)[-1].lower() in ("and", "or"):
        return False
    return item or end[-1] in ".!?…"


def _is_data(text: str) -> bool:
    """JSON or a table's line read as text: what a passage holds as data, not as prose (a
    plan a model wrote, a table row cut from its header, which cannot be told from it)."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[", "|"):
        return True
    try:
        json.loads(stripped)
    except ValueError:
        data = sum(c in _DATA_CHARS for c in stripped)
        return stripped.count('":') >= 2 or data >= 0.2 * len(stripped.replace(" ", ""))
    return True


def _enumerations(pieces: list[str], *, item: bool) -> list[tuple[str, bool]]:
    """The ``pieces`` (consecutive sentences of a paragraph, or consecutive list items) that
    stand alone (`_stands_alone`), each enumeration joined into one (flagged True): a
    "First, …" and the ordinal pieces right after it ("Second, …", "Finally, …"), after the
    sentence right before it in a paragraph (its introduction). An ordinal piece outside
    such a run (a "First, …" with no next, a "Second, …" whose first is not there) is
    dropped; a piece dropped breaks a run, so that a unit is always contiguous text."""
    out: list[tuple[str, bool]] = []
    run: list[str] = []
    before: str | None = None  # the piece right before this one, when it was kept alone
    for piece in [*pieces, ""]:
        kept = bool(piece) and _stands_alone(piece, item=item)
        ordinal = kept and _ORDINAL.match(piece) is not None
        opens = ordinal and _OPENS_ENUMERATION.match(piece) is not None
        if run and ordinal and not opens:
            run.append(piece)
            continue
        if len(run) > 1:
            intro = [out.pop()[0]] if not item and before is not None else []
            out.append((" ".join([*intro, *run]), True))
        if run:  # what comes next follows an enumeration, or a dropped "First, …"
            before = None
        if opens:
            run = [piece]
            continue
        run = []
        before = piece if kept and not ordinal else None
        if before is not None:
            out.append((before, False))
    return out


def _sentences(paragraph: str) -> list[str]:
    pieces: list[str] = []
    for piece in _SENTENCE.split(paragraph) if paragraph else []:
        if pieces and _ABBREVIATION.search(pieces[-1]):
            pieces[-1] += " " + piece  # "e.g. foo" does not end a sentence
        else:
            pieces.append(piece)
    return pieces


def _clip(unit: str, most: int) -> str:
    words = unit.split()
    return unit if len(words) <= most else " ".join(words[:most]) + " …"


# --- summary sections ---------------------------------------------------------------


def sections(summary: str) -> list[tuple[str, list[str]]]:
    """``### heading`` sections of a summary with their non-blank lines ('' heads a preamble)."""
    found: list[tuple[str, list[str]]] = []
    for line in summary.splitlines():
        if line.startswith("### "):
            found.append((line[4:].strip(), []))
        elif line.strip():
            if not found:
                found.append(("", []))
            found[-1][1].append(line.rstrip())
    return found


def render_sections(parts: Sequence[tuple[str, list[str]]]) -> str:
    return "\n\n".join("\n".join(([f"### {h}"] if h else []) + lines) for h, lines in parts).strip()


def lines_within(lines: list[str], max_tokens: int) -> list[str]:
    """Whole lines while they fit; at least the first, clipped between words, markers kept."""
    kept: list[str] = []
    used = 0
    for line in lines:
        used += estimate_tokens(line) + 1
        if used <= max_tokens:
            kept.append(line)
        elif not kept:
            markers = TRAILING.search(line)
            tail = markers.group(0) if markers else ""
            words = line[: len(line) - len(tail)].split()
            while len(words) > 3 and estimate_tokens(" ".join(words) + tail) + 2 > max_tokens:
                words.pop()
            kept.append(" ".join(words).removesuffix(" …") + " …" + tail)
        else:
            break
    return kept
