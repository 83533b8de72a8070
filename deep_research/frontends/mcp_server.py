"""`deep-research mcp`: research, the knowledge base and claim checks as MCP tools.

    research_start, research_resume     the session id at once; the run researches here
    research_follow                     progress notifications until the run ends
    research_status, research_report    the tree, spend and stop reason; the report (or the
                                        findings so far)
    research_cancel, research_list      stop a run and its jobs; past runs
    kb_search, kb_fetch                 the knowledge base's chunks, by query or by id
    verify_claim                        does a page or a chunk hold a passage stating a claim?
    search, fetch                       the knowledge base as ChatGPT connectors and OpenAI
                                        research jobs (DEEP_RESEARCH_KB_MCP_URL) expect it

Built on the official SDK (``MCPServer``); every tool has typed input and output, so the SDK
publishes both schemas. research_start and research_resume take the fields of the HTTP API's
bodies (``options.ResearchRequest``, ``options.ResumeRequest``: ``takes``), so an MCP client
has every option the API and the CLI have, with the same bounds and descriptions. The
engine is reached only through the use-cases in ``app/``, and a server's runs through one
``RunManager``: what a client starts here is a session like any other, which the CLI can
watch, cancel and resume, and the other way round.

Invariants:
- stdio (the default): nothing but protocol messages reaches stdout. The SDK points fd 1 at
  stderr while it serves, and logs go to stderr.
- streamable HTTP (``--http PORT``) binds 127.0.0.1 and keeps the SDK's Host and Origin
  checks (DNS rebinding): this server's own address, and the host of
  ``DEEP_RESEARCH_KB_MCP_URL`` when a tunnel publishes it. When ``DEEP_RESEARCH_API_TOKEN``
  is set every request must carry it (``Authorization: Bearer …``, constant-time compare);
  a public URL without a token is refused.
- When the client goes away (stdin closed, SIGTERM, Ctrl-C, the HTTP server stopped) every
  run is saved as interrupted; ``resume`` picks it up.
- A tool that fails returns a tool error with our one-line message, never a traceback;
  arguments a tool does not take are such an error too (``StrictServer``).
- Starting is light: ``initialize`` and ``tools/list`` are answered before the engine
  (LangChain, OpenAI, Chroma, the page reader, the embedder) is imported; the first tool
  that needs it loads it (``tests/test_startup.py``).
- stderr gets warnings and errors only, whatever level a library sets on its logger.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar
from urllib.parse import quote, urlsplit

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from mcp_types import Tool as ToolInfo
from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from deep_research.app import knowledge, saved, verify
from deep_research.app.config import Settings
from deep_research.app.options import ResearchRequest, ResumeRequest
from deep_research.app.runs import RunManager
from deep_research.app.verify import KbChunk, Verification
from deep_research.core import markdown as md
from deep_research.core.errors import ConfigError, DeepResearchError
from deep_research.core.models import (
    Citation,
    NodeStatus,
    RunSpec,
    RunStatus,
    SessionState,
    SourceHint,
    StopReason,
)
from deep_research.frontends.common import hit_json, session_detail
from deep_research.frontends.hosts import LOOPBACK_NAMES, bearer_token_matches
from deep_research.persistence.sessions import SessionSummary

if TYPE_CHECKING:
    from deep_research.adapters.web.shared import SharedReader

MCP_PATH = "/mcp"
MAX_FOLLOW_SECONDS = 3600
INSTRUCTIONS = """\
Researches hard questions and writes cited reports: a tree of sub-questions researched on
the web and in the user's markdown knowledge base. A run takes minutes and costs money
(capped per run and per day by this server). research_start returns a session id at once;
follow the run with research_follow (progress notifications) or research_status, then read
research_report. kb_search / kb_fetch read the knowledge base; verify_claim checks that a
URL or a knowledge-base chunk holds a passage stating a claim."""

SessionId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="The session id research_start returned (a unique prefix works too).",
    ),
]


# --- outputs ----------------------------------------------------------------------------


class Started(BaseModel):
    session_id: str
    next: str = Field(
        default="research_follow reports progress until the run ends; research_status polls.",
        description="What to call next.",
    )


class Spend(BaseModel):
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    reasoning_tokens: int
    web_search_calls: int
    total_tokens: int
    cost_usd: float


class NodeView(BaseModel):
    id: str
    question: str
    status: NodeStatus
    source_hint: SourceHint
    depends_on: list[str]
    parent_id: str | None
    confidence: float
    cost_usd: float
    error: str | None
    remote_jobs: dict[str, str] = Field(description="Research jobs still running at the provider.")
    researched_by: str


class ResearchStatus(BaseModel):
    """A run's progress: the object ``sessions show --json`` prints."""

    session_id: str
    question: str
    status: RunStatus = Field(description="running, complete, stopped, failed or interrupted.")
    stop_reason: StopReason | None
    created_at: datetime
    iteration: int = Field(description="The plan -> research -> judge round it is in.")
    report_path: str | None = Field(description="The report file, once it is written.")
    usage: Spend
    run_spec: RunSpec = Field(description="The run's choices (models, engine), kept for resume.")
    nodes: list[NodeView] = Field(description="The research tree's sub-questions.")


