"""A one-facet run (issue 33): its lone section, titled with the question, does not repeat
the Answer above it."""

from __future__ import annotations

from typing import Literal

from deep_research.core.models import (
    Citation,
    ResearchNode,
    SectionPlan,
    SessionState,
    Writing,
)
from deep_research.core.report import assemble

QUESTION = "What is the critical path of a research tree?"
FIRST = "- The critical path is the chain of dependent nodes with the longest duration. [S1]"
SECOND = "- No schedule finishes a run faster than its critical path. [S1]"
THIRD = "- Starting a node the instant its dependencies finish keeps the run on it. [S1]"
NOTE = "_Extractive answer: sentences quoted verbatim from the sources, no model._"


def session(
    sections: list[tuple[str, str]], lead: str, mode: Literal["llm", "extractive"]
) -> SessionState:
    source = Citation(ref="S1", kind="kb", locator="kb/scheduling.md#Critical path:1-3")
    node = ResearchNode(id="f1", question=QUESTION.rstrip("?"), status="done", notes=FIRST)
    plans = [
        SectionPlan(id=f"s{i}", title=t, question=t, node_ids=["f1"], status="written", text=b)
        for i, (t, b) in enumerate(sections, start=1)
    ]
    return SessionState(
        session_id="a" * 12,
        question=QUESTION,
        mode=mode,
        sources={"S1": source},
        nodes={"f1": node},
        writing=Writing(covers=["f1"], sections=plans, lead=lead, lead_status="written"),
    )


def lines_of(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("- ")]


def test_an_extractive_lone_section_keeps_what_the_answer_does_not_say() -> None:
    title = QUESTION.rstrip("?")  # the facet is the question itself
    lead = f"{NOTE}\n\n{FIRST}\n{SECOND}"
    report = assemble(session([(title, f"{FIRST}\n{SECOND}\n{THIRD}")], lead, "extractive"))
    [section] = report.sections
    assert section.title == "In detail"
    assert section.body == THIRD.replace("[S1]", "[1]")
    said = lines_of(report.markdown)
    assert len(said) == len(set(said)) == 3, "each quoted line once"
    assert f"## {title}" not in report.markdown
    assert "stated in [In detail](#in-detail)" in report.markdown


def test_a_lone_section_the_answer_holds_whole_is_no_section() -> None:
    lead = f"{NOTE}\n\n{FIRST}\n{SECOND}"
    report = assemble(session([(QUESTION, f"{FIRST}\n{SECOND}")], lead, "extractive"))
    assert report.sections == []
    assert lines_of(report.markdown) == [
        FIRST.replace("[S1]", "[1]"),
        SECOND.replace("[S1]", "[1]"),
    ]


def test_a_written_lone_section_keeps_its_title_and_its_paragraphs() -> None:
    """A model's section keeps its title (a revised claim is found by it) and its paragraphs
    apart; only lines the Answer states word for word go."""
    title = QUESTION.rstrip("?")
    body = f"{FIRST}\n\nA second paragraph. [S1]\n\nA third paragraph. [S1]"
    report = assemble(session([(title, body)], FIRST, "llm"))
    [section] = report.sections
    assert section.title == title
    assert section.body == "A second paragraph. [1]\n\nA third paragraph. [1]"


def test_sections_of_a_run_with_several_facets_are_left_as_they_are() -> None:
    lead = f"{NOTE}\n\n{FIRST}"
    report = assemble(
        session([(QUESTION, f"{FIRST}\n{SECOND}"), ("Scheduling", THIRD)], lead, "extractive")
    )
    assert [s.title for s in report.sections] == [QUESTION, "Scheduling"]
    assert report.sections[0].body.startswith(FIRST.replace("[S1]", "[1]"))
