"""Content-addressed result cache: (tool, model, normalized query) -> JSON text.

Invariants:
- Keys are ``content_hash(tool, model, normalize_query(query))``: anything that
  changes the result must be part of the key. Callers fold a prompt or schema
  version into ``tool`` (e.g. ``f"branch@{content_hash(prompt)}"``) so editing a
  prompt misses instead of serving stale answers.
- Values are ``str`` (JSON the caller produced). diskcache stores ``str`` as text,
  never as a pickle, so reading the cache can't execute code; a non-``str`` value
  found under a key is treated as a miss.
- The cache is an optimization, never a dependency: a missing, locked or corrupt
  store behaves as a miss (``get`` -> None, ``set`` -> no-op) and bumps ``errors``.
  Programming errors (bad argument types) still propagate.
- Secrets never enter the cache. Nothing here sees Settings; callers must not put
  API keys or auth headers into queries or values.
- No diskcache call runs on the event loop: each goes through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import diskcache
from pydantic import BaseModel

# What a broken store raises: sqlite for corrupt/locked files, OSError for the file
# system, Timeout when diskcache gives up waiting for sqlite's lock.
_STORE_ERRORS = (sqlite3.Error, OSError, diskcache.Timeout)


def _json_default(value: object) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def canonical_json(obj: object) -> str:
    """One spelling per value: sorted keys, no spaces, unicode kept as is."""
    return json.dumps(
        obj,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=_json_default,
    )


def content_hash(*parts: object) -> str:
    """sha256 hex of the canonical JSON of ``parts`` (as a list, so parts can't run together)."""
    return hashlib.sha256(canonical_json(list(parts)).encode("utf-8")).hexdigest()


def normalize_query(text: str) -> str:
    """Casefold, collapse every run of (unicode) whitespace to one space, strip."""
    return " ".join(text.casefold().split())


class ResultCache:
    """An async facade over ``diskcache.Cache`` that degrades to a miss on store errors.

    The store is opened lazily on first use, off the event loop; if opening fails,
    the cache stays disabled for the rest of the process rather than retrying on
    every call.
    """

    def __init__(self, directory: Path, timeout: float = 2.0) -> None:
        self.directory = directory
        # diskcache waits up to 60 s for sqlite's lock by default; a cache that
        # another process holds busy should cost a miss, not stall a branch.
        self.timeout = timeout
        self.errors = 0
        self._cache: diskcache.Cache | None = None
        self._disabled = False
        self._open_lock = threading.Lock()
        self._errors_lock = threading.Lock()

    @staticmethod
    def key(tool: str, model: str, query: str) -> str:
        return content_hash(tool, model, normalize_query(query))

    async def get(self, tool: str, model: str, query: str) -> str | None:
        return await asyncio.to_thread(self._get, self.key(tool, model, query))

    async def set(self, tool: str, model: str, query: str, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"cache values are JSON strings, got {type(value).__name__}")
        await asyncio.to_thread(self._set, self.key(tool, model, query), value)

    def close(self) -> None:
        # diskcache keeps one sqlite connection per thread; this closes the calling
        # thread's. Worker-thread connections close when their threads exit.
        with self._open_lock:
            if self._cache is not None:
                self._cache.close()
                self._cache = None
            self._disabled = True

    # --- worker-thread side ------------------------------------------------------

    def _count_error(self) -> None:
        # Worker threads run concurrently; `+=` on an attribute is not atomic.
        with self._errors_lock:
            self.errors += 1

    def _store(self) -> diskcache.Cache | None:
        with self._open_lock:
            if self._cache is None and not self._disabled:
                try:
                    self._cache = diskcache.Cache(str(self.directory), timeout=self.timeout)
                except _STORE_ERRORS:
                    self._count_error()
                    self._disabled = True
            return self._cache

    def _get(self, key: str) -> str | None:
        store = self._store()
        if store is None:
            return None
        try:
            value = store.get(key)
        except _STORE_ERRORS:
            self._count_error()
            return None
        return value if isinstance(value, str) else None

    def _set(self, key: str, value: str) -> None:
        store = self._store()
        if store is None:
            return
        try:
            store.set(key, value)
        except _STORE_ERRORS:
            self._count_error()
