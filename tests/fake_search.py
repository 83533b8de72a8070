"""A loopback HTTP server speaking four web search APIs, for tests.

    with FakeSearch() as fake:
        tavily = make_provider("tavily", base_url=fake.url("tavily"), api_key=…, …)

Each API lives under its own prefix and answers in its real shape (see `apis.py` for the
sources): ``/searxng/search`` (SearXNG JSON), ``/tavily/search``, ``/brave/res/v1/web/
search``, ``/exa/search``. Like the real services it refuses a wrong key the way each does
(Tavily 401 ``detail.error``, Brave 422 ``SUBSCRIPTION_TOKEN_INVALID``, Exa 401), refuses a
result count over its maximum, SearXNG answers 403 when JSON output is off, and a rate
limit per API (``limit(api, count, per)``: at most ``count`` accepted requests in any
``per`` seconds) answers 429 with a whole-second Retry-After.

The web scope in each API's own terms (see `apis.py`): SearXNG and Brave read ``site:`` /
``-site:`` operators in ``q`` (``(site:a.com OR site:b.org)``), SearXNG a ``time_range`` of
day, month or year, Brave a ``freshness`` of pd/pw/pm/py or ``YYYY-MM-DDtoYYYY-MM-DD`` and
a ``q`` of at most 400 characters and 50 words; Tavily ``include_domains``,
``exclude_domains`` and ``start_date`` (YYYY-MM-DD); Exa ``includeDomains``,
``excludeDomains`` and ``startPublishedDate`` (ISO 8601). A malformed one is refused as the
API refuses it (400; Brave 422). The answer is narrowed by what the request said, and only
by that: a request that does not narrow gets pages outside the scope too (a `Doc` may carry
its ``published`` date), so a test sees the client's own filter at work.

Every routed request can be answered after ``delay`` seconds (a latency for benchmarks).
Faults (`Fault`) are applied to the next requests of an API: any status with the API's
error body (a message may quote the key it was sent, as some real APIs do), a slow answer,
a truncated JSON body, JSON of another shape, a dropped connection.

Invariants: all state is guarded by one lock and `wait_for` wakes on every request; keys are
compared, never stored (a request records only whether its key was right); every request
is logged with its arrival time (``time.monotonic()``, the client's clock too). Handler
exceptions answer 500 and land in ``errors`` (the test fixture fails on them).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

Api = Literal["searxng", "tavily", "brave", "exa"]
FaultKind = Literal["status", "slow", "malformed", "wrong_shape", "drop"]
APIS: tuple[Api, ...] = ("searxng", "tavily", "brave", "exa")
DEFAULT_KEYS: Mapping[Api, str] = {
    "tavily": "tvly-dev-FAKEKEY0123456789",
    "brave": "BSAfakeSubscriptionToken0123",
    "exa": "exa-fake-2f1c9e7a-key",
}
_PATHS: Mapping[str, Api] = {
    "/searxng/search": "searxng",
    "/tavily/search": "tavily",
    "/brave/res/v1/web/search": "brave",
    "/exa/search": "exa",
}
_MAX_COUNT: Mapping[Api, int] = {"tavily": 20, "brave": 20, "exa": 100}
_SEARXNG_RANGES = {"day": 1, "month": 31, "year": 365}
_BRAVE_PAST = {"pd": 1, "pw": 7, "pm": 31, "py": 365}
_BRAVE_RANGE = re.compile(r"^(\d{4}-\d{2}-\d{2})to(\d{4}-\d{2}-\d{2})$")


@dataclass(frozen=True)
class Doc:
    url: str
    title: str
    text: str
    published: str | None = None
    """``YYYY-MM-DD``, as a search index knows it; None: undated (kept by date filters)."""


@dataclass(frozen=True)
class Fault:
    """Applied to the next `times` requests of `api` (None: of any API).

    status: answer ``status`` with the API's error body saying ``message`` (``{key}`` in it
    is replaced by the key the request sent) and a Retry-After header when `retry_after`
    is set; slow: answer after `delay` s; malformed: 200 with truncated JSON; wrong_shape:
    200 with JSON that has no results; drop: close the connection without an answer.
    """

    kind: FaultKind
    api: Api | None = None
    times: int = 1
    status: int = 500
    message: str = "Internal server error"
    retry_after: str | None = None
    delay: float = 0.0


def rate_limited(api: Api | None = None, retry_after: str | None = "1", times: int = 1) -> Fault:
    return Fault("status", api, times, 429, "Too Many Requests", retry_after)


@dataclass(frozen=True)
class RecordedRequest:
    api: Api | None
    method: str
    path: str
    query: str
    """The search query the API was sent."""
    count: int | None
    """The number of results asked for (None: none sent)."""
    body: Any
    key_ok: bool | None
    """Whether the request carried the right key (None: the API takes none)."""
    at: float
    """``time.monotonic()`` on arrival."""
    status: int = 0
    """What was answered (0: no answer, the connection was dropped)."""
    params: Mapping[str, str] = field(default_factory=dict)
    """The URL's query parameters (SearXNG's and Brave's whole request)."""


