"""The research tools: start and resume a run (in this server), follow it, its status and
report, cancel it, and the past runs. A run is a session like any other: the CLI can watch,
cancel and resume it, and the other way round."""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from deep_research.app import knowledge, saved
from deep_research.app.config import Settings
from deep_research.app.options import ResearchRequest, ResumeRequest
from deep_research.core.models import SessionState
from deep_research.core.report import assemble
from deep_research.frontends.common import session_detail
from deep_research.frontends.mcp.context import ToolContext, argument, one_line_errors, takes
from deep_research.frontends.mcp.views import (
    Cancelled,
    CancelledJob,
    EvidencePage,
    Followed,
    Report,
    ResearchStatus,
    Sessions,
    Started,
)

MAX_FOLLOW_SECONDS = 3600

SessionId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        description="The session id research_start returned (a unique prefix works too).",
    ),
]


def register(server: MCPServer[None], context: ToolContext) -> None:
    settings, manager = context.settings, context.runs
    reading, spending = context.reading, context.spending

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
            return Started(session_id=await manager.resume(session_id, request))

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
            seen, last, ended = 0, "", False
            events = manager.watch(session_id)
            with anyio.move_on_after(max_wait_seconds):
                async with contextlib.aclosing(events):
                    async for event in events:
                        seen, last = seen + 1, event.message
                        await ctx.report_progress(event.id, None, event.message)
                await manager.wait(session_id)  # a run of this process: until it let go
                ended = True
            state = saved.status(settings, session_id)
            return Followed(
                ended=ended, events=seen, last_event=last, status=status_of(settings, state)
            )

    @server.tool(annotations=reading)
    async def research_status(session_id: SessionId) -> ResearchStatus:
        """A run's progress: each sub-question with its status, the spend, the stop reason
        and whether the report is written."""
        with one_line_errors():
            return status_of(settings, saved.status(settings, session_id))

    @server.tool(annotations=reading)
    async def research_evidence(
        session_id: SessionId,
        query: Annotated[
            str,
            Field(max_length=knowledge.MAX_QUERY_CHARS, description="Rank the units for it."),
        ] = "",
        offset: Annotated[int, Field(ge=0, description="Units to skip.")] = 0,
        limit: Annotated[int, Field(ge=1, le=saved.MAX_EVIDENCE_PAGE)] = 20,
    ) -> EvidencePage:
        """A page of the run's evidence store: its sub-questions' findings, each with the
        source text it rests on. With a query, best first (ranked as the knowledge base
        ranks chunks); without, in the order the sub-questions finished."""
        with one_line_errors():
            page = await saved.read_evidence_soon(
                settings, session_id, query=query, offset=offset, limit=limit
            )
        return EvidencePage(
            total=page.total, offset=page.offset, units=page.units, damage=page.damage
        )

    @server.tool(annotations=reading)
    async def research_report(session_id: SessionId) -> Report:
        """The run's report as markdown, with numbered citations and its sources. Before it
        is written: the same report, with the findings of each sub-question done so far as
        its sections."""
        with one_line_errors():
            state = saved.status(settings, session_id)
            written = saved.sessions(settings).report(state.session_id)
            done = sum(1 for n in state.nodes.values() if n.status == "done")
            return Report(
                session_id=state.session_id,
                status=state.status,
                final=written is not None,
                markdown=assemble(state).markdown if written is None else written,
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


def status_of(settings: Settings, state: SessionState) -> ResearchStatus:
    """A session as research_status reports it: ``sessions show --json``'s object."""
    path = saved.report_path(settings, state.session_id)
    return ResearchStatus.model_validate(session_detail(state, path))
