"""Contradictions in the evidence store: two findings on one subject whose numbers, dates
or polarity conflict. No model: each unit is read once into its details (`Reading`), and
only pairs that share content words are compared (an inverted index), so a few hundred
units cost a few milliseconds.

A pair is on one subject when
- the words before each one's first auxiliary or copula ("The Foo bridge" of "The Foo
  bridge is …") are words of the other (the Foo bridge is not the Foo tunnel);
- every name (a capitalized word past the first, a version such as "Python 3.12") of each
  is a word of the other (Acme is not Globex, Germany not France);
- they share at least ``MIN_SHARED`` content words, ``SAME_SUBJECT`` of the shorter's.

Then, and only when the two speak of the same time (the same dates, or none), they conflict:
- ``number``: a quantity in the same unit (metres, %, USD, employees …) differs beyond the
  rounding either side wrote ("1.2 million" is 1,234,567; "1,200" is not 1,450);
- ``date``: both tell of an event (founded, opened, released …) at dates that differ;
- ``polarity``: one denies ("not", "never", "no longer", "un…", "decreased") what the other
  affirms, in nearly the same words (``SAME_CLAIM``), the denying side adding none.

Different years are different times, not a conflict: "$5M in 2021" and "$7M in 2022" are
both true. A year that is the event's own date ("opened in 1998") is what a ``date``
conflict compares instead.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.adapters.verifier import claim_words
from deep_research.core.citations import SESSION
from deep_research.core.corroboration import ConflictKind, Contradiction, Side
from deep_research.core.models import EvidenceUnit

MIN_SHARED = 2
SAME_SUBJECT = 0.6
"""The share of the shorter unit's content words the other must hold."""
SAME_CLAIM = 0.6
"""A polarity conflict: the Jaccard similarity of the two units' content words."""
COMMON = 0.25
"""A word in more than this share of the units (of 40 or more) does not pair units."""

_MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("January", "Jan"),
            ("February", "Feb"),
            ("March", "Mar"),
            ("April", "Apr"),
            ("May",),
            ("June", "Jun"),
            ("July", "Jul"),
            ("August", "Aug"),
            ("September", "Sep", "Sept"),
            ("October", "Oct"),
            ("November", "Nov"),
            ("December", "Dec"),
        ],
        1,
    )
    for name in names
}
_MONTH = "(?:" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?:[0-2]?\d|3[01])(?:st|nd|rd|th)?"
_YEAR = r"(?:1[5-9]\d\d|20\d\d|2100)"
_DATES = re.compile(
    rf"\b(?P<iy>{_YEAR})-(?P<im>[01]\d)-(?P<id>[0-3]\d)\b"
    rf"|\b(?P<dd>{_DAY})\s+(?P<dm>{_MONTH}),?(?:\s+(?P<dy>{_YEAR}))?\b"
    rf"|\b(?P<mm>{_MONTH})\s+(?:(?P<md>{_DAY})(?!\d)(?:,?\s+(?P<my>{_YEAR}))?|(?P<my2>{_YEAR}))\b"
)
"""2021-03-12; 12 March 2021, 12 March; March 12, 2021, March 12, March 2021."""
_NUMBER = re.compile(
    r"(?<![\w.,/-])(?P<cur>US\$|[$€£¥])?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<suffix>%|(?:bn|tn|mn|[kKmMbB])(?![\w]))?(?![\w%]|[.,]\d)"
)
_AFTER = re.compile(
    r"\s*-?\s*(?P<scale>thousand|million|billion|trillion|per\s*cent|percent)?"
    r"\s*-?\s*(?P<word>[A-Za-z]+)?"
)
_SCALE = {
    "k": 1e3, "thousand": 1e3, "m": 1e6, "mn": 1e6, "million": 1e6,
    "b": 1e9, "bn": 1e9, "billion": 1e9, "tn": 1e12, "trillion": 1e12,
}  # fmt: skip
_SCALES = re.compile(r"\b(?:thousand|million|billion|trillion|per\s*cent|percent)\b", re.I)
_CURRENCY = {"$": "usd", "us$": "usd", "€": "eur", "£": "gbp", "¥": "jpy"}
_UNITS = {
    "usd": "usd", "dollar": "usd", "dollars": "usd", "eur": "eur", "euro": "eur",
    "euros": "eur", "gbp": "gbp", "m": "m", "metre": "m", "metres": "m", "meter": "m",
    "meters": "m", "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km",
    "kilometers": "km", "ft": "ft", "foot": "ft", "feet": "ft", "mi": "mi", "mile": "mi",
    "miles": "mi", "kg": "kg", "kilogram": "kg", "kilograms": "kg", "percent": "%",
    "s": "s", "sec": "s", "second": "s", "seconds": "s", "ms": "ms", "gb": "gb", "mb": "mb",
    "people": "people", "persons": "people", "employees": "people", "staff": "people",
    "workers": "people", "tb": "tb", "hz": "hz", "mhz": "mhz", "ghz": "ghz", "w": "w",
    "kw": "kw", "mw": "mw",
}  # fmt: skip
_NAMING = frozenset(
    """version versions v release releases model series generation gen phase stage level
    chapter article section rule tier grade type class act""".split()  # noqa: SIM905
)
"""Words whose number names a thing ("version 2") rather than measuring it."""
_YEAR_BEFORE = frozenset(
    """in since by from until till through during before after of early late mid circa c
    year years fiscal fy spring summer autumn fall winter""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[^\W\d_][\w'’.-]*\w|[^\W\d_]|\d+(?:[.,]\d+)*")
"""A word ("Øresund", "Node.js", "GPT-4", "doesn't") or a number."""
_AUXILIARIES = frozenset(
    """is are was were be been has have had does do did will would can could may might
    shall should must isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't
    didn't won't wouldn't can't cannot couldn't shouldn't""".split()  # noqa: SIM905
)
_NEGATIONS = frozenset("not no never none nobody nothing neither nor cannot".split())  # noqa: SIM905
_POLARITY = _NEGATIONS | {"always", "still", "longer", "yet", "currently", "officially"}
"""Not content: a flipped negation ("no longer" → "still") leaves the claim's words."""
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
_EVENTS = {
    "founded": "founding", "established": "founding", "incorporated": "founding",
    "created": "founding", "opened": "opening", "inaugurated": "opening",
    "launched": "release", "released": "release", "introduced": "release",
    "debuted": "release", "premiered": "release", "unveiled": "release", "shipped": "release",
    "published": "release", "issued": "release", "born": "birth", "died": "death",
    "signed": "signing", "completed": "completion", "built": "completion",
    "finished": "completion", "announced": "announcement", "acquired": "acquisition",
    "bought": "acquisition", "merged": "merger", "began": "start", "started": "start",
    "ended": "end", "closed": "end", "discontinued": "end", "retired": "end",
    "expired": "end", "deprecated": "deprecation", "discovered": "discovery",
    "invented": "discovery", "elected": "election", "appointed": "election",
    "ratified": "adoption", "enacted": "adoption", "adopted": "adoption",
    "passed": "adoption", "approved": "adoption", "entered": "entry", "listed": "listing",
    "sank": "sinking", "collapsed": "collapse", "occurred": "event", "happened": "event",
    "held": "event",
}  # fmt: skip
"""Words that tell of a one-time event, by kind: two of one kind are one event
("released" / "shipped"), so their dates must agree."""


@functools.cache
def _stem(word: str) -> str:
    """A word's stem as the claim verifier counts it; "" for a function word."""
    stems = claim_words(word)
    if len(stems) > 1:  # "Node.js": one word here, two for the verifier
        return word.lower()
    return next(iter(stems), "")


@functools.cache
def _events() -> dict[str, str]:
    """Event stems, and their kind."""
    return {_stem(word): kind for word, kind in _EVENTS.items()}


@functools.cache
def _antonyms() -> dict[str, frozenset[str]]:
    pairs: dict[str, set[str]] = defaultdict(set)
    for a, b in _ANTONYMS:
        pairs[_stem(a)].add(_stem(b))
        pairs[_stem(b)].add(_stem(a))
    return {k: frozenset(v) for k, v in pairs.items()}


# --- reading one unit ------------------------------------------------------------------


@dataclass(frozen=True)
class Date:
    year: int | None
    month: int | None
    day: int | None
    text: str
    at: int
    """Where it starts in the finding (to find the event it dates)."""

    def agrees(self, other: Date) -> bool:
        """Whether both can be one date: every part both give is the same."""
        return all(
            a is None or b is None or a == b
            for a, b in (
                (self.year, other.year),
                (self.month, other.month),
                (self.day, other.day),
            )
        )


@dataclass(frozen=True)
class Quantity:
    value: float
    slack: float
    """How far the written figure may be from the true one: half its last digit
    ("1.2 million": 50,000; "1,200": 0.5; "1,200,000": 500,000)."""
    unit: str
    text: str

    def agrees(self, other: Quantity) -> bool:
        return abs(self.value - other.value) <= max(self.slack, other.slack) + 1e-9


@dataclass(frozen=True)
class Reading:
    """What a unit says, for comparison."""

    words: frozenset[str]
    """Content stems (numbers, dates and polarity words left out; names in)."""
    subject: frozenset[str]
    """The content stems before the first auxiliary ("The Foo bridge" of "… is …")."""
    names: frozenset[str]
    quantities: tuple[Quantity, ...]
    dates: tuple[Date, ...]
    negated: bool
    events: tuple[tuple[str, Date], ...]
    """Each date told of an event, with the event's kind ("opening" of "opened in 1998"):
    the event word nearest before the date, else the nearest after it."""


def _plain(finding: str) -> str:
    text = SESSION.sub(" ", finding)
    text = re.sub(r"\\([\[\]])|\*\*|__|`", r"\1", text)
    return " ".join(text.split())


def _dates(text: str) -> tuple[list[Date], str]:
    """The dates ``text`` gives, and ``text`` with them blanked (so that a day is no
    quantity)."""
    found: list[Date] = []

    def take(m: re.Match[str]) -> str:
        g = m.groupdict()
        month_name = (g["dm"] or g["mm"] or "").rstrip(".")
        year = g["iy"] or g["dy"] or g["my"] or g["my2"]
        day = g["id"] or g["dd"] or g["md"]
        month = int(g["im"]) if g["im"] else _MONTHS.get(month_name)
        if month_name == "May" and not (day or year):
            return m[0]
        found.append(
            Date(
                int(year) if year else None,
                month,
                int(re.sub(r"\D", "", day)) if day else None,
                m[0].strip(),
                m.start(),
            )
        )
        return " " * len(m[0])

    return found, _DATES.sub(take, text)


def _slack(digits: str, scale: float) -> float:
    whole, _, decimals = digits.replace(",", "").partition(".")
    if decimals:
        return 0.5 * 10.0 ** -len(decimals) * scale
    zeros = len(whole) - len(whole.rstrip("0"))
    if scale > 1 or zeros >= 3:  # "5 million", "1,200,000": rounded as written
        return 0.5 * 10.0 ** min(zeros, len(whole) - 1) * scale
    return 0.0  # "1,200", "30": exact


def _quantities(text: str) -> tuple[list[Quantity], list[Date], list[str]]:
    """Quantities, bare years (as dates) and naming numbers ("version 2") in ``text``."""
    quantities: list[Quantity] = []
    years: list[Date] = []
    names: list[str] = []
    for m in _NUMBER.finditer(text):
        digits, currency, suffix = m["num"], (m["cur"] or "").lower(), m["suffix"] or ""
        before = text[: m.start()].split()
        previous = before[-1].lower().strip("(,") if before else ""
        after = _AFTER.match(text, m.end())
        scale_word = (after["scale"] or "").lower().replace(" ", "") if after else ""
        word = (after["word"] or "") if after else ""
        value = float(digits.replace(",", ""))
        if (
            not currency
            and not suffix
            and not scale_word
            and re.fullmatch(_YEAR, digits)
            and (previous in _YEAR_BEFORE or not word or not _stem(word) or previous == "")
        ):
            years.append(Date(int(digits), None, None, digits, m.start()))
            continue
        if (
            not currency
            and not suffix
            and before
            and (previous in _NAMING or (before[-1][:1].isupper() and _stem(previous)))
        ):
            names.append("#" + digits)
            continue
        scale, unit = _SCALE.get(scale_word, 1.0), _CURRENCY.get(currency, "")
        if suffix == "%" or scale_word == "percent":
            unit = "%"
        elif suffix == "m" and not currency:  # "5m" long; "$5m", "5M" are millions
            unit = "m"
        elif suffix:
            scale = _SCALE[suffix.lower()]
        named = not unit and bool(word) and bool(_stem(word) or word.lower() in _UNITS)
        if named:
            unit = _UNITS.get(word.lower(), "") or _stem(word)
        if after and named:
            end = after.end()
        elif after and scale_word:
            end = after.start("scale") + len(after["scale"])
        else:
            end = m.end()
        quantities.append(
            Quantity(value * scale, _slack(digits, scale), unit, text[m.start() : end].strip())
        )
    return quantities, years, names


def read_unit(finding: str) -> Reading:
    """The details of one finding (see the module docstring)."""
    text = _plain(finding)
    dates, rest = _dates(text)
    quantities, years, numbered = _quantities(rest)
    tokens = _WORD.findall(_SCALES.sub(" ", _NUMBER.sub(" ", rest)))
    words: set[str] = set(numbered)
    subject: set[str] = set()
    names: set[str] = set(numbered)
    negations = 0
    seen_auxiliary = False
    for i, raw in enumerate(tokens):
        low = raw.lower().replace("’", "'")
        if low in _NEGATIONS or low.endswith("n't"):
            negations += 1
        if low in _AUXILIARIES:
            seen_auxiliary = True
        if low in _POLARITY or low.endswith("n't"):
            continue
        stem = _stem(low)
        if not stem or stem[0].isdigit():
            continue
        words.add(stem)
        if not seen_auxiliary:
            subject.add(stem)
        if i > 0 and raw[0].isupper():
            names.add(stem)
    if not seen_auxiliary:
        subject = set()
    return Reading(
        words=frozenset(words),
        subject=frozenset(subject),
        names=frozenset(names),
        quantities=tuple(quantities),
        dates=tuple(dates + years),
        negated=negations % 2 == 1,
        events=_events_of(rest, dates + years),
    )


def _events_of(text: str, dates: Sequence[Date]) -> tuple[tuple[str, Date], ...]:
    kinds = _events()
    told = [
        (m.start(), kinds[s]) for m in _WORD.finditer(text) if (s := _stem(m[0].lower())) in kinds
    ]
    found = []
    for date in dates if told else ():
        before = [event for event in told if event[0] < date.at]
        _, kind = before[-1] if before else min(told, key=lambda e: abs(e[0] - date.at))
        found.append((kind, date))
    return tuple(found)


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
def _opposites(stem: str) -> frozenset[str]:
    """The stems that say the opposite of ``stem``: its antonyms, and it with a negating
    prefix added or removed ("avail" / "unavail")."""
    found = set(_antonyms().get(stem, ()))
    for prefix in _PREFIXES:
        found.add(prefix + stem)
        if stem.startswith(prefix) and len(stem) - len(prefix) >= 4:
            found.add(stem[len(prefix) :])
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
    words: list[str] = _WORD.findall(text)
    for raw in words:
        low = raw.lower().replace("’", "'")
        if low in _NEGATIONS or low.endswith("n't"):
            return raw
    return "not"


def _raw(text: str, stem: str) -> str:
    """The word of ``text`` whose stem is ``stem``, as written."""
    words: list[str] = _WORD.findall(text)
    return next((w for w in words if _stem(w.lower()) == stem), stem)


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
    texts = [_plain(u.finding) for u in units]
    readings = [read_unit(u.finding) for u in units]
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
        found.append(
            Contradiction(
                kind=hit[0],
                conflict=hit[1],
                first=Side(unit_id=a.id, finding=a.finding, refs=tuple(a.refs)),
                second=Side(unit_id=b.id, finding=b.finding, refs=tuple(b.refs)),
            )
        )
    return found
