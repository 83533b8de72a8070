"""bench/data/docs_detail.jsonl (scripts/make_docs_detail.py) is a well-formed claim set.

Rows are well-formed; a verbatim claim is in its evidence and an altered or other-section
claim is not (both up to whitespace: hard-wrapped markdown breaks lines inside sentences);
every kind has enough rows to measure anything.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "bench" / "data" / "docs_detail.jsonl"
KINDS = {"verbatim": 1, "number": 0, "negation": 0, "identifier": 0, "other_section": 0}
FIELDS = {
    "id",
    "source_dataset",
    "kind",
    "claim",
    "evidence",
    "question",
    "label",
    "source",
    "licence",
}


def norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def rows() -> list[dict[str, object]]:
    with DATA.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_rows_are_well_formed(rows: list[dict[str, object]]) -> None:
    assert rows
    ids = [row["id"] for row in rows]
    assert len(set(ids)) == len(ids)
    for row in rows:
        assert set(row) == FIELDS, row["id"]
        assert row["source_dataset"] == "docs"
        assert row["question"] == ""
        assert row["kind"] in KINDS, row["id"]
        assert row["label"] == KINDS[str(row["kind"])], row["id"]
        for key in ("claim", "evidence", "source", "licence"):
            assert isinstance(row[key], str), (row["id"], key)
            assert str(row[key]).strip(), (row["id"], key)
        assert str(row["id"]).startswith("docs-")


def test_verbatim_claims_are_in_their_evidence_and_the_rest_are_not(
    rows: list[dict[str, object]],
) -> None:
    for row in rows:
        inside = norm(str(row["claim"])) in norm(str(row["evidence"]))
        assert inside == (row["kind"] == "verbatim"), (row["id"], row["kind"], row["claim"])


def test_each_kind_has_at_least_30_rows(rows: list[dict[str, object]]) -> None:
    counts = Counter(str(row["kind"]) for row in rows)
    assert set(counts) == set(KINDS)
    assert min(counts.values()) >= 30, counts
