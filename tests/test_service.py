"""The service every front-end calls, used directly (no CLI): the MCP server and HTTP API
will call it exactly like this."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from deep_research.app import service
from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError, SessionError, UsageError


@pytest.mark.parametrize(
    ("question", "options", "error", "message"),
    [
        ("   ", service.RunOptions(), UsageError, "empty"),
        ("x" * 5000, service.RunOptions(), UsageError, "limit is 4,000"),
        ("q?", service.RunOptions(kb_only=True, web_only=True), UsageError, "exclude"),
        ("q?", service.RunOptions(web_only=True), ConfigError, "needs a model"),
    ],
)
def test_prepare_refuses_bad_requests_before_anything_is_saved(
    offline: Settings, question: str, options: service.RunOptions, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        service.prepare(offline, question, options)
    assert service.list_sessions(offline) == []


async def test_a_run_started_and_followed_through_the_service(offline: Settings) -> None:
    question = "  When does a research node start?  "
    prepared = service.prepare(offline, question, service.RunOptions())
    assert prepared.extractive
    assert prepared.policy == "kb_only", "no model: the knowledge base only"
    assert prepared.question == "When does a research node start?"
    said: list[str] = []
    events: list[object] = []
    with service.start(prepared, said.append) as run:
        state = await service.execute(run, events.append)
    assert any("ingesting" in line for line in said), "the empty KB was ingested first"
    assert state.status == "complete"
    assert run.report_markdown is not None
    assert "scheduling.md" in run.report_markdown

    [listed] = service.list_sessions(offline)
    assert listed.session_id == state.session_id
    assert service.status(offline, state.session_id[:6]).status == "complete"
    path = service.report_path(offline, state.session_id)
    assert path is not None
    assert Path(path).read_bytes().decode() == run.report_markdown  # noqa: ASYNC240
    with pytest.raises(SessionError):
        service.status(offline, "000000000000")


async def test_choices_made_for_the_user_reach_the_sessions_event_log(offline: Settings) -> None:
    """A server has no terminal: why ``auto`` chose an engine is in the log it follows."""
    prepared = service.prepare(offline, "How are costs capped?", service.RunOptions())
    prepared = replace(prepared, notices=("web research: chosen for you",))
    shown: list[object] = []
    with service.start(prepared, lambda _line: None) as run:
        await service.execute(run, shown.append)
    log = Path(offline.sessions_dir, run.state.session_id, "events.jsonl").read_text()  # noqa: ASYNC240
    events = [json.loads(line) for line in log.splitlines()]
    assert [e["type"] for e in events[:2]] == ["start", "message"]
    assert events[1]["message"] == "web research: chosen for you"
    assert "web research: chosen for you" not in shown, "whoever prepared the run said it"


async def test_a_session_without_research_jobs_has_nothing_to_cancel(offline: Settings) -> None:
    prepared = service.prepare(offline, "How are costs capped?", service.RunOptions())
    with service.start(prepared, lambda _line: None) as run:
        await service.execute(run, lambda _event: None)
    result = await service.cancel(offline, run.state.session_id)
    assert result.jobs == []
    assert result.recorded
