"""Sessions as saved: list them, read one, follow its events, read its report.

Nothing here builds an engine: ``sessions list``, ``sessions show`` and the servers' reads stay
cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from pydantic import ValidationError

from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError, DeepResearchError, SessionError, UsageError
from deep_research.core.events import TERMINAL
from deep_research.core.models import EvidenceUnit, SessionState
from deep_research.core.report import REPORT_VERSION, Report, assemble
from deep_research.persistence.port import Sessions, open_sessions
from deep_research.persistence.records import SessionSummary

if TYPE_CHECKING:
    from deep_research.core.events import RunEvent
    from deep_research.persistence.port import Events, Evidence


def sessions(settings: Settings) -> Sessions:
    """Where this installation keeps its sessions (``Settings.database_url``, else files).
    A database's leases last ``worker_timeout_seconds``: a session's lease lapses when its
    worker is declared dead (``app.team``), not later."""
    url = settings.database_url.get_secret_value() if settings.database_url else None
    return open_sessions(settings.sessions_dir, url, lease_seconds=settings.worker_timeout_seconds)


TEAM_ONLY = "workers and queued runs keep their sessions and queue in a team's PostgreSQL database"


def database_url(settings: Settings, why: str = TEAM_ONLY) -> str:
    """``Settings.database_url``, or a one-line ``ConfigError`` saying ``why`` it is needed
    (before anything of a team's, DBOS or psycopg, loads)."""
    if settings.database_url is None:
        raise ConfigError(f"DEEP_RESEARCH_DATABASE_URL is not set: {why}")
    return settings.database_url.get_secret_value()


def list_sessions(settings: Settings) -> list[SessionSummary]:
    return sessions(settings).list()


def status(settings: Settings, session_id: str) -> SessionState:
    """A session as saved, its status as ``sessions list`` shows it: one whose process is
    gone before it finished reads as interrupted (``SessionStore.shown_status``)."""
    store = sessions(settings)
    state = store.load(session_id)
    state.status = store.shown_status(state)
    return state


async def watch(
    settings: Settings,
    session_id: str,
    *,
    after: int | None = None,
    poll_seconds: float = 0.05,
    live: Events | None = None,
    pending: Callable[[], bool] | None = None,
) -> AsyncGenerator[RunEvent, None]:
    """A session's events as they happen, from any process: those after event id ``after``
    (None: from the start of its latest run, or of the next one when that has ended and a
    process holds the session), until that run ends — or at once, when no
    process runs the session and everything written has been read. ``live``: the run's
    log, when this process runs it (events arrive as written, not by polling). ``pending``:
    whether a team's worker will run the session (its run is queued, or a dead worker's
    waits for another): followed meanwhile too."""
    store = sessions(settings)
    session_id = store.resolve(session_id)

    def active() -> bool:
        """A process runs the session, or a team's worker will."""
        if store.is_locked(session_id) or store.load(session_id).status == "queued":
            return True
        return pending is not None and pending()

    if after is None and live is not None:
        after = live.opened_after  # this run's, even before its start event (queued)
    if after is None:
        events = store.events(session_id).read()
        starts = [event.id for event in events if event.type == "start"]
        after = starts[-1] - 1 if starts else 0
        if events and events[-1].type in TERMINAL and active():
            # That run has ended and a process holds the session (or it is queued): a
            # resume, whose start event is not written yet. Its events, not the last run's.
            after = events[-1].id
    if live is not None:
        source = follow_live(live, after)
    else:
        source = store.follow(
            session_id,
            after,
            poll_seconds=poll_seconds,
            running=active,
        )
    async with contextlib.aclosing(source):  # a follower that stops lets go of the log now
        async for event in source:
            yield event


def report_path(settings: Settings, session_id: str) -> str | None:
    """Where the session's report is (a file's path), None before one is written."""
    store = sessions(settings)
    return store.report_location(store.resolve(session_id))


def read_report_data(store: Sessions, session_id: str) -> Report | str:
    """The report of ``session_id`` (a full id) as data, as it was written with it. Where
    that is missing, damaged or of another ``schema_version``, the report is rebuilt from
    its session; where that fails too, it is its markdown, shown as written."""
    with contextlib.suppress(ValidationError):
        data = Report.model_validate_json(store.report_data(session_id) or "null")
        if "schema_version" in data.model_fields_set and data.schema_version == REPORT_VERSION:
            return data
    try:
        return assemble(store.load(session_id))
    except (SessionError, OSError, ValidationError):
        return store.report(session_id) or ""  # shown as written, its citations not linked


MAX_EVIDENCE_PAGE = 100


@dataclass(frozen=True)
class EvidencePage:
    total: int
    """Units in the session's store."""
    offset: int
    units: list[EvidenceUnit]
    """The page: in the order the nodes finished, or best first for a query."""
    damage: str = ""
    """What was wrong with the session's store (damaged lines skipped); "" when nothing."""


MAX_EMBEDDED_PER_QUERY = 256
"""Units a query embeds at most (their vectors are saved: the next query embeds the next
ones). Until embedded, a unit is ranked by its words, its dense score the lowest (a zero
vector). Bounds the work, memory and time of one request however large the session."""

_QUERIES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evidence-query")
"""Ranked reads run here, one at a time, never in the shared pool the servers' other
reads use: eight concurrent queries queue instead of starving the server."""
MAX_QUEUED_QUERIES = 4
"""Ranked reads running or waiting in ``_QUERIES`` at most; another is refused (``Busy``)."""
_QUEUE_ROOM = threading.BoundedSemaphore(MAX_QUEUED_QUERIES)


class Busy(DeepResearchError):
    """Too much is waiting already: ask again in ``retry_after`` seconds (HTTP 503)."""

    retry_after = 5


async def read_evidence_soon(
    settings: Settings, session_id: str, *, query: str = "", offset: int = 0, limit: int = 20
) -> EvidencePage:
    """``read_evidence`` off the event loop: a ranked read in its own thread (``_QUERIES``),
    at most ``MAX_QUEUED_QUERIES`` of them queued (``Busy`` beyond); a plain page in the
    shared pool. Cancelled while it waits (its client gone), a ranked read never starts:
    the queue skips a cancelled future, and its place is free at once."""
    read = partial(read_evidence, settings, session_id, query=query, offset=offset, limit=limit)
    if not " ".join(query.split()):
        return await asyncio.to_thread(read)
    if not _QUEUE_ROOM.acquire(blocking=False):
        raise Busy(
            f"{MAX_QUEUED_QUERIES} ranked reads of evidence are queued already: "
            f"ask again in {Busy.retry_after} seconds"
        )
    try:
        job = _QUERIES.submit(read)
    except BaseException:  # the pool shut down (at exit): the place is not taken
        _QUEUE_ROOM.release()
        raise
    job.add_done_callback(lambda _: _QUEUE_ROOM.release())  # run, failed or cancelled
    return await asyncio.wrap_future(job)


def read_evidence(
    settings: Settings, session_id: str, *, query: str = "", offset: int = 0, limit: int = 20
) -> EvidencePage:
    """A page of the session's evidence units; with ``query``, ranked as the knowledge base
    ranks chunks (``kb.rank``: BM25 and the configured embedder, fused). Vectors are saved
    beside the units under the embedder's identity, so each unit is embedded once, and a
    query embeds at most ``MAX_EMBEDDED_PER_QUERY`` of them."""
    if offset < 0 or not 1 <= limit <= MAX_EVIDENCE_PAGE:
        raise UsageError(f"offset must be >= 0 and limit 1-{MAX_EVIDENCE_PAGE}")
    store = sessions(settings)
    evidence = store.evidence(store.resolve(session_id))
    units, damage = evidence.read()
    query = " ".join(query.split())
    if query and units:
        units = _ranked(settings, evidence, query, units)
    return EvidencePage(len(units), offset, units[offset : offset + limit], damage)


def _ranked(
    settings: Settings, evidence: Evidence, query: str, units: list[EvidenceUnit]
) -> list[EvidenceUnit]:
    # Lazy: LangChain and Chroma, for a query only; the servers import this module at start.
    from deep_research.kb.embeddings import make_embeddings
    from deep_research.kb.rank import KnownVectors, rank

    embedder = make_embeddings(settings.kb)
    target = embedder.embed_query(query)
    saved = evidence.vectors(embedder.model_id)
    if saved and len(next(iter(saved.values()))) != len(target):
        saved = {}  # vectors of another size (a damaged file): made again, then replaced
    texts = [unit.finding for unit in units]
    missing = [t for t in dict.fromkeys(texts) if t not in saved]
    vectors = saved
    if now := missing[:MAX_EMBEDDED_PER_QUERY]:
        vectors = saved | dict(zip(now, embedder.embed_documents(now), strict=True))
        with contextlib.suppress(OSError):  # a read-only directory still answers
            evidence.save_vectors(embedder.model_id, vectors)
    order = rank(query, texts, KnownVectors(vectors, target))
    return [units[i] for i, _ in order]


async def follow_live(log: Events, after: int = 0) -> AsyncGenerator[RunEvent, None]:
    """``follow`` for a run of this process: its events as ``log`` appends them (no polling),
    after those already written. Stops after the run's ``end`` event."""
    queue: asyncio.Queue[RunEvent] = asyncio.Queue()
    log.listeners.append(queue.put_nowait)  # first: nothing appended from now on is missed
    try:
        for event in log.read(after):
            after = event.id
            yield event
            if event.type in TERMINAL:
                return
        while True:
            event = await queue.get()
            if event.id <= after:
                continue  # read from the file already
            after = event.id
            yield event
            if event.type in TERMINAL:
                return
    finally:
        log.listeners.remove(queue.put_nowait)
