"""Saving a session from the event loop without blocking it.

Invariant: ``Checkpointer`` never lets an older snapshot overwrite a newer one.
"""

from __future__ import annotations

import threading

from deep_research.core.models import SessionState, utcnow
from deep_research.persistence.sessions import SessionStore


class Checkpointer:
    """Saves states from the event loop without blocking it, newest snapshot wins.

    ``save`` serializes on the loop (so the snapshot is the state as of the call,
    not as of some later moment in a worker thread) and writes in a thread. Every
    snapshot gets a sequence number; the writer keeps the newest pending snapshot
    per session and never writes one older than what is on disk. So concurrent
    saves may coalesce (a waiter finds its snapshot already superseded), a
    cancelled save never rolls the file back, and when ``save`` returns the file
    holds that snapshot or a newer one.
    """

    def __init__(self, store: SessionStore) -> None:
        import asyncio  # here, not at the top: `sessions list` starts without it (~25 ms)

        self._store = store
        self._seq = 0
        self._pending: dict[str, tuple[int, str]] = {}
        self._written: dict[str, int] = {}
        self._loop_lock = asyncio.Lock()  # one writer thread at a time from the loop
        self._write_lock = threading.Lock()  # orders loop writes against save_now
        # Guards only the counter and the pending slot (never held across I/O), so
        # save_now may run on another thread without blocking the loop's snapshots.
        self._seq_lock = threading.Lock()

    def _snapshot(self, state: SessionState) -> int:
        state.updated_at = utcnow()
        payload = self._store.serialize(state)
        with self._seq_lock:
            self._seq += 1
            self._pending[state.session_id] = (self._seq, payload)
            return self._seq

    def _flush(self, session_id: str) -> None:
        with self._write_lock:
            with self._seq_lock:
                seq, payload = self._pending[session_id]
            if seq <= self._written.get(session_id, 0):
                return
            self._store.write_serialized(session_id, payload)
            self._written[session_id] = seq

    async def save(self, state: SessionState) -> None:
        import asyncio

        seq = self._snapshot(state)
        async with self._loop_lock:
            if self._written.get(state.session_id, 0) >= seq:
                return  # a newer snapshot already reached the disk
            await asyncio.to_thread(self._flush, state.session_id)

    def save_now(self, state: SessionState) -> None:
        """Synchronous save for shutdown paths (signal handlers, finally blocks).

        Waits for a write already in progress, then writes this snapshot unless a
        newer one got there first. Safe from any thread, provided nothing mutates
        ``state`` while it is being serialized.
        """
        self._snapshot(state)
        self._flush(state.session_id)