@dataclass
class _Armed:
    fault: Fault
    left: int


@dataclass
class _Window:
    count: int
    per: float
    accepted: deque[float] = field(default_factory=deque)


class FakeSearch:
    def __init__(self, keys: Mapping[Api, str] | None = None) -> None:
        self._cond = threading.Condition(threading.RLock())
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._keys: dict[Api, str] = dict(DEFAULT_KEYS if keys is None else keys)
        self.corpus: dict[str, list[Doc]] = {}  # normalised query -> docs; else generated
        self.replies: dict[tuple[Api, str], Any] = {}  # (api, query) -> a whole JSON body
        self.searxng_json = True  # False: 403, as a server without json in search.formats
        self.delay = 0.0  # seconds every routed request waits before it is answered (latency)
        self._faults: list[_Armed] = []
        self._windows: dict[Api, _Window] = {}
        self._requests: list[RecordedRequest] = []
        self.errors: list[str] = []

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeSearch:
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fake-search", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._server = None

    def __enter__(self) -> FakeSearch:
        return self.start()

    def __exit__(
        self, exc: type[BaseException] | None, val: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def url(self, api: Api) -> str:
        """The base URL to give the provider for `api`."""
        if self._server is None:
            raise RuntimeError("FakeSearch is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/{api}"

    # --- scripting -------------------------------------------------------------------
    def key(self, api: Api) -> str:
        return self._keys[api]

    def inject(self, *faults: Fault) -> None:
        with self._cond:
            self._faults.extend(_Armed(f, f.times) for f in faults)

    def limit(self, api: Api, count: int, per: float) -> None:
        """Accept at most `count` requests of `api` in any `per` seconds; 429 the rest."""
        with self._cond:
            self._windows[api] = _Window(count, per)

    # --- assertions ------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    def of(self, api: Api) -> list[RecordedRequest]:
        return [r for r in self.requests if r.api == api]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise TimeoutError(f"FakeSearch: condition not met within {timeout}s")

    # --- request handling (server threads) -------------------------------------------
    def _take_fault(self, api: Api | None) -> Fault | None:
        with self._cond:
            for armed in self._faults:
                if armed.left > 0 and armed.fault.api in (None, api):
                    armed.left -= 1
                    return armed.fault
        return None

    def _admit(self, api: Api, now: float) -> float | None:
        """None when the rate limit lets the request in, else seconds until it would."""
        with self._cond:
            window = self._windows.get(api)
            if window is None:
                return None
            while window.accepted and window.accepted[0] <= now - window.per:
                window.accepted.popleft()
            if len(window.accepted) >= window.count:
                return window.accepted[0] + window.per - now
            window.accepted.append(now)
            return None

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _fail(self, message: str) -> None:
        with self._cond:
            self.errors.append(message)

    def _docs(self, query: str) -> list[Doc]:
        with self._cond:
            docs = self.corpus.get(" ".join(query.casefold().split()))
        if docs is not None:
            return docs
        slug = "-".join(query.casefold().split())[:40] or "q"
        return [
            Doc(f"https://example.com/{slug}/{i}", f"{query} — page {i}", f"About {query}: {i}.")
            for i in range(1, 31)
        ]


# --- wire shapes ------------------------------------------------------------------------
def _error_body(api: Api, status: int, message: str) -> tuple[str, bytes]:
    if api == "tavily":
        payload: dict[str, Any] = {"detail": {"error": message}}
    elif api == "brave":
        payload = {
            "type": "ErrorResponse",
            "error": {
                "id": str(uuid.uuid4()),
                "status": status,
                "code": "RATE_LIMITED" if status == 429 else "GENERIC_ERROR",
                "detail": message,
                "meta": {},
            },
            "time": int(time.time()),
        }
    elif api == "exa":
        payload = {"requestId": uuid.uuid4().hex, "error": message, "tag": f"HTTP_{status}"}
    else:  # SearXNG answers errors as plain text
        return "text/plain; charset=utf-8", message.encode()
    return "application/json", json.dumps(payload).encode()


def _refused_key(api: Api) -> tuple[int, dict[str, Any]]:
    if api == "tavily":
        return 401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
    if api == "brave":
        return 422, {
            "type": "ErrorResponse",
            "error": {
                "id": str(uuid.uuid4()),
                "status": 422,
                "code": "SUBSCRIPTION_TOKEN_INVALID",
                "detail": "The provided subscription token is invalid.",
                "meta": {"component": "authentication"},
            },
            "time": int(time.time()),
        }
    return 401, {"requestId": uuid.uuid4().hex, "error": "Invalid API key", "tag": "UNAUTHORIZED"}


def _answer(api: Api, query: str, docs: list[Doc]) -> dict[str, Any]:
    results: list[dict[str, Any]]
    if api == "searxng":
        results = [
            {"url": d.url, "title": d.title, "content": d.text, "engine": "duckduckgo"}
            for d in docs
        ]
        return {"query": query, "number_of_results": 0, "results": results, "answers": []}
    if api == "tavily":
        results = [
            {"url": d.url, "title": d.title, "content": d.text, "score": 0.9, "raw_content": None}
            for d in docs
        ]
        return {"query": query, "answer": None, "images": [], "results": results}
    if api == "brave":
        body: dict[str, Any] = {"type": "search", "query": {"original": query}}
        if docs:
            body["web"] = {
                "type": "search",
                "results": [
                    {"type": "search_result", "url": d.url, "title": d.title, "description": d.text}
                    for d in docs
                ],
            }
        return body
    results = [{"id": d.url, "url": d.url, "title": d.title, "highlights": [d.text]} for d in docs]
    return {"requestId": uuid.uuid4().hex, "results": results, "costDollars": {"total": 0.007}}


def _key_ok(api: Api, headers: Mapping[str, str], key: str) -> bool:
    if api == "tavily":
        return headers.get("authorization") == f"Bearer {key}"
    if api == "brave":
        return headers.get("x-subscription-token") == key
    return key in (headers.get("x-api-key"), headers.get("authorization", "")[7:])


def _presented_key(api: Api, headers: Mapping[str, str]) -> str:
    if api == "brave":
        return headers.get("x-subscription-token", "")
    if api == "exa" and "x-api-key" in headers:
        return headers["x-api-key"]
    return headers.get("authorization", "").removeprefix("Bearer ")


def _search_args(api: Api, params: Mapping[str, str], body: Any) -> tuple[str, int | None]:
    if api in ("searxng", "brave"):
        count = params.get("count")
        return params.get("q", ""), int(count) if count and count.isdigit() else None
    body = body if isinstance(body, dict) else {}
    count = body.get("max_results" if api == "tavily" else "numResults")
    return str(body.get("query", "")), count if isinstance(count, int) else None


@dataclass(frozen=True)
class _Narrowing:
    """What a request asked of the scope, read the way its API reads it."""

    query: str
    """The query without its operators (what the corpus is looked up by)."""
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    since: date | None = None

    def keeps(self, doc: Doc) -> bool:
        host = (urlsplit(doc.url).hostname or "").lower()
        if self.include and not _under(host, self.include):
            return False
        if _under(host, self.exclude):
            return False
        if self.since is None or doc.published is None:
            return True
        return date.fromisoformat(doc.published) >= self.since


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _under(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith(f".{d}") for d in domains)


def _operators(query: str) -> _Narrowing:
    """``site:`` / ``-site:`` operators of a query (grouped with ``OR`` and parentheses)."""
    tokens = query.replace("(", " ").replace(")", " ").split()
    include = tuple(t.removeprefix("site:") for t in tokens if t.startswith("site:"))
    exclude = tuple(t.removeprefix("-site:") for t in tokens if t.startswith("-site:"))
    bare = [t for t in tokens if t != "OR" and not t.startswith(("site:", "-site:"))]
    return _Narrowing(" ".join(bare), include, exclude)


def _domain_list(body: dict[str, Any], name: str) -> tuple[str, ...]:
    value = body.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Refused(400, f"{name} must be a list of strings")
    return tuple(v.lower() for v in value)


def _narrowing(api: Api, query: str, params: Mapping[str, str], body: Any) -> _Narrowing:
    """The scope a request asked for, or `_Refused` as the API refuses a malformed one."""
    today = date.today()
    if api == "searxng":
        found = _operators(query)
        past = params.get("time_range")
        if past is None:
            return found
        if past not in _SEARXNG_RANGES:
            raise _Refused(400, f"Invalid value for time_range: {past}")
        return replace(found, since=today - timedelta(days=_SEARXNG_RANGES[past]))
    if api == "brave":
        if len(query) > 400 or len(query.split()) > 50:
            raise _Refused(422, "q must be at most 400 characters and 50 words")
        found = _operators(query)
        fresh = params.get("freshness")
        if fresh is None:
            return found
        if fresh in _BRAVE_PAST:
            return replace(found, since=today - timedelta(days=_BRAVE_PAST[fresh]))
        span = _BRAVE_RANGE.match(fresh)
        try:
            if span is None:
                raise ValueError(fresh)
            return replace(found, since=date.fromisoformat(span.group(1)))
        except ValueError:
            raise _Refused(422, f"freshness: not pd, pw, pm, py or a range: {fresh}") from None
    body = body if isinstance(body, dict) else {}
    if api == "tavily":
        include = _domain_list(body, "include_domains")
        exclude = _domain_list(body, "exclude_domains")
        start = body.get("start_date")
        if start is None:
            return _Narrowing(query, include, exclude)
        try:
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(start)):
                raise ValueError(start)
            return _Narrowing(query, include, exclude, date.fromisoformat(str(start)))
        except ValueError:
            raise _Refused(400, "start_date must be YYYY-MM-DD") from None
    include, exclude = _domain_list(body, "includeDomains"), _domain_list(body, "excludeDomains")
    start = body.get("startPublishedDate")
    try:
        stamp = None if start is None else datetime.fromisoformat(str(start).replace("Z", "+00:00"))
    except ValueError:
        raise _Refused(400, "startPublishedDate must be an ISO 8601 date") from None
    return _Narrowing(query, include, exclude, stamp.date() if stamp else None)


# --- HTTP plumbing ----------------------------------------------------------------------
class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeSearch

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hung up mid-answer (its deadline passed) is expected


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server
    _pending: RecordedRequest

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded instead

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        at = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        api = _PATHS.get(split.path)
        params = {k: v[0] for k, v in parse_qs(split.query).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        query, count = _search_args(api, params, body) if api else ("", None)
        key = fake._keys.get(api) if api else None
        key_ok = None if key is None or api is None else _key_ok(api, headers, key)
        # Recorded as the answer goes out: a client that has its answer finds it in the log.
        self._pending = RecordedRequest(
            api, method, split.path, query, count, body, key_ok, at, params=params
        )
        try:
            self._respond(fake, api, method, params, headers, query, count, key_ok, at)
        except OSError:
            pass  # the client hung up (its deadline passed) before the answer went out
        except Exception:
            fake._fail(f"FakeSearch handler raised:\n{traceback.format_exc()}")
            self._send(500, "text/plain", b"FakeSearch handler raised")

    def _respond(
        self,
        fake: FakeSearch,
        api: Api | None,
        method: str,
        params: Mapping[str, str],
        headers: Mapping[str, str],
        query: str,
        count: int | None,
        key_ok: bool | None,
        at: float,
    ) -> int:
        if api is None or method != ("GET" if api in ("searxng", "brave") else "POST"):
            fake._fail(f"FakeSearch: no route for {method} {self.path}")
            return self._send(404, "text/plain", b"not found")
        if fake.delay:
            fake._stopping.wait(fake.delay)
        fault = fake._take_fault(api)
        if fault is not None and fault.kind == "slow":
            fake._stopping.wait(fault.delay)
        if fault is not None and fault.kind == "drop":
            self.server.fake._record(self._pending)
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return 0
        if key_ok is False:
            return self._json(*_refused_key(api))
        if fault is not None and fault.kind == "status":
            message = fault.message.replace("{key}", _presented_key(api, headers))
            extra = {"retry-after": fault.retry_after} if fault.retry_after is not None else {}
            return self._send(fault.status, *_error_body(api, fault.status, message), extra)
        wait = fake._admit(api, at)
        if wait is not None:
            retry = {"retry-after": str(max(1, math.ceil(wait)))}
            return self._send(429, *_error_body(api, 429, "Too Many Requests"), retry)
        if api == "searxng" and (params.get("format") != "json" or not fake.searxng_json):
            return self._send(403, "text/html", b"<html><h1>403 Forbidden</h1></html>")
        if not query:
            return self._send(400, *_error_body(api, 400, "query is required"))
        if api in _MAX_COUNT and count is not None and not 0 < count <= _MAX_COUNT[api]:
            status = 422 if api == "brave" else 400
            message = f"the result count must be 1-{_MAX_COUNT[api]}, not {count}"
            return self._send(status, *_error_body(api, status, message))
        if fault is not None and fault.kind == "malformed":
            return self._send(200, "application/json", b'{"results": [{"url": "https://ex')
        if fault is not None and fault.kind == "wrong_shape":
            return self._json(200, {"unexpected": True})
        try:
            asked = _narrowing(api, query, params, self._pending.body)
        except _Refused as refused:
            return self._send(refused.status, *_error_body(api, refused.status, refused.message))
        with fake._cond:
            scripted = fake.replies.get((api, query))
        if scripted is not None:
            return self._json(200, scripted)
        docs = [d for d in fake._docs(asked.query) if asked.keeps(d)]
        limit = 20 if count is None else count
        return self._json(200, _answer(api, query, docs[:limit]))

    def _json(self, status: int, payload: Any) -> int:
        return self._send(status, "application/json", json.dumps(payload).encode())

    def _send(
        self, status: int, content_type: str, data: bytes, extra: Mapping[str, str] | None = None
    ) -> int:
        self.server.fake._record(replace(self._pending, status=status))
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        return status
