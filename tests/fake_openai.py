"""A loopback HTTP server speaking enough of the OpenAI API for tests.

    with FakeOpenAI() as fake:
        client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test")

It runs on 127.0.0.1 in a daemon thread of the test process, so a CLI started as
a child process can use it too, and everything it knows (scripts, deep-research
responses, counters) outlives a killed client: a resumed run re-attaches by id.

Like the real service it refuses what the real service refuses, as the real service
words it: a model it does not serve (404 `model_not_found`; see `DEFAULT_MODELS`,
`add_model`, `today`), a reasoning effort the model does not take (`EFFORTS_TAKEN`:
`minimal` on GPT-6, `none` on astra / 6.1-sol / 6.2), `temperature` on a reasoning model
unless its effort is `none`, `max_tokens` on a reasoning model's chat completion,
`reasoning.summary` for an unverified organisation. Those are expected answers, not fake
errors.

`flavor` makes it a local server instead, refusing what that one refuses as its source
words it (not the OpenAI refusals above: both answer any `model`, take `temperature`):
- "llama-cpp-python" (0.3.36): a `response_format` other than text / json_object
  (json_schema included) is a 500 `internal_server_error` quoting FastAPI's validation
  error, sent without x-should-retry; `max_completion_tokens` is ignored (`max_tokens`
  is the cap); chat completions run one at a time (its server's model lock).
- "llama-server" (llama.cpp's): a prompt that fills a slot's context is a 400
  `exceed_context_size_error` with `n_prompt_tokens` and `n_ctx`; beyond `slots`,
  requests wait for a free slot; GET /props; `meta.n_ctx` in GET /v1/models.
Both 404 GET /v1/models/{id} (and any other unknown route) with their own 404 body.
Every flavour finds a json_object / text request's schema in its prompt
(`ChatRequest.schema_name`), and counts `peak_concurrency` / `peak_requests`.

Invariants: every piece of state is guarded by one lock; `wait_for` wakes on
every change, so tests wait on conditions, never on sleeps; the Authorization
header is never stored. Handler errors and unscripted requests answer 4xx/5xx
with `x-should-retry: false` and are appended to `errors` (the pytest fixture
fails the test on them).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.fake_openai_payloads import (
    CAP_KEYS,
    DEFAULT_MODELS,
    N_CTX_TRAIN,
    NO_QUOTA,
    RATE_LIMITED,
    UNAUTHORIZED,
    ChatReply,
    ChatRequest,
    Citation,
    FaultKind,
    Flavor,
    RecordedRequest,
    ResearchReport,
    ResearchRequest,
    ResearchStatus,
    StoredResponse,
    approx_tokens,
    chat_completion,
    default_report,
    embeddings,
    exceed_context_size,
    final_status,
    llama_cpp_python_refusal,
    llama_server_props,
    local_model_list,
    model_not_found,
    model_object,
    new_id,
    not_found,
    refused_effort,
    refused_flex,
    refused_max_tokens,
    refused_mcp_tool,
    refused_temperature,
    refused_web_search,
    response_object,
    unsupported_temperature,
    unverified_summary,
)

__all__ = [
    "DEFAULT_MODELS",
    "ChatReply",
    "ChatRequest",
    "Citation",
    "FakeOpenAI",
    "Fault",
    "Flavor",
    "RecordedRequest",
    "ResearchReport",
    "ResearchRequest",
]

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key"})
_FINAL = frozenset({"completed", "failed", "incomplete", "cancelled"})

Headers = dict[str, str]
ChatResult = ChatReply | str | dict[str, Any]
ChatHandler = Callable[[ChatRequest], ChatResult | None]
ResearchHandler = Callable[[ResearchRequest], ResearchReport | str | None]


@dataclass(frozen=True)
class Fault:
    """Applied to the next `times` requests whose path starts with `path_prefix`.

    rate_limit: 429, server_error: 500, both with retry-after / retry-after-ms headers
    when `retry_after` > 0 (the SDK sleeps that long, else backs off ~0.5 s);
    insufficient_quota: 429 out of credit, no retry-after (the SDK still retries it);
    unauthorized: 401 invalid_api_key; slow: answer after `delay` s; malformed: 200 with
    a truncated JSON body; drop: close the connection before handling; drop_after:
    handle (state changes!), then drop.
    """

    kind: FaultKind
    path_prefix: str = "/v1/"
    times: int = 1
    retry_after: float = 0.01
    delay: float = 0.0


@dataclass
class _Armed:
    fault: Fault
    left: int


class FakeOpenAI:
    def __init__(
        self,
        *,
        polls_to_complete: int = 2,
        embedding_dimensions: int = 64,
        models: Mapping[str, str | None] | None = None,
        today: date = date(2026, 11, 23),
        retrieve_endpoint: bool = True,
        list_endpoint: bool = True,
        flavor: Flavor = "openai",
        slots: int = 4,
        context_tokens: int = 8192,
    ) -> None:
        self.flavor: Flavor = flavor
        self.slots = slots  # llama-server's --parallel: chat completions generated at once
        # One llama-server slot's context (`n_ctx`), capped by the model's training context.
        self.n_ctx = min(context_tokens, N_CTX_TRAIN)
        self._cond = threading.Condition(threading.RLock())
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        # Chat completions.
        self.chat_handler: ChatHandler | None = None
        self.default_chat_reply: ChatResult | None = None
        self._chat_scripts: dict[str | None, deque[ChatResult]] = {}
        # Deep research.
        self.research_handler: ResearchHandler | None = None
        self._research_script: deque[ResearchReport | str] = deque()
        self.polls_to_complete = polls_to_complete  # retrieves until a response is final
        self.hold_responses = False  # True: stay in_progress until complete()
        self._responses: dict[str, StoredResponse] = {}
        # Embeddings, faults, latency.
        self.embedding_dimensions = embedding_dimensions
        self.latency = 0.0  # seconds from a request to its answer (a fault's delay on top)
        self._faults: list[_Armed] = []
        # Models: id -> shutdown date (ISO) or None; served while the date is after today.
        # A local server serves what you `add_model`, not OpenAI's list.
        default = DEFAULT_MODELS if flavor == "openai" else {}
        self.models: dict[str, str | None] = dict(default if models is None else models)
        self.today = today
        # False: GET /v1/models/{id} 404s (vLLM); neither llama server has that route.
        self.retrieve_endpoint = retrieve_endpoint and flavor == "openai"
        self.list_endpoint = list_endpoint  # False: GET /v1/models 404s too
        self.org_verified = False  # True: reasoning.summary is accepted
        # True: a research job's `service_tier: "flex"` is refused (400, param service_tier),
        # as OpenAI refuses a tier a model or mode does not offer; nothing is created.
        self.refuse_flex = False
        # Records and counters.
        self._requests: list[RecordedRequest] = []
        self.research_inputs: Counter[str] = Counter()  # creates per input text
        self.retrieves: Counter[str] = Counter()  # GETs per response id
        self.cancels: Counter[str] = Counter()  # cancels per response id
        self.errors: list[str] = []  # handler exceptions, unscripted requests
        self.create_replied_at: dict[str, float] = {}  # response id -> time.time() replied
        self._open_chats = 0  # chat completions received and not yet answered
        self._generating = 0  # ... of which holding a slot (being generated)
        self._peak_requests = 0
        self._peak_concurrency = 0

    # --- lifecycle -------------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        self._stopping.clear()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()  # wake requests queued for a slot
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(
        self, exc: type[BaseException] | None, val: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    # --- scripting -------------------------------------------------------------------
    def script(self, schema_name: str | None, replies: Iterable[ChatResult]) -> None:
        """Queue chat replies for requests with this schema name (None: plain text)."""
        with self._cond:
            self._chat_scripts.setdefault(schema_name, deque()).extend(replies)

    def script_research(self, reports: Iterable[ResearchReport | str]) -> None:
        """Queue deep-research reports, used by creates in order (a str is a bare report)."""
        with self._cond:
            self._research_script.extend(reports)

    def assert_scripts_consumed(self) -> None:
        with self._cond:
            left = {k: len(v) for k, v in self._chat_scripts.items() if v}
            if self._research_script:
                left["<research>"] = len(self._research_script)
        assert not left, f"scripted replies never requested: {left}"

    def inject(self, *faults: Fault) -> None:
        with self._cond:
            self._faults.extend(_Armed(f, f.times) for f in faults)

    def faults_pending(self) -> int:
        with self._cond:
            return sum(a.left for a in self._faults)

    def add_model(self, model: str, shutdown_date: str | None = None) -> None:
        """Serve `model` too (e.g. a local "llama3.1"), until `shutdown_date` if given."""
        with self._cond:
            self.models[model] = shutdown_date

    def served(self, model: str) -> bool:
        with self._cond:
            if model not in self.models:
                return False
            shutdown = self.models[model]
            return shutdown is None or date.fromisoformat(shutdown) > self.today

    # --- deep-research control -------------------------------------------------------
    def complete(self, response_id: str, status: ResearchStatus | None = None) -> None:
        """Finish a response now (its scripted status, unless `status` overrides it)."""
        with self._cond:
            stored = self._responses[response_id]
            if stored.status not in _FINAL:
                stored.finish(status or stored.final_status)
            self._cond.notify_all()

    def response_status(self, response_id: str) -> str:
        with self._cond:
            return self._responses[response_id].status

    @property
    def response_ids(self) -> list[str]:
        with self._cond:
            return list(self._responses)

    # --- assertions ------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._cond:
            return list(self._requests)

    @property
    def peak_concurrency(self) -> int:
        """Most chat completions generated at once (at most `slots`; 1 for llama-cpp-python)."""
        with self._cond:
            return self._peak_concurrency

    @property
    def peak_requests(self) -> int:
        """Most chat completions a client had open at once, queued ones included."""
        with self._cond:
            return self._peak_requests

    def count(self, path_prefix: str, method: str | None = None) -> int:
        return sum(
            1
            for r in self.requests
            if r.path.startswith(path_prefix) and method in (None, r.method)
        )

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Block until `predicate()` holds (re-checked on every request and change)."""
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                raise TimeoutError(f"FakeOpenAI: condition not met within {timeout}s")

    # --- request handling (server threads) -------------------------------------------
    def _take_fault(self, path: str) -> Fault | None:
        with self._cond:
            for armed in self._faults:
                if armed.left > 0 and path.startswith(armed.fault.path_prefix):
                    armed.left -= 1
                    return armed.fault
        return None

    def _replied(self, response_id: str) -> None:
        with self._cond:
            self.create_replied_at[response_id] = time.time()
            self._cond.notify_all()

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _route(
        self,
        method: str,
        path: str,
        body: Any,
        *,
        query: Mapping[str, list[str]] | None = None,
        wait: bool = False,
    ) -> tuple[int, dict[str, Any]]:
        """Answer a request (`query`: its url's, parsed); `wait`: hold a chat completion's
        slot for the latency too."""
        parts = path.strip("/").split("/")
        try:
            if method == "POST" and path in _MODEL_PATHS:
                refusal = self._refusal(path, body)
                if refusal is not None:
                    return refusal
            if method == "POST" and path == "/v1/chat/completions":
                return self._chat(body, wait)
            if method == "POST" and path == "/v1/embeddings":
                return 200, embeddings(body, self.embedding_dimensions)
            if method == "POST" and path == "/v1/responses":
                return self._create_response(body)
            if parts[:2] == ["v1", "responses"] and len(parts) >= 3:
                return self._response_action(method, parts[2], parts[3:], query or {})
            if method == "GET" and path == "/v1/models" and self.list_endpoint:
                return 200, self._model_list()
            if method == "GET" and path.startswith("/v1/models/") and self.retrieve_endpoint:
                return self._model(unquote(path.removeprefix("/v1/models/")))
            if method == "GET" and path == "/props" and self.flavor == "llama-server":
                with self._cond:
                    model = next((m for m in self.models if self.served(m)), "")
                return 200, llama_server_props(model, self.slots, self.n_ctx)
            return not_found(self.flavor, f"FakeOpenAI: no route for {method} {path}")
        except Exception:
            return self._fail(500, f"FakeOpenAI handler raised:\n{traceback.format_exc()}")
        finally:
            with self._cond:
                self._cond.notify_all()

    def _refusal(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """What the real API refuses before doing anything (nothing is created or counted)."""
        if self.flavor == "llama-cpp-python":  # FastAPI validates before the model lock
            return llama_cpp_python_refusal(body) if path == "/v1/chat/completions" else None
        if self.flavor == "llama-server":
            return None  # its refusals come once a slot takes the request: see _generate
        model = body.get("model")
        if not isinstance(model, str) or not self.served(model):
            return model_not_found(str(model))
        if path == "/v1/embeddings":
            return None
        reasoning = body.get("reasoning") or {}
        if path == "/v1/chat/completions":
            effort, effort_param = body.get("reasoning_effort"), "reasoning_effort"
            refusal = refused_max_tokens(model, body)
            if refusal is not None:
                return refusal
        else:
            effort, effort_param = reasoning.get("effort"), "reasoning.effort"
        refusal = refused_effort(model, effort, effort_param)
        if refusal is not None:
            return refusal
        if refused_temperature(model, body.get("temperature"), effort):
            return unsupported_temperature()
        if path == "/v1/responses" and reasoning.get("summary") and not self.org_verified:
            return unverified_summary()
        if path == "/v1/responses":
            return refused_mcp_tool(body) or refused_web_search(body)
        return None

    def _model_list(self) -> dict[str, Any]:
        with self._cond:
            data = [model_object(m, d) for m, d in self.models.items() if self.served(m)]
        if self.flavor != "openai":
            return local_model_list(self.flavor, [m["id"] for m in data], self.n_ctx)
        return {"object": "list", "data": data}

    def _model(self, model: str) -> tuple[int, dict[str, Any]]:
        with self._cond:
            if not self.served(model):  # shut down or unknown: the key can no longer use it
                return model_not_found(model)
            return 200, model_object(model, self.models[model])

    def _fail(self, status: int, message: str) -> tuple[int, dict[str, Any]]:
        with self._cond:
            self.errors.append(message)
        return _error(status, message)

    @contextlib.contextmanager
    def _slot(self) -> Iterator[float]:
        """Hold a generation slot; yields when it was taken. Local servers queue what they
        cannot run yet: llama-server defers a task until one of its `--parallel` slots frees,
        llama-cpp-python (app.py) holds its one model lock through each completion."""
        limit = {"openai": None, "llama-cpp-python": 1, "llama-server": self.slots}[self.flavor]
        with self._cond:
            self._open_chats += 1
            self._peak_requests = max(self._peak_requests, self._open_chats)
            self._cond.notify_all()
            self._cond.wait_for(
                lambda: limit is None or self._generating < limit or self._stopping.is_set()
            )
            self._generating += 1
            self._peak_concurrency = max(self._peak_concurrency, self._generating)
            self._cond.notify_all()
        try:
            yield time.monotonic()
        finally:
            with self._cond:
                self._generating -= 1
                self._open_chats -= 1
                self._cond.notify_all()

    def _chat(self, body: dict[str, Any], wait: bool) -> tuple[int, dict[str, Any]]:
        req = ChatRequest.from_body(body, CAP_KEYS[self.flavor])
        with self._slot() as taken:
            answer = self._generate(req)
            with self._cond:
                self._cond.notify_all()  # the reply is made: wake `wait_for` before the latency
            if wait:  # a queued request's latency starts when a slot takes it
                self._stopping.wait(max(0.0, self.latency - (time.monotonic() - taken)))
        return answer

    def _generate(self, req: ChatRequest) -> tuple[int, dict[str, Any]]:
        if self.flavor == "llama-server" and approx_tokens(req.text) >= self.n_ctx:
            return exceed_context_size(approx_tokens(req.text), self.n_ctx)
        # User handlers run outside the lock: one may block on an event to hold a call open.
        reply = self.chat_handler(req) if self.chat_handler else None
        with self._cond:
            queue = self._chat_scripts.get(req.schema_name)
            if reply is None and queue:
                reply = queue.popleft()
        if reply is None:
            reply = self.default_chat_reply
        if reply is None and req.schema_name is None:
            reply = "This is a fake reply."
        if reply is None:
            return self._fail(400, f"FakeOpenAI: no chat reply scripted for {req.schema_name!r}")
        if not isinstance(reply, ChatReply):
            reply = ChatReply(content=reply)
        return 200, chat_completion(req.model, reply, req.text)

    def _create_response(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self.refuse_flex and body.get("service_tier") == "flex":
            return refused_flex()
        req = ResearchRequest.from_body(body)
        report = self.research_handler(req) if self.research_handler else None
        with self._cond:
            if report is None and self._research_script:
                report = self._research_script.popleft()
            if report is None:
                report = default_report(req.input_text)
            if isinstance(report, str):
                report = ResearchReport(text=report)
            stored = StoredResponse(
                id=new_id("resp"),
                model=req.model,
                body=body,
                report=report,
                polls_left=self.polls_to_complete,
                held=self.hold_responses,
                final_status=final_status(report, body.get("max_output_tokens")),
            )
            self._responses[stored.id] = stored
            self.research_inputs[req.input_text] += 1
            if not req.background:  # foreground: answer with the finished response
                stored.finish(stored.final_status)
            return 200, response_object(stored, body.get("include") or [])

    def _response_action(
        self, method: str, response_id: str, rest: list[str], query: Mapping[str, list[str]]
    ) -> tuple[int, dict[str, Any]]:
        """A retrieve (its reply holds what its own `include[]` asks for, as the API's: the
        create's `include` is not remembered) or a cancel (it takes no `include`)."""
        include: list[str] = []
        with self._cond:
            stored = self._responses.get(response_id)
            if stored is None:
                return _error(404, f"No response found with id '{response_id}'.")
            if method == "GET" and not rest:
                self.retrieves[response_id] += 1
                include = query.get("include[]", [])
                if stored.status not in _FINAL:
                    stored.polls_left -= 1
                    if stored.polls_left <= 0 and not stored.held:
                        stored.finish(stored.final_status)
                    else:
                        stored.status = "in_progress"
            elif method == "POST" and rest == ["cancel"]:
                self.cancels[response_id] += 1
                if stored.status not in _FINAL:
                    stored.finish("cancelled")
            else:
                return _error(404, f"FakeOpenAI: no route for {method} responses/{rest}")
            return 200, response_object(stored, include)


_MODEL_PATHS = frozenset({"/v1/chat/completions", "/v1/responses", "/v1/embeddings"})


def _error(status: int, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": "fake_error", "code": None}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeOpenAI

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
        """Cut keep-alive connections, so no client is served after stop()."""
        with self._open_lock:
            for sock in self._open:
                with contextlib.suppress(OSError):  # already closed by the peer
                    sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client killed mid-request (kill -9 tests) is expected, not an error


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle on, the body of a reply on a
    # keep-alive connection waits for the client's delayed ACK (~40 ms). Real servers
    # don't do that, and a benchmark of reply-to-disk latency must not measure it.
    disable_nagle_algorithm = True
    server: _Server

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; requests are recorded instead

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        received = time.monotonic()
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        target = urlsplit(self.path)
        path, query = target.path, parse_qs(target.query)
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = None
        fault = fake._take_fault(path)
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake._record(
            RecordedRequest(
                method=method,
                path=path,
                headers={k: v for k, v in headers.items() if k not in _SECRET_HEADERS},
                body=body,
                authorized="authorization" in headers,
                fault=fault.kind if fault else None,
                query=query,
            )
        )
        kind = fault.kind if fault else None
        if kind is None and not (raw and body is None):
            # A served model's latency includes its own work: the reply is made while the
            # client waits, so each of N concurrent calls takes `latency`, not `latency`
            # plus the fake's turns at the GIL after the other replies' work.
            status, payload = fake._route(method, path, body or {}, query=query, wait=True)
            fake._stopping.wait(max(0.0, fake.latency - (time.monotonic() - received)))
            return self._reply(method, path, status, payload)
        delay = fake.latency + (fault.delay if fault and fault.kind == "slow" else 0.0)
        if delay > 0:
            fake._stopping.wait(delay)
        if kind == "drop":
            return self._drop()
        retry = {}
        if fault and fault.retry_after > 0:
            retry = {
                "retry-after": f"{fault.retry_after:g}",
                "retry-after-ms": f"{fault.retry_after * 1000:g}",
            }
        if kind == "rate_limit":
            return self._send(*RATE_LIMITED, retry)
        if kind == "insufficient_quota":
            return self._send(*NO_QUOTA)
        if kind == "unauthorized":
            return self._send(*UNAUTHORIZED)
        if kind == "server_error":
            return self._send(*_error(500, "Internal error (fake)."), retry)
        if raw and body is None:
            return self._send(*_error(400, "FakeOpenAI: request body is not JSON"))
        status, payload = fake._route(method, path, body or {}, query=query)
        if kind == "drop_after":
            return self._drop()
        if kind == "malformed":
            return self._send_bytes(200, json.dumps(payload).encode()[:40])
        self._reply(method, path, status, payload)

    def _reply(self, method: str, path: str, status: int, payload: dict[str, Any]) -> None:
        # The fake's own failures must not be retried; a real server's 500 (llama-cpp-python's
        # refusals) carries no such header, so the SDK retries it as it would the real one.
        error = payload.get("error")
        real = isinstance(error, dict) and error.get("type") != "fake_error"
        extra = {} if status < 500 or real else {"x-should-retry": "false"}
        self._send(status, payload, extra)
        if method == "POST" and path == "/v1/responses" and status == 200:
            self.server.fake._replied(payload["id"])

    def _send(self, status: int, payload: dict[str, Any], extra: Headers | None = None) -> None:
        self._send_bytes(status, json.dumps(payload).encode(), extra)

    def _send_bytes(self, status: int, data: bytes, extra: Headers | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", new_id("req"))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):  # the peer is already gone
            self.connection.shutdown(socket.SHUT_RDWR)
