"""Web branch benchmark: the search-and-read executor against loopback servers (issue #8, §6).

    python bench/web.py            # human-readable figures
    python bench/web.py --json     # ... and a last line with one JSON object
    python bench/web.py --smoke    # 3 hosts, short delays, once: does it still run?

Twelve fake web hosts, one per loopback address (127.0.0.2-127.0.0.13: politeness is per
host), serve small pages after 500 ms each; one fake SearXNG answers every search after
300 ms, its rate limit (100 a second) and the client's (50 a second) above the bench load.
A scripted planner emits 12 independent web sub-questions and the orchestrator runs them
(real session checkpoints on disk, budget guard, extractive summarizer, report author and
judge) with the real `SearchReadExecutor` and no model: each branch searches its question,
reads the 4 pages found, all on its own host, through the real `PageReader` (its defaults:
2 requests in flight and 2 a second per host, robots.txt included), ranks the passages
with the shipped local embedder and quotes the best. Every run has fresh servers, reader
and rate limits, and no result cache. Figures (targets):

- speedup_12_branches          wall time, max_parallel 1 / max_parallel 12          >= 8
- cpu_s_per_branch             process CPU seconds per branch, parallel runs (the
                               in-process loopback servers' threads included)
- max_requests_per_second_per_host  most requests one host's own log shows started
                               within any 1 s window (inclusive), parallel runs    <= 2.0
                               (the per-host rate setting)
- extraction_recall            share of the hand-written main-text sentences of the real
                               doc pages (tests/web_fixtures) the extractor keeps  >= 0.9
- boilerplate_share            share of extracted words outside the main text      <= 0.05
Recall and boilerplate are weighted by each page's main-text words. Timings are medians
of several runs on this (shared, noisy) machine, serial and parallel runs interleaved.
--smoke computes every figure once at the SMOKE scale (the test suite runs it): its values
are not the targets'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deep_research.adapters.branches.search_read import SearchLimits, SearchReadExecutor
from deep_research.adapters.extractive.roles import (
    ExtractiveAuthor,
    ExtractiveJudge,
    ExtractiveSummarizer,
)
from deep_research.adapters.prices import PriceTable
from deep_research.adapters.web.passages import split_passages
from deep_research.adapters.web.reader import PageReader, ReaderSettings
from deep_research.adapters.web.search import default_rate_limits, make_provider
from deep_research.core.engine import Engine, RunConfig
from deep_research.core.errors import KnowledgeBaseError
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import Limits, Plan, SessionState
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.writing import SectionedWriter
from deep_research.kb.embeddings import Embedder
from deep_research.kb.rank import rank
from deep_research.kb.static_embeddings import StaticEmbeddings
from deep_research.persistence.cache import normalize_query as normalize
from deep_research.persistence.checkpoints import Checkpointer
from deep_research.persistence.sessions import SessionStore
from tests.fake_search import Doc, FakeSearch
from tests.fake_web import FIXTURES, FakeWeb
from tests.fakes import FakePlanner, task
from tests.hash_embeddings import HashEmbeddings


@dataclass(frozen=True)
class Scale:
    """The bench's load: one web host (one loopback address) per branch."""

    branches: int = 12
    search_delay_s: float = 0.3
    page_delay_s: float = 0.5
    pages_per_branch: int = 4
    per_host_rate: float = 2.0

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(f"127.0.0.{i}" for i in range(2, 2 + self.branches))


FULL = Scale()
SMOKE = Scale(
    branches=3, search_delay_s=0.02, page_delay_s=0.05, pages_per_branch=2, per_host_rate=20.0
)
PER_HOST_CONCURRENCY = 2
CLIENT_SEARCH_RATE = 50.0  # searches a second the provider's bucket lets out
SERVER_SEARCH_LIMIT = 100  # ... and the fake SearXNG accepts, per second
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
KEYS = (
    "speedup_12_branches",
    "serial_s",
    "parallel_s",
    "cpu_s_per_branch",
    "max_requests_per_second_per_host",
    "per_host_rate",
    "max_in_flight_per_host",
    "extraction_recall",
    "boilerplate_share",
)


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    most_in_window: int
    """Most requests one host saw start within any 1 s window."""
    most_in_flight: int
    busiest: tuple[float, ...]
    """When the requests to that host started, seconds after its first."""


# --- the branch runs --------------------------------------------------------------------------


@contextmanager
def loopback(scale: Scale) -> Iterator[tuple[list[FakeWeb], FakeSearch]]:
    """Fresh servers: one web host per address, one search API; fails on their errors."""
    with ExitStack() as stack:
        webs = [stack.enter_context(FakeWeb(address=address)) for address in scale.hosts]
        for web in webs:
            web.page_delay = scale.page_delay_s
        search = stack.enter_context(FakeSearch())
        search.delay = scale.search_delay_s
        search.limit(SERVER_SEARCH_LIMIT, 1.0)
        yield webs, search
        errors = [e for web in webs for e in web.errors] + search.errors
        if errors:
            raise RuntimeError("the loopback servers saw errors:\n" + "\n".join(errors))


