"""The claim ledger: every sentence of a report's body that states a fact, and what each
source it cites says of it (pure: the checking is ``adapters.claim_check``).

    drafts = claims_of(report, extractive=False)      # what to check
    ledger = ClaimLedger(session_id=..., claims=[...])  # the checker's verdicts
    report = marked(report, ledger)                   # marks where they stand + "Claim check"

- A claim is a sentence or bullet of the lead or of a section (``evidence.findings``: not
  headings, tables or code) that cites ``[N]``, or that cites nothing but states a fact
  (``citations.is_factual``: a number, a name, a comparison): that one is ``uncited``.
- A section the writer did not write (its evidence quoted instead) and every sentence of an
  extractive report are ``quoted``: the sources' own words, not checked.
- A claim's verdict is the best of its sources' (``RANK``): one source that states it
  suffices; a contradiction outranks silence.
- ``marked`` puts a visible mark after every claim that is not ``supported`` or ``quoted``,
  linking to the "Claim check" section, which lists them with the passage found. Nothing
  is deleted.
- A claim its sources do not support may be rewritten once by its writer (``Revision``):
  the rewrite replaces it only when its sources then support it; either way the attempt is
  kept, listed in the "Claim check" section, and never made twice.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, get_args

from pydantic import BaseModel, Field

from deep_research.core import markdown as md
from deep_research.core.citations import LOCAL, is_factual
from deep_research.core.claim_totals import ClaimTotals
from deep_research.core.corroboration import (
    Contradiction,
    Corroboration,
    contradictions_markdown,
    report_confidence,
    section_confidence,
)
from deep_research.core.evidence import findings
from deep_research.core.markers import as_shown
from deep_research.core.models import Citation
from deep_research.core.report import ANSWER, CONTRADICTIONS, Report, anchor

Support = Literal["supported", "partial", "unsupported", "contradicted", "unverifiable"]
Verdict = Literal[
    "supported", "partial", "contradicted", "unsupported", "unverifiable", "uncited", "quoted"
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
"""In the order the totals count them."""
RANK = {"supported": 4, "partial": 3, "contradicted": 2, "unsupported": 1, "unverifiable": 0}
"""Which source's verdict a claim takes: the highest."""
MARKED: frozenset[str] = frozenset({"partial", "unsupported", "contradicted", "unverifiable"})
"""Verdicts that get a mark where the claim stands (and ``uncited``, said apart)."""
TIME_LIMIT = "not checked: time limit"
CLAIM_CHECK = "Claim check"
LISTED = 40
"""Claims the "Claim check" section lists in full (the rest are counted; claims.json has all)."""


class SourceCheck(BaseModel):
    """What one cited source says of a claim."""

    ref: int = Field(description="The report's number of the source ([N]).")
    session_ref: str = Field(default="", description="The session's ref (S#).")
    url: str | None = None
    locator: str = ""
    passage: str = Field(default="", description="The source's best passage, verbatim.")
    score: float = Field(default=0.0, description="Calibrated P(supported), from the text.")
    verdict: Support = "unverifiable"
    verifier: str = Field(
        default="", description="Who decided: 'text' or the judge model's name; '' unchecked."
    )
    conflicts: list[str] = Field(default_factory=list)
    note: str = Field(default="", description="Why the text was not read, or not checked.")
    key: str = Field(
        default="", description="Hash of (claim text, ref, source text): a re-check's cache key."
    )
    source_key: str = Field(
        default="", description="The independent source it is (a site, a KB root)."
    )

    @property
    def checked(self) -> bool:
        return self.note != TIME_LIMIT


class Claim(BaseModel):
    id: str = Field(description="C1, C2, … in reading order.")
    text: str = Field(description="The sentence as the report states it, markers included.")
    section: str
    revised_from: str = Field(
        default="", description="The sentence as first written, when this is its rewrite."
    )
    refs: list[int] = Field(default_factory=list)
    verdict: Verdict
    corroboration: Literal["corroborated", "single source", ""] = Field(
        default="",
        description="For a supported claim: two or more independent sources state it, or one.",
    )
    sources: list[SourceCheck] = Field(default_factory=list)


