"""Report benchmark: how much of the research reaches the report (today's baseline).

    python bench/report.py            # human-readable figures
    python bench/report.py --json     # ... and a last line with one JSON object
    python bench/report.py --smoke    # every figure once, at toy sizes: does it still run?

The whole engine runs end to end (``wiring.build`` from Settings, the orchestrator, the real
OpenAI-research branch executor, the real report) against the loopback fake OpenAI server
in facts mode (``bench/facts.py``): a plan of N independent web sub-questions, one
iteration (the judge then says complete); each research job states K distinct facts, each
with a unique tag, number and cited URL; every chat call is a faithful copier that keeps
the facts of its prompt, with their citation markers, in order, within its token cap and
the limits its prompt states. 100 ms latency per call. N = 12 and 48, K = 5, 12 branches in
parallel.

The report's *body* is its lead and sections (``Report.body``): the engine's own
bookkeeping (status, coverage, citation check), the numbered sources and the "Findings by
sub-question" appendix are not counted.

Figures (targets from the issue; measured from outside before this work in brackets):
- evidence_retention_12      share of the facts gathered that the body states with a
                             citation resolving to that fact's own URL (``[n]`` ->
                             ``Report.sources[n - 1]``), 12 branches          >= 0.95 (0.82)
- evidence_retention_48      the same, 48 branches                           >= 0.90 (0.20)
- largest_prompt_ratio_48_over_12  largest prompt (characters) of any model call, 48
                             branches over 12                                  <= 1.3
- report_words_48_over_12    body words, 48 branches over 12                   >= 2.5
- sections_48                ``##`` sections of the body at 48 branches, the engine's own
                             "Coverage and limitations" and "Citation check" not counted
                                                                               >= 4
- write_wall_48_seconds      48 branches: from the last branch done (its event) to the
                             report written (the writer returning)
- write_wall_over_one_call   that / one call's latency (0.1 s)                 <= 4
                             (the wall is the median of --runs runs, 3 by default)
The human-readable output also names each chat role's largest prompt at both sizes. At
K = 5 a branch's notes are ~50 tokens, so 12 branches fill none of the fixed budgets (the
2,000-token rolling summary that the judge and the summarizer read is at ~590 tokens, the
outline's 2,500-token catalog at ~a third): the ratio above measures budgets filling between
12 and 48, not a prompt outgrowing its budget (with real notes the summarizer's prompt is
the same at 5 nodes as at 50: bench/engine.py). ``--facts`` sets K (at 25 every budget
fills at both sizes, the ratio is 1.01, and sections overflow their own budget and are
condensed when the run has money and tokens left over).
Today's code misses several targets: this bench measures the baseline the next work must
raise. --smoke computes the same figures once at toy sizes (N = 3 and 6, K = 2, 10 ms a
call; the test suite runs it): its values are not the targets'.
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
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.facts import FactsWorld, Gathered
from bench.prompt_growth import prompt_chars
from deep_research.app.config import Settings
from deep_research.app.wiring import build
from deep_research.core.models import Limits, SessionState, Writing
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import JobEvent, Meter, ReportWriter, WriteJob
from deep_research.core.report import Report
from tests.fake_openai import FakeOpenAI
from tests.fakes import MemorySaver

BOOKKEEPING = ("Coverage and limitations", "Citation check")
"""Sections the report adds itself, whatever was found: not counted as the report's own."""
_STATED = re.compile(r"(FACT-\d{2,}-\d+)\b(?:(?!FACT-)[^\[\n])*?\b(\d{4,})\b((?:\s*\[\d+\])*)")
_NUMBER = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Run:
    gathered: dict[str, Gathered]
    report: Report
    largest_prompt: int
    write_wall: float
    calls: dict[str, int]
    prompts: dict[str, int]
    """Each chat role's largest prompt (characters): which call is the largest, and why."""


class TimedWriter:
    """The engine's writer, noting when the report is written."""

    def __init__(self, inner: ReportWriter) -> None:
        self.inner = inner
        self.written_at = 0.0

    async def outline(self, state: SessionState, meter: Meter) -> Writing | None:
        return await self.inner.outline(state, meter)

    async def write(self, job: WriteJob) -> Report:
        report = await self.inner.write(job)
        self.written_at = time.monotonic()
        return report


