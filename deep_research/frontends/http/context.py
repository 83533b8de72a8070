"""What every route of one server shares, kept on the app (``app.state.context``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from fastapi import Request

from deep_research.app.config import Settings
from deep_research.app.runs import RunManager


@dataclass
class ServerContext:
    settings: Settings
    runs: RunManager
    warm: asyncio.Event | None = field(default=None)
    """Set when the start-up build has ended (``warm.start_warm_up``)."""

    async def warmed(self) -> None:
        """Until the start-up build has ended (at once without one: an app whose lifespan
        was not run), so a request does not build the same again on the event loop."""
        if self.warm is not None:
            await self.warm.wait()


def context(request: Request) -> ServerContext:
    shared: ServerContext = request.app.state.context
    return shared
