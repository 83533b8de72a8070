"""Bounded views: no prompt input grows with the number of nodes."""

from __future__ import annotations

from deep_research.core import context
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import Citation, ResearchNode


def node(i: int, *, notes_tokens: int = 300, deps: list[str] | None = None) -> ResearchNode:
    citation = Citation(ref=f"S{i}", kind="web", url=f"https://e.org/{i}")
    return ResearchNode(
        id=f"n{i}",
        question=f"question {i}?",
        status="done",
        notes=f"claim {i} [S{i}]. " + "word " * (notes_tokens * 4 // 5),
        citations=[citation],
        confidence=(i % 10) / 10,
        depends_on=deps or [],
    )


def test_findings_stay_within_the_cap_whatever_the_fan_in() -> None:
    for fan_in in (1, 4, 50, 400):
        nodes = {f"n{i}": node(i) for i in range(fan_in)}
        sink = node(9999, deps=list(nodes))
        found = context.findings(nodes, sink, cap=2000)
        total = sum(estimate_tokens(f.notes) for f in found)
        assert total <= 2000 + 2 * len(found), (fan_in, total)
        assert all(len(f.citations) <= 5 for f in found)


def test_findings_keep_the_sources_their_notes_cite() -> None:
    nodes = {"n1": node(1)}
    [finding] = context.findings(nodes, node(2, deps=["n1"]), cap=2000)
    assert [c.ref for c in finding.citations] == ["S1"]


def test_summary_batches_fit_the_digest_budget() -> None:
    done = [node(i, notes_tokens=400) for i in range(10)]
    batch = context.take_batch(done, budget_tokens=1000)
    assert len(batch) == 2
    huge = node(1, notes_tokens=5000)
    assert context.take_batch([huge, node(2)], 1000) == [huge], "one oversized node alone"
    small = [node(i, notes_tokens=10) for i in range(10)]
    assert len(context.take_batch(small, 1000)) == context.SUMMARY_BATCH


def test_catalog_and_overview_are_bounded() -> None:
    nodes = [node(i) for i in range(100)]
    assert len(context.catalog(nodes)) == context.CATALOG_SIZE
    lines = context.overview(nodes).splitlines()
    assert lines[0] == "done: 100"
    assert len(lines) == 1 + min(context.CATALOG_SIZE, context.OVERVIEW_NODES)
