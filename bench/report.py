"""Report benchmark: how much of the research reaches the report, and what the claim check
of a full run makes of the fabrications a writer plants in it.

    python bench/report.py            # human-readable figures
    python bench/report.py --json     # ... and a last line with one JSON object
    python bench/report.py --smoke    # every figure once, at toy sizes: does it still run?

The whole engine runs end to end (``wiring.build`` from Settings, the orchestrator, the real
OpenAI-research branch executor, the real report) against the loopback fake OpenAI server
in facts mode (``bench/facts.py``): a plan of N independent web sub-questions, one
iteration (the judge then says complete); each research job states K distinct facts (the
templates and made-up names of ``bench/planted.py``, shared with ``bench/claims.py``), each
with a unique name and its own cited page; every chat call is a faithful copier that keeps
the facts of its prompt, with their citation markers, in order, within its token cap and
the limits its prompt states. 100 ms latency per call: the fake makes its reply within
it, as a served model does, so each of 12 concurrent calls answers after 100 ms (not after
100 ms plus the fake's own work for the other eleven, done in this process). N = 12 and 48,
K = 5, 12 branches in parallel.

The writers plant fabrications as they write (``FactsWorld.copy_facts(..., plant=True)``,
the section writer's and the lead's replies, deterministic from a seed; never by editing
the report afterwards): 15 % of the facts are altered in five kinds, a fifth each — a
changed number, a flipped negation, a swapped entity (another fact's name), a citation
moved to another fact's page, an unsupported clause added — and 30 % of the true ones are
reworded. The cited pages (each fact's as stated, among filler) are served on loopback
(``bench.planted.Pages``) and allowed by ``DEEP_RESEARCH_FETCH_ALLOW``, so the run's own
claim check (wired as ``deep-research run`` wires it: ``app/checking.py``) reads them
through the real page reader, as it reads any research job's cited page; the per-host
politeness limits are raised (8 at once, 100 a second) since one loopback host stands for
240 sites. The claim check's judge abstains (the text verifier decides, as in
``bench/claims.py``), or with ``--judge`` is a fake that calls every claim it is asked about
supported, quoting nothing (``yes``), the wrong sentence of the passage
(``yes_wrong_quote``) or the right one (``quoting``): the code takes a judge's "supported"
only with a quote it can check (``adapters.claims``), so the claim figures must hold with
each. Its repair is the fake writer restating what the passages state.

At the larger size (48 branches; 6 in --smoke) the research jobs also state the 20 pairs of
``bench.planted.pairs``, the ones ``bench/claims.py`` gives its finder directly: 10 planted
contradicting pairs (one subject, a conflicting number, date or polarity) and 10 that only
look alike (the same subject another year, or another subject). Each side is a sentence of
its own research job (a pair's two sides in two jobs half the plan apart), cited to its own
page (``/c<pair>.<side>``, served beside the facts'). They are extra findings, not among
the K facts: retention and the claim figures count the K facts only. The compressor keeps
them, so they reach the branches' notes and the evidence store as units of their own; the
writers and the summarizer copy the K facts only, so the body and its claims are as they
would be without them (the pairs appear in the report only in the engine's own
"Contradictions" section). The prompts that read the notes carry them (the outline's
catalog, a section's evidence, the summarizer's findings) at 48 branches and not at 12:
``largest_prompt_ratio_48_over_12`` counts them against the 12-branch run. The body
figures and the claim figures are the same with and without them; the write wall is
measured with them (280 evidence units at 48 branches, not 240): in back-to-back single
runs it was ~0.3 one-call latencies longer with them.

The report's *body* is its lead and sections (``Report.body``): the engine's own
bookkeeping (status, coverage, citation check), the numbered sources and the "Findings by
sub-question" appendix are not counted.

Figures (targets from the issue; measured from outside before this work in brackets):
- evidence_retention_12      share of the facts gathered that the body states with a
                             citation resolving to that fact's own URL (``[n]`` ->
                             ``Report.sources[n - 1]``), 12 branches          >= 0.95 (0.82)
                             Counted on the report as the writer returned it (before the
                             claim check's marks and repairs), and in any form the writers
                             made of the fact: as stated, reworded or with its planted
                             alteration (a moved citation: cited to any page). Retention
                             measures what the engine carries from research to the body;
                             a planted alteration is the fake writer's, at the last step,
                             and the claim check's figures below measure it.
- evidence_retention_48      the same, 48 branches                           >= 0.90 (0.20)
- stated_per_fact_12         statements of a fact in the body (as written, in any form) per
                             fact it states, 12 branches: a section states only what it is
                             given, and each finding is given to one section; the lead
                             restates its sections' key points               <= 1.2 (1.87)
- stated_per_fact_48         the same, 48 branches
- largest_prompt_ratio_48_over_12  largest prompt (characters) of any model call, 48
                             branches over 12                                  <= 1.3
- report_words_48_over_12    body words (as written), 48 branches over 12      >= 2.5
- sections_48                ``##`` sections of the body at 48 branches (as written), the
                             engine's own "Coverage and limitations", "Citation check",
                             "Claim check" and "Contradictions" not counted
                                                                               >= 4
- write_wall_48_seconds      48 branches: from the last branch done (its event) to the
                             report written (the writer returning)
- write_wall_over_one_call   that / one call's latency (0.1 s)                 <= 4
                             (the wall is the median of --runs runs, 3 by default)
- fabrications_flagged       48 branches: share of the claims stating a planted
                             fabrication whose verdict in the session's ``claims.json`` is
                             anything but ``supported`` (a claim the repair rewrote counts
                             as flagged: it was sent back for not being supported), overall
                             and per kind (``fabrications_flagged_<kind>``)   >= 0.95 each
- true_claims_flagged        the same share among the claims stating a true fact, as
                             stated or reworded, cited to its own page          <= 0.05
- check_ms_per_claim_cached_pages  the claim check again on the writer's report after the
                             run, its pages already read, no judge and no repair (as
                             ``bench/claims.py`` times it), per claim
- check_ms_per_claim_in_run  the run's own check (first page reads, judge, repair) per claim
- check_share_of_wall        the run's own check over the run's wall time (median of runs)
- judged                     48 branches: claims the run's claim check asked its judge about
                             (those its text verifier left uncertain), summed over its calls
- contradictions_found       48 branches: share of the 10 planted pairs the run's own
                             contradiction finder reports: a contradiction of the session's
                             ``claims.json`` (the claim check's, over the evidence store; the
                             report's "Contradictions" section shows the same list) whose two
                             sides are the pair's two sentences                 >= 0.9
- false_contradictions       the same share among the 10 look-alike pairs       <= 0.1
- contradictions, other_contradictions  contradictions reported in all, and those of no
                             pair (between the K facts, or across two pairs: none expected)
A claim is matched to its fact by its words (markers dropped): each form a fact is written
in here is unique. A claim stating a true fact's words cited to another page is a moved
citation when that fact was planted so, else counted as ``miscited_claims`` (none
expected); claims of no fact (``other_claims``) are counted and left out.
The human-readable output also names each chat role's largest prompt at both sizes. At
K = 5 a branch's notes are ~110 tokens, so 12 branches fill none of the fixed budgets (the
2,000-token rolling summary that the judge and the summarizer read holds all 60 facts in
~1,300 tokens, the outline's 2,500-token catalog is at ~a third): the ratio above measures
budgets filling between 12 and 48, not a prompt outgrowing its budget (with real notes the
summarizer's prompt is the same at 5 nodes as at 50: bench/engine.py). ``--facts`` sets K
(at 25 every budget fills at both sizes, the ratio is 1.02, and sections overflow their
own budget and are condensed when the run has money and tokens left over).
Today's code misses several targets: this bench measures the baseline the next work must
raise. --smoke computes the same figures once at toy sizes (N = 3 and 6, K = 2, 10 ms a
call; the test suite runs it): its values are not the targets' (at 12 facts, 5 are planted:
at least one of each kind).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.facts import MARKER, REWORDED, STATED, FactsWorld
from bench.planted import JUDGES, KINDS, Pages, side_path
from bench.prompt_growth import prompt_chars
from deep_research.adapters.claim_check import ClaimChecker
from deep_research.app.config import Settings
from deep_research.app.preparation import Prepared
from deep_research.app.sources import resolve
from deep_research.app.wiring import build
from deep_research.core.ledger import Claim, ClaimLedger
from deep_research.core.models import EvidenceUnit, Limits, SessionState, Writing
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import (
    CheckJob,
    JobEvent,
    Meter,
    ReportChecker,
    ReportWriter,
    WriteJob,
)
from deep_research.core.report import Report
from deep_research.persistence.claims import SessionClaims
from deep_research.persistence.sessions import SessionStore
from tests.fake_openai import ChatHandler, ChatRequest, ChatResult, FakeOpenAI
from tests.fakes import RecordingMeter

BOOKKEEPING = ("Coverage and limitations", "Citation check", "Claim check", "Contradictions")
"""Sections the report adds itself, whatever was found: not counted as the report's own."""
_NUMBER = re.compile(r"\[(\d+)\]")
_CLAIM = re.compile(r"^Claim \d+: ", re.MULTILINE)
"""A claim the judge is asked about, as its prompt lists it (``adapters.claims.claims_text``)."""
TRUE_KINDS = ("true", "reworded")


