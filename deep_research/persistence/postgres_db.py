"""The connection behind ``PgSessions``, and the lease that says which worker runs a session.

Invariants:
- One connection per ``Database``, opened on first use and checked to be at
  ``schema.VERSION``; threads take turns, one transaction each (``run``). A psycopg error
  never escapes: it is a ``StorageError`` naming the database, never its password.
- A connection that had already served and fails is replaced once and the work run again
  (a server restart, a failover, an idle connection cut): every write is idempotent under
  that retry (a lease's acquire too: a retry finds the lease its lost reply took) but a
  change of the daily ledger, which is not retried.
- A lease is ``(lease_owner, lease_epoch, lease_expires)`` on the session's row. Acquiring
  takes a free or expired lease and adds one to the epoch; a thread renews it every third of
  its time to live, on a connection of its own; releasing frees it only while the epoch is
  still ours. A holder that dies stops renewing, so its lease expires: the lock goes with
  its holder, ``lease_seconds`` later. A process holds a session once at a time.
- Every write through a ``Database`` holding a session's lease is fenced (``write``): it
  locks the session's row and checks the epoch first, so a worker whose lease another worker
  took over fails with ``StorageError`` and never overwrites the newer worker's state.
  Writes with no lease held (``create``, ``sessions cancel``) are not fenced, as with files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from deep_research.core.errors import SessionError, SessionLocked, StorageError
from deep_research.persistence import schema

log = logging.getLogger(__name__)

T = TypeVar("T")
Cursor = psycopg.Cursor[tuple[Any, ...]]
Connection = psycopg.Connection[tuple[Any, ...]]

_DEFAULTS = {
    "connect_timeout": "10",
    "application_name": "deep-research",
    "keepalives": "1",
    "keepalives_idle": "15",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "options": "-c lock_timeout=10s -c statement_timeout=60s",
}
"""Connection parameters the address may set otherwise: a dead peer is noticed in ~30 s, and
no statement waits forever on a row another client holds (every thread of a process shares
one connection: one stuck statement would hold them all)."""


def no_session(session_id: str) -> SessionError:
    return SessionError(f"no session {session_id}; see `deep-research sessions list`")


class Database:
    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.where = schema.redacted(conninfo)
        self.held: dict[str, int] = {}
        """The lease epoch of each session this ``Database`` holds."""
        self._lock = threading.Lock()
        self._conn: Connection | None = None

    # --- transactions ----------------------------------------------------------------

    def run(self, work: Callable[[Cursor], T], *, retry: bool = True) -> T:
        """``work`` in one transaction (committed when it returns, rolled back if it raises)."""
        with self._lock:
            reused = self._conn is not None
            try:
                return self._attempt(work)
            except psycopg.OperationalError as exc:
                self._close()
                if not (retry and reused):
                    raise self._failure(exc) from None
                log.warning("%s: connection lost (%s); reconnecting", self.where, exc)
            try:
                return self._attempt(work)
            except psycopg.OperationalError as exc:
                self._close()
                raise self._failure(exc) from None

    def write(self, session_id: str, work: Callable[[Cursor], T]) -> T:
        """``run`` a write of ``session_id``'s, fenced: a missing session is a
        ``SessionError``, a lease taken over from this ``Database`` a ``StorageError``."""

        def fenced(cur: Cursor) -> T:
            row = cur.execute(
                "SELECT lease_epoch FROM sessions WHERE session_id = %s FOR NO KEY UPDATE",
                (session_id,),
            ).fetchone()
            if row is None:
                raise no_session(session_id)
            held = self.held.get(session_id)
            if held is not None and row[0] != held:
                raise StorageError(f"session {session_id} was taken over by another worker")
            return work(cur)

        return self.run(fenced)

    def _attempt(self, work: Callable[[Cursor], T]) -> T:
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:
                return work(cur)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            given = conninfo_to_dict(self.conninfo)
            defaults = {k: v for k, v in _DEFAULTS.items() if k not in given}
            conn = psycopg.connect(make_conninfo(self.conninfo, **defaults), autocommit=True)
            try:
                schema.check(conn, self.where)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _failure(self, exc: psycopg.Error) -> StorageError:
        return StorageError(
            f"the database at {self.where}: {schema.first_line(exc, self.conninfo)}"
        )

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._close()

    # --- leases ------------------------------------------------------------------

    @contextlib.contextmanager
    def lease(self, session_id: str, seconds: float) -> Iterator[None]:
        """Hold ``session_id``'s lease, renewed while held; ``SessionLocked`` at once when
        another holds it."""
        if session_id in self.held:  # as a second flock of the same file is refused
            raise SessionLocked(f"session {session_id} is being run by this process ({owner()})")
        holder = f"{owner()} #{uuid.uuid4().hex[:8]}"  # a retried acquire finds its own
        epoch = self.run(lambda cur: _acquire(cur, session_id, seconds, holder))
        self.held[session_id] = epoch
        stop = threading.Event()
        renewals = Database(self.conninfo)  # never queued behind this one's statements
        renewer = threading.Thread(
            target=_renew,
            args=(renewals, session_id, epoch, seconds, stop),
            name=f"lease-{session_id}",
            daemon=True,
        )
        renewer.start()
        try:
            yield
        finally:
            stop.set()
            renewer.join()
            renewals.close()
            del self.held[session_id]
            try:
                self.run(lambda cur: _release(cur, session_id, epoch))
            except StorageError as exc:  # it expires by itself
                log.warning("session %s: lease not released (%s)", session_id, exc)

    def locked(self, session_id: str) -> bool:
        """True while a live lease is on ``session_id``."""
        return self.run(
            lambda cur: bool(
                cur.execute(
                    "SELECT 1 FROM sessions WHERE session_id = %s "
                    "AND lease_owner IS NOT NULL AND lease_expires > now()",
                    (session_id,),
                ).fetchone()
            )
        )


def _renew(
    db: Database, session_id: str, epoch: int, seconds: float, stop: threading.Event
) -> None:
    """Extend the lease every third of its time to live, on ``db``'s own connection."""
    while not stop.wait(seconds / 3):
        try:
            kept = db.run(lambda cur: _extend(cur, session_id, epoch, seconds))
        except StorageError as exc:  # the next round tries again
            log.warning("session %s: lease not renewed (%s)", session_id, exc)
            continue
        if not kept:
            log.warning("session %s: lease taken over by another worker", session_id)
            return


