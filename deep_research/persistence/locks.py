"""The lock of a session driven by a process: an exclusive ``flock`` on its ``lock`` file.

The kernel drops a ``flock`` when its holder exits or dies, so a crash never leaves a stale
lock behind. flock locks belong to an open file description, so a second ``hold()`` in the
same process fails too: a session is driven by one owner, period. The lock file is never
deleted — unlinking it would let a second process lock a fresh inode while the first still
holds the old one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from deep_research.core.errors import SessionLocked

LOCK_FILE = "lock"


@contextlib.contextmanager
def hold(directory: Path, session_id: str) -> Iterator[None]:
    """Hold the session's lock, or raise ``SessionLocked`` at once (naming the holder)."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise SessionLocked(
                f"session {session_id} is being run by another process (pid {holder})"
            ) from None
        # The pid is only for the message above; the flock is the lock. A full disk
        # leaves the pid unwritten (the holder reads "unknown"), not the run unlocked:
        # what the run saves then fails with the disk's own error, naming its file.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def held(directory: Path) -> bool:
    """True while some process holds the lock (probes the flock without taking it)."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we may just have taken
    return False
