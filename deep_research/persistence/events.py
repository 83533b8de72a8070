"""A session's event log, ``<session dir>/events.jsonl``: one JSON `RunEvent` a line.

Written only by the process that holds the session's lock (the one running it), read by
any process (``sessions watch``, the HTTP API's SSE stream), which follows the file as it
grows; the process running the run hands its events to its own followers as they are
written (``app.saved.follow_live``). Ids increase by one across the whole session, resumes
included: a follower that reconnects with the last id it saw misses nothing and sees
nothing twice.

Invariants: a line is written whole (one ``write`` of the line and its newline, then a
flush), so a reader meets at most one partial last line, which it leaves for the next
read; a line that does not parse (a torn write from a crash) is skipped, never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from deep_research.core.events import TERMINAL, RunEvent

FILE_NAME = "events.jsonl"


class EventLog:
    """The append side: assigns ids and writes each event as one line."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.last_id = max((e.id for e in read_events(path)), default=0)
        self.opened_after = self.last_id
        """The last id before this log was opened: this run's events are the ones after it."""
        self._file: IO[str] | None = None
        self.listeners: list[Callable[[RunEvent], None]] = []
        """Called with each event once it is written (the server's live subscribers)."""

    def append(self, event: RunEvent) -> RunEvent:
        self.last_id += 1
        stored = event.model_copy(update={"id": self.last_id})
        if self._file is None:
            self._file = self.path.open("a", encoding="utf-8")
        self._file.write(stored.model_dump_json() + "\n")
        self._file.flush()
        for listener in list(self.listeners):
            listener(stored)
        return stored

    def read(self, after: int = 0) -> list[RunEvent]:
        return read_events(self.path, after)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_events(path: Path, after: int = 0) -> list[RunEvent]:
    """The complete events in ``path`` with an id above ``after``."""
    events, _ = _read_from(path, 0, after)
    return events


def _read_from(path: Path, offset: int, after: int) -> tuple[list[RunEvent], int]:
    """Events in whole lines from byte ``offset``; and the offset after the last whole line."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            chunk = file.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1  # a partial last line waits for its newline
    events: list[RunEvent] = []
    for line in chunk[:end].splitlines():
        with contextlib.suppress(ValidationError, json.JSONDecodeError, UnicodeDecodeError):
            event = RunEvent.model_validate_json(line)
            if event.id > after:
                events.append(event)
    return events, offset + end


async def follow(
    path: Path,
    after: int = 0,
    *,
    poll_seconds: float = 0.05,
    running: Callable[[], bool] | None = None,
) -> AsyncGenerator[RunEvent, None]:
    """Events with an id above ``after`` as they are written; stops after an ``end`` event,
    or when ``running`` says no process runs the session any more and everything written
    has been read."""
    offset = 0
    while True:
        events, offset = _read_from(path, offset, after)
        for event in events:
            after = event.id
            yield event
            if event.type in TERMINAL:
                return
        if not events and running is not None and not running():
            events, offset = _read_from(path, offset, after)  # written just before it ended
            for event in events:
                yield event
            return
        await asyncio.sleep(poll_seconds)
