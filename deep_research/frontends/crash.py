"""Crash logs: an exception that is not one of ours is a bug. The user gets one line naming
the file that holds its traceback; neither the line nor the file ever holds a secret."""

from __future__ import annotations

import contextlib
import os
import re
import stat
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
LONG_SECRET = 8
"""Secrets this long are masked wherever they occur; shorter ones as whole words only."""
_KEY_SHAPED = re.compile(r"\b(sk|tvly|exa)-[A-Za-z0-9_-]{8,}")


def write_crash_log(exc: BaseException) -> Path | None:
    """Write ``exc``'s traceback under ``<data dir>/logs/`` (a private folder of this user's
    in the temp directory when that cannot be written); its path, or None when nothing
    could be written. The file is readable by its owner only."""
    text = scrub("".join(traceback.format_exception(exc)))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    for logs in (_home() / "logs", _private_temp_dir()):
        try:
            if logs is None:
                continue
            logs.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = logs / f"crash-{stamp}.log"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
            return path
        except OSError:  # a full disk: no empty log is left behind
            with contextlib.suppress(OSError):
                path.unlink()
    return None


def _private_temp_dir() -> Path | None:
    """``<tmp>/deep-research-logs-<uid>``, made 0700; None when it exists but is not a
    folder of ours that only we can enter (another user could read or swap our logs)."""
    folder = Path(tempfile.gettempdir()) / f"deep-research-logs-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return None
    if stat.S_IMODE(info.st_mode) != 0o700:
        try:
            os.chmod(folder, 0o700)
        except OSError:
            return None
    return folder


def scrub(text: str) -> str:
    """``text`` without any secret: the value of every secret setting (from the environment
    or ``.env``), however short, becomes its name, and anything shaped like an API key is
    masked. Longer secrets first, so one that holds another is replaced whole. A short one
    (a local server's dummy key, ``x`` or ``ollama``) is replaced only as a whole word, or it
    would garble every word that holds its letters."""
    for name, secret in sorted(_secrets().items(), key=lambda item: -len(item[1])):
        if len(secret) >= LONG_SECRET:
            text = text.replace(secret, f"<{name}>")
        elif secret:
            whole = re.compile(rf"(?<![\w-]){re.escape(secret)}(?![\w-])")
            text = whole.sub(f"<{name}>", text)
    return _KEY_SHAPED.sub(lambda m: f"{m.group(1)}-<masked>", text)


def _secrets() -> dict[str, str]:
    found = {name: os.environ.get(name, "") for name in SECRET_VARIABLES}
    try:
        from pydantic import SecretStr

        from deep_research.app.loading import load_settings

        settings = load_settings()
        for field in type(settings).model_fields:
            value = getattr(settings, field)
            if isinstance(value, SecretStr) and value.get_secret_value():
                found[f"{field.upper()} (settings)"] = value.get_secret_value()
    except Exception:  # invalid settings are why some runs crash: use what is known
        pass
    return found


def _home() -> Path:
    try:
        from deep_research.app.loading import load_settings

        return load_settings().home
    except Exception:  # the settings may be what crashed: fall back to the environment
        from deep_research.app.home import data_home

        return data_home()
