"""Repair, once: what the writer is told of a claim its sources do not support, how its
reply is taken as a rewrite, and how an adopted rewrite replaces the sentence in the report
and in the session's written sections. ``claim_check`` decides which claims go back, pays
for them and checks each rewrite again."""

from __future__ import annotations

import re
from collections.abc import Sequence

from deep_research.adapters.verifier import strip_markers
from deep_research.core import markdown as md
from deep_research.core.authoring import (
    REVISION_PASSAGE_CHARS,
    REVISION_PASSAGES,
    RevisionRequest,
)
from deep_research.core.citations import LOCAL
from deep_research.core.ledger import Claim, SourceCheck, replaced
from deep_research.core.models import SessionState
from deep_research.core.report import ANSWER, Report

REVISE = frozenset({"unsupported", "contradicted"})
"""Claims sent back to their writer once."""
ADOPTED = frozenset({"supported"})
"""What a rewrite's sources must say of it for it to replace the sentence."""


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
            body = (
                replaced(section.body, claim.text, after)
                if section.title == claim.section
                else None
            )
            if body is not None:
                section.body = body
                break
        else:
            return None
        report = report.model_copy(update={"sections": sections})
    writing = state.writing
    if writing is not None:
        refs = [c.ref for c in report.sources]

        def session(text: str) -> str:
            return LOCAL.sub(
                lambda m: (
                    f"[{refs[int(m.group(1)) - 1]}]" if int(m.group(1)) <= len(refs) else m.group(0)
                ),
                text,
            )

        before, now = session(claim.text), session(after)
        if claim.section == ANSWER:
            writing.lead = replaced(writing.lead, before, now) or writing.lead
        for planned in writing.sections:
            if planned.title == claim.section:
                planned.text = replaced(planned.text, before, now) or planned.text
    return report
