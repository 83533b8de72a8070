"""The MCP server's plumbing: ``create_server`` (each module of ``TOOLS`` registers its own
tools), ``StrictServer`` (arguments a tool does not take, or that fail validation, as
one-line tool errors) and the transports, stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from mcp_types import Tool as ToolInfo
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from deep_research.adapters.web.search.http_api import user_agent
from deep_research.app.config import Settings
from deep_research.app.runs import RunManager
from deep_research.core.errors import ConfigError
from deep_research.frontends.hosts import LOOPBACK_NAMES, bearer_token_matches, error, wrong_host
from deep_research.frontends.mcp import kb_tools, research_tools, web_tools
from deep_research.frontends.mcp.context import ToolContext

TOOLS = (research_tools, kb_tools, web_tools)
"""The modules of tools, each with its ``register(server, context)``, in the order
tools/list gives: a new module of tools is added here, and nowhere else (``doctor``
imports this module, which imports them)."""
MCP_PATH = "/mcp"
INSTRUCTIONS = """\
Researches hard questions and writes cited reports: a tree of sub-questions researched on
the web and in the user's markdown knowledge base. A run takes minutes and costs money
(capped per run and per day by this server). research_start returns a session id at once;
follow the run with research_follow (progress notifications) or research_status, then read
research_report. kb_search / kb_fetch read the knowledge base; verify_claim checks whether a
URL or a knowledge-base chunk supports a claim (supported, partial, unsupported,
contradicted), with the passage that decided."""

# --- the server -------------------------------------------------------------------------


class StrictServer(MCPServer[None]):
    """The SDK's server, strict about arguments. The SDK drops the names a tool does not
    take, so a typo (``max_cost`` for ``max_cost_usd``) would run on the default budget:
    here it is a tool error naming the ones it takes, and every input schema says
    ``additionalProperties: false``. Arguments that fail validation are one line too."""

    _takes: dict[str, list[str]] | None = None

    async def list_tools(self) -> list[ToolInfo]:
        return [
            tool.model_copy(
                update={"input_schema": {**tool.input_schema, "additionalProperties": False}}
            )
            for tool in await super().list_tools()
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[None, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if self._takes is None:  # every tool is registered before the first call
            tools = await super().list_tools()
            self._takes = {t.name: list(t.input_schema.get("properties", {})) for t in tools}
        takes = self._takes.get(name)  # None: no such tool, which the SDK says
        if takes is not None and (unknown := [arg for arg in arguments if arg not in takes]):
            raise ToolError(unknown_arguments(name, unknown, takes))
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(invalid_arguments(exc.__cause__)) from exc.__cause__
            raise


def unknown_arguments(tool: str, unknown: list[str], takes: list[str]) -> str:
    """``unknown argument max_cost (did you mean max_cost_usd?); research_start takes: …``"""
    from difflib import get_close_matches

    shown = [arg if arg.isidentifier() else repr(arg[:60]) for arg in unknown]
    guess = get_close_matches(unknown[0], takes, n=1) if len(unknown) == 1 else []
    return (
        f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(shown)}"
        + (f" (did you mean {guess[0]}?)" if guess else "")
        + f"; {tool} takes: {', '.join(takes) or 'no arguments'}"
    )


def invalid_arguments(error: ValidationError) -> str:
    """The SDK's message is pydantic's, over several lines: one line per argument here."""
    problems = []
    for problem in error.errors(include_url=False):
        where = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            problems.append(f"missing argument {where}")
        else:
            problems.append(f"invalid argument {where}: {' '.join(problem['msg'].split())}")
    return "; ".join(problems)


def create_server(
    settings: Settings, *, runs: RunManager | None = None, local_worker: bool = True
) -> MCPServer[None]:
    """The server and its tools. Light: the engine (LangChain, Chroma, the page reader, the
    embedder) loads with the first tool call that needs it, so ``initialize`` and
    ``tools/list`` are answered at once."""
    manager = runs or RunManager(settings, local_worker=local_worker)
    reader = web_tools.LazyReader(settings)  # one per process, as runs share it

    @asynccontextmanager
    async def lifespan(_server: MCPServer[None]) -> AsyncIterator[None]:
        try:
            manager.open()  # in a team: one of its workers too, unless --no-local-worker
            yield
        finally:
            with anyio.CancelScope(shield=True):  # the client is gone: save, then go
                await manager.shutdown()
                await reader.aclose()
            sys.stdout.flush()  # while fd 1 is still stderr: nothing stray on the wire after

    server = StrictServer(
        "deep-research",
        instructions=INSTRUCTIONS,
        version=user_agent().removeprefix("deep-research/"),
        lifespan=lifespan,
        log_level="WARNING",
    )
    context = ToolContext(
        settings=settings,
        runs=manager,
        reader=reader,
        reading=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        spending=ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=True
        ),
    )
    for tools in TOOLS:
        tools.register(server, context)
    return server


# --- transports -------------------------------------------------------------------------


def log_warnings_only() -> None:
    """Warnings and errors reach stderr; libraries' DEBUG and INFO lines do not. The level is
    the handler's, because loggers may set their own (bm25s sets DEBUG on import). Installed
    before the SDK's server, whose own set-up then adds no handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def serve_stdio(settings: Settings, *, local_worker: bool = True) -> None:
    """Serve over stdin/stdout until the client closes stdin (or SIGTERM, Ctrl-C)."""
    log_warnings_only()
    asyncio.run(_serve_stdio(settings, local_worker))