async def run_once(branches: int, facts: int, latency: float, parallel: int, home: Path) -> Run:
    world = FactsWorld(branches, facts)
    with FakeOpenAI(polls_to_complete=1) as fake:
        world.install(fake)
        fake.latency = latency
        settings = Settings(
            _env_file=None,
            openai_base_url=fake.base_url,
            openai_api_key="bench",
            home=home,
            max_nodes_per_plan=branches,
            max_parallel_branches=parallel,
            web_poll_seconds=0.01,
        )
        built = build(settings, "web_only", None, extractive=False, engine="openai")
        writer = TimedWriter(built.engine.writer)
        engine = dataclasses.replace(built.engine, writer=writer)
        state = SessionState(
            session_id=f"{branches:012d}",
            question="What is known about every aspect of X?",
            limits=Limits(max_iterations=1, max_cost_usd=1000),
        )
        done_at: list[float] = []

        def on_event(event: str | JobEvent) -> None:
            if isinstance(event, str) and event.startswith("done "):
                done_at.append(time.monotonic())

        orch = ResearchOrchestrator(
            state, engine, MemorySaver(), built.guard(state), built.config, on_event
        )
        async with built.resources:
            await orch.run()
        done = sum(1 for node in state.nodes.values() if node.status == "done")
        assert done == branches, f"{done}/{branches} done: {state.stop_reason} {state.stop_detail}"
        assert orch.report is not None
        assert done_at
        assert len(world.gathered) == branches * facts, "a research job stated no facts"
        largest = max(prompt_chars(r.body) for r in fake.requests if r.method == "POST")
        return Run(
            world.gathered,
            orch.report,
            largest,
            writer.written_at - max(done_at),
            world.calls,
            world.prompts,
        )


def retention(report: Report, gathered: dict[str, Gathered]) -> float:
    """Share of the facts the body states (tag and number) citing the fact's own URL."""
    kept: set[str] = set()
    for tag, value, markers in _STATED.findall(report.body):
        fact = gathered.get(tag)
        if fact is None or value != fact.value:
            continue
        urls = {
            report.sources[n - 1].url
            for n in map(int, _NUMBER.findall(markers))
            if 1 <= n <= len(report.sources)
        }
        if fact.url in urls:
            kept.add(tag)
    return len(kept) / len(gathered)


def sections(body: str) -> int:
    heads = re.findall(r"^## +(.+?)\s*$", body, re.MULTILINE)
    return sum(1 for h in heads if h not in BOOKKEEPING)


def words(body: str) -> int:
    return len(body.split())


def bench_report(
    few: int, many: int, facts: int, latency: float, runs: int = 1, parallel: int = 12
) -> dict[str, float]:
    """The figures keep their names at other sizes (the smoke run's). The write wall is the
    median of ``runs`` runs at the larger size; the other figures are of its first run (the
    copier is deterministic: they do not vary)."""
    with tempfile.TemporaryDirectory() as tmp:
        small = asyncio.run(run_once(few, facts, latency, parallel, Path(tmp) / "few"))
        larges = [
            asyncio.run(run_once(many, facts, latency, parallel, Path(tmp) / f"many{i}"))
            for i in range(runs)
        ]
    large = larges[0]
    for label, run in (("few", small), ("many", large)):
        roles = sorted(run.prompts.items(), key=lambda kv: -kv[1])
        print(f"{label:>5} largest prompts: " + ", ".join(f"{r} {c}" for r, c in roles))
    write_wall = statistics.median(run.write_wall for run in larges)
    return {
        "evidence_retention_12": retention(small.report, small.gathered),
        "evidence_retention_48": retention(large.report, large.gathered),
        "largest_prompt_chars_12": small.largest_prompt,
        "largest_prompt_chars_48": large.largest_prompt,
        "largest_prompt_ratio_48_over_12": large.largest_prompt / small.largest_prompt,
        "report_words_12": words(small.report.body),
        "report_words_48": words(large.report.body),
        "report_words_48_over_12": words(large.report.body) / words(small.report.body),
        "sections_48": sections(large.report.body),
        "write_wall_48_seconds": write_wall,
        "write_wall_over_one_call": write_wall / latency,
    }


KEYS = (
    "evidence_retention_12",
    "evidence_retention_48",
    "largest_prompt_ratio_48_over_12",
    "report_words_48_over_12",
    "sections_48",
    "write_wall_48_seconds",
    "write_wall_over_one_call",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--runs", type=int, default=3, help="runs at 48 branches (median wall)")
    parser.add_argument("--smoke", action="store_true", help="once, toy sizes, in seconds")
    parser.add_argument("--facts", type=int, default=5, help="facts per research job (K)")
    args = parser.parse_args()
    if args.smoke:
        figures = bench_report(3, 6, facts=2, latency=0.01)
    else:
        figures = bench_report(12, 48, facts=args.facts, latency=0.1, runs=args.runs)
    for key, value in figures.items():
        print(f"{key:>32}: {value:.3f}", flush=True)
    if args.json:
        print(json.dumps({k: round(figures[k], 4) for k in KEYS}))


if __name__ == "__main__":
    main()
