"""A team-wide cap on research jobs in flight: ``DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS``.

Slot ``i`` of ``limit`` is PostgreSQL's advisory lock ``(NAMESPACE, i)``, held by this
process's own connection while one of its research jobs runs. PostgreSQL lets go of a
connection's locks when it closes, so a worker that dies frees its slots with it: at once
when killed, within a minute when its machine is lost (``SERVER_KEEPALIVES``).

Invariants:
- One connection per process and database (``job_slots`` is cached), one statement at a
  time on it (a lock); a slot this process holds is never taken twice by it (advisory locks
  nest within a connection: ``taken`` says which are ours).
- A connection that fails loses every slot it held: they are forgotten here too, and the
  next ``try_take`` opens a new connection. For that moment the team may run more jobs
  than the cap (the jobs run on at the provider); it never waits forever on a slot no one
  holds.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from deep_research.core.errors import StorageError

if TYPE_CHECKING:
    import psycopg

NAMESPACE = 0x6472  # "dr": the first key of every slot's advisory lock
SERVER_KEEPALIVES = (
    "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3"
)
"""The server's side of a slot's connection: a worker's machine lost (no FIN, no RST) frees
its slots within ~1 minute, not the 2 hours of the operating system's default."""


class JobSlots:
    def __init__(self, conninfo: str, limit: int) -> None:
        self.limit = limit
        self._conninfo = conninfo
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._lock = threading.Lock()
        self.taken: set[int] = set()

    def try_take(self) -> int | None:
        """A free slot, now held by this process; None when all ``limit`` are in use."""
        with self._lock, self._failing("take a research-job slot"):
            conn = self._connection()
            for slot in range(self.limit):
                if slot in self.taken:
                    continue
                row = conn.execute(
                    "SELECT pg_try_advisory_lock(%s, %s)", (NAMESPACE, slot)
                ).fetchone()
                if row is not None and row[0]:
                    self.taken.add(slot)
                    return slot
            return None

    def give_back(self, slot: int) -> None:
        """Let go of ``slot`` (already gone with a failed connection: nothing to do)."""
        with self._lock:
            if slot not in self.taken:
                return
            self.taken.discard(slot)
            try:
                with self._failing("give back a research-job slot"):
                    assert self._conn is not None  # ours while ``taken`` holds it
                    self._conn.execute("SELECT pg_advisory_unlock(%s, %s)", (NAMESPACE, slot))
            except StorageError:
                pass  # the connection is closed now: its slots went with it

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        if self._conn is None or self._conn.closed:
            self._drop()
            given = str(conninfo_to_dict(self._conninfo).get("options") or "")
            conninfo = make_conninfo(self._conninfo, options=f"{given} {SERVER_KEEPALIVES}")
            self._conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=10)
        return self._conn

    def _drop(self) -> None:
        """Close the connection: its slots go with it."""
        if self._conn is not None:
            self._conn.close()
        self._conn = None
        self.taken.clear()

    @contextmanager
    def _failing(self, doing: str) -> Iterator[None]:
        """A database error as one ``StorageError`` line (no password); the connection,
        which may have lost its locks with it, is closed."""
        import psycopg

        from deep_research.persistence.schema import first_line

        try:
            yield
        except psycopg.Error as exc:
            self._drop()
            raise StorageError(f"could not {doing}: {first_line(exc, self._conninfo)}") from None


@functools.cache
def job_slots(conninfo: str, limit: int) -> JobSlots:
    """This process's slots on the team's database (one connection, whatever its runs)."""
    return JobSlots(conninfo, limit)