@dataclass(frozen=True)
class Run:
    world: FactsWorld
    written: Report
    """The report as the writer returned it (before the claim check)."""
    report: Report
    """The report as the run ends: checked, marked, repaired."""
    ledger: ClaimLedger
    """The session's ``claims.json``."""
    largest_prompt: int
    write_wall: float
    run_wall: float
    check_seconds: float
    """The run's own claim check."""
    recheck_seconds: float
    """The claim check again, its pages cached, no judge, no repair."""
    calls: dict[str, int]
    prompts: dict[str, int]
    """Each chat role's largest prompt (characters): which call is the largest, and why."""
    judged: int = 0
    """Claims the run's claim check asked its judge about."""


@dataclass
class CountedJudge:
    """The world's chat (``inner``), counting the claims each claim-judge prompt lists."""

    inner: ChatHandler
    asked: int = 0

    def __call__(self, req: ChatRequest) -> ChatResult | None:
        if req.schema_name == "Judgements":
            self.asked += len(_CLAIM.findall(req.text))
        return self.inner(req)


class TimedWriter:
    """The engine's writer, noting when the report is written, and what it wrote."""

    def __init__(self, inner: ReportWriter) -> None:
        self.inner = inner
        self.written_at = 0.0
        self.report: Report | None = None

    async def outline(self, state: SessionState, meter: Meter) -> Writing | None:
        return await self.inner.outline(state, meter)

    async def write(self, job: WriteJob) -> Report:
        report = await self.inner.write(job)
        self.written_at = time.monotonic()
        self.report = report
        return report


