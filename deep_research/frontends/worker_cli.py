"""`deep-research worker` and `deep-research submit`: a team's queued runs (``app.team``).

Both need DEEP_RESEARCH_DATABASE_URL and the team extra; DBOS is imported in their bodies
only, never by the other commands.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deep_research.frontends.common import JsonOpt, print_json
from deep_research.frontends.question import read_question
from deep_research.frontends.run_cli import CostOpt, IterOpt, ParallelOpt, TimeOpt, TokensOpt, flag
from deep_research.frontends.run_cli import _given as given_options


def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            min=1,
            max=64,
            help="Runs researched at once (DEEP_RESEARCH_WORKER_CONCURRENCY, default 2).",
        ),
    ] = None,
) -> None:
    """Research the team's queued runs (`deep-research submit`) until SIGTERM or Ctrl-C.

    Start one or more on any machines sharing DEEP_RESEARCH_DATABASE_URL (after `deep-research
    db upgrade`). Each run is researched by one worker at a time; when a worker dies (no
    heartbeat for DEEP_RESEARCH_WORKER_TIMEOUT_SECONDS, default 60), another resumes its runs
    where their last checkpoint left them, re-attaching research jobs already created."""
    import logging

    from deep_research.app import saved
    from deep_research.app.loading import load_settings
    from deep_research.persistence.port import team_extra

    settings = load_settings().with_overrides(worker_concurrency=concurrency)
    saved.database_url(settings)  # refused before DBOS loads
    with team_extra():
        from deep_research.app import team  # DBOS: a worker's only

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    raise typer.Exit(team.serve_worker(settings))


def submit(
    ctx: typer.Context,
    question: Annotated[
        str | None, typer.Argument(help="The research question; - reads it from stdin.")
    ] = None,
    question_file: Annotated[
        Path | None,
        typer.Option("--question-file", help="Read the question from this file.", dir_okay=False),
    ] = None,
    max_parallel: ParallelOpt = None,
    max_iterations: IterOpt = None,
    max_cost_usd: CostOpt = None,
    max_total_tokens: TokensOpt = None,
    max_runtime_seconds: TimeOpt = None,
    preset: Annotated[str | None, flag("preset")] = None,
    web_engine: Annotated[str | None, flag("web_engine")] = None,
    kb_name: Annotated[str | None, flag("kb_name")] = None,
    kb_only: Annotated[bool, flag("kb_only")] = False,
    web_only: Annotated[bool, flag("web_only")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Save QUESTION as a new session and queue it for the team's workers (`deep-research
    worker`); print its id. Nothing is researched here: follow it with `deep-research
    sessions watch ID`."""
    from deep_research.app import saved
    from deep_research.app.loading import load_settings
    from deep_research.app.options import RunOptions
    from deep_research.frontends import render
    from deep_research.persistence.port import team_extra

    settings = load_settings()
    question = read_question(question, question_file)
    values, flags = given_options(ctx)
    options = RunOptions.parse(values, flags)
    saved.database_url(settings)  # refused before DBOS loads
    with team_extra():
        from deep_research.app import queue  # DBOS: a team's only

    session_id = queue.submit(settings, question, options, _quiet if as_json else render.info)
    if as_json:
        print_json({"session_id": session_id, "status": "queued"})
    else:
        render.out.print(session_id, highlight=False)


def _quiet(_message: object) -> None:
    pass
