"""The server, put together: its context, the guard, the error handlers and the routes."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from deep_research.app.config import Settings
from deep_research.app.runs import RunManager
from deep_research.app.warm import start_warm_up
from deep_research.core.errors import ConfigError
from deep_research.frontends.hosts import allowed_hosts, allowed_origins, is_loopback
from deep_research.frontends.http import page, research
from deep_research.frontends.http.context import ServerContext
from deep_research.frontends.http.guard import install_errors, install_guard


def check_bind(settings: Settings, host: str) -> None:
    """Off loopback, a token is required: this server spends the user's money."""
    if not is_loopback(host) and settings.token() is None:
        raise ConfigError(
            f"serving on {host} needs DEEP_RESEARCH_API_TOKEN (every request must then carry "
            "it); or bind 127.0.0.1"
        )


def log_to_stderr() -> None:
    """This package's INFO lines (how ``auto`` chose the web engine) and warnings reach
    stderr beside uvicorn's own; libraries' INFO lines do not."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    package = logging.getLogger("deep_research")
    package.addHandler(handler)
    package.setLevel(logging.INFO)


def create_app(
    settings: Settings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    runs: RunManager | None = None,
    local_worker: bool = True,
) -> FastAPI:
    check_bind(settings, host)
    shared = ServerContext(settings, runs or RunManager(settings, local_worker=local_worker))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        shared.warm = start_warm_up(shared.runs)
        shared.runs.open()  # in a team: one of its workers too, unless --no-local-worker
        yield
        await shared.runs.shutdown()  # every run saved as interrupted

    app = FastAPI(
        title="deep-research",
        summary="Research a hard question and get a cited report.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.context = shared
    given = settings.token()
    public = settings.public_host_list
    hosts = allowed_hosts(host, port, public)
    install_guard(
        app,
        hosts=hosts,
        origins=allowed_origins(hosts, port, public),
        token=given.encode() if given else None,
    )
    install_errors(app)
    app.include_router(page.router)
    app.include_router(research.router)
    return app