class Revision(BaseModel):
    """One claim sent back to its writer after the check, and what came of it."""

    section: str
    before: str = Field(description="The sentence as written, and as checked.")
    verdict_before: Verdict
    after: str = Field(default="", description="The rewrite; '' when none came back.")
    verdict_after: Verdict | None = None
    adopted: bool = Field(
        default=False, description="The rewrite replaced the sentence (its sources support it)."
    )
    note: str = ""


class ClaimLedger(BaseModel):
    """``<session dir>/claims.json``."""

    schema_version: int = 1
    session_id: str
    checked_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    claims: list[Claim] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="What the check could not do.")
    deciders: dict[str, int] = Field(
        default_factory=dict, description="Sources' verdicts by who decided them."
    )
    contradictions: list[Contradiction] = Field(
        default_factory=list, description="Findings of the evidence store that conflict."
    )
    revisions: list[Revision] = Field(
        default_factory=list, description="Claims sent back to their writer once, every check's."
    )

    def totals(self) -> ClaimTotals:
        counts = Counter(c.verdict for c in self.claims)
        return ClaimTotals(
            claims=len(self.claims),
            by_verdict={v: counts[v] for v in VERDICTS if counts[v]},
            corroborated=sum(1 for c in self.claims if c.corroboration == "corroborated"),
            unchecked=sum(1 for c in self.claims if any(not s.checked for s in c.sources)),
            contradictions=len(self.contradictions),
            revised=sum(1 for c in self.claims if c.revised_from),
            confidence=report_confidence(self.by_section().values()),
            checked_at=self.checked_at,
        )

    def by_section(self) -> dict[str, tuple[list[str], list[Corroboration]]]:
        """Each section's claims' verdicts and corroboration (what its confidence is from)."""
        out: dict[str, tuple[list[str], list[Corroboration]]] = {}
        for claim in self.claims:
            verdicts, corroborations = out.setdefault(claim.section, ([], []))
            verdicts.append(claim.verdict)
            corroborations.append(_corroboration(claim))
        return out

    def cache(self) -> dict[str, SourceCheck]:
        """Its checked sources by key: what a re-check need not check again."""
        return {s.key: s for c in self.claims for s in c.sources if s.key and s.checked}

    def revised(self, sentence: str) -> bool:
        """Whether ``sentence`` was sent back already, or is a rewrite: never again."""
        words = sentence.split()
        return any(words in (r.before.split(), r.after.split()) for r in self.revisions)


def _corroboration(claim: Claim) -> Corroboration:
    if claim.verdict != "supported":
        return Corroboration.of(())
    return Corroboration.of(s.source_key for s in claim.sources if s.verdict == "supported")


# --- the claims of a report -----------------------------------------------------------------


@dataclass(frozen=True)
class Draft:
    """A claim before it is checked."""

    text: str
    section: str
    refs: tuple[int, ...]
    quoted: bool


def claims_of(report: Report, *, extractive: bool) -> list[Draft]:
    """The report body's claims, in reading order (see the module docstring)."""
    parts = [(ANSWER, report.lead, bool(report.lead_note))]
    parts += [(s.title, s.body, bool(s.note)) for s in report.sections]
    out: list[Draft] = []
    for title, body, not_written in parts:
        for sentence in findings(body):
            refs = tuple(dict.fromkeys(int(n) for n in LOCAL.findall(sentence)))
            refs = tuple(n for n in refs if 1 <= n <= len(report.sources))
            if not refs and not is_factual(LOCAL.sub("", sentence)):
                continue
            out.append(Draft(sentence, title, refs, quoted=extractive or not_written))
    return out