def question(n: int) -> str:
    return f"How does web host {n} keep every reader within its limits per host?"


async def drive(
    webs: list[FakeWeb],
    search: FakeSearch,
    parallel: int,
    embedder: Embedder,
    home: Path,
    scale: Scale,
) -> tuple[float, float]:
    """One research run of a web branch per host: (wall seconds, process CPU seconds)."""
    for n, web in enumerate(webs):
        search.corpus[normalize(question(n))] = [
            Doc(web.url(f"/page/{n * 100 + i}.html"), f"Page {i} of host {n}", "About limits.")
            for i in range(scale.pages_per_branch)
        ]
    searcher = make_provider(
        "searxng",
        limits=default_rate_limits({"searxng": CLIENT_SEARCH_RATE}),
        base_url=search.url(),
    )
    reader = PageReader(
        ReaderSettings(
            allow=tuple(web.netloc for web in webs),
            per_host_concurrency=PER_HOST_CONCURRENCY,
            per_host_rate=scale.per_host_rate,
            trust_env=False,
        )
    )
    executor = SearchReadExecutor(
        searcher,
        reader,
        rank=lambda query, passages: rank(query, passages, embedder),
        split=split_passages,
        writer=None,
        query_writer=None,
        limits=SearchLimits(pages_per_round=scale.pages_per_branch),
    )
    tasks = [task(f"w{n}", question=question(n)) for n in range(len(webs))]
    state = SessionState(session_id="e" * 12, question="bench?", limits=Limits(max_iterations=1))
    engine = Engine(
        FakePlanner([Plan(rationale="scripted", tasks=tasks)]),
        executor,
        ExtractiveSummarizer(),
        ExtractiveJudge(),
        writer=SectionedWriter(ExtractiveAuthor()),
    )
    store = SessionStore(home)
    (home / state.session_id).mkdir(parents=True)
    config = RunConfig(max_parallel=parallel, max_nodes_per_plan=len(tasks), max_depth=3)
    guard = BudgetGuard(state, state.limits, prices=PriceTable())
    orch = ResearchOrchestrator(state, engine, Checkpointer(store), guard, config)
    try:
        cpu, start = time.process_time(), time.perf_counter()
        await orch.run()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    finally:
        await reader.aclose()
        await searcher.aclose()
    failed = {n.id: n.error for n in state.nodes.values() if n.status != "done"}
    assert not failed, f"bench branches did not finish: {failed}"
    return wall, cpu


def run_once(parallel: int, embedder: Embedder, scale: Scale) -> Run:
    with loopback(scale) as (webs, search), tempfile.TemporaryDirectory() as tmp:
        wall, cpu = asyncio.run(drive(webs, search, parallel, embedder, Path(tmp), scale))
        for web in webs:
            pages = [p for p in web.paths() if p.startswith("/page/")]
            assert len(pages) == scale.pages_per_branch, f"{web.hostname} served {pages}"
        busiest = max(webs, key=lambda web: web.max_in_window(1.0, web.hostname))
        starts = sorted(hit.started for hit in busiest.hits)
        return Run(
            wall,
            cpu,
            busiest.max_in_window(1.0, busiest.hostname),
            max(web.max_in_flight(web.hostname) for web in webs),
            tuple(t - starts[0] for t in starts),
        )


def bench_branches(runs: int, embedder: Embedder, scale: Scale) -> dict[str, float]:
    serial: list[Run] = []
    parallel: list[Run] = []
    for _ in range(runs):  # interleaved: the machine's noise falls on both alike
        serial.append(run_once(1, embedder, scale))
        parallel.append(run_once(scale.branches, embedder, scale))
    worst = max(parallel, key=lambda r: r.most_in_window)
    shown = " ".join(f"{t:.3f}" for t in worst.busiest)
    print(f"{'':>18}  the busiest host's requests started at {shown} s (robots.txt, then pages)")
    serial_s = statistics.median(r.wall_s for r in serial)
    parallel_s = statistics.median(r.wall_s for r in parallel)
    return {
        "serial_s": serial_s,
        "parallel_s": parallel_s,
        "speedup_12_branches": serial_s / parallel_s,
        "cpu_s_per_branch": statistics.median(r.cpu_s for r in parallel) / scale.branches,
        "max_requests_per_second_per_host": max(r.most_in_window for r in parallel),
        "per_host_rate": scale.per_host_rate,
        "max_in_flight_per_host": max(r.most_in_flight for r in parallel),
    }


