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
- a web citation outside the run's web scope (an excluded domain a research job cited, a
  domain the run does not allow): never read nor checked against anything; it supports
  nothing (``unsupported``) and its note says why (``OUT_OF_SCOPE``). So too a page the
  reader refuses as out of scope once it sees it (published before ``since``, or a redirect
  out of the scope): the claim is not left ``unverifiable`` with the page still cited.

Invariants:
- A verdict is kept under ``check_key`` (claim text, ref, the source text we hold): a
  re-check (``resume``, ``deep-research check``) verifies only what changed or was not
  checked.
- Past the job's deadline nothing more is verified: those sources are ``unverifiable``
  with ``TIME_LIMIT`` as their note, and a later check takes them up.
- The judge is paid out of ``CheckJob.money``: a batch whose worst case it cannot cover is
  not asked, and the text verifier's verdicts stand, with a line saying so.
- Repair, once: an ``unsupported`` or ``contradicted`` claim goes back to its section's
  writer (``reviser``) with its sources' passages and what differs, at most
  ``max_revisions`` a report, each paid for out of the same money (or skipped, saying so).
  The rewrite is checked like any claim and replaces the sentence, in the report and in
  the session's written sections, only when it differs from it, is one paragraph of text
  (no heading or list of its own) and its sources then support it; else the sentence stands
  as written, marked. Every attempt is kept in the ledger; a sentence written twice is sent
  back once, and a sentence sent back, or a rewrite, is never sent back again. What the
  writer is told and how its reply is taken: ``adapters.claim_repair``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from deep_research.adapters.branches.protocols import Page, Reader
