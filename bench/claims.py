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
or another subject; target ≤ 0.1), and the check's time per claim with the pages already
read (median of 3) and with them read for the first time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deep_research.adapters.claim_check import ClaimChecker  # noqa: E402
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

KINDS = ("number", "negation", "entity", "moved_citation", "added_clause")
FABRICATED = 0.15
REWORDED = 0.30

# --- the facts ------------------------------------------------------------------------------

SYLLABLES = ("ka", "lo", "mir", "vet", "sun", "dra", "pel", "quo", "tan", "zer", "bri", "om")


@dataclass(frozen=True)
class Template:
    stated: str
    """As the research job stated it: {name} and {n} filled in."""
    reworded: str
    negated: str
    clause: str
    """An unsupported clause to add (after a comma)."""


TEMPLATES = (
    Template(
        "The {name} index stores its vectors in {n} shards by default.",
        "By default, {n} shards hold the vectors of the {name} index.",
        "The {name} index does not store its vectors in {n} shards by default.",
        "which made it the fastest index measured by the Linux Foundation that year",
    ),
    Template(
        "The {name} scheduler retries a failed task {n} times before giving up.",
        "Before giving up on a failed task, the {name} scheduler retries it {n} times.",
        "The {name} scheduler never retries a failed task {n} times before giving up.",
        "a limit that Google adopted for its own internal batch systems",
    ),
    Template(
        "The {name} cache keeps each entry for {n} seconds after its last read.",
        "Each entry stays in the {name} cache for {n} seconds after it was last read.",
        "The {name} cache does not keep each entry for {n} seconds after its last read.",
        "which halved the memory use reported by its largest customers",
    ),
    Template(
        "The {name} parser was rewritten in Rust and now reads {n} megabytes per second.",
        "Rewritten in Rust, the {name} parser now reads {n} megabytes per second.",
        "The {name} parser was not rewritten in Rust and reads {n} megabytes per second.",
        "twice the speed of every other open-source parser",
    ),
    Template(
        "The {name} protocol sends a heartbeat to every peer each {n} milliseconds.",
        "Every {n} milliseconds, the {name} protocol sends each peer a heartbeat.",
        "The {name} protocol does not send a heartbeat to every peer each {n} milliseconds.",
        "as the IETF working group required in its final draft",
    ),
)
FILLER = (
    "This page describes the {name} project, its design and its defaults.",
    "The project is maintained by a small team of volunteers and documented in the open.",
    "Its configuration lives in a single file that the service reads when it starts.",
    "Operators can change most settings without restarting the service.",
)


@dataclass
class Fact:
    index: int
    name: str
    number: int
    template: Template
    kind: str = "true"
    """"true", "reworded" or a fabrication kind."""
    written: str = ""
    """What the report states."""
    cites: int = 0
    """The fact whose page the report cites for it."""

    @property
    def stated(self) -> str:
        return self.template.stated.format(name=self.name, n=f"{self.number:,}")

    @property
    def flagged_expected(self) -> bool:
        return self.kind in KINDS


