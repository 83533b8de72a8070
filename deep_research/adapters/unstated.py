"""What a claim says that its source nowhere does, read with no model: a name the source
never uses, a run of content words none of which it uses, or a clause it does not state.
The claim check makes a ``supported`` verdict ``partial`` for it (``all_stated``): the
verifier weighs how much of a claim a source covers, and these are what a swapped entity
and an added clause leave uncovered.

Words are stemmed as the claim verifier stems them (``adapters.verifier.claim_words``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from deep_research.adapters.verifier import (
    SupportVerdict,
    claim_words,
    content_tokens,
    strip_markers,
)

CLAUSE_WORDS = 4
CLAUSE_STATED = 0.25
_CLAUSE_END = re.compile(r"[,;]\s")
"""A clause ends at a comma or a semicolon before a space (not the one in "1,353")."""


def unstated_clauses(claim: str, stated: Callable[[str], bool]) -> list[str]:
    """The clauses of ``claim`` (its parts between commas and semicolons) that its source
    does not state: of at least ``CLAUSE_WORDS`` content words, fewer than
    ``CLAUSE_STATED`` of them ``stated`` (a stem the source uses). A true sentence with a
    clause appended (", twice the speed of every other parser") is two statements, and the
    clause's words are too few to weigh in the whole sentence's coverage; a clause that
    shares a word or two with the source but adds the rest is not stated either."""
    out = []
    for clause in _CLAUSE_END.split(claim):
        stems = [s for s, _ in content_tokens(clause)]
        if len(stems) >= CLAUSE_WORDS and sum(map(stated, stems)) < CLAUSE_STATED * len(stems):
            out.append(" ".join(clause.split()).rstrip(".!?"))
    return out


_WORD = re.compile(r"[A-Za-z][\w'’-]*")
UNSTATED_RUN = 5
"""Content words in a row, none of them in the source: a clause the source does not state."""
PREFIX = 5
"""Letters two words share to count as one (the stemmer misses "America" / "American")."""
TITLE_CASE = 0.3
"""A claim with this share of capitalized words is in title case: no word of it is a name."""


def unstated(claim: str, source: str) -> list[str]:
    """What a claim says that its source nowhere does: a name (a capitalized word past the
    first, in a claim not in title case) the source never uses, and ``UNSTATED_RUN`` content
    words in a row none of which it uses, or a clause it does not state
    (``unstated_clauses``): an added clause. The verifier weighs how much of a
    claim the source covers; these are what a swapped entity and an added clause leave
    uncovered. Measured on AttributionBench dev: of the rows the verifier supports, 27 of
    455 labelled supported and 28 of 140 labelled unsupported have such a gap (24 of 140
    before the clause rule, which flags none of the 455)."""
    held = claim_words(source)
    held_prefixes = {stem[:PREFIX] for stem in held}

    def stated(stem: str) -> bool:
        return stem in held or stem[:PREFIX] in held_prefixes

    spelled = {word.lower()[:PREFIX] for word in _WORD.findall(source)}
    bare = strip_markers(claim)
    words = _WORD.findall(bare)
    out: list[str] = []
    capitalized = [w for w in words if w[:1].isupper()]
    if words and len(capitalized) / len(words) < TITLE_CASE:
        missing = [
            w
            for w in words[1:]
            if w[:1].isupper() and w.isalpha() and len(w) > 2 and w.lower()[:PREFIX] not in spelled
        ]
        out += [f"name “{name}”" for name in dict.fromkeys(missing)]
    run: list[str] = []
    longest: list[str] = []
    for stem, raw in content_tokens(bare):
        run = [] if stated(stem) else [*run, raw]
        longest = run if len(run) > len(longest) else longest
    if len(longest) >= UNSTATED_RUN:
        return [*out, f"clause “{' '.join(longest)}”"]
    return out + [f"clause “{clause}”" for clause in unstated_clauses(bare, stated)]


def all_stated(claim: str, source: str, verdict: SupportVerdict) -> SupportVerdict:
    """A supported verdict stays supported only when the source states all of the claim;
    else it is ``partial``, with what the source does not state as its conflicts."""
    if verdict.support != "supported":
        return verdict
    missing = unstated(claim, source)
    if not missing:
        return verdict
    return replace(verdict, support="partial", conflicts=(*verdict.conflicts, *missing))
