"""Driving the real CLI in-process (typer's CliRunner) and reading what it saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from deep_research.frontends.cli import app
from deep_research.persistence.sessions import SessionStore


def cli(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


def run_json(env: dict[str, str], *args: str) -> dict[str, Any]:
    code, out, err = cli(env, *args, "--json")
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 1, f"stdout must hold exactly one JSON object, got: {out!r}"
    data: dict[str, Any] = json.loads(lines[0])
    return data


def session_state(env: dict[str, str], session_id: str) -> dict[str, Any]:
    """The saved session as a resume reads it: state.json, then its job journal."""
    store = SessionStore(Path(env["DEEP_RESEARCH_HOME"]) / "sessions")
    return store.load(session_id).model_dump(mode="json")