def owner() -> str:
    """Who holds a lease, as the ``SessionLocked`` message names it."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _acquire(cur: Cursor, session_id: str, seconds: float, holder: str) -> int:
    """Take a free or lapsed lease (or, retried after a lost reply, the one ``holder``
    took); its new epoch."""
    row = cur.execute(
        "UPDATE sessions SET lease_owner = %s, lease_epoch = lease_epoch + 1, "
        "lease_expires = now() + make_interval(secs => %s) "
        "WHERE session_id = %s "
        "AND (lease_owner IS NULL OR lease_expires <= now() OR lease_owner = %s) "
        "RETURNING lease_epoch",
        (holder, seconds, session_id, holder),
    ).fetchone()
    if row is None:
        raise _refusal(cur, session_id)
    return int(row[0])


def delete_unleased(cur: Cursor, session_id: str) -> None:
    """Delete the session (and all it holds) unless a live lease is on it."""
    deleted = cur.execute(
        "DELETE FROM sessions WHERE session_id = %s "
        "AND (lease_owner IS NULL OR lease_expires <= now()) RETURNING 1",
        (session_id,),
    ).fetchone()
    if deleted is None and isinstance(refusal := _refusal(cur, session_id), SessionLocked):
        raise refusal  # none at all: gone already (a retry whose first reply was lost)


def _refusal(cur: Cursor, session_id: str) -> SessionError:
    """Why a session could not be had: there is none, or a live lease is on it."""
    holder = cur.execute(
        "SELECT lease_owner FROM sessions WHERE session_id = %s", (session_id,)
    ).fetchone()
    if holder is None:
        return no_session(session_id)
    return SessionLocked(
        f"session {session_id} is being run by another process ({holder[0] or 'unknown'})"
    )


def _extend(cur: Cursor, session_id: str, epoch: int, seconds: float) -> bool:
    return (
        cur.execute(
            "UPDATE sessions SET lease_expires = now() + make_interval(secs => %s) "
            "WHERE session_id = %s AND lease_epoch = %s AND lease_owner IS NOT NULL "
            "RETURNING 1",
            (seconds, session_id, epoch),
        ).fetchone()
        is not None
    )


def _release(cur: Cursor, session_id: str, epoch: int) -> None:
    cur.execute(
        "UPDATE sessions SET lease_owner = NULL, lease_expires = NULL "
        "WHERE session_id = %s AND lease_epoch = %s",
        (session_id, epoch),
    )


class DatabaseBook:
    """The servers' daily ledger (``persistence.daily.Book``) as the one row of
    ``daily_book``, changed in one transaction that holds the row: every server of the
    team admits against one figure. A lost connection is not retried (a reservation made
    twice would hold twice the money): the caller's request fails, and the next one
    reconnects."""

    def __init__(self, conninfo: str) -> None:
        self._db = Database(conninfo)  # its own connection: a step reads the sessions
        self.where = f"{self._db.where} (daily_book)"

    def update(self, step: Callable[[bytes | None], tuple[T, str | None]]) -> T:
        def held(cur: Cursor) -> T:
            row = cur.execute("SELECT book FROM daily_book WHERE id = 1 FOR UPDATE").fetchone()
            raw = None if row is None or row[0] is None else str(row[0]).encode("utf-8")
            result, text = step(raw)
            if text is not None:
                cur.execute("UPDATE daily_book SET book = %s WHERE id = 1", (text,))
            return result

        return self._db.run(held, retry=False)
