"""A loopback web server for the page reader's tests (and benchmarks).

    with FakeWeb() as web:
        reader = PageReader(ReaderSettings(allow=(web.netloc,)))
        page = await reader.read(web.url("/docs/bisect.html"))

It runs on 127.0.0.1 (or another loopback ``address``: 127.0.0.2-127.0.0.254 work on Linux
without setup, a host per address for politeness benchmarks) in a daemon thread and serves
the real documentation pages of ``tests/web_fixtures`` under ``/docs/``, a ``robots.txt``
(``robots``, ``robots_status``), and the cases a reader must survive — see `FakeWeb.ROUTES`.
A request in absolute form (``GET http://name/path``, as a client sends it to a forward
proxy) is answered as a proxy would, from the same routes, and logged with ``proxied=True``.

Every request is logged with the time it started and finished (``time.monotonic()``), the
Host it named and its status (`hits`), so a test or a benchmark can count the requests in
flight and per second per host (`max_in_flight`, `max_in_window`). Handler errors other
than a client hanging up are collected in ``errors`` (the pytest fixture fails on them).
"""

from __future__ import annotations

import contextlib
import ssl
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).parent / "web_fixtures"
DEFAULT_ROBOTS = "User-agent: *\nDisallow: /private/\n"
HUGE_BYTES = 3_000_000  # over the reader's 2 MB default cap
_OPEN = float("inf")  # a request still being handled has not finished

BOILERPLATE = """<!DOCTYPE html>
<html><head><title>Example Corp</title></head><body>
<header><nav><a href="/">Home</a> | <a href="/products">Products</a> |
<a href="/about">About us</a> | <a href="/contact">Contact</a></nav></header>
<div id="cookie-banner" role="dialog">We use cookies to give you the best experience.
<button>Accept all</button> <button>Settings</button></div>
<aside class="sidebar"><ul><li><a href="/a">Popular</a></li><li><a href="/b">Latest</a></li>
<li><a href="/c">Archive</a></li></ul></aside>
<footer><p>&copy; 2026 Example Corp. All rights reserved.</p>
<a href="/privacy">Privacy</a> | <a href="/terms">Terms</a> | <a href="/imprint">Imprint</a>
</footer></body></html>
"""


def numbered_page(number: int, published: str = "") -> str:
    """A small article, different for every number (the politeness tests read many); with
    ``published`` (YYYY-MM-DD), its ``article:published_time`` says so."""
    meta = (
        f'<meta property="article:published_time" content="{published}T08:00:00Z">'
        if published
        else ""
    )
    sentences = " ".join(
        f"Paragraph {number}.{i} explains how the reader keeps to its limits per host, "
        f"so that a research run never floods one server with requests."
        for i in range(1, 4)
    )
    return (
        f"<!DOCTYPE html><html><head>{meta}<title>Page {number}</title></head><body>"
        f'<nav><a href="/">Home</a></nav><article><h1>Page {number}</h1>'
        f"<p>{sentences}</p><p>{sentences}</p></article>"
        f"<footer>Example footer</footer></body></html>"
    )


@dataclass(frozen=True)
class Hit:
    method: str
    path: str
    host: str
    """The Host header's name, without the port."""
    netloc: str
    started: float
    finished: float
    """When the answer's body started to go out; ``inf`` while it is being handled."""
    status: int
    proxied: bool
    user_agent: str