def names(count: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if name not in out:
            out.append(name)
    return out


def plant(count: int, seed: int = 7) -> list[Fact]:
    rng = random.Random(seed)
    facts = [
        Fact(i, name, rng.randrange(12, 9_000), TEMPLATES[i % len(TEMPLATES)], cites=i)
        for i, name in enumerate(names(count, rng))
    ]
    order = list(range(count))
    rng.shuffle(order)
    fabricated = order[: max(len(KINDS), round(FABRICATED * count))]
    for k, i in enumerate(fabricated):
        facts[i].kind = KINDS[k % len(KINDS)]
    true = [i for i in order if facts[i].kind == "true"]
    for i in true[: round(REWORDED * len(true))]:
        facts[i].kind = "reworded"
    for fact in facts:
        fact.written = write(fact, facts, rng)
    return facts


def write(fact: Fact, facts: list[Fact], rng: random.Random) -> str:
    t, n = fact.template, f"{fact.number:,}"
    other = facts[(fact.index + 1 + rng.randrange(len(facts) - 1)) % len(facts)]
    if fact.kind == "reworded":
        return t.reworded.format(name=fact.name, n=n)
    if fact.kind == "number":
        changed = fact.number + rng.choice((-1, 1)) * rng.randrange(3, max(4, fact.number // 2))
        return t.stated.format(name=fact.name, n=f"{max(2, changed):,}")
    if fact.kind == "negation":
        return t.negated.format(name=fact.name, n=n)
    if fact.kind == "entity":
        return t.stated.format(name=other.name, n=n)
    if fact.kind == "moved_citation":
        fact.cites = other.index
        return fact.stated
    if fact.kind == "added_clause":
        return fact.stated.rstrip(".") + ", " + t.clause + "."
    return fact.stated


def page_html(fact: Fact) -> str:
    lines = [f.format(name=fact.name) for f in FILLER]
    lines.insert(2, fact.stated)
    body = "".join(f"<p>{line}</p>" for line in lines)
    return (
        f"<html><head><title>{fact.name}</title></head><body><article><h1>{fact.name}</h1>"
        f"{body}</article></body></html>"
    )


# --- the loopback pages ---------------------------------------------------------------------


class Pages:
    def __init__(self, facts: list[Fact]) -> None:
        pages = {f"/f{f.index}": page_html(f).encode() for f in facts}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                page = pages.get(self.path)
                self.send_response(200 if page else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(page or b"not found")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.port}/f{index}"

    def close(self) -> None:
        self.server.shutdown()


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


async def check(report: Report, reader: PageReader) -> tuple[ClaimLedger, float]:
    store = Ledger()

    async def save() -> None:
        pass

    loop = asyncio.get_running_loop()
    job = CheckJob(
        state=SessionState(session_id="bench", question="bench"),
        report=report,
        meter=RecordingMeter(budget=0.0),  # no judge: the text verifier decides
        save=save,
        deadline=loop.time() + 3600,
        money=0.0,
        store=store,
    )
    started = time.perf_counter()
    await ClaimChecker(reader=reader, fetch_workers=8).check(job)
    assert store.ledger is not None
    return store.ledger, time.perf_counter() - started


# --- contradictions -------------------------------------------------------------------------

PAIRS = (
    ("The {a} plant employed {n} workers in 2021.", "The {a} plant employed {m} workers in 2021."),
    ("The {a} treaty was signed in {y}.", "The {a} treaty was signed in {z}."),
    (
        "The {a} service supports IPv6 on every region.",
        "The {a} service does not support IPv6 on every region.",
    ),
    ("The {a} dam is {n} metres high.", "The {a} dam is {m} metres high."),
    (
        "The {a} library dropped Python 2 support in {y}.",
        "The {a} library dropped Python 2 support in {z}.",
    ),
)
LOOKALIKES = (
    ("The {a} plant employed {n} workers in 2021.", "The {a} plant employed {m} workers in 2023."),
    ("The {a} dam is {n} metres high.", "The {b} bridge is {m} metres long."),
    (
        "The {a} service supports IPv6 on every region.",
        "The {b} service does not support IPv4 on every region.",
    ),
    (
        "The {a} company reported revenue of ${n} million in 2019.",
        "The {a} company reported revenue of ${m} million in 2022.",
    ),
    (
        "The {a} library dropped Python 2 support in {y}.",
        "The {b} library dropped Python 2 support in {z}.",
    ),
)


def contradiction_pairs(seed: int = 11) -> tuple[list[EvidenceUnit], set[frozenset[str]], int]:
    """Units of 10 planted pairs and 10 look-alike pairs; the planted pairs' id sets; how
    many look-alike pairs there are."""
    rng = random.Random(seed)
    pool = names(40, rng)
    units: list[EvidenceUnit] = []
    planted: set[frozenset[str]] = set()
    for k in range(20):
        templates = PAIRS if k < 10 else LOOKALIKES
        first, second = templates[k % len(templates)]
        n = rng.randrange(100, 5000)
        y = rng.randrange(1960, 2015)
        values = {
            "a": pool[2 * k],
            "b": pool[2 * k + 1],
            "n": f"{n:,}",
            "m": f"{n + rng.randrange(50, 900):,}",
            "y": str(y),
            "z": str(y + rng.randrange(2, 9)),
        }
        ids = []
        for side, text in enumerate((first, second)):
            ref = f"S{100 + 2 * k + side}"
            unit_id = f"c{k}.{side}"
            units.append(
                EvidenceUnit(
                    id=unit_id,
                    node_id=f"c{k}x{side}",
                    question="q",
                    finding=f"{text.format(**values)} [{ref}]",
                    refs=[ref],
                    sources=[EvidenceSource(ref=ref, text=text.format(**values))],
                )
            )
            ids.append(unit_id)
        if k < 10:
            planted.add(frozenset(ids))
    return units, planted, 10


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
    finally:
        await reader.aclose()
        pages.close()
    verdicts = [c.verdict for c in ledger.claims]
    assert len(verdicts) == len(facts), (len(verdicts), len(facts))
    flagged = [v != "supported" for v in verdicts]
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for fact, flag in zip(facts, flagged, strict=True):
        by_kind[fact.kind].append(flag)
    fabricated = [flag for k in KINDS for flag in by_kind[k]]
    true = by_kind["true"] + by_kind["reworded"]
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
    }, {"missed": missed[:10], "false_flags": false_flags[:10]}


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
