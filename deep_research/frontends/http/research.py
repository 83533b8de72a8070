"""The API's routes: start, follow, read, resume and cancel runs; list sessions; search the
knowledge base. Each takes the server's context (``context.ServerContext``) as a
dependency and calls the use-cases in ``app/``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi.responses import HTMLResponse, PlainTextResponse
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

from deep_research.adapters.report_html import REPORT_POLICY, render_html, report_policy
from deep_research.app import knowledge, saved
from deep_research.app.options import ResearchRequest, ResumeRequest
from deep_research.app.setting_types import Preset
from deep_research.core.errors import SessionError
from deep_research.frontends.common import hit_json, session_detail
from deep_research.frontends.http.context import ServerContext, context
from deep_research.frontends.http.page import protected, stylesheet

router = APIRouter()
T = TypeVar("T")
Context = Annotated[ServerContext, Depends(context)]


class Accepted(BaseModel):
    session_id: str
    status_url: str
    events_url: str


def accepted(session_id: str) -> Accepted:
    return Accepted(
        session_id=session_id,
        status_url=f"/research/{session_id}",
        events_url=f"/research/{session_id}/events",
    )


class ServerLimits(BaseModel):
    """What a run started here may spend, and the preset it runs unless it names one (the
    page's hints): settings of this server, none of them secret."""

    max_cost_usd: float = Field(
        description="The most a run's max_cost_usd may be (DEEP_RESEARCH_SERVER_MAX_COST_USD)."
    )
    default_max_cost_usd: float = Field(
        description="What a run given no max_cost_usd may spend: the configured limit, within "
        "the cap (less when today's budget has less left)."
    )
    daily_budget_usd: float = Field(
        description="What all runs may spend in one UTC day "
        "(DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD)."
    )
    preset: Preset = Field(description="The preset of a run that names none.")


@router.get("/limits", response_model=ServerLimits)
async def limits(server: Context) -> ServerLimits:
    """This server's caps on what a run may spend, and its default preset."""
    caps = server.runs.caps
    return ServerLimits(
        max_cost_usd=caps.max_cost_per_run,
        default_max_cost_usd=min(server.settings.max_cost_usd, caps.max_cost_per_run),
        daily_budget_usd=caps.daily_budget,
        preset=server.settings.preset,
    )


@router.post("/research", status_code=202, response_model=Accepted)
async def start(body: ResearchRequest, server: Context) -> Accepted:
    """Start a run; it goes on in the server. Follow it at ``events_url``."""
    await server.warmed()
    return accepted(await server.runs.start(body.question, body.options))


@router.get("/research/{session_id}")
async def status(session_id: str, server: Context) -> dict[str, Any]:
    """The run's tree, status, spend and report path (``sessions show --json``)."""
    state = saved.status(server.settings, session_id)
    return session_detail(state, saved.report_path(server.settings, state.session_id))


@router.get("/research/{session_id}/evidence", response_model=None)
async def evidence(
    session_id: str,
    server: Context,
    request: Request,
    query: Annotated[str, Query(max_length=knowledge.MAX_QUERY_CHARS)] = "",
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=saved.MAX_EVIDENCE_PAGE)] = 20,
) -> dict[str, Any] | Response:
    """A page of the run's evidence store (its findings, each with the source text it rests
    on); with ``query``, best first. Ranked reads queue, a few at most (503 beyond, with
    ``Retry-After``); one whose client has gone is dropped."""
    page = await while_connected(
        request,
        saved.read_evidence_soon(
            server.settings, session_id, query=query, offset=offset, limit=limit
        ),
    )
    if page is None:
        return Response(status_code=499)  # nginx's "client closed request": read by nobody
    return {
        "total": page.total,
        "offset": page.offset,
        "units": [unit.model_dump(mode="json") for unit in page.units],
        "damage": page.damage,
    }


async def while_connected(request: Request, work: Coroutine[Any, Any, T]) -> T | None:
    """What ``work`` returns, or None when the client goes away first: ``work`` is then
    cancelled (a server does not notice a client gone unless it listens, and the work would
    go on for nobody)."""
    doing = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({doing, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (doing, gone):
            task.cancel()  # the one that ended: nothing to do
        await asyncio.wait({doing, gone})
    return None if doing.cancelled() else doing.result()


async def _disconnected(request: Request) -> None:
    """Until the client has gone: after the body (none, for a GET) comes ``http.disconnect``."""
    while (await request.receive())["type"] != "http.disconnect":
        continue


@router.get("/research/{session_id}/events")
async def events(
    session_id: str,
    server: Context,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0)] = None,
) -> EventSourceResponse:
    """Server-Sent Events of the run: node started/done/failed/blocked, spend, stop,
    report ready, end. Each has an id; reconnect with ``Last-Event-ID`` to miss none."""
    saved.status(server.settings, session_id)  # an unknown id is a 404, not an empty stream

    async def stream() -> AsyncIterator[dict[str, str]]:
        async for event in server.runs.watch(session_id, after=last_event_id):
            yield {"id": str(event.id), "event": event.type, "data": event.model_dump_json()}

    return EventSourceResponse(stream(), ping=15)


@router.get("/research/{session_id}/report", response_model=None)
async def report(
    session_id: str, server: Context, accept: Annotated[str, Header()] = ""
) -> PlainTextResponse | HTMLResponse:
    """The report: markdown, or HTML with clickable citations when the client accepts
    ``text/html``."""
    store = saved.sessions(server.settings)
    session_id = store.resolve(session_id)
    markdown = store.report(session_id)
    if markdown is None:
        raise SessionError(f"session {session_id} has no report yet")
    if "text/html" in accept:
        style = stylesheet()
        page = render_html(saved.read_report_data(store, session_id), stylesheet=style)
        return HTMLResponse(page, headers=protected(report_policy(style)))
    return PlainTextResponse(
        markdown,
        media_type="text/markdown; charset=utf-8",
        headers=protected(REPORT_POLICY),
    )


@router.post("/research/{session_id}/resume", status_code=202, response_model=Accepted)
async def resume(
    session_id: str, body: Annotated[ResumeRequest, Body()], server: Context
) -> Accepted:
    """Continue a stopped or interrupted run with the choices it started with (optionally
    new limits); it goes on in the server."""
    await server.warmed()
    return accepted(await server.runs.resume(session_id, body))


@router.post("/research/{session_id}/cancel")
async def cancel(session_id: str, server: Context) -> dict[str, Any]:
    """Stop the run (saved as interrupted) and its research jobs at the provider."""
    await server.warmed()
    result = await server.runs.cancel(session_id)
    return {
        "session_id": result.session_id,
        "recorded": result.recorded,
        "jobs": [
            {"node_id": node, "job_id": job, "status": outcome.status}
            for node, job, outcome in result.jobs
        ],
    }


@router.get("/sessions")
async def sessions(
    server: Context, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> list[dict[str, Any]]:
    return [row.model_dump(mode="json") for row in saved.list_sessions(server.settings)[:limit]]


@router.get("/kb/search")
async def kb_search(
    q: Annotated[str, Query(max_length=knowledge.MAX_QUERY_CHARS)],
    server: Context,
    k: Annotated[int, Query(ge=1, le=100)] = 8,
) -> list[dict[str, object]]:
    """The knowledge base's best chunks for ``q``: each with its locator, the file's title and
    tags, and a score in [0, 1] (``kb search --help`` says what it means)."""
    await server.warmed()
    hits = knowledge.kb_search(server.settings, q, k=k)
    return [hit_json(hit) for hit in hits]