class TimedChecker:
    """A checker of the engine's, timed."""

    def __init__(self, inner: ReportChecker) -> None:
        self.inner = inner
        self.seconds = 0.0

    async def check(self, job: CheckJob) -> Report:
        started = time.perf_counter()
        try:
            return await self.inner.check(job)
        finally:
            self.seconds += time.perf_counter() - started


class HeldClaims:
    """A ``ClaimStore`` over a session's evidence that keeps no earlier verdicts: a re-check
    verifies every claim again."""

    def __init__(self, units: list[EvidenceUnit]) -> None:
        self._units = units
        self.ledger: ClaimLedger | None = None

    def units(self) -> list[EvidenceUnit]:
        return self._units

    def load(self) -> ClaimLedger | None:
        return None

    def save(self, ledger: ClaimLedger) -> None:
        self.ledger = ledger


async def recheck(checker: ClaimChecker, state: SessionState, report: Report, home: Path) -> float:
    """The check of ``report`` again with the run's page reads (cached), no judge and no
    repair: seconds."""
    bare = dataclasses.replace(checker, judge=None, reviser=None)
    bare._reads = checker._reads
    store = HeldClaims(SessionClaims(home).units())

    async def save() -> None:
        pass

    job = CheckJob(
        state=state.model_copy(deep=True),
        report=report,
        meter=RecordingMeter(budget=0.0),
        save=save,
        deadline=asyncio.get_running_loop().time() + 3600,
        money=0.0,
        store=store,
    )
    started = time.perf_counter()
    await bare.check(job)
    return time.perf_counter() - started


