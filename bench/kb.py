"""Knowledge-base benchmark on BEIR SciFact, through the real ingest and search path.

    python bench/kb.py                 # full corpus, the 300 test queries
    python bench/kb.py --limit 50      # a quick run on the first 50 test queries
    python bench/kb.py --json          # ... and a last line with one JSON object
    python bench/kb.py --smoke         # does it all still run? (tiny sizes, figures not targets)

The 5,183 abstracts are written as one markdown file each (`<doc_id>.md`: the
title as a `# heading`, the abstract as body) under `bench/.work/`, ingested into
a fresh KB in a temporary DEEP_RESEARCH_HOME with the default settings (so the
default local embedder), then queried. A document may have several chunks: its
rank is its best chunk's. Figures (targets):

- ndcg10_bm25, ndcg10_dense, ndcg10_hybrid   nDCG@10 per search mode (hybrid >= 0.70)
- recall10_hybrid                            share of relevant docs in the hybrid top 10
- ingest_seconds                             full corpus, model load included (< 300)
- reingest_seconds                           second ingest, nothing changed (<= 5)
- query_p95_ms                               hybrid search, 95th percentile (<= 50)
- ingest_peak_mb                             peak RSS of the process that ingests
- sample_kb_ingest_seconds                   `deep-research kb ingest kb/` (the shipped sample
                                             KB, 239 chunks) in a fresh DEEP_RESEARCH_HOME,
                                             start-up included, median of 3 (<= 16: a third
                                             of the 47.5 s the first run's ingest took on a
                                             busy 2-core machine before issue 15)

``--smoke`` runs every step at a toy size: the abstracts relevant to the first 5 test
queries plus a few dozen others, those 5 queries, and one sample-KB ingest. It needs
SciFact in ``../shared/benchmarks/scifact/`` (or ``--data``) like the full run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Collection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deep_research.app.loading import load_settings
from deep_research.kb.catalog import open_kb
from deep_research.kb.ingest import ingest
from deep_research.kb.modes import Mode
from deep_research.kb.search import search

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "benchmarks" / "scifact"
DATA_FILES = ("corpus.jsonl", "queries.jsonl", "qrels_test.tsv")
SAMPLE_KB = REPO / "kb"
WORK = Path(__file__).resolve().parent / ".work"
KEYS = (
    "ndcg10_bm25",
    "ndcg10_dense",
    "ndcg10_hybrid",
    "recall10_hybrid",
    "ingest_seconds",
    "reingest_seconds",
    "query_p95_ms",
    "ingest_peak_mb",
    "sample_kb_ingest_seconds",
)
SMOKE_QUERIES = 5
SMOKE_OTHER_DOCS = 30
# Chunks, not documents, come back: ask for more so ten distinct documents remain.
CHUNKS_PER_QUERY = 30


def check_data(data: Path) -> None:
    missing = [name for name in DATA_FILES if not (data / name).is_file()]
    if missing:
        sys.exit(
            f"bench/kb.py: BEIR SciFact not found: {', '.join(missing)} missing in {data}; "
            "put the data there (see ../shared/benchmarks/scifact/README.md) or pass --data DIR"
        )


def write_corpus(data: Path, out: Path, only: Collection[str] | None = None) -> int:
    """One markdown file per abstract (those in ``only`` when given); files already up to date
    are left alone (mtimes kept)."""
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    with (data / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            if only is not None and doc["_id"] not in only:
                continue
            body = f"# {doc['title'].strip()}\n\n{doc['text'].strip()}\n"
            path = out / f"{doc['_id']}.md"
            if not path.exists() or path.read_text(encoding="utf-8") != body:
                path.write_text(body, encoding="utf-8")
            count += 1
    return count


def first_doc_ids(data: Path, n: int) -> list[str]:
    ids: list[str] = []
    with (data / "corpus.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            if len(ids) == n:
                break
            ids.append(json.loads(line)["_id"])
    return ids


def load_test(data: Path) -> tuple[dict[str, str], dict[str, set[str]]]:
    qrels: dict[str, set[str]] = {}
    with (data / "qrels_test.tsv").open(encoding="utf-8") as rows:
        next(rows)
        for row in rows:
            qid, doc_id, _ = row.rstrip("\n").split("\t")
            qrels.setdefault(qid, set()).add(doc_id)
    queries: dict[str, str] = {}
    with (data / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            query = json.loads(line)
            if query["_id"] in qrels:
                queries[query["_id"]] = query["text"]
    ordered = sorted(queries, key=int)
    return {q: queries[q] for q in ordered}, qrels


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, doc in enumerate(ranked[:10]) if doc in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(len(relevant), 10)))
    return dcg / ideal


def ranked_docs(sources: list[str]) -> list[str]:
    """Document ids in order of their best chunk."""
    seen: dict[str, None] = {}
    for source in sources:
        seen.setdefault(Path(source).stem, None)
    return list(seen)


def run_ingest_child(home: Path, root: Path) -> dict[str, float]:
    """Ingest in a child process, so its peak RSS is the ingest's alone."""
    env = {**os.environ, "DEEP_RESEARCH_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, __file__, "--ingest-only", str(root)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def sample_kb_ingest(runs: int) -> float:
    """Median seconds of ``deep-research kb ingest kb/`` as a user runs it the first time: a
    new process (start-up and model load included), a fresh DEEP_RESEARCH_HOME, the default
    (local) embedder. Run from a temporary folder, so no ``.env`` changes the settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEEP_RESEARCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    seconds: list[float] = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="dr-kb-bench-") as tmp:
            env["DEEP_RESEARCH_HOME"] = tmp
            command = [sys.executable, "-m", "deep_research", "kb", "ingest", str(SAMPLE_KB)]
            started = time.perf_counter()
            done = subprocess.run(
                [*command, "--json"], env=env, cwd=tmp, capture_output=True, text=True
            )
            seconds.append(time.perf_counter() - started)
        if done.returncode != 0:
            sys.exit(f"bench/kb.py: {' '.join(command)} exited {done.returncode}: {done.stderr}")
        if not json.loads(done.stdout)["total_chunks"]:
            sys.exit(f"bench/kb.py: {' '.join(command)} indexed no chunks")
    return statistics.median(seconds)


def ingest_only(root: Path) -> None:
    settings = load_settings()
    started = time.perf_counter()
    store = open_kb(settings.kb, create=True)
    report = ingest(store, root)
    seconds = time.perf_counter() - started
    print(
        json.dumps(
            {"seconds": seconds, "chunks": report.total_chunks, "model": store.embeddings.model_id}
        )
    )


def evaluate(home: Path, queries: dict[str, str], qrels: dict[str, set[str]]) -> dict[str, float]:
    os.environ["DEEP_RESEARCH_HOME"] = str(home)
    store = open_kb(load_settings().kb)
    search(store, "warm-up: build the lexical index and load the model", k=1)
    figures: dict[str, float] = {}
    latencies: list[float] = []
    recall = 0.0
    modes: tuple[Mode, ...] = ("bm25", "dense", "hybrid")
    for mode in modes:
        total = 0.0
        for qid, text in queries.items():
            started = time.perf_counter()
            hits = search(store, text, k=CHUNKS_PER_QUERY, mode=mode)
            if mode == "hybrid":
                latencies.append((time.perf_counter() - started) * 1000)
            docs = ranked_docs([hit.source for hit in hits])[:10]
            total += ndcg_at_10(docs, qrels[qid])
            if mode == "hybrid":
                recall += len(qrels[qid] & set(docs)) / len(qrels[qid])
        figures[f"ndcg10_{mode}"] = total / len(queries)
    figures["recall10_hybrid"] = recall / len(queries)
    latencies.sort()
    figures["query_p95_ms"] = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument("--limit", type=int, help="only the first N test queries")
    parser.add_argument("--data", type=Path, default=DATA, help="the SciFact folder")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to see that it runs")
    parser.add_argument("--ingest-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ingest_only:
        ingest_only(args.ingest_only)
        return

    check_data(args.data)
    queries, qrels = load_test(args.data)
    if args.smoke:
        queries = dict(list(queries.items())[:SMOKE_QUERIES])
    elif args.limit:
        queries = dict(list(queries.items())[: args.limit])
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK, prefix="home-") as tmp:
        home = Path(tmp) / "home"
        if args.smoke:
            root = Path(tmp) / "corpus"
            wanted = {doc for qid in queries for doc in qrels[qid]}
            wanted |= set(first_doc_ids(args.data, SMOKE_OTHER_DOCS))
            count = write_corpus(args.data, root, wanted)
        else:
            root = WORK / "scifact" / "corpus"
            count = write_corpus(args.data, root)
        print(f"corpus: {count} markdown files in {root}")
        first = run_ingest_child(home, root)
        print(f"ingest: {first['chunks']:.0f} chunks with {first['model']}")
        second = run_ingest_child(home, root)
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
        figures = evaluate(home, queries, qrels)
    figures["ingest_seconds"] = first["seconds"]
    figures["reingest_seconds"] = second["seconds"]
    figures["ingest_peak_mb"] = peak_kb / 1024
    figures["sample_kb_ingest_seconds"] = sample_kb_ingest(1 if args.smoke else 3)
    print(f"queries: {len(queries)}")
    for key in KEYS:
        print(f"{key:24} {figures[key]:.4f}")
    if args.json:
        print(json.dumps({key: round(figures[key], 4) for key in KEYS}))


if __name__ == "__main__":
    main()