def verdict_of(draft: Draft, sources: Sequence[SourceCheck]) -> Verdict:
    if draft.quoted:
        return "quoted"
    if not draft.refs:
        return "uncited"
    return max((s.verdict for s in sources), key=RANK.__getitem__, default="unverifiable")


def check_key(claim: str, session_ref: str, source_text: str) -> str:
    """The cache key of one source's verdict on one claim: it changes when either text does."""
    text = hashlib.sha256(source_text.encode()).hexdigest()
    return hashlib.sha256(f"{claim}\x00{session_ref}\x00{text}".encode()).hexdigest()[:24]


# --- the report, marked ---------------------------------------------------------------------


def marked(
    report: Report, ledger: ClaimLedger, sources: Mapping[str, Citation] | None = None
) -> Report:
    """``report`` with a mark after every claim that is not supported, the "Claim check"
    section in place of the lexical citation check, and the "Contradictions" section (its
    sources, from the session's ``sources``, numbered after the report's own)."""
    flagged = [c for c in ledger.claims if c.verdict in MARKED or c.verdict == "uncited"]
    lead = report.lead
    sections = [s.model_copy() for s in report.sections]
    for claim in flagged:
        mark = f" [⚠ {claim.id} {claim.verdict}](#{anchor(CLAIM_CHECK)})"
        if claim.section == ANSWER and (marked_lead := _after(lead, claim.text, mark)):
            lead = marked_lead
            continue
        for section in sections:
            if section.title == claim.section and (body := _after(section.body, claim.text, mark)):
                section.body = body
                break
    totals = ledger.totals()
    checked = totals.claims - totals.by_verdict.get("quoted", 0)
    supported = totals.by_verdict.get("supported", 0)
    status = report.status
    if status and checked:
        status += f" · {supported} of {checked} claims supported by their sources"
        if totals.confidence is not None:
            status += f" · claim confidence {totals.confidence:.2f}"
    cited = list(report.sources)
    numbers = {c.ref: n for n, c in enumerate(cited, start=1)}
    for found in ledger.contradictions:
        for ref in found.refs:
            if ref not in numbers and sources and ref in sources:
                cited.append(sources[ref])
                numbers[ref] = len(cited)
    conflicts = contradictions_markdown(ledger.contradictions, numbers.get)
    read = {  # a page's text the check read itself (a note: it read none, or only the job's)
        s.session_ref: s.passage
        for c in ledger.claims
        for s in c.sources
        if s.passage and not s.note
    }
    # Once the check has read a page, the report never says its text was not captured: a
    # source that came without text (a research job gives the page's address) quotes it.
    cited = [
        s.model_copy(update={"quote": read[s.ref]})
        if not s.quote.strip() and read.get(s.ref, "").strip()
        else s
        for s in cited
    ]
    if conflicts and lead.strip():
        count = len(ledger.contradictions)
        lead += (
            f"\n\n_The sources disagree on {count} point{'s' if count != 1 else ''}: see "
            f"[{CONTRADICTIONS}](#{anchor(CONTRADICTIONS)})._"
        )
    return report.model_copy(
        update={
            "status": status,
            "lead": lead,
            "sections": sections,
            "sources": cited,
            "contradictions": conflicts,
            "citation_check": "",
            "claim_check": claim_check_text(report, ledger),
        }
    )


def _pattern(sentence: str) -> re.Pattern[str]:
    """``sentence`` as it stands in a body: its words, between them any run of spaces or
    line breaks (and the ``>`` of a quote's next line)."""
    return re.compile(r"(?:\s+>)*\s+".join(re.escape(w) for w in sentence.split()))


def _after(body: str, sentence: str, mark: str) -> str | None:
    """``body`` with ``mark`` after the sentence; None when the sentence is not in it."""
    found = _pattern(sentence).search(body)
    return None if found is None else body[: found.end()] + mark + body[found.end() :]


