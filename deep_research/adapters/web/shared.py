"""What every run in a process shares on the web: one page reader and one set of search rate
limits per event loop.

Politeness to a host and a provider's rate limit only mean something when every run in the
process counts against the same bucket (the MCP server and the HTTP API run many at once).
A run holds these through `SharedReader` and `SharedRateLimits`, built in the composition root
before any event loop runs; each takes its loop's shared object on first use and lets go
of it in ``aclose`` (the run's resources), and the last run to let go closes it.

Invariants: the shared objects are made, used and closed on one event loop; a reader is
shared by runs whose ``ReaderSettings`` are equal, rate limits by runs whose rates are
equal (the settings a process reads once, in practice).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from deep_research.adapters.branches.protocols import Page
from deep_research.adapters.web.reader import PageReader, ReaderSettings
from deep_research.adapters.web.search import default_rate_limits
from deep_research.adapters.web.search.base import RateLimits
from deep_research.core.scope import WebScope

T = TypeVar("T")


class _Registry(Generic[T]):
    """Objects by key, each with the count of its users."""

    def __init__(self) -> None:
        self._held: dict[Hashable, tuple[T, int]] = {}

    def acquire(self, key: Hashable, make: Callable[[], T]) -> T:
        item, users = self._held.get(key) or (make(), 0)
        self._held[key] = (item, users + 1)
        return item

    def release(self, key: Hashable) -> T | None:
        """The object, when its last user has let go of it (and it is forgotten)."""
        item, users = self._held.pop(key)
        if users > 1:
            self._held[key] = (item, users - 1)
            return None
        return item

    def __len__(self) -> int:
        return len(self._held)


READERS: _Registry[PageReader] = _Registry()
LIMITS: _Registry[RateLimits] = _Registry()


@dataclass
class SharedReader:
    """A ``Reader`` that reads through its event loop's shared `PageReader`, within the
    run's web ``scope`` (runs of other scopes share the reader and its politeness)."""

    settings: ReaderSettings
    scope: WebScope = field(default_factory=WebScope)
    _key: Hashable = field(default=None, init=False)
    _reader: PageReader | None = field(default=None, init=False)

    async def read(self, url: str) -> Page:
        if self._reader is None:
            self._key = (asyncio.get_running_loop(), self.settings)
            self._reader = READERS.acquire(self._key, lambda: PageReader(self.settings))
        return await self._reader.read(url, self.scope)

    async def aclose(self) -> None:
        if self._reader is None:
            return
        self._reader = None
        last = READERS.release(self._key)
        if last is not None:
            await last.aclose()


class SharedRateLimits(RateLimits):
    """The search rate limits of the running event loop, shared by every run in it: what a
    run's providers are given (``make_provider(limits=...)``). ``release`` when the run ends."""

    def __init__(self, per_second: Mapping[str, float] | None = None) -> None:
        self._given = dict(per_second or {})
        super().__init__(self._given)
        self._key: Hashable = None
        self._held: RateLimits | None = None

    def _shared(self) -> RateLimits:
        if self._held is None:
            self._key = (asyncio.get_running_loop(), tuple(sorted(self._given.items())))
            self._held = LIMITS.acquire(self._key, lambda: default_rate_limits(self._given))
        return self._held

    def rate(self, name: str) -> float:
        return default_rate_limits(self._given).rate(name)

    async def acquire(self, name: str) -> None:
        await self._shared().acquire(name)

    def pause(self, name: str, seconds: float) -> None:
        self._shared().pause(name, seconds)

    def release(self) -> None:
        if self._held is not None:
            self._held = None
            LIMITS.release(self._key)
