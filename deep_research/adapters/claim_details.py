"""A claim's details, which a passage stating the claim must give as the claim does: its
numbers, its code identifiers and its polarity (a "not", a "never"). Read over the claim
verifier's tokens (``adapters.verifier``): (stem, word as written) pairs."""

from __future__ import annotations

import re
from collections.abc import Sequence

_IDENTIFIER = re.compile(
    r"`([^`\n]+)`"  # a code span
    r"|\b([A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+(?:\(\))?"  # dotted: os.path.join, a.b()
    r"|[A-Za-z]\w*_\w+"  # snake_case
    r"|[a-z]{2,}[A-Z]\w*"  # camelCase (not iPad)
    r"|[A-Z][a-z0-9]+[A-Z]\w*"  # PascalCase with a second capital
    r"|\w+\(\))"  # a call: run()
)
_NEGATIONS = frozenset(
    "not no never none nobody nothing neither nor cannot".split()  # noqa: SIM905
)
"""("without" is no negation of the statement: "sorted without sorting" is sorted.)"""
_AFFIRMATIONS = frozenset({"always", "still"})
"""The words a flipped negation leaves ("never" → "always", "no longer" → "still")."""
POLARITY = _NEGATIONS | _AFFIRMATIONS | {"alway"}  # "always", stemmed
"""Not counted when a passage is matched to the claim: a flipped one must still match."""


def number_words(stems: set[str]) -> set[str]:
    return {s for s in stems if s[0].isdigit()}


def identifiers_in(text: str) -> set[str]:
    names = ((span or bare).strip().removesuffix("()") for span, bare in _IDENTIFIER.findall(text))
    return {name.lower() for name in names if name}


def _negated(tokens: Sequence[tuple[str, str]]) -> bool:
    """Odd negations: "not" flips, "not never" does not."""
    return sum(stem in _NEGATIONS or raw.lower() in _NEGATIONS for stem, raw in tokens) % 2 == 1


def flipped(claim: Sequence[tuple[str, str]], passage: Sequence[tuple[str, str]]) -> bool:
    """The passage's polarity is not the claim's: one of them negated (``_negated``), or
    "always"/"still" in the claim where the passage negates ("never", "no longer")."""
    if _negated(claim) != _negated(passage):
        return True
    said = {raw.lower() for _, raw in passage}
    affirmed = {raw.lower() for _, raw in claim} & _AFFIRMATIONS
    return bool(affirmed - said) and bool(said & _NEGATIONS)
