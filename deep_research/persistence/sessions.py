"""The session store: one directory per run under ``Settings.sessions_dir``.

Layout::

    <root>/<session_id>/state.json   the SessionState, rewritten after every change
    <root>/<session_id>/jobs.jsonl   paid research jobs' intents and ids, appended at once
    <root>/<session_id>/report.md    the final report, once written
    <root>/<session_id>/report.json  the same report as data (its sources apart), for HTML
    <root>/<session_id>/lock         flock'ed by the process driving the session

Invariants:
- A session id is 4-32 lowercase hex characters (new ones are 12). Every id from
  the user is checked against that pattern before it touches the file system, so
  ``../x``, ``/etc`` or unicode look-alikes can never name a path outside ``root``.
- ``state.json`` is only ever replaced whole: write a temp file in the same
  directory, fsync it, ``os.replace``. A reader sees the previous or the new
  state, never a torn one, and no temp file survives a successful save.
- A corrupt or unreadable (nested past the parsers' depth, too) ``state.json`` is
  reported as a ``SessionError`` naming the file and is never overwritten by this module;
  ``list()`` shows such a session as ``corrupt`` instead of skipping it, and lists the
  others. One saved with a ``schema_version`` other than ``SCHEMA_VERSION`` (or none) is refused the
  same way, in one line naming both versions: no other format is read.
- A paid job's intent and id are a line of ``jobs.jsonl`` first (``persistence.jobs``);
  loading replays the lines ``state.json`` does not hold yet.
- At most one process drives a session: ``lock()`` holds an exclusive ``flock``
  (``persistence.locks``) that the kernel drops when the holder dies.
- Nothing written here contains secrets: ``SessionState`` has no secret fields
  and Settings never reach this module.
"""

from __future__ import annotations

import builtins
import contextlib
import os
import shutil
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deep_research.core.errors import SessionError, StorageError
from deep_research.core.models import RunStatus, SessionState, utcnow
from deep_research.persistence import jobs, locks
from deep_research.persistence.atomic import atomic_write_text
from deep_research.persistence.records import (
    SCHEMA_VERSION,
    SESSION_ID,
    UNPRINTABLE,
    SessionSummary,
    check_id,
    corrupt,
    decode,
    new_session_id,
    shown_status,
    summary,
)

if TYPE_CHECKING:
    from deep_research.core.events import RunEvent
    from deep_research.persistence.claims import SessionClaims
    from deep_research.persistence.events import EventLog
    from deep_research.persistence.evidence import SessionEvidence

STATE_FILE = "state.json"
REPORT_FILE = "report.md"
REPORT_DATA_FILE = "report.json"


class SessionStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root)
        self._journaled: dict[str, int] = {}
        """Lines in each session's jobs.jsonl, counted on first use by the driving process."""

    # --- naming ------------------------------------------------------------------

    def path(self, session_id: str) -> Path:
        """The directory of ``session_id`` (validated; need not exist)."""
        return self.root / check_id(session_id)

    def resolve(self, session_id_or_prefix: str) -> str:
        """The full id for a full id or a unique prefix, like git."""
        prefix = check_id(session_id_or_prefix)
        if (self.root / prefix).is_dir():
            return prefix
        matches = sorted(sid for sid in self._ids() if sid.startswith(prefix))
        if not matches:
            raise SessionError(f"no session {prefix}; see `deep-research sessions list`")
        if len(matches) > 1:
            shown = ", ".join(matches[:10]) + (" …" if len(matches) > 10 else "")
            raise SessionError(f"session id {prefix} is ambiguous: {shown}")
        return matches[0]

    def _ids(self) -> builtins.list[str]:
        try:
            entries = builtins.list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        # Anything not shaped like an id (temp dirs, stray files) is not a session.
        return [e.name for e in entries if SESSION_ID.fullmatch(e.name) and e.is_dir()]

    def changed_since(self, when: datetime) -> builtins.list[str]:
        """The sessions whose state.json was written at or after ``when``: no other holds a
        ledger entry dated since (an entry is dated before the save that writes it)."""
        # A second's slack for file systems with coarse timestamps.
        cutoff = when.timestamp() - 1.0
        changed: builtins.list[str] = []
        for session_id in self._ids():
            try:
                written = (self.root / session_id / STATE_FILE).stat().st_mtime
            except OSError:
                continue  # no state.json: nothing in it to count
            if written >= cutoff:
                changed.append(session_id)
        return changed

    def _existing(self, session_id: str) -> Path:
        directory = self.path(session_id)
        if not directory.is_dir():
            raise SessionError(f"no session {session_id}; see `deep-research sessions list`")
        return directory

    # --- state -------------------------------------------------------------------

    def create(self, question: str, **fields: Any) -> SessionState:
        """A new session directory with its first state.json."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            while True:
                session_id = new_session_id()
                try:
                    (self.root / session_id).mkdir()
                except FileExistsError:  # 48 random bits: practically never; never clobber
                    continue
                break
        except OSError as exc:  # a read-only data directory, a file where a folder goes
            raise StorageError(f"cannot create a session in {self.root}: {exc}") from exc
        state = SessionState(session_id=session_id, question=question, **fields)
        try:
            self.save(state)
        except StorageError:
            shutil.rmtree(self.root / session_id, ignore_errors=True)  # no empty session left
            raise
        return state

    def serialize(self, state: SessionState) -> str:
        """The state as state.json holds it, with the job journal's lines it holds."""
        state.schema_version = SCHEMA_VERSION
        state.jobs_journaled = self.jobs_journaled(state.session_id)
        # Compact: indenting costs ~50% more event-loop time per checkpoint; use `jq` to read.
        return state.model_dump_json()

    def save(self, state: SessionState) -> None:
        """Stamp ``updated_at`` and replace state.json atomically."""
        state.updated_at = utcnow()
        self.write_serialized(state.session_id, self.serialize(state))

    def write_serialized(self, session_id: str, payload: str) -> None:
        """Atomically write an already-serialized state (the Checkpointer's off-loop half)."""
        directory = self._existing(session_id)
        try:
            atomic_write_text(directory / STATE_FILE, payload)
        except OSError as exc:  # a full disk, a read-only data directory: nothing is lost
            raise StorageError(f"cannot save session {session_id}: {exc}") from exc

    def load(self, session_id_or_prefix: str) -> SessionState:
        return self._read(self.resolve(session_id_or_prefix))

    # --- paid research jobs (``persistence.jobs``) ----------------------------------

    def save_jobs(self, state: SessionState, node_id: str) -> None:
        """Node ``node_id``'s job intents and ids on disk now: a line of its journal."""
        lines = self.jobs_journaled(state.session_id)
        try:
            jobs.append(self._existing(state.session_id), state, node_id)
        except OSError as exc:
            del self._journaled[state.session_id]  # counted again: a torn line is ended
            raise StorageError(f"cannot save session {state.session_id}: {exc}") from exc
        self._journaled[state.session_id] = lines + 1

    def jobs_journaled(self, session_id: str) -> int:
        if (known := self._journaled.get(session_id)) is None:
            known = self._journaled[session_id] = jobs.length(self.path(session_id))
        return known

    def _read(self, session_id: str) -> SessionState:
        file = self.path(session_id) / STATE_FILE
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            raise SessionError(f"session {session_id} is corrupt: {file} is missing") from None
        except OSError as exc:
            raise SessionError(f"session {session_id}: cannot read {file}: {exc}") from None
        return jobs.replay(self.path(session_id), decode(session_id, raw, str(file)))

    # --- its parts: events, evidence, claims, report ------------------------------

    def events(self, session_id: str) -> EventLog:
        from deep_research.persistence.events import FILE_NAME, EventLog

        return EventLog(self._existing(session_id) / FILE_NAME)

    def follow(
        self,
        session_id: str,
        after: int = 0,
        *,
        poll_seconds: float = 0.05,
        running: Callable[[], bool] | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        from deep_research.persistence import events  # asyncio: not on `sessions list`

        path = self.path(session_id) / events.FILE_NAME
        return events.follow(path, after, poll_seconds=poll_seconds, running=running)

    def evidence(self, session_id: str) -> SessionEvidence:
        from deep_research.persistence.evidence import SessionEvidence

        return SessionEvidence(self._existing(session_id))

    def claims(self, session_id: str) -> SessionClaims:
        from deep_research.persistence.claims import SessionClaims

        return SessionClaims(self._existing(session_id))

    def report(self, session_id: str) -> str | None:
        with contextlib.suppress(FileNotFoundError):
            return (self.path(session_id) / REPORT_FILE).read_text("utf-8", errors="replace")
        return None

    def report_data(self, session_id: str) -> str | None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return (self.path(session_id) / REPORT_DATA_FILE).read_text("utf-8")
        return None

    def report_location(self, session_id: str) -> str | None:
        path = self.path(session_id) / REPORT_FILE
        return str(path) if path.exists() else None

    def claims_location(self, session_id: str) -> str | None:
        from deep_research.persistence.claims import FILE_NAME

        path = self.path(session_id) / FILE_NAME
        return str(path) if path.exists() else None

    def write_report(self, session_id: str, markdown: str, data: str | None = None) -> str:
        """Write report.md (its control characters, from model and page text, left out:
        ``UNPRINTABLE``), and ``data`` (the report as JSON) to report.json first, each
        atomically; returns the path of report.md. Without ``data``, an older report.json
        is removed: it would describe another report."""
        path = self._existing(session_id) / REPORT_FILE
        try:
            if data is None:
                path.with_name(REPORT_DATA_FILE).unlink(missing_ok=True)
            else:
                atomic_write_text(path.with_name(REPORT_DATA_FILE), data)
            atomic_write_text(path, UNPRINTABLE.sub("", markdown))
        except OSError as exc:
            raise StorageError(f"cannot write the report of session {session_id}: {exc}") from exc
        return str(path)

    # --- locking -----------------------------------------------------------------

    def lock(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's exclusive lock, or raise ``SessionLocked`` at once."""
        return locks.hold(self._existing(session_id), session_id)

    def shown_status(self, state: SessionState) -> RunStatus:
        session_id = state.session_id
        return shown_status(
            state,
            reported=lambda: self.report_location(session_id) is not None,
            locked=lambda: self.is_locked(session_id),
        )

    def is_locked(self, session_id: str) -> bool:
        """True while some process drives the session."""
        return locks.held(self.path(session_id))

    # --- removing ----------------------------------------------------------------

    def remove(self, session_id_or_prefix: str) -> str:
        """Delete a session and its report; its id. Refused (``SessionLocked``) while a
        process runs it. The directory is renamed away under the lock, so nobody can lock
        or load a half-deleted session."""
        session_id = self.resolve(session_id_or_prefix)
        doomed = self.root / f".{session_id}.deleting"
        with self.lock(session_id):
            os.replace(self.path(session_id), doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return session_id

    # --- listing -----------------------------------------------------------------

    def list(self) -> builtins.list[SessionSummary]:
        """Every session, newest first; unreadable ones as status ``corrupt``."""
        rows = [self._summary(session_id) for session_id in self._ids()]
        return sorted(rows, key=lambda row: row.created_at, reverse=True)

    def _summary(self, session_id: str) -> SessionSummary:
        try:
            state = self._read(session_id)
        except SessionError as exc:
            # No trustworthy timestamps inside: date it by the directory.
            when = datetime.fromtimestamp(self.path(session_id).stat().st_mtime, UTC)
            return corrupt(session_id, when, exc)
        return summary(state, self.shown_status(state))
