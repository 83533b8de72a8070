"""`deep-research serve`: the research engine over HTTP, with live events (SSE).

    POST /research                 {"question": …, options} -> 202 {"session_id": …}
                                   (``options.ResearchRequest``: what ``run`` takes)
    GET  /research/{id}            status: the object ``sessions show --json`` prints
    GET  /research/{id}/events     Server-Sent Events; reconnect with Last-Event-ID
    GET  /research/{id}/report     markdown, or HTML (citations clickable) when accepted
    POST /research/{id}/resume     {"max_cost_usd": …} -> 202 (``options.ResumeRequest``)
    POST /research/{id}/cancel     stop the run and its research jobs
    GET  /sessions                 past runs, newest first
    GET  /kb/search?q=…&k=8        the knowledge base's best chunks
    GET  /openapi.json             the API's OpenAPI description (no Swagger UI: it would load
                                   its script from a CDN, and this server loads nothing from
                                   elsewhere; /docs says so and links here)
    GET  /                         a page to start runs, watch them live and read reports

Every front-end goes through the use-cases in ``app/`` (and a server's runs through
``runs.RunManager``), so the CLI can watch, cancel and resume what this server started, and
the other way round.

This server spends the user's money, so (invariants):
- It binds 127.0.0.1 unless told otherwise, and any other address needs
  ``DEEP_RESEARCH_API_TOKEN``; when a token is set, every request must carry it
  (``Authorization: Bearer …``, compared in constant time), except for the page's own
  files and the API's description (``PUBLIC``): they hold no data, and the page is where
  the user types the token.
- ``Host`` must name this server (``hosts``: its bind address, the machine's names on a
  public bind, ``DEEP_RESEARCH_PUBLIC_HOSTS``) and an ``Origin``, when sent, must be this
  server's: a web page the user visits cannot start runs (CSRF) or reach it through DNS
  rebinding. No CORS headers are ever sent.
- A POST must be ``Content-Type: application/json`` and at most ``MAX_BODY_BYTES``.
- Session ids are validated before they touch the file system; no endpoint reads a path a
  client gives. Reports are rendered as HTML by markdown-it-py with raw HTML off (model and
  web text is untrusted), each ``[N]`` linked from the report's data (``report_html``), and
  served, like the page, under a content security policy. Errors are JSON
  ``{"error": {"code", "message"}}``: the same one line the CLI prints and a stable code,
  never a traceback.
- A client going away never stops a run; stopping the server saves every run as
  interrupted (resume picks them up).
- What a run needs (the engine's modules, the TLS context, prices, the embedding model) is
  built as the server starts, off the event loop (``runs.warm_up``); a start waits for it
  rather than building it again, and the page answers meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, FastAPI, Header, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel
from sse_starlette import EventSourceResponse

from deep_research.adapters.report_html import REPORT_POLICY, render_html
from deep_research.app import knowledge, saved
from deep_research.app.config import Settings
from deep_research.app.options import ResearchRequest, ResumeRequest
from deep_research.app.runs import RunManager, start_warm_up
from deep_research.core.errors import (
    ConfigError,
    DeepResearchError,
    SessionError,
)
from deep_research.frontends.common import error_code, hit_json, session_detail
from deep_research.frontends.hosts import (
    allowed_hosts,
    allowed_origins,
    bearer_token_matches,
    is_loopback,
)

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
PUBLIC = frozenset({"/", "/app.js", "/app.css", "/openapi.json", "/docs", "/redoc"})
"""What a GET needs no token for: files with no data in them."""


class Accepted(BaseModel):
    session_id: str
    status_url: str
    events_url: str


HTTP_STATUS = {
    "session_busy": 409,
    "unknown_session": 404,
    "bad_request": 400,
    "invalid_settings": 422,
    "knowledge_base": 422,
    "provider_failed": 502,
    "storage": 507,
    "failed": 500,
}
"""The HTTP status of each of our errors' stable codes (``cli_common.ERROR_CODES``: one
table of codes for the CLI's ``--json`` and this API)."""


def error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


