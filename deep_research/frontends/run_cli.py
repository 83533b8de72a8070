"""`deep-research run` and `deep-research resume`: research a question from the terminal.

The commands read the question (an argument, stdin or a file), parse the run options, show
the worst-case cost before anything is spent (and ask above a limit), then drive the run
with a live view and print the report.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from deep_research.app.flags import FLAGS
from deep_research.core.errors import EXIT_DECLINED, EXIT_INTERRUPTED, BudgetTooSmall, UsageError
from deep_research.frontends.common import (
    JsonOpt,
    ServerOpt,
    error_json,
    print_json,
    print_report,
    service,
)
from deep_research.frontends.question import read_question

if TYPE_CHECKING:
    from deep_research.app import lifecycle, preparation
    from deep_research.core.ports import JobEvent

# --- shared options -------------------------------------------------------------


def flag(name: str) -> Any:
    """Run option ``name`` as a typer option: its flag and help (``app/flags.py``, the words
    its HTTP and MCP descriptions use too)."""
    found = FLAGS[name]
    return typer.Option(found.flag, help=found.help)


ParallelOpt = Annotated[int | None, flag("max_parallel")]
IterOpt = Annotated[int | None, flag("max_iterations")]
CostOpt = Annotated[float | None, flag("max_cost_usd")]
TokensOpt = Annotated[int | None, flag("max_total_tokens")]
TimeOpt = Annotated[float | None, flag("max_runtime_seconds")]
FullOpt = Annotated[
    bool,
    typer.Option(
        "--full",
        help="On a terminal, print the whole report, not only its answer and contents.",
    ),
]
CLI_ONLY = frozenset(
    {"question", "question_file", "estimate_only", "yes", "as_json", "session_id", "full", "server"}
)
"""Parameters of ``run`` and ``resume`` that are no run option: every other is a field of
``options.RunOptions`` (``run``) or ``options.ResumeRequest`` (``resume``), by the same
name (``tests/test_options.py`` holds them to it)."""


def _given(ctx: typer.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The command's run options as given (by field name), and the flag of each."""
    params = [p for p in ctx.command.params if p.name and p.name not in CLI_ONLY]
    values = {p.name: ctx.params[p.name] for p in params if p.name}
    flags = {p.name: p.opts[0] for p in params if p.name}
    return values, flags


