"""Extractive runs through the CLI: a knowledge base with nothing on the question says so and
is not "complete"; what is quoted is never a table header, a list fragment or raw JSON."""

from __future__ import annotations

import re
from pathlib import Path

from deep_research.adapters.extractive.roles import NO_RELEVANT_PASSAGE, RELEVANCE_FLOOR
from tests.clirun import cli, session_state

PLANNING = """# Planning

## How the planner plans

The planner turns the question into a plan of sub-questions, each a node of the tree.

{"rationale": "Split the question.", "tasks": [{"id": "t1", "question": "What is the plan?"}]}

```json
{"rationale": "Fenced plans are code.", "tasks": []}
```

First, the planner reads the question and every gap the judge named.

The plan promises:

- a node for every planned sub-question;
- priorities that order the ready nodes,

| Planner field | Planner meaning |
|---|---|
| priority | Higher priority nodes of the plan start first |
"""


def no_model(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("OPENAI_")}


def report_of(env: dict[str, str], err: str) -> tuple[str, dict[str, object]]:
    session = re.findall(r"session ([0-9a-f]{12})", err)[-1]
    state = session_state(env, session)
    path = Path(env["DEEP_RESEARCH_HOME"]) / "sessions" / session / "report.md"
    return path.read_text(), state


def test_a_question_the_kb_has_nothing_on_is_not_complete_and_says_why(
    kb_env: dict[str, str],
) -> None:
    env = no_model(kb_env)
    code, _out, err = cli(env, "Where do puffins nest?")
    report, state = report_of(env, err)
    assert state["status"] != "complete"
    assert "complete" not in str(state["stop_detail"])
    assert NO_RELEVANT_PASSAGE in report, "the report says why nothing was quoted"
    assert f"relevance floor {RELEVANCE_FLOOR:.2f}" in report
    assert "passage coverage" not in report
    assert not re.search(r"\[\d+\]", report.split("## Sources")[0]), "nothing is cited"
    assert code != 0, err


def test_a_question_the_kb_answers_in_part_is_not_complete(kb_env: dict[str, str]) -> None:
    env = no_model(kb_env)
    _code, _out, err = cli(env, "When does a research node start, and where do puffins nest?")
    report, state = report_of(env, err)
    assert (state["status"], state["stop_reason"]) == ("stopped", "nothing_to_do")
    assert str(state["stop_detail"]).startswith("1 part(s) of the question found no relevant")
    assert state["iteration"] == 1, "one round: nothing replans an extractive run"
    assert "starts as soon as its dependencies are done" in report
    assert NO_RELEVANT_PASSAGE in report


def test_quotes_are_never_json_a_header_row_or_a_fragment(
    kb_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "kb" / "planning.md").write_text(PLANNING)
    env = no_model(kb_env)
    code, _, err = cli(env, "kb", "ingest", "kb")
    assert code == 0, err
    code, _out, err = cli(env, "How does the planner plan the nodes of a plan?")
    assert code == 0, err
    report, state = report_of(env, err)
    assert state["status"] == "complete"
    body = report.split("## Sources")[0]
    quoted = re.findall(r"^- (.+) \[\d+\]$", body, re.M)
    assert "The planner turns the question into a plan of sub-questions" in body
    assert quoted
    for quote in quoted:
        assert not re.search(r'[{}"|]', quote), quote
        assert "Planner meaning" not in quote, "a header row"
        assert not quote.startswith("First,"), "a 'First' with no 'Second'"
        assert quote[-1] not in ";,:", quote
    assert "priority — Higher priority nodes of the plan start first" in body
