"""Repair, once: which claims go back to their writer and how many the money allows, what the
writer is told of a claim its sources do not support, how its reply is taken as a rewrite,
and how an adopted rewrite replaces the sentence in the report, in the session's written
sections and in the ledger. ``claim_check`` pays for them and checks each rewrite again."""

from __future__ import annotations

import re
from collections.abc import Sequence

from deep_research.adapters.verifier import strip_markers
from deep_research.core import markdown as md
from deep_research.core.authoring import (
    REVISION_PASSAGE_CHARS,
    REVISION_PASSAGES,
    Reviser,
    RevisionRequest,
)
from deep_research.core.citations import LOCAL
from deep_research.core.errors import BudgetExhausted, ProviderError
from deep_research.core.ledger import RANK, Claim, ClaimLedger, Revision, SourceCheck, replaced
from deep_research.core.models import SessionState
from deep_research.core.ports import Meter
from deep_research.core.report import ANSWER, Report

REVISE = frozenset({"unsupported", "contradicted"})
"""Claims sent back to their writer once."""
ADOPTED = frozenset({"supported"})
"""What a rewrite's sources must say of it for it to replace the sentence."""


def due(ledger: ClaimLedger) -> list[Claim]:
    """The ``REVISE`` claims neither sent back before nor a rewrite (``ClaimLedger.revised``);
    of a sentence written twice, its first claim only."""
    first = {" ".join(c.text.split()): c for c in reversed(ledger.claims) if c.verdict in REVISE}
    return [
        c
        for c in ledger.claims
        if first.get(" ".join(c.text.split())) is c and not ledger.revised(c.text)
    ]


