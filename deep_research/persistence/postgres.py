"""Sessions in PostgreSQL (team mode): ``PgSessions``, the ``Sessions`` port over the tables
of ``persistence.schema``, for workers on several machines sharing one database.

    upgrade(url)                    # once per release: `deep-research db upgrade`
    sessions = PgSessions(url)      # refuses a database at another schema version
    with sessions.lock(session_id): # a lease, renewed while held: see ``postgres_db``
        sessions.save(state)        # fenced: fails once another worker took the lease over

Invariants, beside the port's (``persistence.port``):
- A state is stored as the exact text ``serialize`` made and read with ``records.decode``: a
  row that does not decode is a one-line ``SessionError``, and ``list()`` shows it as
  ``corrupt`` and lists the others, as with files.
- The job journal is ``session_jobs``: a line per ``save_jobs``, numbered 1, 2, … per
  session; ``serialize`` stamps the last one this process wrote or this state was loaded
  with, without a query (it runs on the event loop), and ``load`` replays the lines after it.
- ``updated_at`` is this machine's clock at the write, as a file's mtime is: a ledger entry
  dated before a save is found by ``changed_since`` from that save on.
- The lock is a lease (``postgres_db``): it goes with its holder ``lease_seconds`` after the
  holder stops renewing it, not at once as a ``flock`` does.
- The report and the claim ledger are kept in the database: ``report_location`` is
  ``db:<session id>/report.md`` (``claims_location``: ``…/claims.json``), a name for
  people (``deep-research sessions report <id>`` prints the report), not a path.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from deep_research.core.errors import SessionError
from deep_research.core.events import TERMINAL, RunEvent
from deep_research.core.models import RunStatus, SessionState, utcnow
from deep_research.persistence.postgres_db import Cursor, Database, delete_unleased, no_session
from deep_research.persistence.postgres_parts import (
    PgClaims,
    PgEvents,
    PgEvidence,
    append_jobs_line,
    jobs_line,
    read_events,
    replay_jobs,
)
from deep_research.persistence.records import (
    SCHEMA_VERSION,
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
    from deep_research.persistence.port import Sessions

MIN_POLL_SECONDS = 0.25
"""A follower's shortest poll: the database serves every watcher of every machine."""

_SUMMARY_ROWS = """
SELECT s.session_id, s.state, s.updated_at,
       s.lease_owner IS NOT NULL AND s.lease_expires > now(),
       r.session_id IS NOT NULL
FROM sessions s LEFT JOIN session_reports r USING (session_id)
"""


