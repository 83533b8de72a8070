"""The claim verifier: does a source's text support a claim? One pure function for the whole
tool (``verify``): MCP ``verify_claim``, the report's checks and the benchmark call it.

    verdict = verify("Raft elects a leader by majority vote [1].", page_text, question)
    verdict.support     # "supported" | "partial" | "unsupported" | "contradicted" | "unverifiable"
    verdict.score       # calibrated P(supported), 0-1
    verdict.passages    # the source's best passage(s), verbatim
    verdict.verifier    # who decided: TEXT_VERIFIER, or the judge model's name

Without a model it decides from the text alone (features below, weights fitted on data and
shipped in ``verifier_weights.json``); a judge model (``judge``) settles the claims whose
score falls in the uncertain band.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Support = Literal["supported", "partial", "unsupported", "contradicted", "unverifiable"]
TEXT_VERIFIER = "text"
"""``SupportVerdict.verifier`` when the shipped classifier decided (no model)."""


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
    """The score fell in the band a judge model settles (``UNCERTAIN``)."""

    def decided_by(self, support: Support, verifier: str) -> SupportVerdict:
        """This verdict, as a judge settled it."""
        return replace(self, support=support, verifier=verifier, uncertain=False)
