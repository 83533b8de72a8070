"""Corroboration, contradictions and confidence as data: what the claim check hands the
report, and the two derivations that need nothing but that data.

- `Corroboration`: how many independent sources support a claim (``corroborated`` at two
  or more). What makes two sources independent — one registrable domain, one knowledge-base
  root — is decided where the public-suffix list is (``adapters.corroboration.source_key``);
  here a source is only its key.
- `Contradiction`: two evidence units on one subject whose numbers, dates or polarity
  conflict (found by ``adapters.contradictions``), and `contradictions_markdown`, the body
  of the report's "Contradictions" section.
- `section_confidence` / `report_confidence`: a confidence derived from the claims'
  verdicts and corroboration (shown beside the judge's, never instead of the evidence).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from deep_research.core import markdown
from deep_research.core.citations import SESSION

CorroborationLevel = Literal["corroborated", "single source", "none"]
CORROBORATED_AT = 2
"""Independent sources a claim needs to be ``corroborated``."""


class Corroboration(BaseModel):
    """The independent sources (their keys, in order of first citation) behind a claim."""

    model_config = ConfigDict(frozen=True)

    level: CorroborationLevel
    sources: tuple[str, ...] = ()

    @classmethod
    def of(cls, keys: Iterable[str]) -> Corroboration:
        """The corroboration of the sources ``keys`` name (repeats are one source)."""
        unique = tuple(dict.fromkeys(k for k in keys if k))
        if not unique:
            return cls(level="none")
        corroborated = len(unique) >= CORROBORATED_AT
        return cls(level="corroborated" if corroborated else "single source", sources=unique)


# --- contradictions -----------------------------------------------------------------

ConflictKind = Literal["number", "date", "polarity"]


class Side(BaseModel):
    """One evidence unit of a contradiction, as the report shows it."""

    model_config = ConfigDict(frozen=True)

    unit_id: str
    finding: str
    """The unit's sentence, with its ``[S#]`` markers."""
    refs: tuple[str, ...]


class Contradiction(BaseModel):
    """Two units on one subject that cannot both be true as written."""

    model_config = ConfigDict(frozen=True)

    kind: ConflictKind
    conflict: str
    """What differs, as each side writes it: "1,200 metres vs 1,450 m", "1998 vs 2001",
    "“not” vs affirmed", "“increased” vs “decreased”"."""
    first: Side
    second: Side

    @property
    def refs(self) -> tuple[str, ...]:
        """Every ref either side cites, in order: the report must number them all."""
        return tuple(dict.fromkeys((*self.first.refs, *self.second.refs)))


_KIND_TEXT: dict[ConflictKind, str] = {
    "number": "figures differ",
    "date": "dates differ",
    "polarity": "one affirms what the other denies",
}
_ESCAPED = re.compile(r"\\([\\`*_\[\]<>&~#])")
_EMPHASIS = re.compile(r"\*\*|__|`")
_MARKER = re.compile(r"\s*" + SESSION.pattern)


def _plain(finding: str) -> str:
    """A finding as prose: no ``[S#]`` marker, no markdown escapes or emphasis (they are
    escaped again, as text, when written)."""
    unmarked = _MARKER.sub("", finding)
    return " ".join(_ESCAPED.sub(r"\1", _EMPHASIS.sub("", unmarked)).split())


def contradictions_markdown(
    contradictions: Sequence[Contradiction], number: Callable[[str], int | None]
) -> str:
    """The body of the report's "Contradictions" section ("" when there is none): one item
    per contradiction, saying what conflicts, then each side's sentence with its sources as
    the report's ``[N]`` markers (``number`` maps a ref to its report number; a ref it does
    not know is left out). Every sentence is written as text: no model text can make a
    link, a marker or a heading here."""
    items = []
    for found in contradictions:
        sides = []
        for side in (found.first, found.second):
            numbers = [n for n in dict.fromkeys(number(r) for r in side.refs) if n is not None]
            markers = "".join(f"[{n}]" for n in numbers)
            sides.append(
                f"  - {markdown.text(_plain(side.finding))}{' ' if markers else ''}{markers}"
            )
        head = f"- **{markdown.text(found.conflict)}** ({_KIND_TEXT[found.kind]})"
        items.append("\n".join([head, *sides]))
    return "\n".join(items)


# --- confidence -----------------------------------------------------------------------

CREDIT: dict[str, float] = {
    "supported": 0.8,
    "partial": 0.4,
    "unverifiable": 0.2,
    "unsupported": 0.0,
    "uncited": 0.0,
    "contradicted": -1.0,
}
"""What one claim adds to its section's confidence, by verdict (see `section_confidence`)."""
CORROBORATED_CREDIT = 1.0
"""A supported claim's credit when two or more independent sources support it."""
NOT_COUNTED = frozenset({"quoted"})
"""Verdicts that say nothing of the writing: a quoted sentence is the source itself."""


def _verdict(verdict: str) -> str:
    """The verdict's word: "unverifiable (not checked: time limit)" is ``unverifiable``."""
    return verdict.split("(", 1)[0].strip().lower()


def _credits(verdicts: Sequence[str], corroborations: Sequence[Corroboration]) -> list[float]:
    if len(verdicts) != len(corroborations):
        raise ValueError(
            f"{len(verdicts)} verdicts but {len(corroborations)} corroborations: one per claim"
        )
    credits = []
    for raw, corroboration in zip(verdicts, corroborations, strict=True):
        verdict = _verdict(raw)
        if verdict in NOT_COUNTED:
            continue
        if verdict == "supported" and corroboration.level == "corroborated":
            credits.append(CORROBORATED_CREDIT)
        else:
            credits.append(CREDIT.get(verdict, 0.0))
    return credits


def section_confidence(
    verdicts: Sequence[str], corroborations: Sequence[Corroboration]
) -> float | None:
    """The mean credit of a section's claims (``verdicts[i]`` and ``corroborations[i]``
    are claim i's), clamped to [0, 1] and rounded to two places:

        confidence = clamp(Σ credit(claim) / claims counted, 0, 1)

    credit: supported by two or more independent sources 1.0, by one 0.8; partial 0.4;
    unverifiable 0.2 (no one could read the source); unsupported and uncited 0; contradicted
    −1, so one contradicted claim cancels a corroborated one. An unknown verdict earns 0.
    ``quoted`` claims (extractive mode) are not counted; None when no claim is counted:
    a section with nothing checked has no derived confidence, not a zero."""
    return _mean(_credits(verdicts, corroborations))


def report_confidence(
    sections: Iterable[tuple[Sequence[str], Sequence[Corroboration]]],
) -> float | None:
    """The report's confidence: `section_confidence` over every section's claims pooled
    (each claim weighs the same, wherever it stands; a short section does not count as
    much as a long one). ``sections``: (verdicts, corroborations) per section, the lead
    included when its claims were checked."""
    return _mean([c for v, cs in sections for c in _credits(v, cs)])


def _mean(credits: Sequence[float]) -> float | None:
    if not credits:
        return None
    return round(min(1.0, max(0.0, sum(credits) / len(credits))), 2)
