"""Which workers are alive: the ``workers`` table (schema version 2), a heartbeat a row.

    with Heartbeats(url, executor_id, timeout) as beats:   # the row is written at once
        beats.beat()          # False: another worker declared this one dead meanwhile
        beats.reap()          # the executors silent longer than ``timeout``, now removed
        beats.leave()         # this worker stops: the next reaper hands its runs on

Invariants:
- A worker is dead once its ``heartbeat_at`` is ``timeout`` old, by the database's clock
  (``now()``): workers on machines whose clocks disagree still agree on who is dead.
- ``reap`` deletes the dead rows and returns their ids in one statement: of two workers
  reaping at once, exactly one gets each dead executor, so its runs are handed on once.
- A worker whose row was reaped is not brought back by ``beat``: its runs are another's.
- One connection of its own, used by one thread at a time (``_lock``), opened again after
  it broke: the heartbeat thread and the reaper never wait on a session's transaction.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

import psycopg

from deep_research.core.errors import StorageError
from deep_research.persistence import schema


class Heartbeats:
    def __init__(self, conninfo: str, executor_id: str, timeout_seconds: float) -> None:
        self.executor_id = executor_id
        self.timeout_seconds = timeout_seconds
        self._where = schema.redacted(conninfo)
        self._conninfo = conninfo
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._run(
            "INSERT INTO workers VALUES (%s, now(), now()) "
            "ON CONFLICT (executor_id) DO UPDATE SET heartbeat_at = now()",
            (executor_id,),
        )

    def beat(self) -> bool:
        """Say this worker is alive; False when its row is gone (it was declared dead)."""
        return bool(
            self._run(
                "UPDATE workers SET heartbeat_at = now() WHERE executor_id = %s RETURNING 1",
                (self.executor_id,),
            )
        )

    def reap(self) -> list[str]:
        """The workers silent for ``timeout_seconds`` (this one never), removed now: the
        caller hands their runs on."""
        rows = self._run(
            "DELETE FROM workers WHERE heartbeat_at < now() - make_interval(secs => %s) "
            "AND executor_id <> %s RETURNING executor_id",
            (self.timeout_seconds, self.executor_id),
        )
        return [str(row[0]) for row in rows]

    def mourn(self, executor_id: str) -> None:
        """Put a reaped worker back, dead: the next ``reap`` returns it again."""
        self._run(
            "INSERT INTO workers VALUES (%s, now(), '-infinity') ON CONFLICT DO NOTHING",
            (executor_id,),
        )

    def leave(self) -> None:
        """Declare this worker dead now, so that the next reaper (another worker's, or the
        next one started) hands its unfinished runs on at once."""
        self._run(
            "UPDATE workers SET heartbeat_at = '-infinity' WHERE executor_id = %s",
            (self.executor_id,),
        )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()

    def __enter__(self) -> Heartbeats:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(
                        self._conninfo,
                        autocommit=True,
                        connect_timeout=10,
                        application_name="deep-research",
                    )
                    schema.check(self._conn, self._where)
                cur = self._conn.execute(query, params)
                return cur.fetchall() if cur.description else []
            except psycopg.OperationalError as exc:
                if self._conn is not None:
                    self._conn.close()  # opened again on the next call
                raise self._failure(exc) from exc
            except psycopg.Error as exc:
                raise self._failure(exc) from exc

    def _failure(self, exc: psycopg.Error) -> StorageError:
        return StorageError(f"the database at {self._where}: {schema.first_line(exc)}")
