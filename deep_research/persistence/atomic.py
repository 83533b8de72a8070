"""Replacing a file all at once: a reader sees the previous text or the new one, never a torn
one, and no temp file survives a successful write."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` all at once.

    The temp file lives in the same directory so ``os.replace`` is a rename within
    one file system (atomic). ``os.replace`` alone survives a process crash; the
    fsync before it also survives a power loss or kernel crash, where the rename
    could otherwise reach the disk before the data and leave an empty state.json
    — the one failure a resumable run cannot recover from. It costs a few ms,
    paid off the event loop (see ``checkpoints.Checkpointer``). The directory itself is not
    fsync'ed: losing the rename just means resuming from the previous checkpoint.
    """
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError) and exc.filename is None:  # a write to a full disk
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