class Followed(BaseModel):
    ended: bool = Field(description="False: max_wait_seconds passed first; follow again.")
    events: int = Field(description="Events seen (each was sent as a progress notification).")
    last_event: str = Field(description="The last event's message.")
    status: ResearchStatus


class Report(BaseModel):
    session_id: str
    status: RunStatus
    final: bool = Field(
        description="True: the run's report. False: there is none yet; `markdown` holds the "
        "findings of the sub-questions done so far."
    )
    markdown: str
    nodes_done: int
    nodes_total: int


class CancelledJob(BaseModel):
    node_id: str
    job_id: str
    status: Literal["cancelled", "already_finished", "unreachable"]


class Cancelled(BaseModel):
    session_id: str
    recorded: bool = Field(
        description="The cancelled nodes are recorded (false: another process runs the "
        "session and records them itself)."
    )
    jobs: list[CancelledJob]


class Sessions(BaseModel):
    sessions: list[SessionSummary]


class KbHit(BaseModel):
    chunk_id: str = Field(description="For kb_fetch and verify_claim.")
    root: str
    source: str
    heading: str
    lines: tuple[int, int]
    score: float
    text: str
    locator: str


class KbHits(BaseModel):
    hits: list[KbHit]


class SearchResult(BaseModel):
    id: str
    title: str
    url: str


class SearchResults(BaseModel):
    results: list[SearchResult]


class Document(BaseModel):
    id: str
    title: str
    text: str
    url: str
    metadata: dict[str, str]


