"""Crash logs: an exception that is not one of ours is a bug. The user gets one line naming
the file that holds its traceback; neither the line nor the file ever holds a secret."""

from __future__ import annotations

import os
import re
import tempfile
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
_KEY_SHAPED = re.compile(r"\b(sk|tvly|exa)-[A-Za-z0-9_-]{8,}")


def write_crash_log(exc: BaseException) -> Path | None:
    """Write ``exc``'s traceback under ``<data dir>/logs/`` (the temp directory when that
    cannot be written); its path, or None when nothing could be written."""
    text = scrub("".join(traceback.format_exception(exc)))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    for logs in (_home() / "logs", Path(tempfile.gettempdir()) / "deep-research-logs"):
        try:
            logs.mkdir(parents=True, exist_ok=True)
            path = logs / f"crash-{stamp}.log"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None


def scrub(text: str) -> str:
    """``text`` without any secret: the values of the secret settings (from the environment
    or ``.env``) become their names, and anything shaped like an API key is masked."""
    for name, secret in _secrets().items():
        if len(secret) >= 8:
            text = text.replace(secret, f"<{name}>")
    return _KEY_SHAPED.sub(lambda m: f"{m.group(1)}-<masked>", text)


def _secrets() -> dict[str, str]:
    found = {name: os.environ.get(name, "") for name in SECRET_VARIABLES}
    try:
        from deep_research.app.config import load_settings

        key = load_settings().openai_api_key
        if key is not None:
            found["OPENAI_API_KEY (.env)"] = key.get_secret_value()
    except Exception:  # invalid settings are why some runs crash: use what is known
        pass
    return found


def _home() -> Path:
    try:
        from deep_research.app.config import load_settings

        return load_settings().home
    except Exception:  # the settings may be what crashed: fall back to the environment
        from deep_research.app.config import data_home

        return data_home()
