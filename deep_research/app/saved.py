"""Sessions as saved: list them, read one, follow its events, read its report.

Nothing here builds an engine: ``sessions list``, ``sessions show`` and the servers' reads stay
cheap.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from deep_research.app.config import Settings
from deep_research.core.models import SessionState
from deep_research.persistence.sessions import SessionStore, SessionSummary

if TYPE_CHECKING:
    from deep_research.core.events import RunEvent
    from deep_research.core.report import Report
    from deep_research.persistence.events import EventLog


def list_sessions(settings: Settings) -> list[SessionSummary]:
    return SessionStore(settings.sessions_dir).list()


def status(settings: Settings, session_id: str) -> SessionState:
    """A session as saved; "running" with no process holding its lock reads as interrupted
    (its process died: kill -9, a crash), as in ``sessions list``."""
    store = SessionStore(settings.sessions_dir)
    state = store.load(session_id)
    if state.status == "running" and not store.is_locked(state.session_id):
        state.status = "interrupted"
    return state


async def watch(
    settings: Settings,
    session_id: str,
    *,
    after: int | None = None,
    poll_seconds: float = 0.05,
    live: EventLog | None = None,
) -> AsyncGenerator[RunEvent, None]:
    """A session's events as they happen, from any process: those after event id ``after``
    (None: from the start of its latest run), until that run ends — or at once, when no
    process runs the session and everything written has been read. ``live``: the run's
    log, when this process runs it (events arrive as written, not by polling)."""
    from deep_research.persistence.events import FILE_NAME, follow, follow_live, read_events

    store = SessionStore(settings.sessions_dir)
    session_id = store.resolve(session_id)
    path = store.path(session_id) / FILE_NAME
    if after is None and live is not None:
        after = live.opened_after  # this run's, even before its start event (queued)
    if after is None:
        starts = [event.id for event in read_events(path) if event.type == "start"]
        after = starts[-1] - 1 if starts else 0
    if live is not None:
        source = follow_live(live, after)
    else:
        source = follow(
            path, after, poll_seconds=poll_seconds, running=lambda: store.is_locked(session_id)
        )
    async with contextlib.aclosing(source):  # a follower that stops lets go of the log now
        async for event in source:
            yield event


def read_report(path: str) -> str:
    """A report this tool wrote (a path from ``report_path``, never a client's)."""
    from pathlib import Path

    return Path(path).read_text(encoding="utf-8", errors="replace")


def read_report_data(path: str) -> Report | str:
    """The report at ``path`` (from ``report_path``) as data, from the report.json written
    with it; a report saved before that file existed (or with it damaged) is its markdown."""
    from pathlib import Path

    from pydantic import ValidationError

    from deep_research.core.report import Report
    from deep_research.persistence.sessions import REPORT_DATA_FILE

    data = Path(path).with_name(REPORT_DATA_FILE)
    try:
        return Report.model_validate_json(data.read_bytes())
    except (OSError, ValidationError):
        return read_report(path)  # shown as written, its citations not linked


def report_path(settings: Settings, session_id: str) -> str | None:
    store = SessionStore(settings.sessions_dir)
    path = store.path(store.resolve(session_id)) / "report.md"
    return str(path) if path.exists() else None
