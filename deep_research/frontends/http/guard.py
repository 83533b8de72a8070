"""Who may ask, and what an error looks like: the middleware every request passes, and
the handlers that turn our errors, invalid requests and bugs into one-line JSON."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from deep_research.app.saved import Busy
from deep_research.core.errors import DeepResearchError
from deep_research.frontends.common import ERROR_CODES, error_code
from deep_research.frontends.hosts import bearer_token_matches, error, wrong_host
from deep_research.frontends.http.page import FILES

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
PUBLIC = frozenset({*FILES, "/openapi.json"})
"""What a GET needs no token for: files with no data in them."""

HTTP_STATUS = {code: status for _, code, status in ERROR_CODES}


def install_guard(
    app: FastAPI, *, hosts: frozenset[str], origins: frozenset[str], token: bytes | None
) -> None:
    """Refuse what is not for this server before any route sees it: a foreign ``Host`` or
    ``Origin``, a missing token, a POST that is not small JSON."""

    @app.middleware("http")
    async def guard(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if wrong_host(request.headers.getlist("host"), hosts):
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


def install_errors(app: FastAPI) -> None:
    """Every error as ``{"error": {"code", "message"}}``: never a traceback."""

    @app.exception_handler(DeepResearchError)
    async def our_error(_request: Request, exc: DeepResearchError) -> JSONResponse:
        code = error_code(exc)
        return error(HTTP_STATUS[code], code, " ".join(str(exc).split()))

    @app.exception_handler(Busy)
    async def busy(_request: Request, exc: Busy) -> JSONResponse:
        retry = {"Retry-After": str(exc.retry_after)}
        return error(503, "busy", " ".join(str(exc).split()), **retry)

    @app.exception_handler(RequestValidationError)
    async def not_valid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(422, "invalid_request", invalid_request(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 400:  # FastAPI's "error parsing the body": not UTF-8 JSON
            return error(422, "invalid_request", "the body is not JSON in UTF-8")
        return await http_exception_handler(request, exc)

    @app.exception_handler(Exception)
    async def bug(_request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return error(500, "internal", f"unexpected {type(exc).__name__}: see the server's log")


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