from deep_research.adapters.claim_repair import (
    ADOPTED,
    REVISE,
    refs_in,
    revision_request,
    rewrite_of,
    rewritten,
)
from deep_research.adapters.claims import SupportJudge, ToJudge, settle
from deep_research.adapters.contradictions import contradictions
from deep_research.adapters.corroboration import source_key
from deep_research.adapters.unstated import all_stated
from deep_research.adapters.verifier import (
    SupportVerdict,
    verify,
)
from deep_research.core.authoring import (
    Reviser,
)
from deep_research.core.corroboration import Corroboration
from deep_research.core.errors import BranchError, BudgetExhausted, ProviderError
from deep_research.core.ledger import (
    RANK,
    TIME_LIMIT,
    Claim,
    ClaimLedger,
    Draft,
    Revision,
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
from deep_research.kb.embeddings import NamedEmbeddings

CLAIMS_AT_ONCE = 8
"""Sources checked at once (the verifier's threads, the page reads under ``fetch_workers``)."""
JudgeFactory = Callable[[Meter], SupportJudge]
"""The judge model, billed to a run's meter."""
OUT_OF_SCOPE = "outside the run's web scope ({scope}): not read, and it supports nothing"
OUTSIDE = "outside the run's web scope"
"""What ``_Check.page`` says of a page the reader refused as out of scope (``PageSkipped``
of kind ``out_of_scope``)."""
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
    judge: JudgeFactory | None = None
    """Settles uncertain verdicts (None: the text verifier decides alone)."""
    judge_worst_usd: Callable[[Sequence[ToJudge]], float] = lambda _claims: 0.0
    """The most one judge call about these claims can cost."""
    embedder: NamedEmbeddings | None = None
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
        await job.save()
        return marked(report, ledger, state.sources)

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


class _Check:
    """One check of one report."""

    def __init__(
        self,
        checker: ClaimChecker,
        job: CheckJob,
        held: dict[str, Held],
        cache: dict[str, SourceCheck],
    ) -> None:
        self.checker = checker
        self.job = job
        self.held = held
        self.cache = cache
        self.fetching = asyncio.Semaphore(checker.fetch_workers)
        self.checking = asyncio.Semaphore(CLAIMS_AT_ONCE)
        """Claims in check at once: one that starts after the deadline is not checked."""
        self.notes: list[str] = []
        self.pending: list[_Pending] = []
        self.unread = 0
        self.timed_out = 0
        self.committed = 0.0
        """The worst case of what the check has asked for so far (USD)."""

    async def ledger(self, drafts: Sequence[Draft]) -> ClaimLedger:
        checks = await asyncio.gather(*(self.claim(i, d) for i, d in enumerate(drafts)))
        sources = [list(c) for c in checks]
        await self.settle(drafts, sources)
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
        deciders: dict[str, int] = {}
        for claim in claims:
            for source in claim.sources:
                if source.verifier:
                    deciders[source.verifier] = deciders.get(source.verifier, 0) + 1
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
            return _outside(base, scope.model_copy(update={"since": None})), None
        if key in self.cache:
            return self.cache[key].model_copy(update={"ref": number}), None
        if asyncio.get_running_loop().time() >= self.job.deadline:
            self.timed_out += 1
            return base.model_copy(update={"note": TIME_LIMIT}), None
        verdict = await self.verify(draft.text, own) if own else None
        note = ""
        if (verdict is None or verdict.support != "supported") and citation.kind == "web":
            page_text, note = await self.page(citation)
            if note == OUTSIDE:  # dated before ``since``, or a redirect out of the scope
                return _outside(base, scope), None
            if page_text:
                on_page = await self.verify(draft.text, page_text)
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

    async def page(self, citation: Citation) -> tuple[str, str]:
        """The cited page's text, or why it was not read (``OUTSIDE``: the reader refused
        it as outside the run's web scope)."""
        if not citation.url:
            return "", "the source has no address"
        if self.checker.reader is None:
            self.unread += 1
            return "", "the page was not read (DEEP_RESEARCH_CHECK_FETCH=off)"
        # Loaded with the first page read (trafilatura), as the reader itself is.
        from deep_research.adapters.web.reader import PageSkipped

        async with self.fetching:
            try:
                page = await self.checker.read(citation.url)
            except BranchError as exc:
                if isinstance(exc, PageSkipped) and exc.kind == "out_of_scope":
                    return "", OUTSIDE
                return "", f"the page was not read: {' '.join(str(exc).split())}"
        return page.text, ""

    async def verify(self, claim: str, text: str) -> SupportVerdict:
        """The verifier's verdict, made partial when the text leaves part of the claim
        unstated (``_all_stated``): both in a worker thread, off the event loop."""

        def verified() -> SupportVerdict:
            found = verify(claim, text, embedder=self.checker.embedder)
            return all_stated(claim, text, found)

        return await asyncio.to_thread(verified)

    async def settle(self, drafts: Sequence[Draft], sources: list[list[SourceCheck]]) -> None:
        """Hand the uncertain verdicts to the judge, as far as the money goes."""
        make = self.checker.judge
        if make is None or not self.pending:
            return
        asks = [ToJudge(drafts[p.claim].text, p.verdict.passages) for p in self.pending]
        worst = self.checker.judge_worst_usd(asks)
        if worst > self.job.money - self.committed:
            self.notes.append(
                f"the judge model was not asked about {len(asks)} uncertain verdict(s): the "
                "run's budget is spent; the text verifier's verdicts stand"
            )
            return
        self.committed += worst
        settled = await settle(asks, [p.verdict for p in self.pending], make(self.job.meter))
        if settled.problem:
            self.notes.append(settled.problem)
        if settled.unproven:
            self.notes.append(
                f"the judge model called {settled.unproven} verdict(s) supported without a "
                "quote of its source that holds the claim: the text verifier's verdicts stand"
            )
        for pending, verdict, why in zip(
            self.pending, settled.verdicts, settled.overruled, strict=True
        ):
            row = sources[pending.claim]
            row[pending.source] = _as_check(row[pending.source], verdict, note=why or None)
        self.pending = []

    # --- repair, once -------------------------------------------------------------------

    async def revise(self, report: Report, ledger: ClaimLedger) -> Report:
        """Send the claims their sources do not support back to their writer, once each;
        put in the report (and the session's written sections) the rewrites their sources
        then support. ``ledger`` is updated in place."""
        reviser = self.checker.reviser
        distinct = {
            " ".join(c.text.split()): c for c in reversed(ledger.claims) if c.verdict in REVISE
        }
        due = [
            c
            for c in ledger.claims
            if c.verdict in REVISE
            and distinct[" ".join(c.text.split())] is c
            and not ledger.revised(c.text)
        ]
        if reviser is None or not due:
            return report
        if asyncio.get_running_loop().time() >= self.job.deadline:
            self.notes.append(
                f"{len(due)} claim(s) not supported by their sources were not sent back to "
                "their writer: the time limit was reached"
            )
            return report
        worst = self.checker.revise_worst_usd
        left = self.job.money - self.committed
        affordable = len(due) if worst <= 0 else max(0, int(left // worst))
        taken = due[: min(affordable, self.checker.max_revisions)]
        if len(taken) < len(due):
            why = (
                "the run's budget is spent"
                if affordable < min(len(due), self.checker.max_revisions)
                else f"at most {self.checker.max_revisions} a report"
            )
            self.notes.append(
                f"{len(due) - len(taken)} claim(s) not supported by their sources were not "
                f"sent back to their writer: {why}"
            )
        self.committed += worst * len(taken)
        rewrites = await asyncio.gather(*(self.rewrite(reviser, c) for c in taken))
        drafts = [
            Draft(after, claim.section, refs_in(after, len(report.sources)), quoted=False)
            for claim, (after, _note) in zip(taken, rewrites, strict=True)
        ]
        checks = await asyncio.gather(*(self.claim(i, d) for i, d in enumerate(drafts) if d.text))
        found = iter(checks)
        sources = [list(next(found)) if d.text else [] for d in drafts]
        await self.settle(drafts, sources)
        for i, (claim, draft, (after, note)) in enumerate(
            zip(taken, drafts, rewrites, strict=True)
        ):
            revision = Revision(
                section=claim.section,
                before=claim.text,
                verdict_before=claim.verdict,
                after=after,
                note=note,
            )
            if after:
                better = self.claim_of(i, draft, sources[i])
                revision.verdict_after = better.verdict
                if better.verdict in ADOPTED and RANK[better.verdict] > RANK[claim.verdict]:
                    moved = rewritten(report, self.job.state, claim, after)
                    if moved is None:
                        revision.note = "the sentence was not found where it stood"
                    else:
                        report = moved
                        revision.adopted = True
                        at = ledger.claims.index(claim)
                        ledger.claims[at] = better.model_copy(
                            update={"id": claim.id, "revised_from": claim.text}
                        )
            ledger.revisions.append(revision)
        return report

    async def rewrite(self, reviser: Reviser, claim: Claim) -> tuple[str, str]:
        """The writer's rewrite of ``claim`` (its markers kept to the claim's own sources),
        or '' and why there is none."""
        request = revision_request(self.job.state.question, claim)
        try:
            raw = await reviser.revise(request, self.job.meter)
        except (ProviderError, BudgetExhausted) as exc:
            return "", f"the rewrite failed: {' '.join(str(exc).split())}"
        after = rewrite_of(raw, claim.text, claim.refs)
        if after is None:
            return "", "the writer did not return one sentence"
        return after, ""


def _outside(base: SourceCheck, scope: WebScope) -> SourceCheck:
    """``base`` as a source outside ``scope`` (described without its location): it supports
    nothing, and its note says so."""
    said = scope.model_copy(update={"location": ""}).describe()
    return base.model_copy(
        update={"verdict": "unsupported", "note": OUT_OF_SCOPE.format(scope=said)}
    )


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
