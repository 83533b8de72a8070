"""`deep-research sessions list|show|cancel`: past runs, and their research jobs.

Each command imports what it uses in its body (see ``cli``)."""

from __future__ import annotations

from typing import Annotated

import typer

from deep_research.app.cli_common import JsonOpt, print_json

sessions_app = typer.Typer(
    help="Past runs: list them, show one, cancel its research jobs.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@sessions_app.command("list")
def sessions_list(
    as_json: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N sessions.")] = 50,
) -> None:
    """Past runs, newest first."""
    from deep_research.app import render, service
    from deep_research.app.config import load_settings

    rows = service.list_sessions(load_settings())[:limit]
    if as_json:
        print_json([row.model_dump(mode="json") for row in rows])
    elif not rows:
        render.info('no sessions yet: run `deep-research "your question"`')
    else:
        render.sessions_table(rows)


@sessions_app.command("show")
def sessions_show(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    as_json: JsonOpt = False,
) -> None:
    """One run: its tree, status, spend and report path."""
    from deep_research.app import render, service
    from deep_research.app.cli_common import run_summary
    from deep_research.app.config import load_settings

    settings = load_settings()
    state = service.status(settings, session_id)
    report_path = service.report_path(settings, state.session_id)
    if as_json:
        data = run_summary(state) | {
            "question": state.question,
            "created_at": state.created_at.isoformat(),
            "iteration": state.iteration,
            "report_path": report_path,
            "run_spec": state.run_spec.model_dump(),
            "nodes": [
                n.model_dump(
                    mode="json",
                    include={
                        "id",
                        "question",
                        "status",
                        "source_hint",
                        "depends_on",
                        "parent_id",
                        "confidence",
                        "cost_usd",
                        "error",
                        "remote_jobs",
                        "researched_by",
                    },
                )
                for n in state.nodes.values()
            ],
        }
        print_json(data)
    else:
        render.session_detail(state, report_path)


@sessions_app.command("cancel")
def sessions_cancel(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    as_json: JsonOpt = False,
) -> None:
    """Cancel a session's research jobs at the provider (also while another process runs it).

    Prints one line per job: cancelled, already finished, or unreachable. Cancelled nodes
    are recorded as such; `resume` does not research them again unless --retry-cancelled."""
    import asyncio

    from deep_research.app import render, service
    from deep_research.app.config import load_settings
    from deep_research.core.errors import ProviderError

    result = asyncio.run(service.cancel(load_settings(), session_id))
    rows = [
        {"node": nid, "job_id": jid, "status": o.status, "detail": o.detail}
        for nid, jid, o in result.jobs
    ]
    if as_json:
        print_json({"session_id": result.session_id, "recorded": result.recorded, "jobs": rows})
    elif not rows:
        render.info(f"session {result.session_id} has no research jobs in flight")
    else:
        for row in rows:
            detail = f" ({row['detail']})" if row["detail"] else ""
            status = str(row["status"]).replace("_", " ")
            render.out.print(f"{row['node']}  {row['job_id']}  {status}{detail}", highlight=False)
        if not result.recorded:
            render.info(
                "the session is being run by another process: it records the cancelled "
                "nodes when it next polls their jobs"
            )
    if any(o.status == "unreachable" for _, _, o in result.jobs):
        raise typer.Exit(ProviderError.exit_code)
