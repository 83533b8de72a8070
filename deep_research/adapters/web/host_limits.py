"""Per-host limits of the page reader, shared by every read in the process: at most
``concurrency`` requests in flight and ``rate`` requests a second to one host
(``aiolimiter``'s leaky bucket, with no burst), and a pause a 429's Retry-After puts on
the whole host; a host that could not be reached is taken to be down for a while."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aiolimiter import AsyncLimiter

SPACING_MARGIN = 0.05
"""Seconds added between two requests to one host: clocks and queues jitter by a few ms."""
DOWN_SECONDS = 120.0
"""How long a host that could not be reached (unknown name, refused, no answer) is taken to
be down: its pages are skipped for the same reason at once, not each after a turn."""


class HostLimits:
    """One host's limits, shared by every read in the process."""

    def __init__(self, concurrency: int, rate: float) -> None:
        self.slots = asyncio.Semaphore(concurrency)
        # No burst: one request per 1/rate seconds, plus a margin, so that a server counting
        # any one-second window (its own clock, a few ms of jitter) never sees more than rate.
        self.rate = AsyncLimiter(1, 1 / rate + SPACING_MARGIN)
        self.not_before = 0.0  # loop time; a 429's Retry-After pauses the whole host
        self._down: tuple[float, Exception] | None = None  # since (loop time), why

    def down(self) -> Exception | None:
        """Why the host could not be reached, within the last ``DOWN_SECONDS``; else None."""
        now = asyncio.get_running_loop().time()
        if self._down is not None and now - self._down[0] < DOWN_SECONDS:
            return self._down[1]
        return None

    def failed(self, why: Exception) -> None:
        """The host could not be reached (``why``): it is down for ``DOWN_SECONDS``."""
        self._down = (asyncio.get_running_loop().time(), why)

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        # Slot first, then the rate: a token is spent only when the request can go out,
        # so requests queued behind busy slots cannot leave in a burst.
        async with self.slots:
            wait = self.not_before - asyncio.get_running_loop().time()
            if wait > 0:
                await asyncio.sleep(wait)
            await self.rate.acquire()
            yield
