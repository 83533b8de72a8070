"""`deep-research sessions list|show|report|watch|cancel|rm|prune`: past runs, their reports
and their jobs.

Each command imports what it uses in its body (see ``cli``)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from deep_research.core.errors import EXIT_DECLINED, ProviderError, SessionError, UsageError
from deep_research.frontends.common import (
    JsonOpt,
    ServerOpt,
    print_json,
    print_report,
    service,
    session_detail,
)

if TYPE_CHECKING:
    from deep_research.persistence.port import Sessions

sessions_app = typer.Typer(
    help="Past runs: list, show, report, watch, cancel their research jobs, rm, prune.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@sessions_app.command("list")
def sessions_list(
    as_json: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N sessions.")] = 50,
    server: ServerOpt = None,
) -> None:
    """Past runs, newest first."""
    from deep_research.frontends import render
    from deep_research.persistence.records import SessionSummary

    if (there := service(server)) is not None:
        with there:
            rows = [SessionSummary.model_validate(row) for row in there.sessions(limit)]
    else:
        rows = _store().list()[:limit]
    if as_json:
        print_json([row.model_dump(mode="json") for row in rows])
    elif not rows:
        render.info('no sessions yet: run `deep-research "your question"`')
    else:
        render.sessions_table(rows)


@sessions_app.command("watch")
def sessions_watch(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    after: Annotated[
        int | None,
        typer.Option("--after", help="Start after this event id (default: its latest run)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON event a line (JSON Lines) on stdout.")
    ] = False,
    server: ServerOpt = None,
) -> None:
    """Follow a run as it happens, from any terminal: its latest run's events until it
    ends (at once, if no process runs it)."""
    import asyncio
    import contextlib
    import functools

    from deep_research.app import saved
    from deep_research.app.loading import load_settings
    from deep_research.core.events import RunEvent
    from deep_research.frontends import render
    from deep_research.persistence.port import team_extra

    def show(event: RunEvent) -> None:
        if as_json:
            print_json(event.model_dump(mode="json"))
        else:
            at = event.at.astimezone().strftime("%H:%M:%S")
            line = f"{event.id:>5} {at} {event.message}"
            render.out.print(line, markup=False, highlight=False)

    if (there := service(server)) is not None:
        with there:
            for event in there.events(session_id, after):
                show(event)
        return

    settings = load_settings()
    with contextlib.ExitStack() as stack:
        pending = None
        if settings.database_url is not None:  # followed while a worker runs it or will
            with team_extra():
                from deep_research.app.queue import RunQueue  # DBOS: a team's only

            queue = RunQueue(settings)
            stack.callback(queue.close)
            pending = functools.partial(queue.active, saved.sessions(settings).resolve(session_id))

        async def follow() -> None:
            async for event in saved.watch(settings, session_id, after=after, pending=pending):
                show(event)

        asyncio.run(follow())


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    as_json: JsonOpt = False,
    server: ServerOpt = None,
) -> None:
    """One run: its tree, status, spend and report path."""
    from deep_research.frontends import render

    if (there := service(server)) is not None:
        from deep_research.frontends import remote

        with there:
            detail = there.status(session_id)
        if as_json:
            print_json(detail)
        else:
            remote.show(detail)
        return
    store = _store()
    state = store.load(session_id)
    state.status = store.shown_status(state)  # as saved.status and `list` say
    report_path = store.report_location(state.session_id)
    if as_json:
        print_json(session_detail(state, report_path))
    else:
        render.session_detail(state, report_path)


@sessions_app.command("report")
def sessions_report(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    full: Annotated[
        bool,
        typer.Option("--full", help="On a terminal, all of it, not only its answer and contents."),
    ] = False,
    server: ServerOpt = None,
) -> None:
    """Print a session's report again: on a terminal its answer and contents (--full: all of
    it), piped its markdown as written."""
    from deep_research.frontends import render

    if (there := service(server)) is not None:
        with there:
            render.report(there.report(session_id))
        return
    store = _store()
    state = store.load(session_id)
    markdown = store.report(state.session_id)
    if markdown is None:
        sid, status = state.session_id, store.shown_status(state)
        if status == "running":
            raise SessionError(f"session {sid} is running: `deep-research sessions watch {sid}`")
        raise SessionError(
            f"session {sid} has no report ({status}): `deep-research resume {sid}` writes one"
        )
    from deep_research.app.saved import read_report_data

    brief = print_report(markdown, read_report_data(store, state.session_id), full=full)
    if brief:
        render.info(f"report: {store.report_location(state.session_id)} (all of it: --full)")


@sessions_app.command("cancel")
def sessions_cancel(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    as_json: JsonOpt = False,
    server: ServerOpt = None,
) -> None:
    """Cancel a session's research jobs at the provider (also while another process runs it).

    Prints one line per job: cancelled, already finished, or unreachable. Cancelled nodes
    are recorded as such; `resume` does not research them again unless --retry-cancelled."""
    import asyncio

    from deep_research.app import lifecycle
    from deep_research.app.loading import load_settings
    from deep_research.frontends import render

    if (there := service(server)) is not None:
        with there:  # the run stopped in the service too (its HTTP API's cancel)
            done = there.cancel(session_id)
        sid, recorded = done["session_id"], done["recorded"]
        rows = [
            {"node": job["node_id"], "job_id": job["job_id"], "status": job["status"], "detail": ""}
            for job in done["jobs"]
        ]
    else:
        result = asyncio.run(lifecycle.cancel(load_settings(), session_id))
        sid, recorded = result.session_id, result.recorded
        rows = [
            {"node": nid, "job_id": jid, "status": o.status, "detail": o.detail}
            for nid, jid, o in result.jobs
        ]
    if as_json:
        print_json({"session_id": sid, "recorded": recorded, "jobs": rows})
    elif not rows:
        render.info(f"session {sid} has no research jobs in flight")
    else:
        for row in rows:
            detail = f" ({row['detail']})" if row["detail"] else ""
            status = str(row["status"]).replace("_", " ")
            line = f"{row['node']}  {row['job_id']}  {status}{detail}"
            render.out.print(line, markup=False, highlight=False)
        if not recorded:
            render.info(
                "the session is being run by another process: it records the cancelled "
                "nodes when it next polls their jobs"
            )
    if any(row["status"] == "unreachable" for row in rows):
        raise typer.Exit(ProviderError.exit_code)


@sessions_app.command("rm")
def sessions_rm(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a session and its report. Refused while a process runs it."""
    from deep_research.app import maintenance, saved
    from deep_research.app.loading import load_settings
    from deep_research.frontends import render

    settings = load_settings()
    state = saved.status(settings, session_id)  # an unknown id fails before any question
    if not yes:
        if not render.interactive():
            raise UsageError("deleting a session needs --yes when nobody can be asked")
        if not typer.confirm(f"delete session {state.session_id} ({state.question[:60]})?"):
            raise typer.Exit(EXIT_DECLINED)
    removed = maintenance.remove_session(settings, state.session_id)
    render.info(f"removed session {removed}")