def afforded(claims: list[Claim], worst: float, left: float, most: int) -> tuple[list[Claim], str]:
    """The ``claims`` sent back: as many as ``left`` (USD) pays for at ``worst`` each, and at
    most ``most``; and why the others are not ('' when none is left out)."""
    affordable = len(claims) if worst <= 0 else max(0, int(left // worst))
    taken = claims[: min(affordable, most)]
    if len(taken) == len(claims):
        return taken, ""
    spent = affordable < min(len(claims), most)
    return taken, "the run's budget is spent" if spent else f"at most {most} a report"


def revision_request(question: str, claim: Claim) -> RevisionRequest:
    """What the writer is told of ``claim``: its sources' best passages (at most
    ``REVISION_PASSAGES``, each cut to ``REVISION_PASSAGE_CHARS``) and what each found."""
    passages = [
        (s.ref, md.clip(" ".join(s.passage.split()), REVISION_PASSAGE_CHARS))
        for s in claim.sources
        if s.passage
    ][:REVISION_PASSAGES]
    return RevisionRequest(
        question=question,
        section=claim.section,
        sentence=claim.text,
        passages=tuple(passages),
        problems=tuple(problem(s) for s in claim.sources),
    )


async def rewrite(reviser: Reviser, question: str, claim: Claim, meter: Meter) -> tuple[str, str]:
    """The writer's rewrite of ``claim`` (its markers kept to the claim's own sources),
    or '' and why there is none."""
    try:
        raw = await reviser.revise(revision_request(question, claim), meter)
    except (ProviderError, BudgetExhausted) as exc:
        return "", f"the rewrite failed: {' '.join(str(exc).split())}"
    after = rewrite_of(raw, claim.text, claim.refs)
    if after is None:
        return "", "the writer did not return one sentence"
    return after, ""


def rewrite_of(raw: str, before: str, refs: Sequence[int]) -> str | None:
    """The writer's reply as a claim: one line of words, citing only the claim's own
    sources (others' markers dropped; none left: the claim's markers added at its end).
    None when it holds no words, is no longer a sentence, carries markup of its own (a
    heading, a list item, a quote, a table, code: anything but one paragraph, read by
    markdown-it), or says what ``before`` said (its words, markers and case aside)."""
    text = " ".join(raw.split()).strip().strip('"“”')
    if not re.search(r"[^\W\d_]", LOCAL.sub("", text)) or len(text) > 2 * len(before) + 300:
        return None
    if not _one_paragraph(raw.strip().strip('"“”')):
        return None
    if strip_markers(text).lower().split() == strip_markers(before).lower().split():
        return None
    text = LOCAL.sub(lambda m: m.group(0) if int(m.group(1)) in refs else "", text)
    text = " ".join(text.split())
    if not LOCAL.search(text):
        markers = "".join(f"[{n}]" for n in refs)
        end = re.search(r"[.!?]$", text)
        text = f"{text[:-1]} {markers}{text[-1]}" if end else f"{text} {markers}"
    return None if text.split() == before.split() else text


def _one_paragraph(text: str) -> bool:
    """Whether markdown-it reads ``text`` as one paragraph of text and nothing else: no
    other block, and no link, image or raw HTML in it."""
    tokens = md.parser().parse(text)
    blocks = [t.type for t in tokens if t.level == 0]
    inline = [c.type for t in tokens for c in t.children or []]
    return blocks == ["paragraph_open", "paragraph_close"] and not (
        {"link_open", "image", "html_inline"} & set(inline)
    )


def refs_in(sentence: str, known: int) -> tuple[int, ...]:
    numbers = dict.fromkeys(int(n) for n in LOCAL.findall(sentence))
    return tuple(n for n in numbers if 1 <= n <= known)


def problem(source: SourceCheck) -> str:
    said = f"[{source.ref}] {source.verdict}"
    if source.conflicts:
        said += ": differs in " + ", ".join(source.conflicts)
    return said + (f" ({source.note})" if source.note else "")


def adopt(
    report: Report,
    state: SessionState,
    ledger: ClaimLedger,
    claim: Claim,
    written: tuple[str, str],
    checked: Claim | None,
) -> Report:
    """``report`` with the attempt to rewrite ``claim`` kept in ``ledger`` (``written``: the
    rewrite, or '' and why there is none; ``checked``: the rewrite checked). The rewrite
    replaces the claim where it stands (``rewritten``) and in ``ledger`` only when its
    sources support it (``ADOPTED``) better than the claim's did."""
    after, note = written
    revision = Revision(
        section=claim.section,
        before=claim.text,
        verdict_before=claim.verdict,
        after=after,
        note=note,
    )
    ledger.revisions.append(revision)
    if checked is None:
        return report
    revision.verdict_after = checked.verdict
    if checked.verdict not in ADOPTED or RANK[checked.verdict] <= RANK[claim.verdict]:
        return report
    moved = rewritten(report, state, claim, after)
    if moved is None:
        revision.note = "the sentence was not found where it stood"
        return report
    revision.adopted = True
    at = ledger.claims.index(claim)
    ledger.claims[at] = checked.model_copy(update={"id": claim.id, "revised_from": claim.text})
    return moved


def rewritten(report: Report, state: SessionState, claim: Claim, after: str) -> Report | None:
    """``report`` with ``claim`` replaced by ``after`` where it stands, and the session's
    written section (or lead) with it, in its ``[S#]`` markers; None if it is not found."""
    if claim.section == ANSWER:
        lead = replaced(report.lead, claim.text, after)
        if lead is None:
            return None
        report = report.model_copy(update={"lead": lead})
    else:
        sections = [s.model_copy() for s in report.sections]
        for section in sections:
            if section.title == claim.section:
                body = replaced(section.body, claim.text, after)
                if body is not None:
                    section.body = body
                    break
        else:
            return None
        report = report.model_copy(update={"sections": sections})
    writing = state.writing
    if writing is not None:
        refs = [c.ref for c in report.sources]

        def session(marker: re.Match[str]) -> str:
            n = int(marker.group(1))
            return f"[{refs[n - 1]}]" if 1 <= n <= len(refs) else marker.group(0)

        before, now = LOCAL.sub(session, claim.text), LOCAL.sub(session, after)
        if claim.section == ANSWER:
            writing.lead = replaced(writing.lead, before, now) or writing.lead
        for planned in writing.sections:
            if planned.title == claim.section:
                planned.text = replaced(planned.text, before, now) or planned.text
    return report
