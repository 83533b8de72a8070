"""Crash logs: an exception that is not one of ours is a bug. The user gets one line naming
the file that holds its traceback; the file never holds a secret."""

from __future__ import annotations

import os
import traceback
from datetime import UTC, datetime
from pathlib import Path

SECRET_VARIABLES = (
    "OPENAI_API_KEY",
    "DEEP_RESEARCH_API_TOKEN",
    "TAVILY_API_KEY",
    "BRAVE_API_KEY",
    "EXA_API_KEY",
)


def write_crash_log(exc: BaseException, home: Path | None = None) -> Path:
    """Write ``exc``'s traceback under ``<data dir>/logs/``; the file's path."""
    from deep_research.app.config import data_home

    logs = (home or data_home()) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = logs / f"crash-{stamp}.log"
    path.write_text(scrub("".join(traceback.format_exception(exc))), encoding="utf-8")
    return path


def scrub(text: str) -> str:
    """``text`` with the value of every secret variable replaced by its name."""
    for name in SECRET_VARIABLES:
        secret = os.environ.get(name, "")
        if len(secret) >= 8:
            text = text.replace(secret, f"<{name}>")
    return text
