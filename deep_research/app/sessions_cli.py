"""`deep-research sessions list|show|cancel`: past runs, and their research jobs."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import openai
import typer

from deep_research.adapters.web.openai_jobs import ResponsesJobs
from deep_research.app import render
from deep_research.app.cli_common import JsonOpt, print_json, run_summary
from deep_research.app.config import Settings, load_settings
from deep_research.app.wiring import price_book
from deep_research.core.errors import ConfigError, ProviderError, SessionLocked
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import Usage
from deep_research.core.ports import CancelOutcome
from deep_research.core.tree import ResearchTree
from deep_research.persistence.sessions import SessionStore

sessions_app = typer.Typer(
    help="Past runs: list them, show one, cancel its research jobs.", no_args_is_help=True
)


@sessions_app.command("list")
def sessions_list(
    as_json: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N sessions.")] = 50,
) -> None:
    """Past runs, newest first."""
    rows = SessionStore(load_settings().sessions_dir).list()[:limit]
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
    store = SessionStore(load_settings().sessions_dir)
    state = store.load(session_id)
    report = store.path(state.session_id) / "report.md"
    report_path = str(report) if report.exists() else None
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
    settings = load_settings()
    store = SessionStore(settings.sessions_dir)
    state = store.load(session_id)
    owned = [(n.id, name, jid) for n in state.nodes.values() for name, jid in n.remote_jobs.items()]
    if not owned:
        if as_json:
            print_json({"session_id": state.session_id, "jobs": []})
        else:
            render.info(f"session {state.session_id} has no research jobs in flight")
        return
    if not settings.has_model:
        raise ConfigError(
            "cancelling jobs needs the provider: set OPENAI_API_KEY or OPENAI_BASE_URL"
        )
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None

    async def cancel_all() -> list[CancelOutcome]:
        async with openai.AsyncOpenAI(
            api_key=key or "not-needed",
            base_url=settings.openai_base_url,
            timeout=settings.request_timeout_seconds,
            max_retries=settings.max_retries,
        ) as client:
            jobs = ResponsesJobs(client)
            return list(await asyncio.gather(*(jobs.cancel(jid) for _, _, jid in owned)))

    outcomes = asyncio.run(cancel_all())
    recorded = _record_cancels(settings, store, state.session_id, owned, outcomes)
    rows = [
        {"node": nid, "job_id": jid, "status": o.status, "detail": o.detail}
        for (nid, _, jid), o in zip(owned, outcomes, strict=True)
    ]
    if as_json:
        print_json({"session_id": state.session_id, "recorded": recorded, "jobs": rows})
    else:
        for row in rows:
            detail = f" ({row['detail']})" if row["detail"] else ""
            status = str(row["status"]).replace("_", " ")
            render.out.print(f"{row['node']}  {row['job_id']}  {status}{detail}", highlight=False)
        if not recorded:
            render.info(
                "the session is being run by another process: it records the cancelled "
                "nodes when it next polls their jobs"
            )
    if any(o.status == "unreachable" for o in outcomes):
        raise typer.Exit(ProviderError.exit_code)


def _record_cancels(
    settings: Settings,
    store: SessionStore,
    session_id: str,
    owned: list[tuple[str, str, str]],
    outcomes: list[CancelOutcome],
) -> bool:
    """Record cancelled nodes (and their jobs' usage) unless another process drives the
    session — that process sees the cancels on its next poll and records them itself."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store.lock(session_id))
        except SessionLocked:
            return False
        state = store.load(session_id)  # fresh, under the lock
        tree = ResearchTree(state.nodes)
        guard = BudgetGuard(state, state.limits, prices=price_book(settings))
        model = state.run_spec.web_model or "unknown"
        for (nid, name, jid), outcome in zip(owned, outcomes, strict=True):
            node = state.nodes[nid]
            if outcome.status != "cancelled" or node.remote_jobs.get(name) != jid:
                continue  # unreachable or finished: the id stays for resume to read
            guard.record(
                "deep_research",
                model,
                outcome.usage or Usage(),
                node_id=nid,
                usage_unknown=outcome.usage is None,
            )
            tree.cancel(node, "cancelled by the user (deep-research sessions cancel)")
        store.save(state)
    return True