class PgSessions:
    """Every session kept in one PostgreSQL database (a ``Sessions``)."""

    def __init__(self, conninfo: str, *, lease_seconds: float = 60.0) -> None:
        self._db = Database(conninfo)
        self.where = self._db.where
        """The database, as messages name it (no password)."""
        self.lease_seconds = lease_seconds
        self._journaled: dict[str, int] = {}
        """The last journal line this process wrote, by session."""

    def close(self) -> None:
        self._db.close()

    # --- naming ------------------------------------------------------------------

    def resolve(self, session_id_or_prefix: str) -> str:
        """The full id for a full id or a unique prefix, like git."""
        prefix = check_id(session_id_or_prefix)
        matches: builtins.list[str] = self._db.run(
            lambda cur: [
                sid
                for (sid,) in cur.execute(
                    "SELECT session_id FROM sessions WHERE session_id LIKE %s "
                    "ORDER BY session_id LIMIT 11",
                    (prefix + "%",),
                )
            ]
        )
        if prefix in matches:
            return prefix
        if not matches:
            raise no_session(prefix)
        if len(matches) > 1:
            shown = ", ".join(matches[:10]) + (" …" if len(matches) > 10 else "")
            raise SessionError(f"session id {prefix} is ambiguous: {shown}")
        return matches[0]

    def changed_since(self, when: datetime) -> builtins.list[str]:
        """The sessions saved at or after ``when``."""
        return self._db.run(
            lambda cur: [
                sid
                for (sid,) in cur.execute(
                    "SELECT session_id FROM sessions WHERE updated_at >= %s", (when,)
                )
            ]
        )

    # --- state -------------------------------------------------------------------

    def create(self, question: str, **fields: Any) -> SessionState:
        """A new session, saved; a new id again on the (48-bit) chance of a clash."""
        while True:
            state = SessionState(session_id=new_session_id(), question=question, **fields)
            if self._insert(state):
                return state

    def _insert(self, state: SessionState) -> bool:
        """Whether ``state`` is kept under its id (False: the id is another session's)."""
        payload = self.serialize(state)
        row = (state.session_id, payload, state.created_at, utcnow())

        def insert(cur: Cursor) -> bool:
            cur.execute(
                "INSERT INTO sessions (session_id, state, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                row,
            )
            kept = cur.execute(  # ours, also when a retry finds it kept by the first try
                "SELECT state FROM sessions WHERE session_id = %s", (state.session_id,)
            ).fetchone()
            return kept is not None and kept[0] == payload

        return self._db.run(insert)

    def serialize(self, state: SessionState) -> str:
        """The state as stored, with the journal's lines it holds (no query: on the loop)."""
        state.schema_version = SCHEMA_VERSION
        written = self._journaled.get(state.session_id, 0)
        state.jobs_journaled = max(written, state.jobs_journaled)
        return state.model_dump_json()

    def save(self, state: SessionState) -> None:
        state.updated_at = utcnow()
        self.write_serialized(state.session_id, self.serialize(state))

    def write_serialized(self, session_id: str, payload: str) -> None:
        row = (payload, datetime.now(UTC), session_id)
        self._db.write(
            check_id(session_id),
            lambda cur: cur.execute(
                "UPDATE sessions SET state = %s, updated_at = %s WHERE session_id = %s", row
            ),
        )

    def load(self, session_id_or_prefix: str) -> SessionState:
        return self._read(self.resolve(session_id_or_prefix))

    def _read(self, session_id: str) -> SessionState:
        def read(cur: Cursor) -> SessionState:
            row = cur.execute(
                "SELECT state FROM sessions WHERE session_id = %s", (session_id,)
            ).fetchone()
            if row is None:
                raise no_session(session_id)
            state = decode(session_id, row[0].encode("utf-8"), f"its state in {self.where}")
            return replay_jobs(cur, state)

        return self._db.run(read)

    def save_jobs(self, state: SessionState, node_id: str) -> None:
        """Node ``node_id``'s job intents and ids kept now: a line of the journal."""
        session_id, line = check_id(state.session_id), jobs_line(state, node_id)
        self._journaled[session_id] = self._db.write(
            session_id, lambda cur: append_jobs_line(cur, session_id, line)
        )

    # --- listing -----------------------------------------------------------------

    def list(self) -> builtins.list[SessionSummary]:
        """Every session, newest first; unreadable ones as status ``corrupt``."""
        rows = self._db.run(lambda cur: cur.execute(_SUMMARY_ROWS).fetchall())
        summaries = [self._summary(*row) for row in rows]
        return sorted(summaries, key=lambda row: row.created_at, reverse=True)

    def _summary(
        self,
        session_id: str,
        payload: str,
        updated_at: datetime,
        locked: bool,
        reported: bool,
    ) -> SessionSummary:
        try:
            state = decode(session_id, payload.encode("utf-8"), f"its state in {self.where}")
        except SessionError as exc:  # dated by its last write, as a file by its mtime
            return corrupt(session_id, updated_at, exc)
        return summary(state, shown_status(state, reported=lambda: reported, locked=lambda: locked))

    # --- who runs it -------------------------------------------------------------

    def lock(self, session_id: str) -> contextlib.AbstractContextManager[None]:
        """Hold the session's lease, or raise ``SessionLocked`` at once."""
        return self._db.lease(check_id(session_id), self.lease_seconds)

    def is_locked(self, session_id: str) -> bool:
        """True while a worker holds a live lease on the session."""
        return self._db.locked(check_id(session_id))

    def shown_status(self, state: SessionState) -> RunStatus:
        """The status to show: an unfinished run nobody holds reads as interrupted."""
        session_id = state.session_id
        return shown_status(
            state,
            reported=lambda: self.report_location(session_id) is not None,
            locked=lambda: self.is_locked(session_id),
        )

    # --- removing ----------------------------------------------------------------

    def remove(self, session_id_or_prefix: str) -> str:
        """Delete a session and all it holds; its id. Refused (``SessionLocked``) while a
        worker holds its lease."""
        session_id = self.resolve(session_id_or_prefix)
        self._db.run(lambda cur: delete_unleased(cur, session_id))
        return session_id

    # --- its parts ---------------------------------------------------------------

    def events(self, session_id: str) -> PgEvents:
        return PgEvents(self._db, check_id(session_id))

    async def follow(
        self,
        session_id: str,
        after: int = 0,
        *,
        poll_seconds: float = 0.05,
        running: Callable[[], bool] | None = None,
    ) -> AsyncGenerator[RunEvent, None]:
        """Events above ``after`` as they are kept, polled every ``poll_seconds`` (at least
        ``MIN_POLL_SECONDS``: each poll is a query, each watcher's); stops after an ``end``
        event, or once ``running`` says no and a last read found what was left."""
        session_id = check_id(session_id)
        while True:
            events = await asyncio.to_thread(read_events, self._db, session_id, after)
            for event in events:
                after = event.id
                yield event
                if event.type in TERMINAL:
                    return
            if not events and running is not None and not await asyncio.to_thread(running):
                for event in await asyncio.to_thread(read_events, self._db, session_id, after):
                    yield event
                return
            await asyncio.sleep(max(poll_seconds, MIN_POLL_SECONDS))

    def evidence(self, session_id: str) -> PgEvidence:
        return PgEvidence(self._db, check_id(session_id))

    def claims(self, session_id: str) -> PgClaims:
        return PgClaims(self._db, check_id(session_id))

    # --- the report --------------------------------------------------------------

    def write_report(self, session_id: str, markdown: str, data: str | None = None) -> str:
        """Keep the report (its control characters left out: ``UNPRINTABLE``) and ``data``,
        the report as JSON, replacing both; its ``report_location``. Without ``data``, none
        is kept: an older one would describe another report."""
        row = (check_id(session_id), UNPRINTABLE.sub("", markdown), data, datetime.now(UTC))
        self._db.write(
            session_id,
            lambda cur: cur.execute(
                "INSERT INTO session_reports VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET markdown = excluded.markdown, "
                "data = excluded.data, written_at = excluded.written_at",
                row,
            ),
        )
        return _location(session_id, "report.md")

    def report(self, session_id: str) -> str | None:
        kept = self._report(session_id)
        return None if kept is None else kept[0]

    def report_data(self, session_id: str) -> str | None:
        kept = self._report(session_id)
        return None if kept is None else kept[1]

    def report_location(self, session_id: str) -> str | None:
        written = self._db.run(
            lambda cur: cur.execute(
                "SELECT 1 FROM session_reports WHERE session_id = %s", (check_id(session_id),)
            ).fetchone()
        )
        return None if written is None else _location(session_id, "report.md")

    def claims_location(self, session_id: str) -> str | None:
        checked = self._db.run(
            lambda cur: cur.execute(
                "SELECT 1 FROM session_claims WHERE session_id = %s", (check_id(session_id),)
            ).fetchone()
        )
        return None if checked is None else _location(session_id, "claims.json")

    def _report(self, session_id: str) -> tuple[str, str | None] | None:
        """The report's markdown and data, or None before it is written."""
        row = self._db.run(
            lambda cur: cur.execute(
                "SELECT markdown, data FROM session_reports WHERE session_id = %s",
                (check_id(session_id),),
            ).fetchone()
        )
        return None if row is None else (row[0], row[1])


def _location(session_id: str, part: str) -> str:
    """A name for a part kept in the database, in the shape of a path: ``db:<id>/<part>``."""
    return f"db:{session_id}/{part}"


if TYPE_CHECKING:

    def _conforms(sessions: PgSessions) -> Sessions:  # mypy checks PgSessions against the port
        return sessions
