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
        assert len(found) == min(fan_in, 2000 // context.MIN_FINDING_TOKENS), fan_in
        total = sum(estimate_tokens(f.notes) for f in found)
        assert total <= 2000 + 2 * len(found), (fan_in, total)
        kept = {f.node_id for f in found}
        dropped = [n.confidence for n in nodes.values() if n.id not in kept]
        assert min(nodes[k].confidence for k in kept) >= max(dropped, default=0.0)


def test_findings_keep_the_sources_their_notes_cite() -> None:
    one = node(1)
    one.citations.append(Citation(ref="S77", kind="web", url="https://e.org/uncited"))
    [finding] = context.findings({"n1": one}, node(2, deps=["n1"]), cap=2000)
    assert [c.ref for c in finding.citations] == ["S1"]
    many = node(3)
    many.notes = " ".join(f"Claim [S{k}]." for k in range(8))
    many.citations = [Citation(ref=f"S{k}", kind="web", url=f"https://e.org/{k}") for k in range(8)]
    [finding] = context.findings({"n3": many}, node(4, deps=["n3"]), cap=2000)
    assert [c.ref for c in finding.citations] == ["S0", "S1", "S2", "S3", "S4"]


def test_summary_batches_fit_the_digest_budget() -> None:
    done = [node(i, notes_tokens=400) for i in range(10)]
    batch = context.take_batch(done, budget_tokens=1000)
    assert len(batch) == 2
    huge = node(1, notes_tokens=5000)
    assert context.take_batch([huge, node(2)], 1000) == [huge], "one oversized node alone"
    small = [node(i, notes_tokens=10) for i in range(10)]
    assert len(context.take_batch(small, 1000)) == context.SUMMARY_BATCH


def test_unmerged_notes_are_the_done_nodes_the_summary_lacks_within_the_budget() -> None:
    from deep_research.core.models import SessionState

    state = SessionState(session_id="0" * 12, question="q")
    for i in range(6):
        state.nodes[f"n{i}"] = node(i, notes_tokens=40)
    state.nodes["n5"].status = "running"
    state.summarized = ["n0", "n1"]
    text = context.unmerged(state, budget_tokens=1000)
    assert [i for i in range(6) if f"claim {i} [S{i}]" in text] == [2, 3, 4]
    assert text.count("### ") == 3
    state.summarized += ["n2", "n3", "n4"]
    assert context.unmerged(state, budget_tokens=1000) == "", "all folded: nothing to add"
    for fan_in in (1, 40, 400):  # bounded whatever the number of unmerged nodes
        state.nodes = {f"n{i}": node(i) for i in range(fan_in)}
        state.summarized = []
        assert estimate_tokens(context.unmerged(state, 1000)) <= 1000 + 20 * min(fan_in, 40)


def test_catalog_and_overview_are_bounded() -> None:
    nodes = [node(i) for i in range(100)]
    assert len(context.catalog(nodes)) == context.CATALOG_SIZE
    lines = context.overview(nodes).splitlines()
    assert lines[0] == "done: 100"
    assert len(lines) == 1 + min(context.CATALOG_SIZE, context.OVERVIEW_NODES)
