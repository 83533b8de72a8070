"""Which workers are alive: the ``workers`` table (schema version 2), a heartbeat a row.

    with Heartbeats(url, executor_id, timeout) as beats:   # the row is written at once
        beats.beat()          # False: another worker declared this one dead meanwhile
        beats.reap(hand_on)   # each executor silent longer than ``timeout`` handed on, removed
        beats.leave()         # this worker stops: the next reaper hands its runs on

Invariants:
- A worker is dead once its ``heartbeat_at`` is ``timeout`` old, by the database's clock
  (``now()``): workers on machines whose clocks disagree still agree on who is dead.
- ``reap`` holds the dead rows (``FOR UPDATE SKIP LOCKED``) while their runs are handed on,
  and deletes them in the same transaction: of two workers reaping at once, exactly one
  gets each dead executor; one that dies midway leaves the rows for the next.
- A worker whose row was reaped is not brought back by ``beat``: its runs are another's.
- One connection of its own (a ``postgres_db.Database``: one thread at a time, opened again
  after it broke, no password in its errors): the heartbeat thread and the reaper never
  wait on a session's transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

from deep_research.persistence.postgres_db import Cursor, Database

log = logging.getLogger(__name__)


class Heartbeats:
    def __init__(self, conninfo: str, executor_id: str, timeout_seconds: float) -> None:
        self.executor_id = executor_id
        self.timeout_seconds = timeout_seconds
        self._db = Database(conninfo)  # its own connection: never behind a session's
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

    def reap(self, hand_on: Callable[[str], None]) -> list[str]:
        """Hand on (``hand_on``: put its unfinished runs back on the queue) each worker
        silent for ``timeout_seconds`` (this one never), then remove it; the ones removed.
        One transaction holds their rows meanwhile: two reapers never hand one on twice, and
        a reaper that dies or fails before the end leaves them for the next (handing on
        again finds nothing left to resume)."""

        def sweep(cur: Cursor) -> list[str]:
            cur.execute(
                "SELECT executor_id FROM workers "
                "WHERE heartbeat_at < now() - make_interval(secs => %s) AND executor_id <> %s "
                "FOR UPDATE SKIP LOCKED",
                (self.timeout_seconds, self.executor_id),
            )
            handed: list[str] = []
            for (gone,) in cur.fetchall():
                try:
                    hand_on(str(gone))
                except Exception:
                    log.exception("worker %s: its runs not handed on; the next reap tries", gone)
                    continue
                handed.append(str(gone))
            cur.execute("DELETE FROM workers WHERE executor_id = ANY(%s)", (handed,))
            return handed

        return self._db.run(sweep)

    def mourn(self, executor_id: str) -> None:
        """Put a reaped worker back, dead (this one, declared dead while it ran): the next
        ``reap`` hands on what it took meanwhile."""
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
        self._db.close()

    def __enter__(self) -> Heartbeats:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(
        self, query: str, params: tuple[Any, ...], *, retry: bool = True
    ) -> list[tuple[Any, ...]]:
        def rows(cur: Cursor) -> list[tuple[Any, ...]]:
            cur.execute(query, params)
            return cur.fetchall() if cur.description else []

        return self._db.run(rows, retry=retry)
