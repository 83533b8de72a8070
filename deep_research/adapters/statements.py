"""What a finding states, read with no model: its content words, the subject (the words
before its first auxiliary), names, quantities with their unit and rounding, dates (and
the event each dates), and polarity. ``adapters.contradictions`` compares two of these.
What a claim says that its source nowhere does is ``adapters.unstated``'s.

    reading = read_finding("The Foo bridge, opened in 1998, is 1,200 metres long [S1].")
    reading.quantities  # (Quantity(value=1200.0, slack=0.0, unit="m", text="1,200 metres"),)
    reading.events      # (("opening", Date(year=1998, …)),)

Words are stemmed as the claim verifier stems them (``adapters.verifier.claim_words``).
A four-digit year is a time ("in 2021", "2021 revenue"), unless a verb or a determiner
puts it before a noun ("had 2000 employees"); a number after a name or "version" names a
thing ("Python 3.12", "version 2") and is a name, not a quantity.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.adapters.verifier import claim_words
from deep_research.core.citations import SESSION

_MONTH_NAMES = """January Jan, February Feb, March Mar, April Apr, May, June Jun, July Jul,
    August Aug, September Sep Sept, October Oct, November Nov, December Dec"""
_MONTHS = {name: n for n, names in enumerate(_MONTH_NAMES.split(","), 1) for name in names.split()}
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
WORD = re.compile(r"[^\W\d_][\w'’.-]*\w|[^\W\d_]|\d+(?:[.,]\d+)*")
"""A word ("Øresund", "Node.js", "GPT-4", "doesn't") or a number."""
_AUXILIARIES = frozenset(
    """is are was were be been has have had does do did will would can could may might
    shall should must isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't
    didn't won't wouldn't can't cannot couldn't shouldn't""".split()  # noqa: SIM905
)
NEGATIONS = frozenset("not no never none nobody nothing neither nor cannot".split())  # noqa: SIM905
_POLARITY = NEGATIONS | {"always", "still", "longer", "yet", "currently", "officially"}
"""Not content: a flipped negation ("no longer" → "still") leaves the claim's words."""
_EVENT_WORDS = {
    "founding": "founded established incorporated created", "opening": "opened inaugurated",
    "release": "launched released introduced debuted premiered unveiled shipped published issued",
    "birth": "born", "death": "died", "signing": "signed", "merger": "merged",
    "completion": "completed built finished", "announcement": "announced",
    "acquisition": "acquired bought", "start": "began started", "deprecation": "deprecated",
    "end": "ended closed discontinued retired expired dropped removed abandoned withdrew "
    "withdrawn ceased",
    "discovery": "discovered invented", "election": "elected appointed", "entry": "entered",
    "adoption": "ratified enacted adopted passed approved", "listing": "listed",
    "sinking": "sank", "collapse": "collapsed", "event": "occurred happened held",
}  # fmt: skip
_EVENTS = {word: kind for kind, words in _EVENT_WORDS.items() for word in words.split()}
"""Words that tell of a one-time event, by kind: two of one kind are one event
("released" / "shipped"), so their dates must agree."""
_WITH_OBJECT = frozenset({"dropped"})
"""Event words only with an object ("dropped Python 2 support", "dropped the plan"): with
none they tell of a change ("sales dropped 5%", "dropped sharply in 2020")."""
_DETERMINERS = frozenset("the a an its their his her our your this that these those".split())  # noqa: SIM905


@functools.cache
def stem(word: str) -> str:
    """A word's stem as the claim verifier counts it; "" for a function word."""
    stems = claim_words(word)
    if len(stems) > 1:  # "Node.js": one word here, two for the verifier
        return word.lower()
    return next(iter(stems), "")


@functools.cache
def events() -> dict[str, str]:
    """Event stems, and their kind."""
    return {stem(word): kind for word, kind in _EVENTS.items()}


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
        mine, theirs = (self.year, self.month, self.day), (other.year, other.month, other.day)
        return all(a is None or b is None or a == b for a, b in zip(mine, theirs, strict=True))


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


def plain(finding: str) -> str:
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
        number = int(re.sub(r"\D", "", day)) if day else None
        found.append(Date(int(year) if year else None, month, number, m[0].strip(), m.start()))
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
            and (previous in _YEAR_BEFORE or not word or not stem(word) or previous == "")
        ):
            years.append(Date(int(digits), None, None, digits, m.start()))
            continue
        if (
            not currency
            and not suffix
            and before
            and (previous in _NAMING or (before[-1][:1].isupper() and stem(previous)))
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
        named = not unit and bool(word) and bool(stem(word) or word.lower() in _UNITS)
        if named:
            unit = _UNITS.get(word.lower(), "") or stem(word)
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


def read_finding(finding: str) -> Reading:
    """The details of one finding (see the module docstring)."""
    text = plain(finding)
    dates, rest = _dates(text)
    quantities, years, numbered = _quantities(rest)
    tokens = WORD.findall(_SCALES.sub(" ", _NUMBER.sub(" ", rest)))
    words: set[str] = set(numbered)
    subject: set[str] = set()
    names: set[str] = set(numbered)
    negations = 0
    seen_auxiliary = False
    for i, raw in enumerate(tokens):
        low = raw.lower().replace("’", "'")
        if low in NEGATIONS or low.endswith("n't"):
            negations += 1
        if low in _AUXILIARIES:
            seen_auxiliary = True
        if low in _POLARITY or low.endswith("n't"):
            continue
        word = stem(low)
        if not word or word[0].isdigit():
            continue
        words.add(word)
        if not seen_auxiliary:
            subject.add(word)
        if i > 0 and raw[0].isupper():
            names.add(word)
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
    kinds = events()
    words = list(WORD.finditer(text))
    objects = {stem(word) for word in _WITH_OBJECT}
    told = [
        (m.start(), kinds[s])
        for i, m in enumerate(words)
        if (s := stem(m[0].lower())) in kinds
        and (s not in objects or _has_object(words[i + 1 : i + 2]))
    ]
    found = []
    for date in dates if told else ():
        before = [event for event in told if event[0] < date.at]
        _, kind = before[-1] if before else min(told, key=lambda e: abs(e[0] - date.at))
        found.append((kind, date))
    return tuple(found)


def _has_object(after: Sequence[re.Match[str]]) -> bool:
    """Whether the word after a verb (``after``: it, or none) opens its object: a
    determiner, or a content word that is no number and no adverb ("sharply")."""
    word = after[0][0].lower() if after else ""
    return word in _DETERMINERS or (
        bool(stem(word)) and not word[0].isdigit() and not word.endswith("ly")
    )
