"""Runs that research the knowledge base: extractive (no model), --kb-only, and no KB."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deep_research.app.config import Settings
from deep_research.kb.catalog import open_kb
from deep_research.kb.search import resolve_locator
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task, verdict

NOTES = {
    "scheduling.md": """---
title: Scheduling
tags: [engine]
---
# Scheduling

## Dependency-driven starts

A research node starts the moment its last dependency is done. The scheduler keeps at
most max_parallel nodes in flight and runs non-parallelizable nodes alone.
""",
    "budgets.md": """# Budgets

## Cost limits

Before a Deep Research job is dispatched its worst-case cost is reserved against the
budget. Work the budget cannot cover never starts, and the report says what is missing.
""",
}


@pytest.fixture
def kb_env(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text)
    return env


def no_model(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("OPENAI_")}


def test_extractive_mode_end_to_end_ingests_kb_first(kb_env: dict[str, str]) -> None:
    env = no_model(kb_env)
    code, out, err = cli(env, "When does a research node start, and how are costs capped?")
    assert code == 0, err
    assert "ingesting kb/ first" in err
    told = re.findall(r"embedded (\d+)/(\d+) chunks", err)
    assert told, "the first run's ingest says how far it is"
    assert told[-1][0] == told[-1][1], "up to the last chunk"
    assert len(told) <= 4, "a line a quarter, not a line a chunk"
    assert "extractive mode" in err
    assert "Extractive mode" in out
    assert "judge" not in err, "no model judged an extractive run: nothing may say one did"
    assert "stopping: complete (passage coverage" in err
    assert "scheduling.md#Scheduling > Dependency-driven starts" in out
    assert "budgets.md#Budgets > Cost limits" in out

    data = run_json(env, "How are costs capped?")
    assert data["status"] == "complete"
    assert data["usage"]["cost_usd"] == 0
    state = session_state(env, data["session_id"])
    assert state["mode"] == "extractive"
    assert {n["source_hint"] for n in state["nodes"].values()} == {"internal"}


def test_kb_only_branch_cites_exact_chunks_and_makes_no_web_call(
    kb_env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _, err = cli(kb_env, "kb", "ingest", "kb")
    assert code == 0, err
    ResearchWorld(
        plans=[[plan_task("k1", source="internal"), plan_task("k2", source="web")]],
        verdicts=[verdict(True)],
    ).install(fake_openai)
    data = run_json(kb_env, "When does a research node start?", "--kb-only")
    assert data["status"] == "complete"
    assert fake_openai.count("/v1/responses") == 0, "--kb-only makes no web call at all"

    state = session_state(kb_env, data["session_id"])
    assert {n["source_hint"] for n in state["nodes"].values()} == {"internal"}
    citations: list[dict[str, Any]] = [c for n in state["nodes"].values() for c in n["citations"]]
    assert citations
    settings = Settings(home=Path(kb_env["DEEP_RESEARCH_HOME"]))
    store = open_kb(settings.kb)
    for citation in citations:
        assert citation["kind"] == "kb"
        text = resolve_locator(store, citation["locator"])
        first_words = " ".join(citation["quote"].split()[:6])
        assert first_words in " ".join(text.split()), "the citation resolves to its text"
    report = Path(data["report_path"]).read_text()
    assert citations[0]["locator"] in report


def test_without_a_knowledge_base_the_planner_is_offered_the_web_only(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("k1", source="internal"), plan_task("w1")]]).install(
        fake_openai
    )
    code, _, err = cli(env, "What did we decide about our own architecture?")
    assert code == 0, err
    said = "kb: off — no knowledge base 'default' (add one with `deep-research kb ingest DIR`)"
    assert err.count(said) == 1, "said once"
    planner_prompts = [
        str(r.body) for r in fake_openai.requests if r.path == "/v1/chat/completions"
    ]
    planner = [p for p in planner_prompts if "Allowed here:" in p]
    assert planner, "the planner was asked"
    assert all("'web': public information on the web" in p for p in planner)
    assert not any("'internal'" in p or "'mixed'" in p for p in planner), "prompt and schema"
    (session_dir,) = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    nodes = json.loads((session_dir / "state.json").read_text())["nodes"]
    assert {n["source_hint"] for n in nodes.values()} == {"web"}, "no internal node is made"
    assert {n["status"] for n in nodes.values()} == {"done"}


def test_kb_search_json_lists_ranked_chunks(kb_env: dict[str, str]) -> None:
    assert cli(kb_env, "kb", "ingest", "kb")[0] == 0
    code, out, _ = cli(kb_env, "kb", "search", "worst-case cost reserved", "-k", "2", "--json")
    assert code == 0
    hits = json.loads(out)
    assert hits[0]["source"] == "budgets.md"
    assert {"source", "heading", "lines", "score", "text"} <= set(hits[0])


def test_no_model_and_no_kb_is_a_clear_error_that_saves_nothing(
    env: dict[str, str], tmp_path: Path
) -> None:
    code, out, err = cli(no_model(env), "What is in my notes?")
    assert out == ""
    assert code == 7
    assert "no model is configured and there is no knowledge base" in err
    assert not (tmp_path / "home" / "sessions").exists()