async def _serve_stdio(settings: Settings, local_worker: bool) -> None:
    manager = RunManager(settings, local_worker=local_worker)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, lambda: loop.create_task(_save_and_exit(manager)))
    await create_server(settings, runs=manager).run_stdio_async()


async def _save_and_exit(manager: RunManager) -> None:
    """SIGTERM or Ctrl-C: save every run as interrupted, then exit. Not by cancelling the
    server: the SDK reads stdin in a thread that nothing interrupts but EOF, and the server
    would wait for it."""
    await manager.shutdown()
    sys.stderr.flush()
    os._exit(0)


def http_app(settings: Settings, server: MCPServer[None], port: int) -> ASGIApp:
    """The streamable HTTP app at ``/mcp``: the SDK's Host/Origin checks for this server's
    loopback address (and the public URL's host), and the API token when one is set. ``Host``
    is checked first as ``serve`` checks it (``Door``): the SDK reads only the first."""
    hosts = [f"{name}:{port}" for name in sorted(LOOPBACK_NAMES)]
    origins = [f"http://{host}" for host in hosts]
    token = settings.token()
    if settings.kb_mcp_url:
        if token is None:
            raise ConfigError(
                "DEEP_RESEARCH_KB_MCP_URL publishes this server: set DEEP_RESEARCH_API_TOKEN "
                "too (every request must then carry it)"
            )
        public = public_hosts(settings.kb_mcp_url)
        hosts += public
        origins += [f"{urlsplit(settings.kb_mcp_url).scheme}://{host}" for host in public]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=security, host="127.0.0.1"
    )
    return Door(app, frozenset(host.lower() for host in hosts), token)


def public_hosts(url: str) -> list[str]:
    """The ``Host`` headers a request through the public URL may carry: its host name
    (lower case, without user info), with and without its port."""
    parts = urlsplit(url)
    name = parts.hostname or ""
    name = f"[{name}]" if ":" in name else name  # IPv6
    return [name] + ([f"{name}:{parts.port}"] if parts.port else [])


def serve_http(settings: Settings, port: int, *, local_worker: bool = True) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` until Ctrl-C or SIGTERM (runs saved)."""
    import uvicorn

    log_warnings_only()
    app = http_app(settings, create_server(settings, local_worker=local_worker), port)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=5,  # a client following a run must not hold the stop
    )


class Door:
    """Every HTTP request must carry one ``Host``, one of ``hosts`` (``hosts.wrong_host``,
    the check ``serve`` makes): with a second one, the SDK's own check would pass a request
    whose first is ours, whatever the second says. With a token, it must also carry
    ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, hosts: frozenset[str], token: str | None) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token.encode() if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.refused(Headers(scope=scope)) if scope["type"] == "http" else None
        await (refused or self.app)(scope, receive, send)

    def refused(self, headers: Headers) -> ASGIApp | None:
        if wrong_host(headers.getlist("host"), self.hosts):
            return error(421, "wrong_host", "this server does not answer to that Host")
        if self.token is not None and not bearer_token_matches(
            headers.get("authorization"), self.token
        ):
            unauthorized = "a valid bearer token is required"
            return error(401, "unauthorized", unauthorized, **{"WWW-Authenticate": "Bearer"})
        return None