# --- the server -------------------------------------------------------------------------


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Our errors become a tool error with their one line (the SDK never sees a traceback)."""
    try:
        yield
    except DeepResearchError as exc:
        raise ToolError(" ".join(str(exc).split())) from None


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


Tool = TypeVar("Tool", bound=Callable[..., Any])


def takes(
    model: type[BaseModel], *, first: Sequence[inspect.Parameter] = ()
) -> Callable[[Tool], Tool]:
    """A tool whose arguments are the fields of ``model`` (after ``first``): their names,
    types, bounds, descriptions and defaults, declared once there (``app.options``, also the
    HTTP API's bodies). The SDK reads a tool's arguments from its signature, so this gives
    the tool that signature; the tool gets them as keyword arguments, validated."""

    def derive(tool: Tool) -> Tool:
        fields = [
            argument(
                name,
                Annotated[
                    (field.annotation, *field.metadata, Field(description=field.description))
                ],
                inspect.Parameter.empty if field.is_required() else field.default,
            )
            for name, field in model.model_fields.items()
        ]
        returns = inspect.signature(tool, eval_str=True).return_annotation
        signature = inspect.Signature([*first, *fields], return_annotation=returns)
        setattr(tool, "__signature__", signature)  # noqa: B010 (mypy: not on Callable)
        return tool

    return derive


def argument(
    name: str, annotation: Any, default: Any = inspect.Parameter.empty
) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


class LazyReader:
    """The page reader for verify_claim, built by its first call: building it loads the
    fetching stack, which the server's start must not wait for."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._reader: SharedReader | None = None

    def get(self) -> SharedReader:
        if self._reader is None:
            from deep_research.adapters.web.shared import SharedReader
            from deep_research.app.engines import reader_settings

            self._reader = SharedReader(reader_settings(self.settings))
        return self._reader

    async def aclose(self) -> None:
        if self._reader is not None:
            await self._reader.aclose()


def create_server(settings: Settings, *, runs: RunManager | None = None) -> MCPServer[None]:
    """The server and its tools. Light: the engine (LangChain, Chroma, the page reader, the
    embedder) loads with the first tool call that needs it, so ``initialize`` and
    ``tools/list`` are answered at once."""
    manager = runs or RunManager(settings)
    reader = LazyReader(settings)  # one per process, as runs share it

    @asynccontextmanager
    async def lifespan(_server: MCPServer[None]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):  # the client is gone: save, then go
                await manager.shutdown()
                await reader.aclose()
            sys.stdout.flush()  # while fd 1 is still stderr: nothing stray on the wire after

    server = StrictServer(
        "deep-research",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level="WARNING",
    )
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    spending = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    def status_of(state: SessionState) -> ResearchStatus:
        path = saved.report_path(settings, state.session_id)
        return ResearchStatus.model_validate(session_detail(state, path))

    @server.tool(annotations=spending)
    @takes(ResearchRequest)
    async def research_start(**arguments: Any) -> Started:
        """Start researching a question. Returns the session id at once; the run goes on in
        this server for minutes. Follow it with research_follow or research_status, then
        read research_report."""
        request = ResearchRequest.model_validate(arguments)
        with one_line_errors():
            return Started(session_id=await manager.start(request.question, request.options))

    @server.tool(annotations=spending)
    @takes(ResumeRequest, first=[argument("session_id", SessionId)])
    async def research_resume(session_id: str, **arguments: Any) -> Started:
        """Continue a stopped or interrupted run (optionally with a bigger budget); it
        repeats the run's choices. Returns at once, like research_start."""
        request = ResumeRequest.model_validate(arguments)
        with one_line_errors():
            resumed = await manager.resume(
                session_id,
                request,
                max_parallel=request.max_parallel,
                retry_cancelled=request.retry_cancelled,
            )
            return Started(session_id=resumed)

    @server.tool(annotations=reading)
    async def research_follow(
        session_id: SessionId,
        ctx: Context[None, Any],
        max_wait_seconds: Annotated[
            int, Field(ge=1, le=MAX_FOLLOW_SECONDS, description="Return after this long.")
        ] = 600,
    ) -> Followed:
        """Wait for a run to end, sending each of its events (a sub-question started or
        done, spend, stop, report written) as a progress notification when the call has a
        progress token. Returns its status when it ends or after max_wait_seconds."""
        with one_line_errors():
            session_id = saved.status(settings, session_id).session_id
            live = manager.live_log(session_id)
            seen, last, ended = 0, "", False
            events = saved.watch(settings, session_id, live=live)
            with anyio.move_on_after(max_wait_seconds):
                async with contextlib.aclosing(events):
                    async for event in events:
                        seen, last = seen + 1, event.message
                        await ctx.report_progress(event.id, None, event.message)
                await manager.wait(session_id)  # a run of this process: until it let go
                ended = True
            state = saved.status(settings, session_id)
            return Followed(ended=ended, events=seen, last_event=last, status=status_of(state))

    @server.tool(annotations=reading)
    async def research_status(session_id: SessionId) -> ResearchStatus:
        """A run's progress: each sub-question with its status, the spend, the stop reason
        and whether the report is written."""
        with one_line_errors():
            return status_of(saved.status(settings, session_id))

    @server.tool(annotations=reading)
    async def research_report(session_id: SessionId) -> Report:
        """The run's report as markdown, with numbered citations and its sources. Before it
        is written: the findings of the sub-questions done so far."""
        with one_line_errors():
            state = saved.status(settings, session_id)
            path = saved.report_path(settings, state.session_id)
            done = sum(1 for n in state.nodes.values() if n.status == "done")
            return Report(
                session_id=state.session_id,
                status=state.status,
                final=path is not None,
                markdown=saved.read_report(path) if path else findings_so_far(state),
                nodes_done=done,
                nodes_total=len(state.nodes),
            )

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=True))
    async def research_cancel(session_id: SessionId) -> Cancelled:
        """Stop a run (it is saved as interrupted) and cancel its research jobs at the
        provider. research_resume leaves the cancelled sub-questions alone unless asked."""
        with one_line_errors():
            result = await manager.cancel(session_id)
        jobs = [CancelledJob(node_id=n, job_id=j, status=o.status) for n, j, o in result.jobs]
        return Cancelled(session_id=result.session_id, recorded=result.recorded, jobs=jobs)

    @server.tool(annotations=reading)
    async def research_list(
        limit: Annotated[int, Field(ge=1, le=200, description="How many, newest first.")] = 20,
    ) -> Sessions:
        """Past runs, newest first: question, status, spend, sub-questions done."""
        with one_line_errors():
            return Sessions(sessions=saved.list_sessions(settings)[:limit])

    @server.tool(annotations=reading)
    async def kb_search(
        query: Annotated[
            str, Field(max_length=knowledge.MAX_QUERY_CHARS, description="What to look for.")
        ],
        k: Annotated[int, Field(ge=1, le=100, description="How many chunks.")] = 8,
    ) -> KbHits:
        """The user's markdown knowledge base: the best chunks for a query (hybrid BM25 +
        embeddings), each with its text, file, heading, lines and chunk_id."""
        with one_line_errors():
            hits = await asyncio.to_thread(knowledge.kb_search, settings, query, k=k)
        return KbHits(hits=[KbHit.model_validate(hit_json(hit)) for hit in hits])

    @server.tool(annotations=reading)
    async def kb_fetch(
        chunk_id: Annotated[str, Field(max_length=64, description="An id from kb_search.")],
    ) -> KbChunk:
        """One knowledge-base chunk by its id: its exact text and where it is (locator)."""
        with one_line_errors():
            return await asyncio.to_thread(verify.kb_fetch, settings, chunk_id)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    async def verify_claim(
        claim: Annotated[str, Field(max_length=4000, description="One factual sentence.")],
        source: Annotated[
            str,
            Field(
                max_length=2000,
                description="A URL (http/https), a knowledge-base chunk id (from kb_search) "
                "a KB locator (root/path#heading:start-end, as reports cite them) or a kb:// "
                "URL from search.",
            ),
        ],
    ) -> Verification:
        """Check a claim against its source: is there a passage in it that states the claim?
        Returns the verdict, the best passage verbatim, its score and, when a model is
        configured, the judge model's reading of that passage."""
        # The judge's call is paid out of the day's budget this server's runs share.
        judge = verify.LLMSupportJudge(settings, manager.ledger) if settings.has_model else None
        with one_line_errors():
            return await verify.verify_claim(
                settings, claim, source, reader=reader.get(), judge=judge
            )

    @server.tool(annotations=reading)
    async def search(
        query: Annotated[str, Field(max_length=knowledge.MAX_QUERY_CHARS, description="A query.")],
    ) -> SearchResults:
        """Search the user's knowledge base. Returns ids, titles and URLs; fetch an id for
        the full text."""
        with one_line_errors():
            hits = await asyncio.to_thread(knowledge.kb_search, settings, query, k=10)
        return SearchResults(
            results=[
                SearchResult(
                    id=h.chunk_id,
                    title=_title(h.title or h.source, h.heading),
                    url=kb_url(h.locator),
                )
                for h in hits
            ]
        )

    @server.tool(annotations=reading)
    async def fetch(
        id: Annotated[str, Field(max_length=64, description="An id from search.")],
    ) -> Document:
        """The full text of a knowledge-base result, by the id search gave."""
        with one_line_errors():
            chunk = await asyncio.to_thread(verify.kb_fetch, settings, id)
        return Document(
            id=chunk.chunk_id,
            title=_title(chunk.title or chunk.source, chunk.heading),
            text=chunk.text,
            url=kb_url(chunk.locator),
            metadata={"locator": chunk.locator, "kb": chunk.kb},
        )

    return server


