"""A session's parts in PostgreSQL: its paid jobs' journal, and its event log, evidence (and
vectors) and claim ledger, the ``Events``, ``Evidence`` and ``ClaimStore`` that ``PgSessions``
hands out.

Invariants, as with files (``persistence.jobs``, ``.events``, ``.evidence``, ``.claims``):
- Journal lines are numbered 1, 2, … per session under the session's row lock; a state
  holds the lines up to its ``jobs_journaled``, and loading replays the ones after.
- Event ids are given by the database, the last one's plus one, under the session's row
  lock: they increase by one across every run of the session. The stored JSON holds no id
  (the column is the id), so a retried append finds the event already kept as the last one
  and keeps it once.
- A node's units are replaced whole in one transaction (the latest batch wins); units read
  back in the order they were kept, so in the order the nodes finished.
- A row that does not parse (an event, a unit, a ledger) is skipped and counted or logged,
  never fatal; another embedder's vectors are none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence

from pydantic import ValidationError

from deep_research.core.events import RunEvent
from deep_research.core.ledger import ClaimLedger
from deep_research.core.models import EvidenceUnit, SessionState
from deep_research.persistence.jobs import Line as JobsLine
from deep_research.persistence.postgres_db import Cursor, Database, no_session

log = logging.getLogger(__name__)


def existing(db: Database, session_id: str) -> str:
    """``session_id``, when it names a session (else ``SessionError``)."""
    found = db.run(
        lambda cur: cur.execute(
            "SELECT 1 FROM sessions WHERE session_id = %s", (session_id,)
        ).fetchone()
    )
    if found is None:
        raise no_session(session_id)
    return session_id


# --- the paid jobs' journal (``persistence.jobs``) ------------------------------------


def replay_jobs(cur: Cursor, state: SessionState) -> SessionState:
    """``state`` with the journal's lines after ``state.jobs_journaled`` applied."""
    rows = cur.execute(
        "SELECT seq, line FROM session_jobs WHERE session_id = %s AND seq > %s ORDER BY seq",
        (state.session_id, state.jobs_journaled),
    ).fetchall()
    for _, raw in rows:
        with contextlib.suppress(ValidationError):
            line = JobsLine.model_validate_json(raw)
            if node := state.nodes.get(line.node):
                node.remote_jobs, node.job_intents = line.remote_jobs, line.job_intents
    if rows:
        state.jobs_journaled = rows[-1][0]
    return state


def jobs_line(state: SessionState, node_id: str) -> str:
    """Node ``node_id``'s jobs as they stand, as a line of the journal."""
    node = state.nodes[node_id]
    line = JobsLine(node=node_id, remote_jobs=node.remote_jobs, job_intents=node.job_intents)
    return line.model_dump_json()


def append_jobs_line(cur: Cursor, session_id: str, line: str) -> int:
    """Keep ``line`` as the session's next; its number."""
    appended = cur.execute(
        "INSERT INTO session_jobs (session_id, seq, line) "
        "SELECT %(s)s, coalesce(max(seq), 0) + 1, %(line)s FROM session_jobs "
        "WHERE session_id = %(s)s RETURNING seq",
        {"s": session_id, "line": line},
    ).fetchone()
    assert appended is not None  # an INSERT … SELECT of an aggregate makes one row
    return int(appended[0])


# --- events ------------------------------------------------------------------------


class PgEvents:
    """The append side of a session's event log (an ``Events``)."""

    def __init__(self, db: Database, session_id: str) -> None:
        self._db = db
        self.session_id = existing(db, session_id)
        self.last_id = db.run(lambda cur: _last_id(cur, session_id))
        self.opened_after = self.last_id
        self.listeners: list[Callable[[RunEvent], None]] = []

    def append(self, event: RunEvent) -> RunEvent:
        text = event.model_copy(update={"id": 0}).model_dump_json()
        session_id = self.session_id
        self.last_id = self._db.write(session_id, lambda cur: _insert(cur, session_id, text))
        stored = event.model_copy(update={"id": self.last_id})
        for listener in list(self.listeners):
            listener(stored)
        return stored

    def read(self, after: int = 0) -> list[RunEvent]:
        return read_events(self._db, self.session_id, after)

    def close(self) -> None:
        """Nothing to close: the ``Database`` keeps the connection."""


def _last_id(cur: Cursor, session_id: str) -> int:
    row = cur.execute(
        "SELECT coalesce(max(id), 0) FROM session_events WHERE session_id = %s", (session_id,)
    ).fetchone()
    return int(row[0]) if row else 0


def _insert(cur: Cursor, session_id: str, event: str) -> int:
    row = cur.execute(
        "WITH last AS (SELECT id, event FROM session_events WHERE session_id = %(s)s "
        "ORDER BY id DESC LIMIT 1) "
        "INSERT INTO session_events (session_id, id, event) "
        "SELECT %(s)s, coalesce((SELECT id FROM last), 0) + 1, %(e)s "
        "WHERE NOT EXISTS (SELECT 1 FROM last WHERE event = %(e)s) RETURNING id",
        {"s": session_id, "e": event},
    ).fetchone()
    if row is None:  # this very event is the last one: a retry after a lost commit reply
        return _last_id(cur, session_id)
    return int(row[0])