def replaced(body: str, before: str, after: str) -> str | None:
    """``body`` with the sentence ``before`` (however its spaces break) replaced by
    ``after``; None when ``before`` is not in it."""
    found = _pattern(before).search(body)
    if found is None:
        return None
    return body[: found.start()] + after + body[found.end() :]


def claim_check_text(report: Report, ledger: ClaimLedger) -> str:
    """The "Claim check" section: the totals, then each claim not supported, with what its
    sources said and the passage found."""
    totals = ledger.totals()
    lines = [f"## {CLAIM_CHECK}", "", "_" + _summary(totals, ledger) + "_"]
    if report.removed_markers:
        removed = report.removed_markers
        lines += ["", f"- {removed} citation(s) pointed to no source and were removed."]
    lines += [f"- {md.text(note)}" for note in ledger.notes]
    flagged = [c for c in ledger.claims if c.verdict in MARKED or c.verdict == "uncited"]
    if flagged:
        lines.append("")
    for claim in flagged[:LISTED]:
        lines.append(
            f"- **{claim.id} · {claim.verdict}** ({md.text(claim.section)}): "
            f"“{md.text(md.clip(as_shown(claim.text), 300))}”"
        )
        if claim.verdict == "uncited":
            lines.append("  - no source is cited for it")
        for source in claim.sources:
            lines.append("  - " + _source_line(source))
    if len(flagged) > LISTED:
        lines.append(f"- … and {len(flagged) - LISTED} more (all of them in claims.json)")
    if ledger.revisions:
        lines += ["", "Sent back to their writer once, with their sources' passages:", ""]
    for revision in ledger.revisions[:LISTED]:
        lines.append("- " + _revision_line(revision))
    return "\n".join(lines)


def _revision_line(revision: Revision) -> str:
    before, after = (md.text(md.clip(as_shown(t), 300)) for t in (revision.before, revision.after))
    was = f"“{before}” ({revision.verdict_before})"
    if revision.adopted:
        return f"rewritten, now {revision.verdict_after}: was {was}"
    if not revision.after:
        return f"{was} stands as written: {md.text(revision.note or 'no rewrite came back')}"
    return (
        f"{was} stands as written: its rewrite “{after}” "
        f"was {revision.verdict_after or 'not checked'} too"
        + (f" ({md.text(revision.note)})" if revision.note else "")
    )


def _summary(totals: ClaimTotals, ledger: ClaimLedger) -> str:
    if not totals.claims:
        return "No factual sentence in the body to check."
    corroborated = f" ({totals.corroborated} corroborated)"
    counts = ", ".join(
        f"{n} {verdict}" + (corroborated if verdict == "supported" else "")
        for verdict, n in totals.by_verdict.items()
    )
    who = ", ".join(
        f"{'the text verifier' if name == 'text' else md.text(name)} ({n})"
        for name, n in sorted(ledger.deciders.items())
    )
    confidence = ""
    if totals.confidence is not None:
        per_section = ", ".join(
            f"{md.text(title)} {value:.2f}"
            for title, (verdicts, corroborations) in ledger.by_section().items()
            if (value := section_confidence(verdicts, corroborations)) is not None
        )
        confidence = (
            f" Confidence from the claims' verdicts and corroboration: {totals.confidence:.2f}"
            f" (by section: {per_section})."
        )
    return (
        f"{totals.claims} claims in the body, each checked against the text of the sources it "
        f"cites: {counts}." + (f" Decided by {who}." if who else "") + confidence
    )


def _source_line(source: SourceCheck) -> str:
    head = f"[{source.ref}] {source.verdict}"
    if source.verifier:
        head += f" (score {source.score:.2f}, {md.text(source.verifier)})"
    if source.conflicts:
        head += " — differs in: " + md.text(", ".join(source.conflicts))
    if source.note:
        head += f" — {md.text(source.note)}"
    if source.passage:
        head += f"\n    > {md.text(md.clip(' '.join(source.passage.split()), 400))}"
    return head