class FakeWeb:
    ROUTES = """
    /robots.txt               ``robots`` with ``robots_status`` (``robots=None``: 404)
    /docs/<name>.html         tests/web_fixtures/<name>.html
    /private/<any>            a page that the default robots.txt disallows
    /plain.txt                text/plain
    /page/<n>.html            a small article, after ``page_delay`` seconds
    /dated/<YYYY-MM-DD>.html  a small article published that day (its meta tag says so)
    /boilerplate.html         navigation, cookie banner, sidebar and footer only
    /slow.html                headers only after ``slow_seconds`` (or at shutdown)
    /huge.html                HUGE_BYTES of HTML, no Content-Length (streamed)
    /huge-declared.html       the same with its Content-Length
    /file.pdf                 application/pdf
    /blob                     binary bytes and no Content-Type
    /redirect/to?url=U        302 to U
    /redirect/chain/<n>       302 to /redirect/chain/<n-1>; 0 is /docs/colorsys.html
    /redirect/metadata        302 to http://169.254.169.254/latest/meta-data/
    /429/once.html            429 with Retry-After: 1 the first time, then a page
    /429/always.html          429 with Retry-After: 1, always
    /429/long.html            429 with Retry-After: 120
    /status/<code>            that status
    """

    def __init__(self, *, tls: bool = False, address: str = "127.0.0.1") -> None:
        self.scheme = "https" if tls else "http"
        """https: a certificate for docs.example.test from tests/web_fixtures/tls/ca.pem."""
        self.address = address
        """The address it listens on."""
        self.hostname = "localhost" if address == "127.0.0.1" else address
        """The host its URLs and `netloc` name: localhost on 127.0.0.1, else the address."""
        self.robots: str | None = DEFAULT_ROBOTS
        self.robots_status = 200
        self.page_delay = 0.0
        self.slow_seconds = 10.0
        self.errors: list[str] = []
        self._hits: list[Hit] = []
        self._served: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def __enter__(self) -> FakeWeb:
        fake = self

        class Handler(_Handler):
            web = fake

        self._server = ThreadingHTTPServer((self.address, 0), Handler)
        self._server.daemon_threads = True
        if self.scheme == "https":
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(FIXTURES / "tls" / "server.pem")
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stopping.set()
        assert self._server is not None
        assert self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    @property
    def port(self) -> int:
        assert self._server is not None, "use FakeWeb as a context manager"
        return int(self._server.server_address[1])

    @property
    def netloc(self) -> str:
        return f"{self.hostname}:{self.port}"

    def url(self, path: str, host: str | None = None) -> str:
        return f"{self.scheme}://{host or self.hostname}:{self.port}{path}"

    # --- the request log ------------------------------------------------------------------

    @property
    def hits(self) -> list[Hit]:
        with self._lock:
            return list(self._hits)

    def paths(self) -> list[str]:
        return [hit.path for hit in self.hits]

    def max_in_flight(self, host: str | None = None) -> int:
        """Most requests to ``host`` (every host: None) being handled at one moment."""
        events = sorted(
            (t, step)
            for hit in self.hits
            if host is None or hit.host == host
            for t, step in ((hit.started, 1), (hit.finished, -1))
        )
        most = level = 0
        for _, step in events:  # at equal times an end sorts before a start
            level += step
            most = max(most, level)
        return most

    def max_in_window(self, seconds: float = 1.0, host: str | None = None) -> int:
        """Most requests to ``host`` started within any window of ``seconds`` (inclusive)."""
        starts = sorted(hit.started for hit in self.hits if host is None or hit.host == host)
        return max(
            (sum(1 for t in starts[i:] if t <= first + seconds) for i, first in enumerate(starts)),
            default=0,
        )

    def _log(self, hit: Hit) -> int:
        with self._lock:
            self._hits.append(hit)
            return len(self._hits) - 1

    def _close(self, number: int, status: int, finished: float) -> None:
        with self._lock:
            hit = self._hits[number]
            if hit.finished == _OPEN:
                self._hits[number] = replace(hit, status=status, finished=finished)

    def _count(self, path: str) -> int:
        """How many times ``path`` was asked for, this request included."""
        with self._lock:
            self._served[path] += 1
            return self._served[path]