def read_events(db: Database, session_id: str, after: int = 0) -> list[RunEvent]:
    """The session's events with an id above ``after``, in order; unreadable rows skipped."""
    rows = db.run(
        lambda cur: cur.execute(
            "SELECT id, event FROM session_events WHERE session_id = %s AND id > %s ORDER BY id",
            (session_id, after),
        ).fetchall()
    )
    events: list[RunEvent] = []
    for event_id, text in rows:
        try:
            events.append(RunEvent.model_validate_json(text).model_copy(update={"id": event_id}))
        except ValidationError:
            log.warning("session %s: event %d skipped (not an event)", session_id, event_id)
    return events


# --- evidence ----------------------------------------------------------------------


class PgEvidence:
    """A session's evidence units and their vectors (an ``Evidence``)."""

    def __init__(self, db: Database, session_id: str) -> None:
        self._db = db
        self.session_id = existing(db, session_id)

    async def keep(self, node_id: str, units: Sequence[EvidenceUnit]) -> None:
        await asyncio.to_thread(self.append, node_id, units)

    def append(self, node_id: str, units: Sequence[EvidenceUnit]) -> None:
        """The node's units, replacing its earlier ones (an empty batch too)."""
        rows = [(self.session_id, node_id, unit.model_dump_json()) for unit in units]

        def replace(cur: Cursor) -> None:
            cur.execute(
                "DELETE FROM session_evidence WHERE session_id = %s AND node_id = %s",
                (self.session_id, node_id),
            )
            cur.executemany(
                "INSERT INTO session_evidence (session_id, node_id, unit) VALUES (%s, %s, %s)",
                rows,
            )

        self._db.write(self.session_id, replace)

    def read(self) -> tuple[list[EvidenceUnit], str]:
        rows = self._db.run(
            lambda cur: cur.execute(
                "SELECT unit FROM session_evidence WHERE session_id = %s ORDER BY position",
                (self.session_id,),
            ).fetchall()
        )
        units: list[EvidenceUnit] = []
        for (text,) in rows:
            try:
                units.append(EvidenceUnit.model_validate_json(text))
            except ValidationError:
                log.warning("session %s: an evidence unit skipped (not a unit)", self.session_id)
        skipped = len(rows) - len(units)
        return units, f"{skipped} damaged unit(s) skipped in {self._db.where}" if skipped else ""

    def vectors(self, embedder_id: str) -> dict[str, list[float]]:
        import numpy as np

        row = self._db.run(
            lambda cur: cur.execute(
                "SELECT texts, dimensions, vectors FROM session_vectors "
                "WHERE session_id = %s AND embedder_id = %s",
                (self.session_id, embedder_id),
            ).fetchone()
        )
        if row is None:
            return {}
        try:
            texts = json.loads(row[0])
            matrix = np.frombuffer(row[2], dtype="<f4").reshape(len(texts), row[1])
        except (ValueError, TypeError) as exc:
            log.warning("session %s: vectors not read (%s); made again", self.session_id, exc)
            return {}
        return dict(zip(map(str, texts), matrix.tolist(), strict=True))

    def save_vectors(self, embedder_id: str, vectors: Mapping[str, list[float]]) -> None:
        """Replace the saved vectors (another embedder's included)."""
        import numpy as np

        texts = list(vectors)
        matrix = np.array([vectors[text] for text in texts], dtype="<f4")
        dimensions = matrix.shape[1] if matrix.ndim == 2 else 0
        row = (self.session_id, embedder_id, json.dumps(texts), dimensions, matrix.tobytes())
        self._db.write(
            self.session_id,
            lambda cur: cur.execute(
                "INSERT INTO session_vectors AS v VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET embedder_id = excluded.embedder_id, "
                "texts = excluded.texts, dimensions = excluded.dimensions, "
                "vectors = excluded.vectors",
                row,
            ),
        )


# --- claims ------------------------------------------------------------------------


class PgClaims:
    """A session's claim ledger (a ``ClaimStore``)."""

    def __init__(self, db: Database, session_id: str) -> None:
        self._db = db
        self.session_id = existing(db, session_id)

    def units(self) -> list[EvidenceUnit]:
        return PgEvidence(self._db, self.session_id).read()[0]

    def load(self) -> ClaimLedger | None:
        row = self._db.run(
            lambda cur: cur.execute(
                "SELECT ledger FROM session_claims WHERE session_id = %s", (self.session_id,)
            ).fetchone()
        )
        if row is None:
            return None
        try:
            return ClaimLedger.model_validate_json(row[0])
        except ValidationError as exc:
            log.warning(
                "session %s: claims not read (%s); the next check writes them anew",
                self.session_id,
                exc.errors()[0]["msg"],
            )
            return None

    def save(self, ledger: ClaimLedger) -> None:
        self._db.write(
            self.session_id,
            lambda cur: cur.execute(
                "INSERT INTO session_claims VALUES (%s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET ledger = excluded.ledger",
                (self.session_id, ledger.model_dump_json()),
            ),
        )
