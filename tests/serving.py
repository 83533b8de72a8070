"""A real uvicorn on loopback for an ASGI app, in the caller's event loop (tests, benches)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    """A port free now on 127.0.0.1 (the app must know its port to check Host and Origin)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def serving(app: Any, port: int) -> AsyncIterator[str]:
    """Serve ``app`` on 127.0.0.1:``port`` until the block ends; yields its base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # uvicorn offers a flag, no event
        if task.done():
            await task  # it failed to start: say why
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
