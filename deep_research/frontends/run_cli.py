"""`deep-research run` and `deep-research resume`: research a question from the terminal.

The commands read the question (an argument, stdin or a file), parse the run options, show
the worst-case cost before anything is spent (and ask above a limit), then drive the run
with a live view and print the report. ``cli`` registers them on the root command, which
maps their errors to one stderr line and an exit code.
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from deep_research.core.errors import EXIT_DECLINED, EXIT_INTERRUPTED, UsageError
from deep_research.core.models import SEARCH_PROVIDERS
from deep_research.frontends.common import JsonOpt, error_json, print_json

if TYPE_CHECKING:
    from deep_research.app import lifecycle, preparation
    from deep_research.core.ports import JobEvent

MAX_QUESTION_BYTES = 64_000


# --- shared options -------------------------------------------------------------

ParallelOpt = Annotated[
    int | None, typer.Option("--max-parallel", help="Branches in flight at once.")
]
IterOpt = Annotated[
    int | None, typer.Option("--max-iterations", help="Plan/research/judge rounds.")
]
CostOpt = Annotated[float | None, typer.Option("--max-cost", help="Cost limit in USD.")]
TokensOpt = Annotated[int | None, typer.Option("--max-tokens", help="Total token limit.")]
TimeOpt = Annotated[float | None, typer.Option("--max-runtime", help="Time limit in seconds.")]
CLI_ONLY = frozenset({"question", "question_file", "estimate_only", "yes", "as_json", "session_id"})
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
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset",
            help="quick, standard (the default) or deep: how far the run goes (iterations, "
            "sub-questions per plan, parallel branches, web job effort and tool calls, "
            "summary size); a flag or setting given for one of them wins.",
        ),
    ] = None,
    chat_model: Annotated[
        str | None, typer.Option(help="One model for every chat role (planner, branch, …).")
    ] = None,
    planner_model: Annotated[str | None, typer.Option(help="Model for planning.")] = None,
    branch_model: Annotated[
        str | None, typer.Option(help="Model for branch notes (KB and search).")
    ] = None,
    web_model: Annotated[
        str | None,
        typer.Option(
            "--web-model",
            "--deep-research-model",
            help="Reasoning model that runs web research jobs (default gpt-5.5).",
        ),
    ] = None,
    web_effort: Annotated[
        str | None,
        typer.Option("--web-effort", help="Its reasoning effort: low, medium, high, xhigh."),
    ] = None,
    web_engine: Annotated[
        str | None,
        typer.Option(
            "--web-engine",
            help="How the web is researched: openai (research jobs), search (search and read "
            "pages with any model, or none), any other engine registered "
            "(app/engines.py), or auto (openai where the server serves the web model, else "
            "search).",
        ),
    ] = None,
    search_provider: Annotated[
        str | None,
        typer.Option(
            "--search-provider",
            help=f"For --web-engine search: {', '.join(SEARCH_PROVIDERS)} (the first is the "
            "default).",
        ),
    ] = None,
    kb_name: Annotated[str | None, typer.Option("--kb", help="Knowledge base name.")] = None,
    kb_only: Annotated[
        bool, typer.Option("--kb-only", help="Research only the knowledge base.")
    ] = False,
    web_only: Annotated[bool, typer.Option("--web-only", help="Research only the web.")] = False,
    estimate_only: Annotated[
        bool,
        typer.Option("--estimate", help="Print the run's worst-case cost and exit; spend nothing."),
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before an expensive run.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Research QUESTION and write a cited report (the default command)."""
    from deep_research.app import lifecycle, preparation
    from deep_research.app.config import load_settings
    from deep_research.app.options import RunOptions
    from deep_research.frontends import render

    question = _read_question(question, question_file)
    values, flags = _given(ctx)
    options = RunOptions.parse(values, flags)
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
        _preflight(prepared, estimate_only=estimate_only, yes=yes, as_json=as_json)
    with lifecycle.start(prepared, _info(as_json)) as run:
        _drive(run, as_json=as_json)


