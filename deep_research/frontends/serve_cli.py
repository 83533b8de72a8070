"""`deep-research serve` and `deep-research mcp`: the HTTP API and the MCP server.

``cli`` registers them on the root command. Each imports what it uses in its body, so the
root command's `--help` loads neither server.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Annotated, Any, NoReturn

import typer

from deep_research.core.errors import EXIT_INTERRUPTED

_STARTUP_FAILURE = 3
"""uvicorn's exit code for a server that could not start (a port in use, say)."""

LocalWorkerOpt = Annotated[
    bool,
    typer.Option(
        "--local-worker/--no-local-worker",
        help="With DEEP_RESEARCH_DATABASE_URL (a team): also research the team's queued runs "
        "in this process, as `deep-research worker` does; or only queue and read them.",
    ),
]


def serve(
    host: Annotated[
        str,
        typer.Option(help="Address to bind; off loopback DEEP_RESEARCH_API_TOKEN is required."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
    local_worker: LocalWorkerOpt = True,
) -> None:
    """Serve the HTTP API: start, follow (Server-Sent Events), resume and cancel runs; API
    docs at /docs. Ctrl-C saves every run as interrupted."""
    try:
        import uvicorn

        from deep_research.app.loading import load_settings
        from deep_research.frontends import render
        from deep_research.frontends.http.app import create_app, log_to_stderr

        settings = load_settings()
        api = create_app(settings, host=host, port=port, local_worker=local_worker)
        log_to_stderr()
        where = f"[{host}]" if ":" in host else host
        render.info(f"serving on http://{where}:{port} (API docs at /docs); Ctrl-C stops")
        config = uvicorn.Config(api, host=host, port=port, log_level="warning", server_header=False)
        server = _server_class()(config)
        server.run()  # on Ctrl-C it saves the runs, then may raise it again here
    except KeyboardInterrupt:
        _end_process(EXIT_INTERRUPTED, "error: interrupted\n")
    except SystemExit as exc:  # uvicorn's, for a port it cannot bind: it has said why
        _end_process(exc.code if isinstance(exc.code, int) else _STARTUP_FAILURE)
    if server.signalled:
        _end_process(EXIT_INTERRUPTED, "error: interrupted\n")
    _end_process(0 if server.started else _STARTUP_FAILURE)  # uvicorn has said why


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, remembering whether a signal (Ctrl-C) stopped it."""

        signalled = False

        def handle_exit(self, sig: int, frame: Any) -> None:
            self.signalled = True
            super().handle_exit(sig, frame)

    return Server


def _end_process(exit_code: int, last_words: str = "") -> NoReturn:
    """End a server's process now, with every run saved: its daemon threads (the warm-up,
    importing the engines; a thread logging to stderr) must not meet the interpreter's
    shutdown, which then aborts (exit 134), nor a second Ctrl-C its clean-up (a traceback)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stderr.write(last_words)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe has nothing to flush
            stream.flush()
    os._exit(exit_code)


def mcp(
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            metavar="PORT",
            min=1,
            max=65535,
            help="Serve streamable HTTP on 127.0.0.1:PORT (at /mcp) instead of stdio.",
        ),
    ] = None,
    local_worker: LocalWorkerOpt = True,
) -> None:
    """Serve the MCP server: research, the knowledge base and claim checks as tools for an
    MCP client (Claude Code, Claude Desktop, …); stdio unless --http. Every run is saved as
    interrupted when the client goes away."""
    from deep_research.app.loading import load_settings
    from deep_research.frontends.mcp import server as mcp_server

    settings = load_settings()
    if http is None:
        mcp_server.serve_stdio(settings, local_worker=local_worker)
        return
    from deep_research.frontends import render

    render.info(f"serving MCP on http://127.0.0.1:{http}/mcp; Ctrl-C stops")
    mcp_server.serve_http(settings, http, local_worker=local_worker)
