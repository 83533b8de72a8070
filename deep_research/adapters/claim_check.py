"""The claim check, a ``ReportChecker``: each claim of the written report against the text of
each source it cites, by the claim verifier (``adapters.verifier.verify``), its uncertain
verdicts settled by the judge model; kept as ``claims.json`` (``core.ledger``).

What a citation is checked against:
- a knowledge-base citation: the cited chunk's whole text (the evidence store's);
- a search-and-read citation: the passage the branch read, then the rest of the page;
- a research job's citation: the cited page, read through the page reader (the address
  guard, robots.txt, per-host politeness, size and time caps; each URL once a process).
  A page that cannot be read leaves the claim ``unverifiable``, but the claim is still
  compared with what the job itself wrote next to the citation: a number changed after the
  job (while compressing, summarizing or writing) is ``contradicted``.
- a web citation outside the run's web scope, or a page the reader refuses as out of scope
  once it sees it (a redirect out of it, published before ``since``): never checked against
  anything; it supports nothing (``unsupported``), its note says why (``adapters.claim_scope``).

Invariants:
- A verdict is kept under ``check_key`` (claim text, ref, the source text we hold): a
  re-check (``resume``, ``deep-research check``) verifies only what changed or was not
  checked.
- Past the job's deadline nothing more is verified: those sources are ``unverifiable``
  with ``TIME_LIMIT`` as their note, and a later check takes them up.
- The judge is paid out of ``CheckJob.money``: a batch whose worst case it cannot cover is
  not asked, and the text verifier's verdicts stand, with a line saying so.
- Repair, once: an ``unsupported`` or ``contradicted`` claim goes back to its section's
  writer (``reviser``), at most ``max_revisions`` a report, each paid for out of the same
  money (or skipped, saying so). The rewrite is checked like any claim and replaces the
  sentence only when its sources then support it; else the sentence stands as written,
  marked. Every attempt is kept in the ledger (which claims go back, what the writer is
  told and how its reply is taken: ``adapters.claim_repair``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from deep_research.adapters.branches.protocols import Page, Reader
from deep_research.adapters.claim_repair import adopt, afforded, due, refs_in, rewrite
from deep_research.adapters.claim_scope import OUTSIDE, out_of_scope, scoped
from deep_research.adapters.claims import SupportJudge, ToJudge, settle
from deep_research.adapters.contradictions import contradictions
from deep_research.adapters.corroboration import source_key
from deep_research.adapters.unstated import all_stated
from deep_research.adapters.verifier import SupportVerdict, verify
from deep_research.core.authoring import Reviser
from deep_research.core.corroboration import Corroboration
from deep_research.core.errors import BranchError
from deep_research.core.ledger import (
    RANK,
    TIME_LIMIT,
    Claim,
    ClaimLedger,
    Draft,
    SourceCheck,
    check_key,
    claims_of,
    marked,
    verdict_of,
)
from deep_research.core.models import Citation, EvidenceUnit
from deep_research.core.ports import CheckJob, Meter
from deep_research.core.report import Report
from deep_research.core.scope import WebScope

if TYPE_CHECKING:
    from deep_research.kb.embeddings import Embedder

CLAIMS_AT_ONCE = 8
"""Sources checked at once (the verifier's threads, the page reads under ``fetch_workers``)."""
SAID_CONTRADICTS = (
    "the page was not read, and the claim differs from what the research job wrote next to "
    "this citation"
)


@dataclass(frozen=True)
class Held:
    """What the session holds of a source: its own words, and what a research job said."""

    text: str = ""
    said: str = ""


def held_texts(units: Sequence[EvidenceUnit]) -> dict[str, Held]:
    """By session ref: the longest source text the evidence store holds, and the first thing
    a research job said next to it."""
    out: dict[str, Held] = {}
    for unit in units:
        for source in unit.sources:
            held = out.get(source.ref, Held())
            text = source.text if len(source.text) > len(held.text) else held.text
            out[source.ref] = Held(text, held.said or source.said)
    return out


@dataclass
class ClaimChecker:
    reader: Reader | None = None
    """Reads cited pages (None: ``DEEP_RESEARCH_CHECK_FETCH=off``, or no web access)."""
    judge: Callable[[Meter], SupportJudge] | None = None
    """The judge model, billed to a run's meter: it settles uncertain verdicts (None: the text
    verifier decides alone)."""
    judge_worst_usd: Callable[[Sequence[ToJudge]], float] = lambda _claims: 0.0
    """The most one judge call about these claims can cost."""
    embedder: Embedder | None = None
    """The verifier's embedder (None: the shipped MiniLM it was fitted with)."""
    source_key: Callable[[Citation], str] = source_key
    """The independent source a citation is (a registrable domain, a KB root)."""
    fetch_workers: int = 4
    reviser: Reviser | None = None
    """The sections' writer, asked once to rewrite a claim its sources do not support."""
    revise_worst_usd: float = 0.0
    """The most one revision can cost."""
    max_revisions: int = 6
    """Claims a report may send back (the final reserve counts as many)."""
    scope: WebScope = field(default_factory=WebScope)
    """The run's web scope: a cited page outside it is never read, and verifies nothing."""
    _reads: dict[str, asyncio.Task[Page]] = field(default_factory=dict, init=False)

    async def check(self, job: CheckJob) -> Report:
        report, state = job.report, job.state
        drafts = claims_of(report, extractive=state.mode == "extractive")
        store = job.store
        prior = await asyncio.to_thread(store.load) if store is not None else None
        units = await asyncio.to_thread(store.units) if store is not None else []
        run = _Check(self, job, held_texts(units), prior.cache() if prior else {})
        ledger = await run.ledger(drafts)
        ledger.revisions = list(prior.revisions) if prior else []
        if state.mode != "extractive":
            report = await run.revise(report, ledger)
        ledger.notes = run.notes
        ledger.contradictions = await asyncio.to_thread(contradictions, units)
        if store is not None:
            await asyncio.to_thread(store.save, ledger)
        state.claims = ledger.totals()
        for ref in run.undated & state.sources.keys():
            state.sources[ref] = state.sources[ref].model_copy(update={"undated": True})
        await job.save()
        return scoped(marked(report, ledger, state.sources), ledger, run.undated, self.scope)

    async def read(self, url: str) -> Page:
        """The page at ``url``, read once however many claims cite it."""
        assert self.reader is not None
        task = self._reads.get(url)
        if task is None:
            task = self._reads[url] = asyncio.ensure_future(self.reader.read(url))
        return await asyncio.shield(task)


@dataclass
class _Pending:
    """A source's text verdict, before the judge may settle it."""

    claim: int
    source: int
    verdict: SupportVerdict


@dataclass
class _Check:
    """One check of one report."""

    checker: ClaimChecker
    job: CheckJob
    held: dict[str, Held]
    cache: dict[str, SourceCheck]
    notes: list[str] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    unread: int = 0
    timed_out: int = 0
    undated: set[str] = field(default_factory=set)
    """The session refs of cited pages read under ``since`` with no date found."""
    committed: float = 0.0
    """The worst case of what the check has asked for so far (USD)."""

    def __post_init__(self) -> None:
        self.fetching = asyncio.Semaphore(self.checker.fetch_workers)
        self.checking = asyncio.Semaphore(CLAIMS_AT_ONCE)
        """Claims in check at once: one that starts after the deadline is not checked."""

    async def ledger(self, drafts: Sequence[Draft]) -> ClaimLedger:
        sources = await self.sources(drafts)
        claims = [
            self.claim_of(i, draft, found)
            for i, (draft, found) in enumerate(zip(drafts, sources, strict=True))
        ]
        if self.unread and self.checker.reader is None:
            self.notes.append(
                f"{self.unread} citation(s) of pages whose text the run did not keep were not "
                "read (DEEP_RESEARCH_CHECK_FETCH=off): their claims are unverifiable"
            )
        if self.timed_out:
            self.notes.append(
                f"the time limit left {self.timed_out} citation(s) unchecked: "
                "`deep-research check ID` checks them"
            )
        deciders = dict(Counter(s.verifier for c in claims for s in c.sources if s.verifier))
        return ClaimLedger(
            session_id=self.job.state.session_id, claims=claims, notes=self.notes, deciders=deciders
        )

    def claim_of(self, index: int, draft: Draft, sources: list[SourceCheck]) -> Claim:
        verdict = verdict_of(draft, sources)
        corroboration: Literal["corroborated", "single source", ""] = ""
        if verdict == "supported":
            found = Corroboration.of(s.source_key for s in sources if s.verdict == "supported")
            corroboration = "corroborated" if found.level == "corroborated" else "single source"
        return Claim(
            id=f"C{index + 1}",
            text=draft.text,
            section=draft.section,
            refs=list(draft.refs),
            verdict=verdict,
            corroboration=corroboration,
            sources=sources,
        )

    async def sources(self, drafts: Sequence[Draft]) -> list[list[SourceCheck]]:
        """Each draft's sources checked, the uncertain verdicts settled by the judge."""
        sources = list(await asyncio.gather(*(self.claim(i, d) for i, d in enumerate(drafts))))
        await self.settle(drafts, sources)
        return sources

    async def claim(self, index: int, draft: Draft) -> list[SourceCheck]:
        if draft.quoted:
            return []
        out: list[SourceCheck] = []
        for number in draft.refs:
            async with self.checking:
                found, verdict = await self.source(draft, number)
            if verdict is not None and verdict.uncertain:
                self.pending.append(_Pending(index, len(out), verdict))
            out.append(found)
        return out

    async def source(self, draft: Draft, number: int) -> tuple[SourceCheck, SupportVerdict | None]:
        """What source ``number`` says of the claim; the text verdict, when one was made."""
        citation = self.job.report.sources[number - 1]
        held = self.held.get(citation.ref, Held())
        own = held.text or citation.quote
        said = held.said or citation.claim
        key = check_key(draft.text, citation.ref, own or said or citation.url or "")
        base = SourceCheck(
            ref=number,
            session_ref=citation.ref,
            url=citation.url,
            locator=citation.locator,
            key=key,
            source_key=self.checker.source_key(citation),
        )
        scope = self.checker.scope
        if citation.kind == "web" and citation.url and not scope.allows(citation.url):
            return _outside(base, out_of_scope(scope.model_copy(update={"since": None}))), None
        if key in self.cache:
            return self.cache[key].model_copy(update={"ref": number}), None
        if asyncio.get_running_loop().time() >= self.job.deadline:
            self.timed_out += 1
            return base.model_copy(update={"note": TIME_LIMIT}), None
        verdict = await self.verify(draft.text, own) if own else None
        note = ""
        if (verdict is None or verdict.support != "supported") and citation.kind == "web":
            page, note = await self.page(citation)
            if note.startswith(OUTSIDE):  # a redirect out of the scope, or dated before since
                return _outside(base, note), None
            if page is not None and page.undated:
                self.undated.add(citation.ref)
            if page is not None and page.text:
                on_page = await self.verify(draft.text, page.text)
                if verdict is None or RANK[on_page.support] > RANK[verdict.support]:
                    verdict, note = on_page, ""
        if verdict is None and said:
            against_said = await self.verify(draft.text, said)
            if against_said.support == "contradicted":
                found = _as_check(base, against_said)
                return found.model_copy(update={"passage": said, "note": SAID_CONTRADICTS}), None
        if verdict is None:
            note = note or "the source's text was not captured"
            return base.model_copy(update={"note": note}), None
        return _as_check(base, verdict).model_copy(update={"note": note}), verdict

    async def page(self, citation: Citation) -> tuple[Page | None, str]:
        """The cited page, or why it was not read (starting ``OUTSIDE``: the reader refused
        it as outside the run's web scope)."""
        if not citation.url:
            return None, "the source has no address"
        if self.checker.reader is None:
            self.unread += 1
            return None, "the page was not read (DEEP_RESEARCH_CHECK_FETCH=off)"
        # Loaded with the first page read (trafilatura), as the reader itself is.
        from deep_research.adapters.web.reader import PageSkipped

        async with self.fetching:
            try:
                page = await self.checker.read(citation.url)
            except BranchError as exc:
                if isinstance(exc, PageSkipped) and exc.kind == "out_of_scope":
                    return None, out_of_scope(self.checker.scope, exc.published)
                return None, f"the page was not read: {' '.join(str(exc).split())}"
        return page, ""

    async def verify(self, claim: str, text: str) -> SupportVerdict:
        """The verifier's verdict, made partial when the text leaves part of the claim
        unstated (``all_stated``): both in a worker thread, off the event loop."""
        embedder = self.checker.embedder
        return await asyncio.to_thread(
            lambda: all_stated(claim, text, verify(claim, text, embedder=embedder))
        )

    async def settle(self, drafts: Sequence[Draft], sources: list[list[SourceCheck]]) -> None:
        """Hand the uncertain verdicts of ``drafts`` to the judge, as far as the money goes;
        unasked, they stand (never carried over to another set of drafts)."""
        make, pending, self.pending = self.checker.judge, self.pending, []
        if make is None or not pending:
            return
        asks = [ToJudge(drafts[p.claim].text, p.verdict.passages) for p in pending]
        worst = self.checker.judge_worst_usd(asks)
        if worst > self.job.money - self.committed:
            self.notes.append(
                f"the judge model was not asked about {len(asks)} uncertain verdict(s): the "
                "run's budget is spent; the text verifier's verdicts stand"
            )
            return
        self.committed += worst
        settled = await settle(asks, [p.verdict for p in pending], make(self.job.meter))
        if settled.problem:
            self.notes.append(settled.problem)
        if settled.unproven:
            self.notes.append(
                f"the judge model called {settled.unproven} verdict(s) supported without a "
                "quote of its source that holds the claim: the text verifier's verdicts stand"
            )
        for asked, verdict, why in zip(pending, settled.verdicts, settled.overruled, strict=True):
            row = sources[asked.claim]
            row[asked.source] = _as_check(row[asked.source], verdict, note=why or None)

    async def revise(self, report: Report, ledger: ClaimLedger) -> Report:
        """Send the claims their sources do not support back to their writer, once each;
        put in the report (and the session's written sections) the rewrites their sources
        then support. ``ledger`` is updated in place."""
        reviser, checker = self.checker.reviser, self.checker
        claims = due(ledger)
        if reviser is None or not claims:
            return report
        if asyncio.get_running_loop().time() >= self.job.deadline:
            self.notes.append(
                f"{len(claims)} claim(s) not supported by their sources were not sent back to "
                "their writer: the time limit was reached"
            )
            return report
        worst = checker.revise_worst_usd
        taken, why = afforded(claims, worst, self.job.money - self.committed, checker.max_revisions)
        if why:
            self.notes.append(
                f"{len(claims) - len(taken)} claim(s) not supported by their sources were not "
                f"sent back to their writer: {why}"
            )
        self.committed += worst * len(taken)
        question, meter = self.job.state.question, self.job.meter
        rewrites = await asyncio.gather(*(rewrite(reviser, question, c, meter) for c in taken))
        drafts = [
            Draft(after, claim.section, refs_in(after, len(report.sources)), quoted=False)
            for claim, (after, _note) in zip(taken, rewrites, strict=True)
        ]
        sources = await self.sources(drafts)  # a draft with no text cites nothing
        for i, (claim, draft, written) in enumerate(zip(taken, drafts, rewrites, strict=True)):
            checked = self.claim_of(i, draft, sources[i]) if draft.text else None
            report = adopt(report, self.job.state, ledger, claim, written, checked)
        return report


def _outside(base: SourceCheck, note: str) -> SourceCheck:
    return base.model_copy(update={"verdict": "unsupported", "note": note})


def _as_check(base: SourceCheck, verdict: SupportVerdict, note: str | None = None) -> SourceCheck:
    """``base`` with ``verdict`` (and ``note``, when given, as its note)."""
    kept = {} if note is None else {"note": note}
    return base.model_copy(
        update={
            **kept,
            "verdict": verdict.support,
            "score": verdict.score,
            "passage": verdict.passages[0] if verdict.passages else "",
            "verifier": verdict.verifier,
            "conflicts": list(verdict.conflicts),
        }
    )
