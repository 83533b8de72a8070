"""The claim verifier on labelled (claim, evidence) rows: macro-F1 per source dataset and
their average, and the time per row.

    python bench/verify.py --data ../shared/benchmarks/attributionbench/id_dev.jsonl --json
    python bench/verify.py --data rows.jsonl --predictions out.jsonl

Rows are JSON lines with ``claim`` and ``evidence``, and optionally ``question``,
``source_dataset``, ``label`` (1: the evidence supports the claim), ``id`` and ``kind``.
The verifier (``adapters.verifier.verify``, no model) sees only claim, evidence and question;
``pred`` is 1 exactly when its verdict is ``supported``. With labels it prints macro-F1 per
``source_dataset`` (one group when absent) and their average, the share of each ``kind``'s
rows it gets right (``bench/data/docs_detail.jsonl`` has kinds), and the median and p95 time
per row (the embedder's load excluded). ``--predictions`` writes one line per row, in input
order: ``{"id": ..., "pred": 0 or 1, "score": float}`` (``id``: the row's, or its line
number). ``--smoke`` runs the first rows of the shipped documentation-detail set.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deep_research.adapters import verifier, verifier_model  # noqa: E402

DOCS_DETAIL = ROOT / "bench" / "data" / "docs_detail.jsonl"
SMOKE_ROWS = 40


def macro_f1(labels: list[int], preds: list[int]) -> float:
    """The mean of each class's F1 (a class with no rows and no predictions scores 0)."""
    scores = []
    for cls in (0, 1):
        tp = sum(1 for y, p in zip(labels, preds, strict=True) if y == cls and p == cls)
        fp = sum(1 for y, p in zip(labels, preds, strict=True) if y != cls and p == cls)
        fn = sum(1 for y, p in zip(labels, preds, strict=True) if y == cls and p != cls)
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / 2


def read_rows(path: Path, limit: int | None) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                row = json.loads(line)
                row.setdefault("id", number)
                rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    return rows


def run(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[float]]:
    embedder = verifier_model.shipped_embedder()
    embedder.embed_query("load the model before the clock starts")
    verifier_model.model()
    predictions, seconds = [], []
    for row in rows:
        started = time.perf_counter()
        verdict = verifier.verify(
            row["claim"], row["evidence"], row.get("question") or "", embedder=embedder
        )
        seconds.append(time.perf_counter() - started)
        predictions.append(
            {"id": row["id"], "pred": int(verdict.support == "supported"), "score": verdict.score}
        )
    return predictions, seconds


def figures(
    rows: list[dict[str, Any]], predictions: list[dict[str, Any]], seconds: list[float]
) -> dict[str, Any]:
    ms = sorted(1000 * s for s in seconds)
    out: dict[str, Any] = {
        "rows": len(rows),
        "median_ms": round(statistics.median(ms), 2) if ms else 0.0,
        "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2) if ms else 0.0,
    }
    labelled = [(r, p) for r, p in zip(rows, predictions, strict=True) if "label" in r]
    if not labelled:
        return out
    groups: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    kinds: dict[str, list[bool]] = defaultdict(list)
    for row, prediction in labelled:
        labels, preds = groups[str(row.get("source_dataset") or "all")]
        labels.append(int(row["label"]))
        preds.append(prediction["pred"])
        if "kind" in row:
            kinds[str(row["kind"])].append(prediction["pred"] == int(row["label"]))
    by_dataset = {name: round(100 * macro_f1(*pair), 1) for name, pair in sorted(groups.items())}
    for name, value in by_dataset.items():
        out[f"macro_f1[{name}]"] = value
    out["macro_f1_average"] = round(sum(by_dataset.values()) / len(by_dataset), 1)
    for kind, right in sorted(kinds.items()):
        out[f"right[{kind}]"] = round(100 * sum(right) / len(right), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DOCS_DETAIL, help="JSON lines of rows")
    parser.add_argument("--predictions", type=Path, help="write one prediction per row here")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--smoke", action="store_true", help=f"the first {SMOKE_ROWS} rows")
    args = parser.parse_args()
    rows = read_rows(args.data, SMOKE_ROWS if args.smoke else None)
    predictions, seconds = run(rows)
    if args.predictions:
        with args.predictions.open("w", encoding="utf-8") as out:
            for prediction in predictions:
                out.write(json.dumps(prediction) + "\n")
    result = figures(rows, predictions, seconds)
    if args.json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()