def invalid_request(exc: RequestValidationError) -> str:
    """A request that does not validate, in one line: where and why, never the value given
    (it may be NaN or Infinity, which JSON cannot carry back, or a lone surrogate, which
    UTF-8 cannot)."""
    first = exc.errors()[0] if exc.errors() else {}
    if first.get("type") == "json_invalid":
        reason = _printable((first.get("ctx") or {}).get("error", "JSON decode error"))
        return f"body: not valid JSON: {reason} (character {first['loc'][-1]})"
    where = ".".join(_printable(part) for part in first.get("loc", ()) if part != "body")
    why = _printable(first.get("msg", "invalid request"))
    why = why.replace("Input should be", "must be")
    return f"{where or 'body'}: {why}"


def _printable(part: object) -> str:
    return str(part).encode("utf-8", "backslashreplace").decode("utf-8")


def check_bind(settings: Settings, host: str) -> None:
    """Off loopback, a token is required: this server spends the user's money."""
    if not is_loopback(host) and settings.token() is None:
        raise ConfigError(
            f"serving on {host} needs DEEP_RESEARCH_API_TOKEN (every request must then carry "
            "it); or bind 127.0.0.1"
        )


def create_app(
    settings: Settings, *, host: str = "127.0.0.1", port: int = 8000, runs: RunManager | None = None
) -> FastAPI:
    check_bind(settings, host)
    manager = runs or RunManager(settings)
    given = settings.token()
    token = given.encode() if given else None
    public = settings.public_host_list
    hosts = allowed_hosts(host, port, public)
    origins = allowed_origins(hosts, port, public)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.warm = start_warm_up(settings)
        yield
        await manager.shutdown()  # every run saved as interrupted

    app = FastAPI(
        title="deep-research",
        summary="Research a hard question and get a cited report.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.runs = manager

    async def warmed() -> None:
        """Until the start-up build has ended (at once without one: an app whose lifespan
        was not run), so a request does not build the same again on the event loop."""
        warm: asyncio.Event | None = getattr(app.state, "warm", None)
        if warm is not None:
            await warm.wait()

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.headers.get("host", "").lower() not in hosts:
            return error(421, "wrong_host", "this server does not answer to that Host")
        origin = request.headers.get("origin")
        if origin is not None and origin.lower() not in origins:
            return error(403, "wrong_origin", "requests from other sites are refused")
        public_file = request.method in ("GET", "HEAD") and request.url.path in PUBLIC
        authorization = request.headers.get("authorization")
        if token is not None and not public_file and not bearer_token_matches(authorization, token):
            return error(401, "unauthorized", "a valid bearer token is required")
        if request.method == "POST":
            kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return error(415, "not_json", "send Content-Type: application/json")
            length = request.headers.get("content-length")
            if length is None or not length.isdigit() or int(length) > MAX_BODY_BYTES:
                return error(413, "too_large", f"the body must be at most {MAX_BODY_BYTES} bytes")
        return await call_next(request)

    @app.exception_handler(DeepResearchError)
    async def our_error(_request: Request, exc: DeepResearchError) -> JSONResponse:
        code = error_code(exc)
        return error(HTTP_STATUS[code], code, " ".join(str(exc).split()))

    @app.exception_handler(RequestValidationError)
    async def not_valid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, "invalid_request", invalid_request(exc))

    @app.exception_handler(Exception)
    async def bug(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error(500, "internal", f"unexpected {type(exc).__name__}: see the server's log")

    @app.get("/", include_in_schema=False)
    async def page() -> Response:
        """The page to watch runs: start one, follow its tree live, read its report."""
        return asset("index.html", "text/html; charset=utf-8")

    @app.get("/app.js", include_in_schema=False)
    async def script() -> Response:
        return asset("app.js", "text/javascript; charset=utf-8")

    @app.get("/app.css", include_in_schema=False)
    async def style() -> Response:
        return asset("app.css", "text/css; charset=utf-8")

    @app.get("/docs", include_in_schema=False)
    @app.get("/redoc", include_in_schema=False)
    async def docs() -> Response:
        """No Swagger UI or ReDoc: both load from a CDN. The description they would show."""
        return asset("docs.html", "text/html; charset=utf-8")

    @app.post("/research", status_code=202, response_model=Accepted)
    async def start(body: ResearchRequest) -> Accepted:
        """Start a run; it goes on in the server. Follow it at ``events_url``."""
        await warmed()
        return accepted(await manager.start(body.question, body.options))

    @app.get("/research/{session_id}")
    async def status(session_id: str) -> dict[str, Any]:
        """The run's tree, status, spend and report path (``sessions show --json``)."""
        state = saved.status(settings, session_id)
        return session_detail(state, saved.report_path(settings, state.session_id))

    @app.get("/research/{session_id}/events")
    async def events(
        session_id: str,
        last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0)] = None,
    ) -> EventSourceResponse:
        """Server-Sent Events of the run: node started/done/failed/blocked, spend, stop,
        report ready, end. Each has an id; reconnect with ``Last-Event-ID`` to miss none."""
        saved.status(settings, session_id)  # an unknown id is a 404, not an empty stream
        live = manager.live_log(session_id)  # a run of this server: pushed, not polled

        async def stream() -> AsyncIterator[dict[str, str]]:
            events = saved.watch(settings, session_id, after=last_event_id, live=live)
            async for event in events:
                yield {"id": str(event.id), "event": event.type, "data": event.model_dump_json()}

        return EventSourceResponse(stream(), ping=15)

    @app.get("/research/{session_id}/report", response_model=None)
    async def report(
        session_id: str, accept: Annotated[str, Header()] = ""
    ) -> PlainTextResponse | HTMLResponse:
        """The report: markdown, or HTML with clickable citations when the client accepts
        ``text/html``."""
        path = saved.report_path(settings, session_id)
        if path is None:
            raise SessionError(f"session {session_id} has no report yet")
        if "text/html" in accept:
            page = render_html(saved.read_report_data(path))
            return HTMLResponse(page, headers=protected(REPORT_POLICY))
        return PlainTextResponse(
            saved.read_report(path),
            media_type="text/markdown; charset=utf-8",
            headers=protected(REPORT_POLICY),
        )

    @app.post("/research/{session_id}/resume", status_code=202, response_model=Accepted)
    async def resume(session_id: str, body: Annotated[ResumeRequest, Body()]) -> Accepted:
        """Continue a stopped or interrupted run with the choices it started with (optionally
        new limits); it goes on in the server."""
        await warmed()
        resumed = await manager.resume(
            session_id,
            body,
            max_parallel=body.max_parallel,
            retry_cancelled=body.retry_cancelled,
        )
        return accepted(resumed)

    @app.post("/research/{session_id}/cancel")
    async def cancel(session_id: str) -> dict[str, Any]:
        """Stop the run (saved as interrupted) and its research jobs at the provider."""
        await warmed()
        result = await manager.cancel(session_id)
        return {
            "session_id": result.session_id,
            "recorded": result.recorded,
            "jobs": [
                {"node_id": node, "job_id": job, "status": outcome.status}
                for node, job, outcome in result.jobs
            ],
        }

    @app.get("/sessions")
    async def sessions(limit: Annotated[int, Query(ge=1, le=1000)] = 50) -> list[dict[str, Any]]:
        return [row.model_dump(mode="json") for row in saved.list_sessions(settings)[:limit]]

    @app.get("/kb/search")
    async def kb_search(
        q: Annotated[str, Query(max_length=knowledge.MAX_QUERY_CHARS)],
        k: Annotated[int, Query(ge=1, le=100)] = 8,
    ) -> list[dict[str, object]]:
        """The knowledge base's best chunks for ``q``, with their locators."""
        await warmed()
        hits = knowledge.kb_search(settings, q, k=k)
        return [hit_json(hit) for hit in hits]

    def accepted(session_id: str) -> Accepted:
        return Accepted(
            session_id=session_id,
            status_url=f"/research/{session_id}",
            events_url=f"/research/{session_id}/events",
        )

    return app


WEB_DIR = Path(__file__).parent / "page"
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def asset(name: str, media_type: str) -> Response:
    """One of the page's files (no build step, no external assets), under a
    content security policy that allows nothing from elsewhere and no inline script."""
    return Response(
        (WEB_DIR / name).read_bytes(), media_type=media_type, headers=protected(PAGE_POLICY)
    )


def protected(policy: str) -> dict[str, str]:
    """The headers of what the server shows a browser: the page's files and the reports."""
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