def resume(
    ctx: typer.Context,
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    max_parallel: ParallelOpt = None,
    max_iterations: IterOpt = None,
    max_cost_usd: CostOpt = None,
    max_total_tokens: TokensOpt = None,
    max_runtime_seconds: TimeOpt = None,
    retry_cancelled: Annotated[
        bool,
        typer.Option(
            "--retry-cancelled", help="Research again the nodes whose jobs were cancelled."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run where it stopped; optionally with a new budget or more iterations.

    The run's choices (models, efforts, web job, knowledge base) are the ones it started
    with. Research jobs still running at the provider (after Ctrl-C or a crash) are
    re-attached by their saved ids, never submitted again."""
    from deep_research.app import lifecycle
    from deep_research.app.config import load_settings
    from deep_research.app.options import ResumeRequest, option_settings

    values, flags = _given(ctx)
    request = ResumeRequest.parse(values, flags)  # before anything is read
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
        on_info=_info(as_json),
    ) as run:
        if not run.prepared.extractive:
            _preflight(run.prepared, estimate_only=False, yes=True, as_json=as_json)
        _drive(run, as_json=as_json)


def _read_question(question: str | None, question_file: Path | None) -> str:
    """The question as given: an argument, ``-`` for stdin, or ``--question-file``."""
    if (question is None) == (question_file is None):
        raise UsageError("give the question as an argument, as - (stdin), or --question-file")
    if question_file is not None:
        try:
            with question_file.open(encoding="utf-8") as file:
                return _bounded(file.read(MAX_QUESTION_BYTES + 1))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the question from {question_file}: {exc}") from None
    if question == "-":
        try:
            text = sys.stdin.read(MAX_QUESTION_BYTES + 1)
        except UnicodeDecodeError as exc:
            raise UsageError(f"the question on stdin is not UTF-8 text: {exc}") from None
        return _bounded(text)
    return question or ""


def _bounded(text: str) -> str:
    """Never read a huge input whole: past this it is no question (options says the limit)."""
    if len(text) > MAX_QUESTION_BYTES:
        raise UsageError(
            "the question is over 64 KB; put background material in the knowledge base instead"
        )
    return text


def _preflight(
    prepared: preparation.Prepared, *, estimate_only: bool, yes: bool, as_json: bool
) -> None:
    """Before anything is spent: the estimate (and exit, or ask), known prices, live models."""
    import asyncio

    from deep_research.app import preparation
    from deep_research.frontends import render

    worst = preparation.estimate(prepared)
    if estimate_only:
        if as_json:
            print_json(asdict(worst) | {"run_worst_usd": round(worst.run_worst_usd, 4)})
        else:
            for line in worst.lines():
                render.out.print(line, highlight=False)
        raise typer.Exit(0)
    if not prepared.extractive:  # with no model, only a paid search provider costs
        for warning in asyncio.run(preparation.check_models(prepared)):
            render.warn(warning)
    too_much = worst.run_worst_usd > prepared.settings.confirm_above_usd
    if too_much and not yes and not as_json and render.interactive():
        render.info("\n".join(worst.lines()))
        if not typer.confirm(f"This run may spend up to ${worst.run_worst_usd:.2f}. Go on?"):
            render.info(
                "nothing was spent; --max-cost USD bounds the run (--preset quick makes it "
                "smaller, --max-parallel N runs fewer jobs at once), --yes or "
                "DEEP_RESEARCH_CONFIRM_ABOVE_USD skips this question"
            )
            raise typer.Exit(EXIT_DECLINED)


def _drive(run: lifecycle.Run, *, as_json: bool) -> None:
    """Research a session held under its lock, showing progress; then the report."""
    import asyncio

    from deep_research.app import lifecycle
    from deep_research.core.budget import totals
    from deep_research.frontends import render
    from deep_research.frontends.common import run_summary

    state = run.state
    show_live = not as_json and render.err.is_terminal
    with render.live_view(state, enabled=show_live) as view:
        emit = view.event if show_live else render.Progress() if not as_json else _quiet
        try:
            asyncio.run(lifecycle.execute(run, emit))
        except KeyboardInterrupt:
            running = lifecycle.save_interrupted(run)
            jobs = (
                f" {running} research job(s) keep running at the provider: resume "
                f"re-attaches; `deep-research sessions cancel {state.session_id}` stops them."
                if running
                else ""
            )
            message = f"interrupted; saved. Resume with: deep-research resume {state.session_id}."
            render.info(message + jobs)
            if as_json:
                error = error_json("interrupted", message + jobs, EXIT_INTERRUPTED)
                print_json({"error": error["error"] | {"session_id": state.session_id}})
            raise typer.Exit(EXIT_INTERRUPTED) from None
    if as_json:
        print_json(run_summary(state))
        return
    render.report(run.report_markdown or "")
    spend = totals(state.ledger)
    render.info(
        f"report: {state.report_path}\nsession {state.session_id}: {state.status} "
        f"({state.stop_reason}) · ${spend.cost_usd:.4f} · {spend.usage.total_tokens:,} tokens"
    )


def _info(as_json: bool) -> preparation.Info:
    from deep_research.frontends import render

    return _quiet if as_json else render.info


def _quiet(_message: str | JobEvent) -> None:
    pass