async def run_once(
    branches: int,
    facts: int,
    latency: float,
    parallel: int,
    home: Path,
    pairs: bool = False,
    judge: str = "abstain",
) -> Run:
    """One run; ``pairs``: research jobs state the contradiction pairs too; ``judge``: the
    claims' judge (``FactsWorld.judge``)."""
    world = FactsWorld(branches, facts, contradictions=pairs, judge=judge)
    said = {side_path(s.pair.index, s.side): s.words + "." for s in world.sides.values()}
    pages = Pages(world.facts, said)
    world.page_url = pages.url
    world.side_url = pages.side_url
    try:
        with FakeOpenAI(polls_to_complete=1) as fake:
            world.install(fake)
            counted = fake.chat_handler = CountedJudge(world.chat)
            fake.latency = latency
            run = await _run(world, fake, pages, branches, parallel, home)
            return dataclasses.replace(run, judged=counted.asked)
    finally:
        pages.close()


async def _run(
    world: FactsWorld, fake: FakeOpenAI, pages: Pages, branches: int, parallel: int, home: Path
) -> Run:
    settings = Settings(
        _env_file=None,
        openai_base_url=fake.base_url,
        openai_api_key="bench",
        home=home,
        max_nodes_per_plan=branches,
        max_parallel=parallel,
        web_poll_seconds=0.01,
        fetch_allow=f"127.0.0.1:{pages.port}",
        fetch_per_host_concurrency=8,
        fetch_per_host_rate=100,
    )
    limits = Limits(max_iterations=1, max_cost_usd=1000)
    question = "What is known about every aspect of X?"
    prepared = Prepared(settings, "web_only", limits, None, question, "openai")
    web = resolve(settings, "web_only", kb=False, web="openai")
    runtime = build(prepared, web, None, SessionStore(settings.sessions_dir))
    writer = TimedWriter(runtime.engine.writer)
    (inner,) = runtime.engine.checkers
    assert isinstance(inner, ClaimChecker)
    checker = TimedChecker(inner)
    engine = dataclasses.replace(runtime.engine, writer=writer, checkers=(checker,))
    state = runtime.state
    session = runtime.store.path(state.session_id)
    done_at: list[float] = []

    def on_event(event: str | JobEvent) -> None:
        if isinstance(event, str) and event.startswith("done "):
            done_at.append(time.monotonic())

    orch = ResearchOrchestrator(
        state,
        engine,
        runtime.checkpointer,  # the run's own: written to disk, off the loop, as a user's
        runtime.guard,
        runtime.config,
        on_event,
        evidence=runtime.evidence,
        claims=runtime.claims,
    )
    async with runtime.resources:
        started = time.perf_counter()
        await orch.run()
        run_wall = time.perf_counter() - started
        assert writer.report is not None
        recheck_seconds = await recheck(inner, state, writer.report, session)
    done = sum(1 for node in state.nodes.values() if node.status == "done")
    assert done == branches, f"{done}/{branches} done: {state.stop_reason} {state.stop_detail}"
    assert orch.report is not None
    assert done_at
    assert len(world.gathered) == len(world.facts), "a research job stated no facts"
    ledger = SessionClaims(session).load()
    assert ledger is not None, "the run's claim check wrote no claims.json"
    shown = sum(1 for line in orch.report.contradictions.splitlines() if line.startswith("- **"))
    assert shown == len(ledger.contradictions), "the report shows other contradictions"
    largest = max(prompt_chars(r.body) for r in fake.requests if r.method == "POST")
    return Run(
        world,
        writer.report,
        orch.report,
        ledger,
        largest,
        writer.written_at - max(done_at),
        run_wall,
        checker.seconds,
        recheck_seconds,
        world.calls,
        world.prompts,
    )


def cited(report: Report, markers: str) -> set[str]:
    """The URLs ``[n]`` markers resolve to."""
    return {
        report.sources[n - 1].url or ""
        for n in map(int, _NUMBER.findall(markers))
        if 1 <= n <= len(report.sources)
    }


def stated_per_fact(report: Report, world: FactsWorld) -> float:
    """How many times the body states each fact it states, in any form (its lead included:
    an answer restating a section's key point counts)."""
    found = world.statements(report.body)
    return len(found) / max(1, len({one.fact.index for one in found}))