def kb_url(locator: str) -> str:
    """A knowledge-base locator as a URL (citations need one): ``kb://root/path#heading:1-9``."""
    return verify.KB_SCHEME + quote(locator, safe="/#:-._~")


def _title(title: str, heading: str) -> str:
    return f"{title} › {heading}" if heading and heading != title else title


def findings_so_far(state: SessionState) -> str:
    """What a session holds before its report: the notes of its done sub-questions and the
    sources they cite (by the session's ``S#`` refs)."""
    done = [n for n in state.nodes.values() if n.status == "done" and n.notes.strip()]
    stop = f", stopped: {state.stop_reason}" if state.stop_reason else ""
    lines = [
        f"# {md.text(state.question)}",
        "",
        f"_No report yet: the run is {state.status} ({len(done)} of {len(state.nodes)} "
        f"sub-questions done{stop}). The findings so far:_",
    ]
    cited: dict[str, Citation] = {}
    for node in done:
        lines += ["", f"## {md.text(node.question)}", "", md.no_definitions(node.notes.strip())]
        cited |= {c.ref: c for c in node.citations if c.ref and c.ref not in cited}
    if cited:
        lines += ["", "## Sources", ""]
        lines += [
            f"- [{ref}] "
            + (
                md.link(c.title or c.url, c.url)
                if c.url
                else md.code(c.locator) + (f" — {md.text(c.title)}" if c.title else "")
            )
            for ref, c in cited.items()
        ]
    return "\n".join(lines) + "\n"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("deep-research")
    except PackageNotFoundError:
        return "0"