# --- extraction quality (the measure of tests/test_reader.py) -----------------------------------

_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")


def words(text: str) -> list[str]:
    """Lower-case words, markdown escapes undone: formatting differences do not count."""
    return re.findall(r"\w+", _ESCAPED.sub(r"\1", text).lower())


def sentences(markdown: str) -> list[str]:
    """Sentences of prose, lines of code and tables: the units recall is counted in."""
    units: list[str] = []
    for block in re.split(r"\n\s*\n", markdown):
        if block.lstrip().startswith(("```", "|")):
            units += block.splitlines()
        else:
            units += re.split(r"(?<=[.!?:;])\s+|\n", block)
    return [unit for unit in units if words(unit)]


def inside(needle: list[str], haystack: list[str]) -> bool:
    return f" {' '.join(needle)} " in f" {' '.join(haystack)} "


def quality(extracted: str, expected: str) -> tuple[float, float]:
    """(recall of the expected sentences, share of extracted words not in the expected text)."""
    got, want = words(extracted), words(expected)
    expected_units = sentences(expected)
    kept = sum(inside(words(unit), got) for unit in expected_units)
    extra = sum(len(words(u)) for u in sentences(extracted) if not inside(words(u), want))
    return kept / len(expected_units), extra / max(1, len(got))


async def read_fixtures(web: FakeWeb, names: list[str]) -> list[str]:
    settings = ReaderSettings(allow=(web.netloc,), trust_env=False)
    async with PageReader(settings) as reader:
        return [(await reader.read(web.url(f"/docs/{name}.html"))).text for name in names]


def bench_extraction() -> dict[str, float]:
    names = sorted(p.stem for p in FIXTURES.glob("*.html"))
    with FakeWeb() as web:
        texts = asyncio.run(read_fixtures(web, names))
    rows = []
    for name, text in zip(names, texts, strict=True):
        expected = (FIXTURES / f"{name}.expected.md").read_text(encoding="utf-8")
        recall, boilerplate = quality(text, expected)
        rows.append((name, recall, boilerplate, len(words(expected))))
        print(f"{'':>18}  {name:<9} recall {recall:.3f}  boilerplate {boilerplate:.3f}")
    total = sum(n for *_, n in rows)
    return {
        "extraction_recall": sum(r * n for _, r, _, n in rows) / total,
        "boilerplate_share": sum(b * n for _, _, b, n in rows) / total,
    }


# --- main -------------------------------------------------------------------------------------


def load_embedder() -> tuple[Embedder, str]:
    """The shipped local-fast model, loaded before any timing; the toy one if it cannot load."""
    try:
        static = StaticEmbeddings()
        static.embed_query("warm up")
        return static, f"StaticEmbeddings ({static.model_id})"
    except (KnowledgeBaseError, OSError) as exc:
        return HashEmbeddings(), f"HashEmbeddings (StaticEmbeddings did not load: {exc})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--runs", type=int, default=3, help="repetitions per figure (median)")
    parser.add_argument("--smoke", action="store_true", help="the SMOKE scale, once")
    args = parser.parse_args()
    scale, runs = (SMOKE, 1) if args.smoke else (FULL, args.runs)
    for name in PROXY_VARIABLES:  # loopback only: nothing may go through a proxy
        os.environ.pop(name, None)
        os.environ.pop(name.lower(), None)

    embedder, described = load_embedder()
    print(
        f"{'setup':>18}: {scale.branches} hosts ({scale.hosts[0]}-{scale.hosts[-1]}), "
        f"{scale.pages_per_branch} pages a branch; latency {scale.search_delay_s * 1000:.0f} ms "
        f"a search, {scale.page_delay_s * 1000:.0f} ms a page; per host "
        f"{PER_HOST_CONCURRENCY} in flight, {scale.per_host_rate:g}/s"
    )
    print(f"{'embedder':>18}: {described}")
    figures: dict[str, float] = {}
    for name, step in (
        ("extraction", bench_extraction),
        (f"{scale.branches} web branches", lambda: bench_branches(runs, embedder, scale)),
    ):
        result = step()
        figures.update(result)
        shown = ", ".join(f"{k}={v:.3f}" for k, v in result.items())
        print(f"{name:>18}: {shown}", flush=True)
    holds = figures["max_requests_per_second_per_host"] <= scale.per_host_rate
    print(
        f"{'politeness':>18}: at most {figures['max_requests_per_second_per_host']:.0f} requests"
        f" to one host in any 1 s window (setting {scale.per_host_rate:g}/s): "
        + ("holds" if holds else "EXCEEDED")
    )
    if args.json:
        print(json.dumps({k: round(figures[k], 4) for k in KEYS}))


if __name__ == "__main__":
    main()