def run(
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
    chat_model: Annotated[str | None, flag("chat_model")] = None,
    planner_model: Annotated[str | None, flag("planner_model")] = None,
    branch_model: Annotated[str | None, flag("branch_model")] = None,
    web_model: Annotated[str | None, flag("web_model")] = None,
    web_effort: Annotated[str | None, flag("web_effort")] = None,
    web_tier: Annotated[str | None, flag("web_tier")] = None,
    web_engine: Annotated[str | None, flag("web_engine")] = None,
    search_provider: Annotated[str | None, flag("search_provider")] = None,
    domains: Annotated[str | None, flag("domains")] = None,
    exclude_domains: Annotated[str | None, flag("exclude_domains")] = None,
    since: Annotated[str | None, flag("since")] = None,
    location: Annotated[str | None, flag("location")] = None,
    kb_name: Annotated[str | None, flag("kb_name")] = None,
    kb_only: Annotated[bool, flag("kb_only")] = False,
    web_only: Annotated[bool, flag("web_only")] = False,
    estimate_only: Annotated[
        bool,
        typer.Option("--estimate", help="Print the run's worst-case cost and exit; spend nothing."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before an expensive run.")
    ] = False,
    full: FullOpt = False,
    server: ServerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Research QUESTION and write a cited report (the default command). On a terminal it
    prints the answer and the report's contents (--full: all of it); piped, the report."""
    from deep_research.app import lifecycle, preparation
    from deep_research.app.loading import load_settings
    from deep_research.app.options import RunOptions
    from deep_research.frontends import render

    question = read_question(question, question_file)
    values, flags = _given(ctx)
    options = RunOptions.parse(values, flags)
    if (there := service(server)) is not None:
        from deep_research.frontends import remote

        with there:  # its own caps and confirmation: the service admits the run or not
            if estimate_only:
                raise UsageError("--estimate works a run out here: leave out --server")
            given = options.model_dump(mode="json", exclude_defaults=True)
            remote.follow_run(there, there.start(question, given), as_json=as_json)
    # Every check a user can fail (question, flags, settings) runs before the engine loads.
    prepared = preparation.prepare(load_settings(), question, options, flags)
    if not prepared.extractive:
        import asyncio

        prepared = asyncio.run(preparation.choose_engine(prepared, _info(as_json)))
    free = prepared.extractive and prepared.engine is None
    if estimate_only and free:
        if as_json:
            print_json({"run_worst_usd": 0.0, "mode": "extractive"})
        else:
            render.out.print("no model is configured: an extractive run costs nothing")
        return
    if estimate_only or not free:
        # A cost limit given for this run is the user's answer: no question is asked.
        asked = yes or options.max_cost_usd is not None
        _preflight(prepared, estimate_only=estimate_only, yes=asked, as_json=as_json, new=True)
    with lifecycle.start(prepared, _info(as_json)) as run:
        _drive(run, as_json=as_json, full=full)


def resume(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    max_parallel: ParallelOpt = None,
    max_iterations: IterOpt = None,
    max_cost_usd: CostOpt = None,
    max_total_tokens: TokensOpt = None,
    max_runtime_seconds: TimeOpt = None,
    retry_cancelled: Annotated[bool, flag("retry_cancelled")] = False,
    resubmit_lost: Annotated[bool, flag("resubmit_lost")] = False,
    full: FullOpt = False,
    server: ServerOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run where it stopped; optionally with a new budget or more iterations.

    The run's choices (models, efforts, web job, knowledge base) are the ones it started
    with. Research jobs still running at the provider (after Ctrl-C or a crash) are
    re-attached by their saved ids, never submitted again; one whose id was lost (the process
    died just after its create) is submitted again only with --resubmit-lost."""
    from deep_research.app import lifecycle
    from deep_research.app.loading import load_settings
    from deep_research.app.options import ResumeRequest, option_settings

    values, flags = _given(ctx)
    request = ResumeRequest.parse(values, flags)  # before anything is read
    if (there := service(server)) is not None:
        from deep_research.frontends import remote

        with there:
            given = request.model_dump(mode="json", exclude_defaults=True)
            remote.follow_run(there, there.resume(session_id, given), as_json=as_json)
    sets = option_settings(ResumeRequest).items()
    settings = load_settings().with_flags(
        {setting: flags[option] for option, names in sets for setting in names},
        {setting: getattr(request, option) for option, names in sets for setting in names},
    )
    with lifecycle.reopen(
        settings,
        session_id,
        request,
        max_parallel=request.max_parallel,
        retry_cancelled=request.retry_cancelled,
        resubmit_lost=request.resubmit_lost,
        on_info=_info(as_json),
    ) as run:
        if not run.prepared.extractive:
            _preflight(run.prepared, estimate_only=False, yes=True, as_json=as_json)
        _drive(run, as_json=as_json, full=full)


def _preflight(
    prepared: preparation.Prepared,
    *,
    estimate_only: bool,
    yes: bool,
    as_json: bool,
    new: bool = False,
) -> None:
    """Before anything is spent: the estimate (and exit, or ask), known prices, live models.

    A ``new`` run whose limits admit no research is refused with the estimate's figures
    (``--estimate`` shows the same, and exits as the run would). A resume has spent already:
    its budget guard decides."""
    import asyncio

    from deep_research.app import preparation
    from deep_research.frontends import render

    worst = preparation.estimate(prepared)
    refused = preparation.refusal(prepared, worst) if new else None
    if estimate_only:
        if as_json:
            figures = asdict(worst) | {
                "run_worst_usd": worst.run_worst_usd,
                "likely_usd": worst.likely_usd,
                "refused": refused,
            }
            print_json({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()})
        else:
            for line in worst.lines():
                render.out.print(line, highlight=False)
        if refused and as_json:
            raise typer.Exit(BudgetTooSmall.exit_code)
    if refused:
        raise BudgetTooSmall(refused)
    if estimate_only:
        raise typer.Exit(0)
    if not prepared.extractive:  # with no model, only a paid search provider costs
        for warning in asyncio.run(preparation.check_models(prepared)):
            render.warn(warning)
    likely, limit = worst.likely_usd, prepared.settings.confirm_above_usd
    asks = not yes and not as_json and likely > limit
    if asks and render.interactive():
        render.info("\n".join(worst.lines()))
        question = (
            f"This run will likely spend about ${likely:.2f} (a guess for up to "
            f"{worst.planned_nodes} sub-question{'s' if worst.planned_nodes != 1 else ''}; "
            f"at most ${worst.run_worst_usd:.2f}), "
            f"above your ${limit:.2f} confirmation limit, DEEP_RESEARCH_CONFIRM_ABOVE_USD. Go on?"
        )
        if not typer.confirm(question):
            render.info(
                "nothing was spent; --max-cost USD bounds the run and skips this question "
                "(--preset quick makes it smaller, --max-parallel N runs fewer jobs at once), "
                "as do --yes and DEEP_RESEARCH_CONFIRM_ABOVE_USD"
            )
            raise typer.Exit(EXIT_DECLINED)


def _drive(run: lifecycle.Run, *, as_json: bool, full: bool = False) -> None:
    """Research a session held under its lock, showing progress; then the report (on a
    terminal its first screen, unless ``full``) and the spend as the session saved it."""
    import asyncio

    from deep_research.app import lifecycle
    from deep_research.core.budget import totals
    from deep_research.frontends import render
    from deep_research.frontends.common import run_summary

    state = run.state
    show_live = not as_json and render.err.is_terminal
    interrupted = False
    with render.live_view(state, enabled=show_live) as view:
        emit = view.event if show_live else render.Progress() if not as_json else _quiet
        try:
            asyncio.run(lifecycle.execute(run, emit))
        except KeyboardInterrupt:
            interrupted = True  # said below the live view's last frame, never above it
    if interrupted:
        _interrupted(run, as_json=as_json)
    if as_json:
        print_json(run_summary(state) | {"exit_code": lifecycle.exit_code(state)})
        raise typer.Exit(lifecycle.exit_code(state))
    _show_report(run, full=full)
    # Read back after everything booked: the claim check pays its judge after the first draft.
    saved = run.store.load(state.session_id)
    spend = totals(saved.ledger)
    render.info(
        f"session {saved.session_id}: {saved.status} ({saved.stop_reason}) · "
        f"${spend.cost_usd:.4f} · {spend.usage.total_tokens:,} tokens"
    )
    raise typer.Exit(lifecycle.exit_code(state))  # not 0 when nothing was found


def _interrupted(run: lifecycle.Run, *, as_json: bool) -> NoReturn:
    """Save a run stopped by Ctrl-C and say how to resume it: the last thing printed."""
    from deep_research.app import lifecycle
    from deep_research.frontends import render

    session_id = run.state.session_id
    running = lifecycle.save_interrupted(run)
    jobs = (
        f" {running} research job(s) keep running at the provider: resume "
        f"re-attaches; `deep-research sessions cancel {session_id}` stops them."
        if running
        else ""
    )
    message = f"interrupted; saved. Resume with: deep-research resume {session_id}."
    render.info(message + jobs)
    if as_json:
        error = error_json("interrupted", message + jobs, EXIT_INTERRUPTED)
        print_json({"error": error["error"] | {"session_id": session_id}})
    raise typer.Exit(EXIT_INTERRUPTED) from None


def _show_report(run: lifecycle.Run, *, full: bool) -> None:
    """The report on stdout (its first screen on a terminal, unless ``full``); its path,
    and how to see all of it, on stderr."""
    from deep_research.app.saved import read_report_data
    from deep_research.frontends import render

    path, session_id = run.state.report_path, run.state.session_id
    data = read_report_data(run.store, session_id) if path is not None else None
    brief = print_report(run.report_markdown or "", data, full=full)
    if path is not None:
        more = f" (all of it: deep-research sessions report {session_id} --full)" if brief else ""
        render.info(f"report: {path}{more}")


def _info(as_json: bool) -> preparation.Info:
    from deep_research.frontends import render

    return _quiet if as_json else render.info


def _quiet(_message: str | JobEvent) -> None:
    pass
