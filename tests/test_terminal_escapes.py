"""Text from questions sent over HTTP or MCP, KB documents, pages and model output is shown on
a terminal, never obeyed by it: no escape sequence (screen clear, hidden text, the window's
title, a link) reaches stdout or stderr from what a command prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli

HOSTILE = "\x1b[2J\x1b]0;owned\x07\x1b[8mhidden\x1b[0m \x9b31m \x90dcs\x9c \x1b]8;;http://x\x1b\\"
"""Clear the screen, set the window's title, hide text, an 8-bit CSI and DCS, a link."""
CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]


def clean(text: str) -> bool:
    return not any(c in text for c in CONTROLS)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_sessions_list_show_and_report_print_no_control_character(home: Path) -> None:
    env = {"DEEP_RESEARCH_HOME": str(home), "COLUMNS": "200"}
    store = SessionStore(home / "sessions")
    state = store.create(f"Why {HOSTILE} is this?")
    state.status = "complete"
    store.save(state)
    store.write_report(state.session_id, f"# Report\n\n## Answer\n\nIt is {HOSTILE} so.\n")
    for args in (
        ("sessions", "list"),
        ("sessions", "show", state.session_id),
        ("sessions", "report", state.session_id, "--full"),
    ):
        code, out, err = cli(env, *args)
        assert code == 0, err
        assert "hidden" in out, args  # the text is shown ...
        assert clean(out), (args, out)  # ... its controls are not
        assert clean(err), (args, err)
    code, out, _ = cli(env, "sessions", "list", "--json")
    assert code == 0
    assert clean(out)
    assert json.loads(out)[0]["question"] == f"Why {HOSTILE} is this?", "JSON keeps the data"


def test_kb_search_prints_no_control_character(home: Path, tmp_path: Path) -> None:
    env = {"DEEP_RESEARCH_HOME": str(home), "COLUMNS": "200"}
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "evil.md").write_text(f"# Budgets\n\nEvery budget {HOSTILE} is capped.\n")
    code, _, err = cli(env, "kb", "ingest", str(notes))
    assert code == 0, err
    code, out, err = cli(env, "kb", "search", "budget capped")
    assert code == 0, err
    assert "capped" in out
    assert clean(out), out
    assert clean(err), err


MARKUP = "[conceal]hidden[/conceal] [link=https://evil.example]a link[/link] [bold red]"
"""Rich markup: hidden text and a live link (OSC 8) on a terminal, were it read as markup."""


def test_sessions_watch_and_prune_show_markup_as_text(home: Path) -> None:
    from deep_research.core.events import RunEvent
    from deep_research.persistence.events import FILE_NAME, EventLog

    env = {"DEEP_RESEARCH_HOME": str(home), "COLUMNS": "300"}
    store = SessionStore(home / "sessions")
    state = store.create(f"Why {MARKUP}?")
    log = EventLog(store.path(state.session_id) / FILE_NAME)
    for kind in ("start", "message", "end"):
        log.append(RunEvent(type=kind, message=f"{kind} {MARKUP}"))  # type: ignore[arg-type]
    log.close()
    code, out, err = cli(env, "sessions", "watch", state.session_id)
    assert code == 0, err
    assert out.count(MARKUP) == 3, out  # each message as written, its brackets shown
    code, out, err = cli(env, "sessions", "prune", "--older-than", "0h", "--dry-run")
    assert code == 0, err
    shown = f"would remove {state.session_id}  Why {MARKUP}"[: len("would remove  ") + 12 + 70]
    assert shown in out, out  # the question's first 70 characters, brackets and all


def test_the_report_on_disk_holds_no_control_character(home: Path) -> None:
    """``cat report.md`` is a terminal sink too: the model's and pages' controls stay out."""
    store = SessionStore(home / "sessions")
    state = store.create("Why?")
    written = store.write_report(state.session_id, f"# Report\n\n\tIt is {HOSTILE} so.\r\n")
    text = Path(written).read_text(encoding="utf-8")
    assert clean(text), repr(text)
    assert "\n\n\tIt is " in text, "newlines and tabs stay"
    assert "hidden" in text, "the text stays"