# --- transports -------------------------------------------------------------------------


def log_warnings_only() -> None:
    """Warnings and errors reach stderr; libraries' DEBUG and INFO lines do not. The level is
    the handler's, because loggers may set their own (bm25s sets DEBUG on import). Installed
    before the SDK's server, whose own set-up then adds no handler."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def serve_stdio(settings: Settings) -> None:
    """Serve over stdin/stdout until the client closes stdin (or SIGTERM, Ctrl-C)."""
    log_warnings_only()
    asyncio.run(_serve_stdio(settings))


async def _serve_stdio(settings: Settings) -> None:
    manager = RunManager(settings)
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
    loopback address (and the public URL's host), and the API token when one is set."""
    hosts = [f"{name}:{port}" for name in sorted(LOOPBACK_NAMES)]
    origins = [f"http://{host}" for host in hosts]
    token = settings.token()
    if settings.kb_mcp_url:
        if token is None:
            raise ConfigError(
                "DEEP_RESEARCH_KB_MCP_URL publishes this server: set DEEP_RESEARCH_API_TOKEN "
                "too (every request must then carry it)"
            )
        hosts += public_hosts(settings.kb_mcp_url)
        scheme = urlsplit(settings.kb_mcp_url).scheme
        origins += [f"{scheme}://{host}" for host in public_hosts(settings.kb_mcp_url)]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=security, host="127.0.0.1"
    )
    if token is None:
        return app
    return BearerToken(app, token)


def public_hosts(url: str) -> list[str]:
    """The ``Host`` headers a request through the public URL may carry: its host name
    (lower case, without user info), with and without its port."""
    parts = urlsplit(url)
    name = parts.hostname or ""
    name = f"[{name}]" if ":" in name else name  # IPv6
    return [name] + ([f"{name}:{parts.port}"] if parts.port else [])


def serve_http(settings: Settings, port: int) -> None:
    """Serve streamable HTTP on 127.0.0.1:``port`` until Ctrl-C or SIGTERM (runs saved)."""
    import uvicorn

    log_warnings_only()
    app = http_app(settings, create_server(settings), port)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=5,  # a client following a run must not hold the stop
    )


class BearerToken:
    """Every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not bearer_token_matches(
            Headers(scope=scope).get("authorization"), self.token
        ):
            refused = JSONResponse(
                {
                    "error": {
                        "code": "unauthorized",
                        "message": "a valid bearer token is required",
                    }
                },
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refused(scope, receive, send)
            return
        await self.app(scope, receive, send)
