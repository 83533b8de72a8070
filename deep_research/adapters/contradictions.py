"""Contradictions in the evidence store: two findings on one subject whose numbers, dates
or polarity conflict. No model: each unit is read once (``adapters.statements.read_finding``), and
only pairs sharing two words or details are compared (an inverted index, the words in more
than a quarter of the units left out): 320 units in milliseconds, 400 units of a single
template, nearly every pair a candidate, in 0.2 s.

A pair is on one subject when
- they share at least ``MIN_SHARED`` content words, ``SAME_SUBJECT`` of the shorter's (a
  quantity or a time both give alike counts as a shared word);
- fewer than half of the words before each one's first auxiliary ("The Foo bridge" of "The
  Foo bridge is …") are missing from the other (the Foo bridge is not the Foo tunnel);
- not both add a name the other lacks (a capitalized word past the first, a version such
  as "Python 3.12"): Acme is not Globex, Lua not JavaScript; one side may add "in Europe".

Then they conflict:
- ``date``: both date an event of one kind (founded / established, released / shipped,
  entered into force …: a date belongs to the event word before it) and the dates differ;
- ``number``, only at one time (the same dates, or none on either side): a quantity in one
  unit (metres, %, USD, people …) differs beyond the rounding either side wrote ("1.2
  million" is 1,234,567; "1,200" is not 1,450);
- ``polarity``, at one time and with no figure differing: one denies ("not", "never", "no
  longer", "un…", "fell" against "rose") what the other affirms, in nearly the same words
  (``SAME_CLAIM``), the denying side adding none ("supports Y but not Z" denies only Z).

Different years are different times, not a conflict: "$5M in 2021" and "$7M in 2022" are
both true, and so are "$5M in 2021" and "$7M" (not known to be one time).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence

from deep_research.adapters.statements import (
    NEGATIONS,
    WORD,
    Reading,
    plain,
    read_finding,
    stem,
)
from deep_research.core.corroboration import ConflictKind, Contradiction, Side
from deep_research.core.models import EvidenceUnit

MIN_SHARED = 2
SAME_SUBJECT = 0.6
"""The share of the shorter unit's content words the other must hold."""
SAME_CLAIM = 0.6
"""A polarity conflict: the Jaccard similarity of the two units' content words."""
COMMON = 0.25
"""A word in more than this share of the units (of 40 or more) does not pair units."""
_UP = "increased increase increases rose rise rises grew grow grows gained gain climbed jumped"
_DOWN = "decreased decrease decreases fell fall falls declined decline declines shrank dropped"
_ANTONYMS = [
    *((up, down) for up in _UP.split() for down in _DOWN.split()),
    ("higher", "lower"), ("larger", "smaller"), ("more", "fewer"), ("above", "below"),
    ("won", "lost"), ("win", "lose"), ("accepted", "rejected"), ("approved", "rejected"),
    ("allowed", "prohibited"), ("allows", "prohibits"), ("allowed", "banned"),
    ("legal", "banned"), ("true", "false"), ("succeeded", "failed"), ("before", "after"),
]  # fmt: skip
_PREFIXES = ("un", "non", "in", "im", "il", "ir", "dis")


@functools.cache
def _antonyms() -> dict[str, frozenset[str]]:
    pairs: dict[str, set[str]] = defaultdict(set)
    for a, b in _ANTONYMS:
        pairs[stem(a)].add(stem(b))
        pairs[stem(b)].add(stem(a))
    return {k: frozenset(v) for k, v in pairs.items()}


# --- comparing two ----------------------------------------------------------------------


def _agreeing(a: Reading, b: Reading) -> int:
    """Details both give alike: each quantity of ``a`` that ``b`` gives too, and the time
    when both give one (they count as shared words: "rose to 6.1% in March 2024")."""
    same = sum(any(x.unit == y.unit and x.agrees(y) for y in b.quantities) for x in a.quantities)
    return same + (bool(a.dates and b.dates) and _same_time(a, b))