class _Handler(BaseHTTPRequestHandler):
    web: FakeWeb
    server_version = "FakeWeb/1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        target = urlsplit(self.path)
        proxied = bool(target.scheme)
        netloc = target.netloc if proxied else self.headers.get("Host", "")
        host = urlsplit(f"//{netloc}").hostname or ""
        agent = self.headers.get("User-Agent", "")
        hit = Hit("GET", target.path, host, netloc, time.monotonic(), _OPEN, 0, proxied, agent)
        self._number = self.web._log(hit)
        try:
            self._route(target.path, parse_qs(target.query))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: a size cap, a timeout
        except Exception:
            self.web.errors.append(traceback.format_exc())
            raise
        finally:
            self._answered(0)

    def _answered(self, status: int) -> None:
        """Logged before the body goes out, so the log is complete when the client has it."""
        self.web._close(self._number, status, time.monotonic())

    # --- routes ---------------------------------------------------------------------------

    def _route(self, path: str, query: dict[str, list[str]]) -> None:
        web = self.web
        if path == "/robots.txt":
            if web.robots is None:
                return self._send(404, b"not found", "text/plain")
            return self._send(web.robots_status, web.robots.encode(), "text/plain")
        if path.startswith("/docs/") and path.endswith(".html"):
            file = FIXTURES / path.removeprefix("/docs/")
            if file.parent == FIXTURES and file.is_file():
                return self._send(200, file.read_bytes())
        if path.startswith("/private/"):
            return self._send(200, numbered_page(0).encode())
        if path == "/plain.txt":
            text = "Plain notes\n\n" + "A plain text file is read as it is, line by line. " * 4
            return self._send(200, text.encode(), "text/plain; charset=utf-8")
        if path.startswith("/page/"):
            web._stopping.wait(web.page_delay)
            number = int(path.removeprefix("/page/").removesuffix(".html"))
            return self._send(200, numbered_page(number).encode())
        if path.startswith("/dated/"):
            day = path.removeprefix("/dated/").removesuffix(".html")
            return self._send(200, numbered_page(int(day[-2:]), published=day).encode())
        if path == "/boilerplate.html":
            return self._send(200, BOILERPLATE.encode())
        if path == "/slow.html":
            web._stopping.wait(web.slow_seconds)
            return self._send(200, numbered_page(1).encode())
        if path in ("/huge.html", "/huge-declared.html"):
            return self._huge(declared=path == "/huge-declared.html")
        if path == "/file.pdf":
            return self._send(
                200, b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + bytes(2000), "application/pdf"
            )
        if path == "/blob":
            return self._send(200, bytes(range(256)) * 8, None)
        if path == "/redirect/to":
            return self._redirect(query["url"][0])
        if path.startswith("/redirect/chain/"):
            left = int(path.removeprefix("/redirect/chain/"))
            return self._redirect(f"/redirect/chain/{left - 1}" if left else "/docs/colorsys.html")
        if path == "/redirect/metadata":
            return self._redirect("http://169.254.169.254/latest/meta-data/")
        if path.startswith("/429/"):
            if path == "/429/once.html" and web._count(path) > 1:
                return self._send(200, numbered_page(429).encode())
            wait = "120" if path == "/429/long.html" else "1"
            return self._send(429, b"slow down", "text/plain", {"Retry-After": wait})
        if path.startswith("/status/"):
            return self._send(int(path.removeprefix("/status/")), b"status", "text/plain")
        return self._send(404, b"not found", "text/plain")

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str | None = "text/html; charset=utf-8",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._answered(status)
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self._send(302, b"", "text/plain", {"Location": location})

    def _huge(self, *, declared: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        if declared:
            self.send_header("Content-Length", str(HUGE_BYTES))
        self.end_headers()  # HTTP/1.0: without a length the body ends when we close
        self._answered(200)
        chunk = b"<p>" + b"All work and no play makes a huge page. " * 100 + b"</p>\n"
        self.wfile.write(b"<!DOCTYPE html><html><body><article>")
        sent = 0
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            while sent < HUGE_BYTES and not self.web._stopping.is_set():
                self.wfile.write(chunk)
                sent += len(chunk)
