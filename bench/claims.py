"""The claim check on planted fabrications and contradictions: what share of the altered
claims it flags, what share of the true ones it flags by mistake, and its time per claim.

    python bench/claims.py --json            # 48 branches x 5 facts
    python bench/claims.py --smoke --json    # a few facts (the test suite runs this)

The report is what a writer made of the research: each branch's research job stated K facts
(a unique name, a unique number, its own page), each cited to its page as a research job
cites — the page's address and the job's own sentence, no page text. The pages are served
on loopback and read through the page reader (``DEEP_RESEARCH_FETCH_ALLOW``'s address
exemption), as the check reads any cited page. In the report:

- 15 % of the facts are fabricated, in five kinds, one fifth each: a changed number, a
  flipped negation, a swapped entity (another fact's name), a citation moved to another
  fact's page, an unsupported clause added;
- 30 % of the true facts are reworded (the same fact, other words and order);
- the rest are stated as the job stated them.

Printed: ``fabrications_flagged`` overall and per kind (flagged: any verdict but
``supported``; targets ≥ 0.95), ``true_claims_flagged`` (target ≤ 0.05) and the share among
reworded facts, ``contradictions_found`` (10 planted pairs of evidence findings, target ≥ 0.9)
and ``false_contradictions`` (10 pairs that only look alike: the same subject another year,
or another subject; target ≤ 0.1) — the pairs of ``bench.planted.pairs``, given to the
finder as evidence units here (``bench/report.py`` has research jobs state them in a full
run) — and the check's time per claim with the pages already read (median of 3) and with
them read for the first time.

Then the check again with each judge fake of ``bench.planted.JUDGES`` settling the uncertain
verdicts: each answers "supported" to every claim it is asked about, quoting nothing, the
wrong sentence of the passage, or the right one. ``fabrications_flagged[J]`` (and per kind)
and ``true_claims_flagged[J]`` must hold the same targets: a judge's word alone overrules
nothing the code found (``adapters.claims.bound``); ``judged[J]`` counts what it was asked.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.planted import JUDGES, KINDS, Fact, Pages, judge_quote, pairs, plant  # noqa: E402
from deep_research.adapters.claim_check import ClaimChecker  # noqa: E402
from deep_research.adapters.claims import JudgeVerdict, ToJudge  # noqa: E402
from deep_research.adapters.contradictions import contradictions  # noqa: E402
from deep_research.adapters.web.reader import PageReader, ReaderSettings  # noqa: E402
from deep_research.core.ledger import ClaimLedger  # noqa: E402
from deep_research.core.models import (  # noqa: E402
    Citation,
    EvidenceSource,
    EvidenceUnit,
    SessionState,
)
from deep_research.core.ports import CheckJob  # noqa: E402
from deep_research.core.report import Report, ReportSection  # noqa: E402
from tests.fakes import RecordingMeter  # noqa: E402

# --- the report -----------------------------------------------------------------------------


def report_of(facts: list[Fact], pages: Pages, per_section: int) -> Report:
    sources = [
        Citation(ref=f"S{f.index + 1}", kind="web", url=pages.url(f.index), claim=f.stated)
        for f in facts
    ]
    sections = []
    for start in range(0, len(facts), per_section):
        group = facts[start : start + per_section]
        body = " ".join(f"{f.written.rstrip('.')} [{f.cites + 1}]." for f in group)
        sections.append(ReportSection(title=f"Branch {start // per_section + 1}", body=body))
    return Report(title="bench", status="", sections=sections, sources=sources)


class Ledger:
    """A ``ClaimStore`` that keeps the ledger in memory (no cache between timed checks)."""

    def __init__(self) -> None:
        self.ledger: ClaimLedger | None = None

    def units(self) -> list[EvidenceUnit]:
        return []

    def load(self) -> ClaimLedger | None:
        return None

    def save(self, ledger: ClaimLedger) -> None:
        self.ledger = ledger


# --- judge fakes ------------------------------------------------------------------------------


@dataclass
class YesJudge:
    """A ``SupportJudge`` that answers "supported" to everything, quoting as ``kind`` says
    (``bench.planted.JUDGES``)."""

    kind: str
    asked: int = 0

    async def judge(self, claims: Sequence[ToJudge]) -> list[JudgeVerdict | None]:
        self.asked += len(claims)
        return [
            JudgeVerdict(verdict="supported", explanation="yes", model="judge", quote=self.quote(c))
            for c in claims
        ]

    def quote(self, item: ToJudge) -> str:
        return judge_quote(self.kind, item.claim, item.passages)


async def check(
    report: Report, reader: PageReader, judge: YesJudge | None = None
) -> tuple[ClaimLedger, float]:
    store = Ledger()

    async def save() -> None:
        pass

    loop = asyncio.get_running_loop()
    job = CheckJob(
        state=SessionState(session_id="bench", question="bench"),
        report=report,
        meter=RecordingMeter(budget=0.0),  # the judge fakes cost nothing
        save=save,
        deadline=loop.time() + 3600,
        money=0.0,
        store=store,
    )
    started = time.perf_counter()
    judged = None if judge is None else (lambda _meter: judge)
    await ClaimChecker(reader=reader, fetch_workers=8, judge=judged).check(job)
    assert store.ledger is not None
    return store.ledger, time.perf_counter() - started


# --- contradictions -------------------------------------------------------------------------


def contradiction_pairs(seed: int = 11) -> tuple[list[EvidenceUnit], set[frozenset[str]], int]:
    """Units of the 10 planted pairs and 10 look-alike pairs of ``bench.planted.pairs``
    (each side a unit of its own node, with its own ref); the planted pairs' id sets; how
    many look-alike pairs there are."""
    units: list[EvidenceUnit] = []
    planted: set[frozenset[str]] = set()
    found = pairs(seed)
    for pair in found:
        k = pair.index
        ids = []
        for side, text in enumerate(pair.sides):
            ref = f"S{100 + 2 * k + side}"
            unit_id = f"c{k}.{side}"
            units.append(
                EvidenceUnit(
                    id=unit_id,
                    node_id=f"c{k}x{side}",
                    question="q",
                    finding=f"{text} [{ref}]",
                    refs=[ref],
                    sources=[EvidenceSource(ref=ref, text=text)],
                )
            )
            ids.append(unit_id)
        if pair.planted:
            planted.add(frozenset(ids))
    return units, planted, sum(1 for pair in found if not pair.planted)


# --- the run ----------------------------------------------------------------------------------


async def measure(
    branches: int, facts_per_branch: int, repeats: int
) -> tuple[dict[str, float], dict[str, Any]]:
    """The figures, and the claims it got wrong (some of each, for a reader)."""
    facts = plant(branches * facts_per_branch)
    pages = Pages(facts)
    reader = PageReader(
        ReaderSettings(
            allow=(f"127.0.0.1:{pages.port}",),
            per_host_concurrency=8,
            per_host_rate=200.0,
            trust_env=False,
        )
    )
    try:
        report = report_of(facts, pages, facts_per_branch)
        ledger, cold = await check(report, reader)
        warm = [(await check(report, reader))[1] for _ in range(repeats)]
        judges = {kind: YesJudge(kind) for kind in JUDGES}
        judged = {kind: (await check(report, reader, judge))[0] for kind, judge in judges.items()}
    finally:
        await reader.aclose()
        pages.close()
    verdicts = [c.verdict for c in ledger.claims]
    fabricated, true, by_kind = flagged(facts, ledger)
    with_judges: dict[str, float] = {}
    for kind, found in judged.items():
        fabricated_j, true_j, by_kind_j = flagged(facts, found)
        with_judges |= {
            f"judged[{kind}]": judges[kind].asked,
            f"fabrications_flagged[{kind}]": round(sum(fabricated_j) / len(fabricated_j), 3),
            **{
                f"fabrications_flagged_{k}[{kind}]": round(sum(by_kind_j[k]) / len(by_kind_j[k]), 3)
                for k in KINDS
                if by_kind_j[k]
            },
            f"true_claims_flagged[{kind}]": round(sum(true_j) / len(true_j), 3),
        }
    missed = [
        {"kind": f.kind, "written": f.written, "verdict": v}
        for f, v in zip(facts, verdicts, strict=True)
        if f.flagged_expected and v == "supported"
    ]
    false_flags = [
        {"kind": f.kind, "written": f.written, "verdict": v}
        for f, v in zip(facts, verdicts, strict=True)
        if not f.flagged_expected and v != "supported"
    ]

    units, planted, lookalikes = contradiction_pairs()
    found = {frozenset((c.first.unit_id, c.second.unit_id)) for c in contradictions(units)}
    claims = len(ledger.claims)
    return {
        "branches": branches,
        "facts": len(facts),
        "fabrications": len(fabricated),
        "fabrications_flagged": round(sum(fabricated) / len(fabricated), 3),
        **{
            f"fabrications_flagged_{k}": round(sum(by_kind[k]) / len(by_kind[k]), 3)
            for k in KINDS
            if by_kind[k]
        },
        "true_claims": len(true),
        "true_claims_flagged": round(sum(true) / len(true), 3),
        "reworded_flagged": round(sum(by_kind["reworded"]) / max(1, len(by_kind["reworded"])), 3),
        "contradictions_found": round(len(found & planted) / len(planted), 3),
        "false_contradictions": round(len(found - planted) / lookalikes, 3),
        "check_ms_per_claim_cached_pages": round(1000 * statistics.median(warm) / claims, 1),
        "check_ms_per_claim_first_read": round(1000 * cold / claims, 1),
        "check_seconds_first_read": round(cold, 2),
        **with_judges,
    }, {"missed": missed[:10], "false_flags": false_flags[:10]}


def flagged(
    facts: list[Fact], ledger: ClaimLedger
) -> tuple[list[bool], list[bool], dict[str, list[bool]]]:
    """Whether each claim is flagged (any verdict but ``supported``): the fabrications', the
    true facts', and by kind."""
    flags = [c.verdict != "supported" for c in ledger.claims]
    assert len(flags) == len(facts), (len(flags), len(facts))
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for fact, flag in zip(facts, flags, strict=True):
        by_kind[fact.kind].append(flag)
    fabricated = [flag for k in KINDS for flag in by_kind[k]]
    return fabricated, by_kind["true"] + by_kind["reworded"], by_kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help="a few facts, one timed repeat")
    parser.add_argument("--branches", type=int, default=48)
    parser.add_argument("--facts", type=int, default=5, help="facts per branch")
    args = parser.parse_args()
    branches, repeats = (4, 1) if args.smoke else (args.branches, 3)
    figures, wrong = asyncio.run(measure(branches, args.facts, repeats))
    for key, claims in wrong.items():  # on stderr: stdout is the figures
        for claim in claims:
            print(
                f"{key}: {claim['kind']}: {claim['written']} ({claim['verdict']})", file=sys.stderr
            )
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:>36}: {value}")


if __name__ == "__main__":
    main()
