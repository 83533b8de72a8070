"""Where sessions live: the ``Sessions`` port, and ``open_sessions`` that picks its
implementation.

``SessionStore`` (``persistence.sessions``) keeps each session as a directory of files:
one user, one machine, no server. Everything above ``persistence/`` reaches a session's
state, job journal, events, evidence, claims and report through these methods only, never
through a path, so another implementation (PostgreSQL, for a team) is a drop-in. One
contract suite (``tests/test_sessions_contract.py``) runs against each implementation; what
they share (ids, a listing's row, reading a saved state) is in ``persistence.records``.

Invariants every implementation keeps (the contract suite checks them):
- ids are 4-32 lowercase hex characters; a prefix resolves like git's, or fails in one line;
- a saved state is read back whole, or the session reads as ``corrupt`` (never half of one);
- a paid job's intent and id are kept by ``save_jobs`` before it returns, and ``load``
  returns them even when no snapshot followed;
- at most one holder of ``lock`` at a time; the lock goes with its holder's death (a file's
  ``flock`` at once; a database's lease once it lapses, ``lease_seconds`` later);
- event ids increase by one across a session's runs, resumes included.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from deep_research.core.errors import ConfigError
from deep_research.persistence.sessions import SessionStore

if TYPE_CHECKING:
    from deep_research.core.events import RunEvent
    from deep_research.core.models import EvidenceUnit, RunStatus, SessionState
    from deep_research.core.ports import ClaimStore
    from deep_research.persistence.records import SessionSummary


class Events(Protocol):
    """A session's event log as its running process appends to it (``EventLog``)."""

    last_id: int
    opened_after: int
    """The last id before this log was opened: this run's events are the ones after it."""
    listeners: list[Callable[[RunEvent], None]]
    """Called with each event once it is kept (the servers' live followers)."""

    def append(self, event: RunEvent) -> RunEvent:
        """Keep ``event`` under the next id; the event as kept."""

    def read(self, after: int = 0) -> list[RunEvent]:
        """The events kept with an id above ``after``, in order."""

    def close(self) -> None: ...


class Evidence(Protocol):
    """A session's evidence units (an ``EvidenceSink``) and their saved vectors."""

    async def keep(self, node_id: str, units: Sequence[EvidenceUnit]) -> None: ...

    def read(self) -> tuple[list[EvidenceUnit], str]:
        """Every unit, in the order the nodes finished; and what was damaged ("" if none)."""

    def vectors(self, embedder_id: str) -> dict[str, list[float]]:
        """Saved vectors of unit texts, by text, under ``embedder_id`` ({} for none)."""

    def save_vectors(self, embedder_id: str, vectors: Mapping[str, list[float]]) -> None: ...


class Sessions(Protocol):
    """Every saved session: its state, paid-job journal, lock, events, evidence, claims and
    report."""

    where: str
    """Where the sessions are, as messages name it (a directory; a database, no password)."""

    # --- state ---
    def create(self, question: str, **fields: Any) -> SessionState: ...

    def resolve(self, session_id_or_prefix: str) -> str:
        """The full id for a full id or a unique prefix (``SessionError`` otherwise)."""

    def load(self, session_id_or_prefix: str) -> SessionState: ...

    def serialize(self, state: SessionState) -> str:
        """The state as it is saved (the ``Checkpointer`` does this on the event loop)."""

    def write_serialized(self, session_id: str, payload: str) -> None:
        """Save a state ``serialize`` made (the ``Checkpointer`` does this off the loop)."""

    def save(self, state: SessionState) -> None: ...

    def save_jobs(self, state: SessionState, node_id: str) -> None:
        """Keep node ``node_id``'s paid-job intents and ids now, ahead of any snapshot."""

    def list(self) -> list[SessionSummary]:
        """Every session, newest first; unreadable ones as status ``corrupt``."""

    def changed_since(self, when: datetime) -> builtins.list[str]:
        """Ids of the sessions saved at or after ``when``."""

    def remove(self, session_id_or_prefix: str) -> str: ...

    # --- who runs it ---
    def lock(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's exclusive lock, or raise ``SessionLocked`` at once."""

    def is_locked(self, session_id: str) -> bool: ...

    def shown_status(self, state: SessionState) -> RunStatus:
        """The status to show: an unfinished run nobody holds reads as interrupted."""

    # --- its parts ---
    def events(self, session_id: str) -> Events:
        """The append side of the session's event log (one per running process)."""

    def follow(
        self,
        session_id: str,
        after: int = 0,
        *,
        poll_seconds: float = 0.05,
        running: Callable[[], bool] | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Events above ``after`` as they are kept, from any process, until an end event,
        or until ``running`` says nobody runs the session and everything kept was read."""

    def evidence(self, session_id: str) -> Evidence: ...

    def claims(self, session_id: str) -> ClaimStore: ...

    def write_report(self, session_id: str, markdown: str, data: str | None = None) -> str:
        """Keep the report (``data``: it as JSON); where it is (``report_location``)."""

    def report(self, session_id: str) -> str | None:
        """The report's markdown as written, or None before one is."""

    def report_data(self, session_id: str) -> str | None:
        """The report as JSON, as written with it (``write_report``'s ``data``), or None."""

    def report_location(self, session_id: str) -> str | None:
        """Where a user finds the report (a file's path; ``db:<id>/report.md`` in a
        database), or None before one is written."""

    def claims_location(self, session_id: str) -> str | None:
        """Where a user finds the claim ledger (as ``report_location``), or None before a
        check."""


def open_sessions(
    sessions_dir: Path, database_url: str | None = None, *, lease_seconds: float = 60.0
) -> Sessions:
    """The sessions of this installation: in the PostgreSQL database at ``database_url``
    (a team's, its leases lapsing ``lease_seconds`` after their holder stops), else the
    files under ``sessions_dir``."""
    if not database_url:
        return SessionStore(sessions_dir)
    return _database(database_url, lease_seconds)


@functools.cache
def _database(database_url: str, lease_seconds: float) -> Sessions:
    """One ``PgSessions`` a database per process: one connection, and the leases this
    process holds known to every write it makes (each is fenced by its lease)."""
    with team_extra():
        from deep_research.persistence.postgres import PgSessions  # psycopg: a team's only
    return PgSessions(database_url, lease_seconds=lease_seconds)


@contextlib.contextmanager
def team_extra() -> Iterator[None]:
    """Say how to install PostgreSQL's driver when an import inside is missing it."""
    try:
        yield
    except ImportError as exc:
        if not (exc.name or "").startswith(("psycopg", "dbos")):
            raise
        raise ConfigError(
            "DEEP_RESEARCH_DATABASE_URL needs the team extra: pip install 'deep-research[team]'"
        ) from None
