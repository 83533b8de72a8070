"""Reports that do not repeat themselves: every finding is given to one section at most, so
no section states what another does, model-written or extractive."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from deep_research.core.authoring import (
    OutlineRequest,
    PlannedSection,
    SectionRequest,
    WritingLimits,
)
from deep_research.core.models import EvidenceUnit, SectionPlan
from deep_research.core.packing import given
from deep_research.core.ports import Meter
from deep_research.core.report import assemble
from deep_research.core.words import prefix_words
from tests.clirun import cli, run_json
from tests.fakes import FakeAuthor
from tests.test_writing import researched, write


class PointedAuthor(FakeAuthor):
    """An outline of two sections whose points share words with every finding (as a model's
    points do), and a faithful section writer: it states all it is given, related included."""

    async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]:
        ids = [i for entry in request.catalog for i in entry.node_ids]
        half = len(ids) // 2
        points = ("Each finding says the value of its node.",)
        return [
            PlannedSection("First half", "What do the first nodes say?", tuple(ids[:half]), points),
            PlannedSection("Second half", "What do the others say?", tuple(ids[half:]), points),
        ]

    async def section(self, request: SectionRequest, meter: Meter) -> str:
        text = await super().section(request, meter)
        return "\n\n".join([text, *request.related])


def findings_stated(state_sections: list[str]) -> Counter[str]:
    """How often each 'Finding j of node i' is stated across the sections."""
    counts: Counter[str] = Counter()
    for text in state_sections:
        for line in text.split("\n\n"):
            if line.startswith("Finding "):
                counts[line.split(" says", 1)[0]] += 1
    return counts


async def test_a_small_run_gives_every_finding_to_one_section_and_states_it_once() -> None:
    state = researched(6, facts=3)
    author = PointedAuthor()
    await write(state, author)
    given_out = [f for r in author.sections for f in (*r.evidence, *r.related)]
    assert len(given_out) == len(set(given_out)) == 18, "each finding given once, none lost"
    assert state.writing is not None
    counts = findings_stated([s.text for s in state.writing.sections])
    assert len(counts) == 18
    assert set(counts.values()) == {1}, "no finding stated twice across the sections"


async def test_related_evidence_is_only_what_its_own_section_left_out() -> None:
    # Each section's own units pass its budget (no money to condense): what its fair cut
    # leaves out may go to the other section as related evidence, once, and nothing else.
    state = researched(4, facts=6, detail="in a rather long sentence about the matter ")
    author = PointedAuthor()
    limits = WritingLimits(own_evidence_tokens=120, related_evidence_tokens=400)
    await write(state, author, limits=limits, spare=(0.0, 0))
    first, second = author.sections
    assert first.related, "each section was given the other's overflow"
    assert second.related
    assert not set(first.related) & set(second.evidence)
    assert not set(second.related) & set(first.evidence)
    given_out = [f for r in author.sections for f in (*r.evidence, *r.related)]
    assert len(given_out) == len(set(given_out)), "no finding given to two sections"


def unit(node: str, n: int, finding: str, ref: str) -> EvidenceUnit:
    return EvidenceUnit(
        id=f"{node}.{n}", node_id=node, question="q?", finding=finding, refs=[ref], sources=[]
    )


def test_a_finding_two_branches_state_alike_goes_once_to_the_section_it_fits_best() -> None:
    shared = "The scheduler starts a node when its last dependency is done"
    units = [
        unit("a", 1, f"{shared} [S1].", "S1"),
        unit("a", 2, "Budgets reserve the worst case first [S2].", "S2"),
        unit("b", 1, f"{shared}. [S1]", "S1"),  # the same passage, quoted by another branch
        unit("b", 2, "The scheduler runs at most four nodes at once [S3].", "S3"),
    ]
    sections = [
        SectionPlan(id="s1", title="Budgets", question="How are costs capped?", node_ids=["a"]),
        SectionPlan(
            id="s2", title="Scheduling", question="When does a node start?", node_ids=["b"]
        ),
    ]
    words = {u.id: prefix_words(u.finding) for u in units}
    budgets, scheduling = given(sections, units, words)
    assert [u.id for u in budgets] == ["a.2"]
    assert [u.id for u in scheduling] == ["b.1", "b.2"], "its best fit: the scheduling section"


def test_a_report_not_yet_written_has_no_findings_appendix_repeating_its_body() -> None:
    state = researched(2)
    report = assemble(state)  # no writing: the body is each sub-question's findings
    assert "Finding 1 of node 1" in report.body
    assert report.notes == []
    assert report.markdown.count("Finding 1 of node 1") == 1


async def test_the_findings_by_sub_question_are_an_index_of_the_sections() -> None:
    state = researched(6, facts=3)
    await write(state, PointedAuthor())
    report = assemble(state)
    text = report.markdown
    body = "".join(s.body for s in report.sections)
    assert body.count("Finding 1 of node 1 ") == 1, "stated in its section"
    after = text.split("## Sources", 1)[1]
    assert "Finding 1 of node 1 " not in after, "and not again after the sources"
    index = after.split("## Findings by sub-question", 1)[1]
    assert "n01: What about part 1?" in index
    assert "[First half](#first-half)" in index, "each sub-question links to its section"
    assert "[Second half](#second-half)" in index
    assert "Finding" not in index


NOTES = {
    "scheduling.md": """# Scheduling

## Dependency-driven starts

A research node starts the moment its last dependency is done. The scheduler keeps at
most four nodes in flight and runs nodes that cannot share a slot alone.
""",
    "budgets.md": """# Budgets

## Cost limits

Before a research job is dispatched its worst-case cost is reserved against the budget.
Work the budget cannot cover never starts, and the report says what is missing.
""",
}


@pytest.fixture
def kb_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text)
    return {k: v for k, v in env.items() if not k.startswith("OPENAI_")}


def test_an_extractive_report_quotes_each_passage_in_one_section(kb_env: dict[str, str]) -> None:
    # Two sub-questions over a two-note KB, both finding the same passages: one section
    # states them, the other's sub-question joins it.
    question = (
        "How does the scheduler start a research node, and how does the scheduler cap the "
        "cost of a research node?"
    )
    code, _out, err = cli(kb_env, question)
    assert code == 0, err
    data = run_json(kb_env, question)
    saved = Path(kb_env["DEEP_RESEARCH_HOME"]) / "sessions" / data["session_id"]
    report = json.loads((saved / "report.json").read_text())
    bullets = Counter(
        line
        for section in report["sections"]
        for line in section["body"].splitlines()
        if line.startswith("- ")
    )
    assert bullets, "the sections quote passages"
    assert max(bullets.values()) == 1, f"a passage quoted in two sections: {bullets}"
    state = json.loads((saved / "state.json").read_text())
    done = [n for n in state["nodes"].values() if n["status"] == "done"]
    assert len(done) == 2
    quoted = Counter(line for n in done for line in n["notes"].splitlines())
    assert max(quoted.values()) > 1, "the branches did quote a passage alike (the test's premise)"
    (section,) = state["writing"]["sections"]
    assert sorted(section["node_ids"]) == sorted(n["id"] for n in done)
    index = [n for n in report["notes"] if n["section"] == 1]
    assert len(index) == 2, "both sub-questions point to the section stating their findings"
