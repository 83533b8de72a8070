"""The claim check's totals: the part of it a session keeps (``SessionState.claims``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class ClaimTotals(BaseModel):
    """The claim check of the report, counted (the claims are in ``claims.json``)."""

    claims: int = 0
    by_verdict: dict[str, int] = Field(
        default_factory=dict,
        description="Claims per verdict: supported, partial, contradicted, unsupported, "
        "unverifiable, uncited (a factual sentence citing nothing), quoted (not checked).",
    )
    corroborated: int = Field(
        default=0, description="Supported claims that two or more independent sources state."
    )
    unchecked: int = Field(
        default=0, description="Claims the time limit left unchecked: a resume checks them."
    )
    contradictions: int = Field(
        default=0, description="Pairs of findings in the evidence that conflict."
    )
    revised: int = Field(
        default=0,
        description="Claims rewritten once by their writer after the check, and then supported.",
    )
    confidence: float | None = Field(
        default=None,
        description="Derived from the claims' verdicts and corroboration (0-1; None: nothing "
        "was checked), beside the judge's.",
    )
    checked_at: datetime | None = None