def retention(report: Report, world: FactsWorld) -> float:
    """Share of the facts gathered that the body states, in any form the writers made of
    it, citing the fact's own page (a fact planted as a moved citation: any page)."""
    kept: set[int] = set()
    for found in world.statements(report.body):
        fact = found.fact
        url = world.gathered.get(fact.index)
        urls = cited(report, "".join(found.markers))
        if url is None or not urls:
            continue
        if url in urls or fact.kind == "moved_citation":
            kept.add(fact.index)
    return len(kept) / len(world.gathered)


def words_of(claim: str) -> str:
    """A claim's words as a fact's form is kept: markers and final period dropped."""
    return " ".join(MARKER.sub("", claim).split()).rstrip(" .")


def kind_of(claim: Claim, world: FactsWorld) -> str:
    """What ``claim`` (as first written) states: ``true``, ``reworded``, a fabrication
    kind, ``miscited`` (a true fact's words cited to another page, not planted so) or
    ``other`` (no fact of the world)."""
    found = world.forms.get(words_of(claim.revised_from or claim.text))
    if found is None:
        return "other"
    fact, form = found
    if form not in (STATED, REWORDED):
        return form
    urls = {s.url for s in claim.sources if s.url}
    if world.page_url(fact.index) not in urls:
        return "moved_citation" if fact.kind == "moved_citation" else "miscited"
    return "true" if form == STATED else "reworded"


def flagged(claim: Claim) -> bool:
    """The check did not find it supported (or sent it back, and it was rewritten)."""
    return claim.verdict != "supported" or bool(claim.revised_from)


def share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else float("nan")


def claim_figures(run: Run) -> dict[str, float]:
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for claim in run.ledger.claims:
        by_kind[kind_of(claim, run.world)].append(flagged(claim))
    fabricated = [flag for kind in KINDS for flag in by_kind[kind]]
    true = [flag for kind in TRUE_KINDS for flag in by_kind[kind]]
    claims = len(run.ledger.claims)
    return {
        "claims": claims,
        "judged": run.judged,
        "fabricated_claims": len(fabricated),
        "fabrications_flagged": share(fabricated),
        **{f"fabrications_flagged_{kind}": share(by_kind[kind]) for kind in KINDS},
        "true_claims": len(true),
        "true_claims_flagged": share(true),
        "reworded_flagged": share(by_kind["reworded"]),
        "miscited_claims": len(by_kind["miscited"]),
        "other_claims": len(by_kind["other"]),
        "check_seconds_in_run": run.check_seconds,
        "check_ms_per_claim_in_run": 1000 * run.check_seconds / max(1, claims),
        "check_ms_per_claim_cached_pages": 1000 * run.recheck_seconds / max(1, claims),
        "check_share_of_wall": run.check_seconds / run.run_wall,
        "run_wall_48_seconds": run.run_wall,
    }


def contradiction_figures(run: Run) -> dict[str, float]:
    """Which pairs the run's own contradiction finder reported (the session's
    ``claims.json``): a contradiction whose two sides are a pair's two sentences."""
    reported: set[int] = set()
    other = 0
    for found in run.ledger.contradictions:
        a = run.world.sides.get(words_of(found.first.finding))
        b = run.world.sides.get(words_of(found.second.finding))
        if a is not None and b is not None and a.pair is b.pair and a.side != b.side:
            reported.add(a.pair.index)
        else:
            other += 1
    planted = {p.index for p in run.world.pairs if p.planted}
    lookalike = {p.index for p in run.world.pairs if not p.planted}
    return {
        "contradictions": len(run.ledger.contradictions),
        "contradictions_found": len(reported & planted) / len(planted),
        "false_contradictions": len(reported & lookalike) / len(lookalike),
        "other_contradictions": other,
    }


def sections(body: str) -> int:
    heads = re.findall(r"^## +(.+?)\s*$", body, re.MULTILINE)
    return sum(1 for h in heads if h not in BOOKKEEPING)


def words(body: str) -> int:
    return len(body.split())


