"""A loopback SearXNG (its JSON search API), for runs that need a real server: the CLI runs
and the benches. The providers' own formats are tested through an httpx transport
(``tests/search_wire.py``), not here.

    with FakeSearch() as fake:
        fake.corpus["raft leader election"] = [Doc("https://a.example/raft", "Raft", "…")]
        env["DEEP_RESEARCH_SEARXNG_URL"] = fake.url()

``GET /search?q=…&format=json`` answers ``results[]`` with ``url``, ``title``, ``content``,
as SearXNG does (checked 2026-11-23, docs.searxng.org "Search API"); another ``format`` is
refused 403, as a server without it in ``search.formats``. The query is looked up in
`corpus` by its words, without ``site:``/``-site:``/``OR`` operators: like an engine that
does not read them, this server narrows nothing, so only the client's own filter keeps a
run within its web scope. A query not in the corpus finds 30 generated pages.

Every request can be answered after ``delay`` seconds (a latency for benchmarks), and
`limit(count, per)` accepts at most ``count`` requests in any ``per`` seconds, answering the
rest 429 with a whole-second Retry-After.

Invariants: all state is guarded by one lock; every request is recorded with its arrival
time (``time.monotonic()``, the client's clock too) and the status it was answered.
Handler exceptions answer 500 and land in ``errors`` (the test fixtures fail on them).
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Doc:
    url: str
    title: str
    text: str


@dataclass(frozen=True)
class RecordedRequest:
    query: str
    """The ``q`` parameter, operators included."""
    params: Mapping[str, str]
    """The URL's query parameters: the whole request."""
    at: float
    """``time.monotonic()`` on arrival."""
    status: int


@dataclass
class _Window:
    count: int
    per: float
    accepted: deque[float] = field(default_factory=deque)


class FakeSearch:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self.corpus: dict[str, list[Doc]] = {}  # normalised query words -> docs
        self.delay = 0.0  # seconds every request waits before it is answered (latency)
        self._window: _Window | None = None
        self._requests: list[RecordedRequest] = []
        self.errors: list[str] = []

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

    def url(self) -> str:
        """The base URL to give the provider (``DEEP_RESEARCH_SEARXNG_URL``)."""
        if self._server is None:
            raise RuntimeError("FakeSearch is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def limit(self, count: int, per: float) -> None:
        """Accept at most `count` requests in any `per` seconds; 429 the rest."""
        with self._lock:
            self._window = _Window(count, per)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    # --- request handling (server threads) -------------------------------------------
    def _admit(self, now: float) -> float | None:
        """None when the rate limit lets the request in, else seconds until it would."""
        with self._lock:
            window = self._window
            if window is None:
                return None
            while window.accepted and window.accepted[0] <= now - window.per:
                window.accepted.popleft()
            if len(window.accepted) >= window.count:
                return window.accepted[0] + window.per - now
            window.accepted.append(now)
            return None

    def _answer(self, params: Mapping[str, str], now: float) -> tuple[int, str, bytes, str]:
        """(status, content type, body, Retry-After or "")."""
        if self.delay:
            self._stopping.wait(self.delay)
        wait = self._admit(now)
        if wait is not None:
            return 429, "text/plain", b"Too Many Requests", str(max(1, math.ceil(wait)))
        if params.get("format") != "json":
            return 403, "text/html", b"<html><h1>403 Forbidden</h1></html>", ""
        query = params.get("q", "")
        if not query.strip():
            return 400, "text/plain", b"q is required", ""
        results = [
            {"url": d.url, "title": d.title, "content": d.text, "engine": "duckduckgo"}
            for d in self._docs(_words(query))
        ]
        body = {"query": query, "number_of_results": 0, "results": results, "answers": []}
        return 200, "application/json", json.dumps(body).encode(), ""

    def _docs(self, query: str) -> list[Doc]:
        with self._lock:
            docs = self.corpus.get(query)
        if docs is not None:
            return docs
        slug = "-".join(query.split())[:40] or "q"
        return [
            Doc(f"https://example.com/{slug}/{i}", f"{query} — page {i}", f"About {query}: {i}.")
            for i in range(1, 31)
        ]


def _words(query: str) -> str:
    """The query's words, casefolded, without ``site:``/``-site:``/``OR`` and parentheses."""
    tokens = query.replace("(", " ").replace(")", " ").casefold().split()
    return " ".join(t for t in tokens if t != "or" and not t.startswith(("site:", "-site:")))


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

    def do_GET(self) -> None:
        fake = self.server.fake
        at = time.monotonic()
        split = urlsplit(self.path)
        params = {k: v[0] for k, v in parse_qs(split.query).items()}
        if split.path != "/search":
            fake.errors.append(f"FakeSearch: no route for GET {self.path}")
            answer: tuple[int, str, bytes, str] = (404, "text/plain", b"not found", "")
        else:
            try:
                answer = fake._answer(params, at)
            except Exception:
                fake.errors.append(f"FakeSearch handler raised:\n{traceback.format_exc()}")
                answer = (500, "text/plain", b"FakeSearch handler raised", "")
        status, content_type, data, retry_after = answer
        with fake._lock:  # recorded as the answer goes out: a client that has it finds it
            fake._requests.append(RecordedRequest(params.get("q", ""), params, at, status))
        with contextlib.suppress(OSError):  # the client hung up (its deadline passed)
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(data)))
            if retry_after:
                self.send_header("retry-after", retry_after)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are recorded instead
