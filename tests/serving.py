"""A real uvicorn on loopback for an ASGI app, in the caller's event loop (tests, benches)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
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


@contextmanager
def serve_process(env: dict[str, str], *flags: str, log: Path) -> Iterator[str]:
    """`deep-research serve` in a child process on a free loopback port, its output in
    ``log``; yields its base URL once it answers, and stops it with Ctrl-C (SIGINT) as a
    user does when the block ends."""
    port = free_port()
    repo = Path(__file__).resolve().parents[1]
    with log.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "deep_research", "serve", "--port", str(port), *flags],
            env={**os.environ, **env, "PYTHONPATH": str(repo)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/sessions", timeout=1)
                break
            except httpx.TransportError:
                if child.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"serve did not start:\n{log.read_text()}") from None
                time.sleep(0.05)
        yield base
    finally:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