@sessions_app.command("prune")
def sessions_prune(
    older_than: Annotated[
        str, typer.Option("--older-than", help="Age, e.g. 12h, 30d, 2w (last change).")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would go; delete nothing.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Delete the sessions not changed for longer than --older-than (never a running one)."""
    from deep_research.app import maintenance
    from deep_research.app.loading import load_settings
    from deep_research.frontends import render

    removed, running = maintenance.prune_sessions(
        load_settings(), parse_age(older_than), dry_run=dry_run
    )
    if as_json:
        print_json(
            {
                "dry_run": dry_run,
                "removed": [row.session_id for row in removed],
                "running": running,
            }
        )
        return
    verb = "would remove" if dry_run else "removed"
    for row in removed:
        line = f"{verb} {row.session_id}  {row.question[:70]}"
        render.out.print(line, markup=False, highlight=False)
    for session_id in running:
        render.info(f"kept {session_id}: a process is running it")
    render.info(f"{verb} {len(removed)} session(s)")


def _store() -> Sessions:
    """The sessions, found from the data directory alone (``Settings.sessions_dir``):
    listing and showing runs read no other setting, so they start without pydantic-settings
    and the asyncio it imports (bench/startup.py times them)."""
    from deep_research.app.home import read_dotenv, settings_database_url, settings_home
    from deep_research.persistence.port import open_sessions

    dotenv = read_dotenv()
    return open_sessions(settings_home(dotenv) / "sessions", settings_database_url(dotenv))


_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> timedelta:
    """``12h``, ``30d``, ``2w`` -> a timedelta."""

    number, unit = text.strip()[:-1], text.strip()[-1:].lower()
    if not number.isdigit() or unit not in _UNITS:
        raise UsageError(f"--older-than {text!r}: give a number and h, d or w (e.g. 30d)")
    return timedelta(seconds=int(number) * _UNITS[unit])