def bench_report(
    few: int,
    many: int,
    facts: int,
    latency: float,
    runs: int = 1,
    parallel: int = 12,
    judge: str = "abstain",
) -> dict[str, float]:
    """The figures keep their names at other sizes (the smoke run's). The walls and the
    check's times are medians of ``runs`` runs at the larger size; the other figures are of
    its first run (the copier is deterministic: they do not vary)."""
    with tempfile.TemporaryDirectory() as tmp:
        small = asyncio.run(run_once(few, facts, latency, parallel, Path(tmp) / "few", judge=judge))
        larges = [
            asyncio.run(
                run_once(
                    many, facts, latency, parallel, Path(tmp) / f"many{i}", pairs=True, judge=judge
                )
            )
            for i in range(runs)
        ]
    large = larges[0]
    for label, run in (("few", small), ("many", large)):
        roles = sorted(run.prompts.items(), key=lambda kv: -kv[1])
        print(f"{label:>5} largest prompts: " + ", ".join(f"{r} {c}" for r, c in roles))
    for claim in large.ledger.claims:  # on stderr: what the check got wrong, for a reader
        kind = kind_of(claim, large.world)
        if (kind in KINDS) != flagged(claim) or kind in ("miscited", "other"):
            print(f"{kind}: {claim.verdict}: {claim.text}", file=sys.stderr)
    for found in large.ledger.contradictions:  # on stderr too: every contradiction reported
        print(
            f"contradiction: {found.conflict}: {found.first.finding} | {found.second.finding}",
            file=sys.stderr,
        )
    write_wall = statistics.median(run.write_wall for run in larges)
    checked = claim_figures(large)
    for key in ("check_ms_per_claim_in_run", "check_ms_per_claim_cached_pages"):
        checked[key] = statistics.median(claim_figures(run)[key] for run in larges)
    checked["check_share_of_wall"] = statistics.median(
        claim_figures(run)["check_share_of_wall"] for run in larges
    )
    return {
        "evidence_retention_12": retention(small.written, small.world),
        "evidence_retention_48": retention(large.written, large.world),
        "stated_per_fact_12": stated_per_fact(small.written, small.world),
        "stated_per_fact_48": stated_per_fact(large.written, large.world),
        "largest_prompt_chars_12": small.largest_prompt,
        "largest_prompt_chars_48": large.largest_prompt,
        "largest_prompt_ratio_48_over_12": large.largest_prompt / small.largest_prompt,
        "report_words_12": words(small.written.body),
        "report_words_48": words(large.written.body),
        "report_words_48_over_12": words(large.written.body) / words(small.written.body),
        "sections_48": sections(large.written.body),
        "write_wall_48_seconds": write_wall,
        "write_wall_over_one_call": write_wall / latency,
        **checked,
        **contradiction_figures(large),
    }


KEYS = (
    "evidence_retention_12",
    "evidence_retention_48",
    "stated_per_fact_12",
    "stated_per_fact_48",
    "largest_prompt_ratio_48_over_12",
    "report_words_48_over_12",
    "sections_48",
    "write_wall_48_seconds",
    "write_wall_over_one_call",
    "claims",
    "judged",
    "fabricated_claims",
    "fabrications_flagged",
    *(f"fabrications_flagged_{kind}" for kind in KINDS),
    "true_claims",
    "true_claims_flagged",
    "reworded_flagged",
    "miscited_claims",
    "other_claims",
    "check_ms_per_claim_in_run",
    "check_ms_per_claim_cached_pages",
    "check_share_of_wall",
    "contradictions",
    "contradictions_found",
    "false_contradictions",
    "other_contradictions",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--runs", type=int, default=3, help="runs at 48 branches (median wall)")
    parser.add_argument("--smoke", action="store_true", help="once, toy sizes, in seconds")
    parser.add_argument("--facts", type=int, default=5, help="facts per research job (K)")
    parser.add_argument(
        "--judge",
        choices=("abstain", *JUDGES),
        default="abstain",
        help="the claims' judge: abstains, or calls every claim it is asked about supported "
        "(quoting nothing, the wrong sentence, or the right one)",
    )
    args = parser.parse_args()
    if args.smoke:
        figures = bench_report(3, 6, facts=2, latency=0.01, judge=args.judge)
    else:
        figures = bench_report(
            12, 48, facts=args.facts, latency=0.1, runs=args.runs, judge=args.judge
        )
    for key, value in figures.items():
        print(f"{key:>32}: {value:.3f}", flush=True)
    if args.json:
        print(json.dumps({k: round(figures[k], 4) for k in KEYS}))


if __name__ == "__main__":
    main()
