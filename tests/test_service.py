"""The use-cases every front-end calls, used directly (no CLI): the MCP server and HTTP API
will call it exactly like this."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from deep_research.app import lifecycle, preparation, saved
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.errors import ConfigError, SessionError, UsageError


@pytest.mark.parametrize(
    ("question", "options", "error", "message"),
    [
        ("   ", RunOptions(), UsageError, "empty"),
        ("x" * 5000, RunOptions(), UsageError, "limit is 4,000"),
        ("q?", RunOptions(kb_only=True, web_only=True), UsageError, "exclude"),
        ("q?", RunOptions(web_only=True), ConfigError, "needs a model"),
    ],
)
def test_prepare_refuses_bad_requests_before_anything_is_saved(
    offline: Settings, question: str, options: RunOptions, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        preparation.prepare(offline, question, options)
    assert saved.list_sessions(offline) == []


async def test_a_run_started_and_followed_through_the_service(offline: Settings) -> None:
    question = "  When does a research node start?  "
    prepared = preparation.prepare(offline, question, RunOptions())
    assert prepared.extractive
    assert prepared.sources().hints == ("internal",), "no model: the knowledge base only"
    assert prepared.question == "When does a research node start?"
    said: list[str] = []
    events: list[object] = []
    with lifecycle.start(prepared, said.append) as run:
        state = await lifecycle.execute(run, events.append)
    assert any("ingesting" in line for line in said), "the empty KB was ingested first"
    assert state.status == "complete"
    assert run.report_markdown is not None
    assert "scheduling.md" in run.report_markdown

    [listed] = saved.list_sessions(offline)
    assert listed.session_id == state.session_id
    assert saved.status(offline, state.session_id[:6]).status == "complete"
    path = saved.report_path(offline, state.session_id)
    assert path is not None
    assert Path(path).read_bytes().decode() == run.report_markdown  # noqa: ASYNC240
    with pytest.raises(SessionError):
        saved.status(offline, "000000000000")


async def test_choices_made_for_the_user_reach_the_sessions_event_log(offline: Settings) -> None:
    """A server has no terminal: why ``auto`` chose an engine is in the log it follows."""
    prepared = preparation.prepare(offline, "How are costs capped?", RunOptions())
    prepared = replace(prepared, notices=("web research: chosen for you",))
    shown: list[object] = []
    with lifecycle.start(prepared, lambda _line: None) as run:
        await lifecycle.execute(run, shown.append)
    log = Path(offline.sessions_dir, run.state.session_id, "events.jsonl").read_text()  # noqa: ASYNC240
    events = [json.loads(line) for line in log.splitlines()]
    assert [e["type"] for e in events[:2]] == ["start", "message"]
    assert events[1]["message"] == "web research: chosen for you"
    assert "web research: chosen for you" not in shown, "whoever prepared the run said it"


async def test_a_session_without_research_jobs_has_nothing_to_cancel(offline: Settings) -> None:
    prepared = preparation.prepare(offline, "How are costs capped?", RunOptions())
    with lifecycle.start(prepared, lambda _line: None) as run:
        await lifecycle.execute(run, lambda _event: None)
    result = await lifecycle.cancel(offline, run.state.session_id)
    assert result.jobs == []
    assert result.recorded