def _same_subject(a: Reading, b: Reading, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether ``a`` and ``b`` speak of one thing (module docstring); ``ignore``: the
    words of a flip ("rose"/"fell"), which differ by design."""
    a_words, b_words = a.words - ignore, b.words - ignore
    shared = len(a_words & b_words) + _agreeing(a, b)
    smaller = min(len(a_words), len(b_words)) + _agreeing(a, b) or 1
    return (
        shared >= MIN_SHARED
        and shared / smaller >= SAME_SUBJECT
        and len(a.subject - b_words) * 2 < len(a.subject) + (not a.subject)
        and len(b.subject - a_words) * 2 < len(b.subject) + (not b.subject)
        and not (a.names - b_words and b.names - a_words)
    )


def _same_time(a: Reading, b: Reading) -> bool:
    if not a.dates and not b.dates:
        return True
    return any(x.agrees(y) for x in a.dates for y in b.dates)


def _number_conflict(a: Reading, b: Reading) -> str | None:
    for x in a.quantities:
        ys = [y for y in b.quantities if y.unit == x.unit]
        if not ys or any(x.agrees(y) for y in ys):
            continue
        xs = [q for q in a.quantities if q.unit == x.unit]
        for y in ys:
            if not any(y.agrees(q) for q in xs):
                return f"{x.text} vs {y.text}"
    return None


def _date_conflict(a: Reading, b: Reading) -> str | None:
    """Both tell of one event (the same word, or two of one kind: "released", "shipped")
    at dates that differ."""
    if a.negated != b.negated:
        return None
    for kind, x in a.events:
        ys = [y for other, y in b.events if other == kind]
        xs = [d for other, d in a.events if other == kind]
        if ys and not any(p.agrees(q) for p in xs for q in ys):
            y = min(ys, key=lambda d: abs((d.year or 0) - (x.year or 0)))
            return f"{x.text} vs {y.text}"
    return None


@functools.cache
def _opposites(word: str) -> frozenset[str]:
    """The stems that say the opposite of the stem ``word``: its antonyms, and it with a
    negating prefix added or removed ("avail" / "unavail")."""
    found = set(_antonyms().get(word, ()))
    for prefix in _PREFIXES:
        found.add(prefix + word)
        if word.startswith(prefix) and len(word) - len(prefix) >= 4:
            found.add(word[len(prefix) :])
    return frozenset(w for w in found if len(w) >= 4 or w in _antonyms())


def _flipped_words(a: Reading, b: Reading) -> tuple[str, str] | None:
    """A word of one whose opposite ("increased"/"decreased", "available"/"unavailable")
    is a word of the other."""
    only_b = b.words - a.words
    for x in sorted(a.words - b.words):
        flipped = _opposites(x) & only_b
        if flipped:
            return x, min(flipped)
    return None


def _polarity_conflict(
    a: Reading, b: Reading, flip: tuple[str, str] | None, a_text: str, b_text: str
) -> str | None:
    """One denies what the other affirms: a negation on one side only, or a flipped word
    ("rose"/"fell") with the negations alike; in nearly the same words (``SAME_CLAIM``),
    the denying side adding none ("supports Y but not Z" denies Z, not Y)."""
    if (a.negated != b.negated) == bool(flip):  # no flip, or two that cancel
        return None
    a_words, b_words = (a.words - {flip[0]}, b.words - {flip[1]}) if flip else (a.words, b.words)
    union = a_words | b_words
    if not union or len(a_words & b_words) / len(union) < SAME_CLAIM:
        return None
    if flip:
        return f"“{_raw(a_text, flip[0])}” vs “{_raw(b_text, flip[1])}”"
    denying, affirming = (a_words, b_words) if a.negated else (b_words, a_words)
    if denying - affirming:
        return None
    return f"“{_negation_word(a_text if a.negated else b_text)}” vs affirmed"


def _negation_word(text: str) -> str:
    words: list[str] = WORD.findall(text)
    for raw in words:
        low = raw.lower().replace("’", "'")
        if low in NEGATIONS or low.endswith("n't"):
            return raw
    return "not"


def _raw(text: str, stemmed: str) -> str:
    """The word of ``text`` whose stem is ``stemmed``, as written."""
    words: list[str] = WORD.findall(text)
    return next((w for w in words if stem(w.lower()) == stemmed), stemmed)


def conflict(a: Reading, b: Reading, a_text: str, b_text: str) -> tuple[ConflictKind, str] | None:
    """How two readings (of ``a_text`` and ``b_text``) conflict, and what differs; None
    when they do not (see the module docstring)."""
    if a.names - b.words and b.names - a.words:  # Acme and Globex: cheap, and common
        return None
    flip = _flipped_words(a, b)
    if not _same_subject(a, b, frozenset(flip or ())):
        return None
    numbers = _number_conflict(a, b)
    dates = None if numbers else _date_conflict(a, b)
    if dates:
        return "date", dates
    if not _same_time(a, b):
        return None
    if numbers:
        return "number", numbers
    if _differing_quantity(a, b):
        return None
    polarity = _polarity_conflict(a, b, flip, a_text, b_text)
    return ("polarity", polarity) if polarity else None


def _differing_quantity(a: Reading, b: Reading) -> bool:
    """A quantity of one that the other gives otherwise (in the same unit)."""
    return any(
        ys and not any(x.agrees(y) for y in ys)
        for x in a.quantities
        for ys in [[y for y in b.quantities if y.unit == x.unit]]
    )


# --- the evidence store -----------------------------------------------------------------


def _candidates(readings: Sequence[Reading]) -> list[tuple[int, int]]:
    """Pairs sharing at least ``MIN_SHARED`` words that are not in most units."""
    postings: dict[str, list[int]] = defaultdict(list)
    for i, reading in enumerate(readings):
        details = {f"@{d.year}" for d in reading.dates if d.year}
        details |= {f"{q.unit}={q.value:.3g}" for q in reading.quantities}
        for word in reading.words | details:
            postings[word].append(i)
    common = COMMON * len(readings) if len(readings) >= 40 else len(readings)
    shared: dict[tuple[int, int], int] = defaultdict(int)
    for units in postings.values():
        if len(units) > common:
            continue
        for n, i in enumerate(units):
            for j in units[n + 1 :]:
                shared[i, j] += 1
    return sorted(pair for pair, count in shared.items() if count >= MIN_SHARED)


def contradictions(units: Sequence[EvidenceUnit]) -> list[Contradiction]:
    """The contradictions among ``units``, in the order of their first unit: pairs on one
    subject, at one time, whose numbers, dates or polarity conflict (module docstring).
    Two units citing exactly the same sources, or saying the same words, are not compared;
    a conflict already shown for a unit (the same "1,200 vs 1,450") is not repeated for
    another unit that says the same."""
    texts = [plain(u.finding) for u in units]
    readings = [read_finding(u.finding) for u in units]
    found: list[Contradiction] = []
    shown: set[tuple[str, int]] = set()
    for i, j in _candidates(readings):
        a, b = units[i], units[j]
        if (a.refs and set(a.refs) == set(b.refs)) or texts[i] == texts[j]:
            continue
        hit = conflict(readings[i], readings[j], texts[i], texts[j])
        if hit is None or (hit[1], i) in shown or (hit[1], j) in shown:
            continue
        shown.update({(hit[1], i), (hit[1], j)})
        found.append(Contradiction(kind=hit[0], conflict=hit[1], first=_side(a), second=_side(b)))
    return found


def _side(unit: EvidenceUnit) -> Side:
    return Side(unit_id=unit.id, finding=unit.finding, refs=tuple(unit.refs))
