"""The `deep-research` command. Errors are mapped to one stderr line + exit code in ``main``.

deep-research "question"            research a question (same as `deep-research run`)
deep-research resume ID             continue a stopped, interrupted or crashed run
deep-research sessions list|show    past runs
deep-research kb ingest|search|...  the markdown knowledge base
deep-research serve                 the HTTP API and its page
deep-research mcp                   the MCP server (a question named like a command: `run "mcp"`)

The commands only parse, call the use-cases in ``app/`` and print: the MCP server and the
HTTP API run research through the same ones. Each command imports what it uses in its body, so
`--help`, `--version` and `sessions list` never load pydantic models, Chroma or LangChain.
"""

from __future__ import annotations

import errno
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from deep_research.core.errors import (
    EXIT_BUG,
    EXIT_DECLINED,
    EXIT_INTERRUPTED,
    DeepResearchError,
    StorageError,
    UsageError,
)
from deep_research.frontends.common import JsonOpt, error_code, error_json, print_json
from deep_research.frontends.kb_cli import kb_app
from deep_research.frontends.sessions_cli import sessions_app

if TYPE_CHECKING:
    from deep_research.app import lifecycle
    from deep_research.core.ports import JobEvent

_debug = False
MAX_QUESTION_BYTES = 64_000
_ROOT_OPTIONS = ("--help", "-h", "--version", "--install-completion", "--show-completion")
_JSON_ERRORS = "deep_research.json_errors"
"""``ctx.meta`` key: the command was given --json, so an error is also a JSON object."""


class DefaultToRun(TyperGroup):
    """`deep-research "question"` means `deep-research run "question"`."""

    # typer vendors its own click; the context type is not public, hence Any.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        ctx.meta[_JSON_ERRORS] = "--json" in (args[: args.index("--")] if "--" in args else args)
        for index, arg in enumerate(args):
            if arg == "--debug":
                continue
            if arg not in self.commands and arg not in _ROOT_OPTIONS:
                args = [*args[:index], "run", *args[index:]]
            break
        return super().parse_args(ctx, args)

    def invoke(self, ctx: Any) -> Any:
        """The one place errors become a stderr line and an exit code (see errors.py)."""
        try:
            return super().invoke(ctx)
        except DeepResearchError as exc:
            if _debug:
                raise
            _fail(ctx, str(exc), error_code(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail(ctx, "interrupted", "interrupted", EXIT_INTERRUPTED)
        except (typer.Exit, typer.Abort):
            raise  # --help, an answered "no", an exit code chosen by the command
        except typer.TyperException as exc:  # click's usage errors, which it prints itself
            exit_code = getattr(exc, "exit_code", 2)
            if ctx.meta.get(_JSON_ERRORS) and hasattr(exc, "format_message"):
                print_json(error_json("bad_request", exc.format_message(), exit_code))
            raise
        except BrokenPipeError:
            # `... | head -1`: the reader has what it wanted. Point stdout at /dev/null so
            # the interpreter's last flush cannot raise again, and end quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None
        except Exception as exc:
            if _debug:
                raise
            storage = storage_error(exc) if isinstance(exc, OSError) else None
            if storage is not None:  # a read-only data directory or a full disk: not a bug
                _fail(ctx, str(storage), error_code(storage), storage.exit_code)
            from deep_research.frontends.crash import scrub, write_crash_log

            log = write_crash_log(exc)
            where = f"the traceback is in {log}" if log else "no log could be written"
            message = scrub(f"unexpected {type(exc).__name__}: {exc}")
            _fail(ctx, f"{message} (a bug: {where}; --debug shows it here)", "internal", EXIT_BUG)


def _fail(ctx: Any, message: str, code: str, exit_code: int) -> NoReturn:
    """An error's one line on stderr (and, after --json, its JSON object on stdout)."""
    from deep_research.frontends import render

    render.error(message)
    if ctx.meta.get(_JSON_ERRORS):
        print_json(error_json(code, message, exit_code))
    raise typer.Exit(exit_code) from None


_STORAGE_ERRNOS = {
    errno.EROFS,
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EACCES,
    errno.EPERM,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.EEXIST,
}


def storage_error(exc: OSError) -> StorageError | None:
    """A file or folder of the data directory that cannot be used (read-only, full disk, a
    file in a folder's place) as the user's one line, naming the path; None for any other
    OSError, which stays a bug."""
    if exc.errno not in _STORAGE_ERRNOS or not exc.filename:
        return None
    from deep_research.app.home import data_home

    path = Path(os.fsdecode(exc.filename)).absolute()
    home = data_home().absolute()
    if path != home and home not in path.parents:
        return None
    reason = exc.strerror or type(exc).__name__
    return StorageError(
        f"cannot use {exc.filename}: {reason} (DEEP_RESEARCH_HOME chooses the data directory)"
    )


app = typer.Typer(
    cls=DefaultToRun,
    help="Research a hard question with a tree of sub-questions, on the web (OpenAI deep "
    "research, or search-and-read with any model) and in your markdown knowledge base, and "
    "write a cited report.",
    epilog=(
        "\b\nExamples:\n"
        '  deep-research "How do vector databases handle deletes?"\n'
        '  deep-research --preset quick "What is HNSW?"\n'
        "  deep-research - < question.txt\n"
        "  deep-research resume 7f3c --max-cost 10\n"
        "  deep-research sessions list\n"
        "  deep-research kb ingest kb/\n"
        "  deep-research serve --port 8000\n"
        "  claude mcp add deep-research -- deep-research mcp\n"
        '  deep-research run "mcp"        (a question that is also a command name)\n\n'
        "With no OPENAI_API_KEY / OPENAI_BASE_URL, runs are extractive over the knowledge "
        "base. Settings: DEEP_RESEARCH_* (see the README)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    # Plain help, like git's: rich's help renderer loads markdown-it and doubles the start.
    rich_markup_mode=None,
)
cache_app = typer.Typer(
    help="The result cache (web reports, model lookups).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(sessions_app, name="sessions")
app.add_typer(kb_app, name="kb")
app.add_typer(cache_app, name="cache")


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"deep-research {version('deep-research')}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    _version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    global _debug
    _debug = debug


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


@app.command()
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
            "pages with any model, or none), auto (openai where the server serves the web "
            "model, else search).",
        ),
    ] = None,
    search_provider: Annotated[
        str | None,
        typer.Option(
            "--search-provider",
            help="For --web-engine search: duckduckgo (default), searxng, tavily, brave, exa.",
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
    from deep_research.app import lifecycle
    from deep_research.app.config import load_settings
    from deep_research.app.options import RunOptions
    from deep_research.frontends import render

    question = _read_question(question, question_file)
    values, flags = _given(ctx)
    options = RunOptions.parse(values, flags)
    # Every check a user can fail (question, flags, settings) runs before the engine loads.
    prepared = lifecycle.prepare(load_settings(), question, options, flags)
    if not prepared.extractive:
        import asyncio

        prepared = asyncio.run(lifecycle.choose_engine(prepared, _info(as_json)))
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


@app.command()
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


@cache_app.command("clear")
def cache_clear(as_json: JsonOpt = False) -> None:
    """Empty the cache: repeated questions are researched (and paid for) again."""
    from deep_research.app import maintenance
    from deep_research.app.config import load_settings
    from deep_research.frontends import render

    freed = maintenance.clear_cache(load_settings())
    if as_json:
        print_json({"freed_bytes": freed})
    else:
        render.info(f"cache cleared ({freed / 1_000_000:.1f} MB)")


@app.command()
def serve(
    host: Annotated[
        str,
        typer.Option(help="Address to bind; off loopback DEEP_RESEARCH_API_TOKEN is required."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8000,
) -> None:
    """Serve the HTTP API: start, follow (Server-Sent Events), resume and cancel runs; API
    docs at /docs. Ctrl-C saves every run as interrupted."""
    import uvicorn

    from deep_research.app.config import load_settings
    from deep_research.frontends import render
    from deep_research.frontends.http.app import create_app, log_to_stderr

    settings = load_settings()
    api = create_app(settings, host=host, port=port)
    log_to_stderr()
    where = f"[{host}]" if ":" in host else host
    render.info(f"serving on http://{where}:{port} (API docs at /docs); Ctrl-C stops")
    uvicorn.run(api, host=host, port=port, log_level="warning", server_header=False)


@app.command()
def mcp(
    http: Annotated[
        int | None,
        typer.Option(
            "--http",
            metavar="PORT",
            min=1,
            max=65535,
            help="Serve streamable HTTP on 127.0.0.1:PORT (at /mcp) instead of stdio.",
        ),
    ] = None,
) -> None:
    """Serve the MCP server: research, the knowledge base and claim checks as tools for an
    MCP client (Claude Code, Claude Desktop, …); stdio unless --http. Every run is saved as
    interrupted when the client goes away."""
    from deep_research.app.config import load_settings
    from deep_research.frontends.mcp import server as mcp_server

    settings = load_settings()
    if http is None:
        mcp_server.serve_stdio(settings)
        return
    from deep_research.frontends import render

    render.info(f"serving MCP on http://127.0.0.1:{http}/mcp; Ctrl-C stops")
    mcp_server.serve_http(settings, http)


@app.command()
def doctor(
    as_json: JsonOpt = False,
    show_settings: Annotated[
        bool, typer.Option("--settings", help="also list every setting (secrets masked)")
    ] = False,
) -> None:
    """Check the set-up, one line a check: models, web research, knowledge bases, the page
    reader, HTTP API and MCP server imports, price data. Exits 1 when a check fails, naming
    the command that fixes it; no model configured is fine (runs answer extractively)."""
    import asyncio

    from deep_research.app.config import load_settings
    from deep_research.app.doctor import doctor as run_doctor
    from deep_research.frontends import render

    report = asyncio.run(run_doctor(load_settings()))
    if as_json:
        print_json(report)
    else:
        from rich.markup import escape

        marks = {"ok": "[green]✓[/]", "note": "[cyan]·[/]", "warn": "[yellow]![/]"}
        for check in report["checks"]:
            line = f"{escape(check['name'])}: {escape(check['detail'])}"
            if check["fix"] and check["status"] != "ok":
                line += f" [dim]→ {escape(check['fix'])}[/]"
            mark = marks.get(check["status"], "[red]✗[/]")
            render.out.print(f"{mark} {line}", highlight=False, soft_wrap=True)
        if show_settings:
            for name, value in report["settings"].items():
                render.out.print(f"{name:>32} = {escape(str(value))}", highlight=False)
        else:
            render.out.print("[dim]every setting (secrets masked): doctor --settings[/]")
    if report["problems"]:
        raise typer.Exit(1)


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
    prepared: lifecycle.Prepared, *, estimate_only: bool, yes: bool, as_json: bool
) -> None:
    """Before anything is spent: the estimate (and exit, or ask), known prices, live models."""
    import asyncio

    from deep_research.app import lifecycle
    from deep_research.frontends import render

    worst = lifecycle.estimate(prepared)
    if estimate_only:
        if as_json:
            print_json(asdict(worst) | {"run_worst_usd": round(worst.run_worst_usd, 4)})
        else:
            for line in worst.lines():
                render.out.print(line, highlight=False)
        raise typer.Exit(0)
    if not prepared.extractive:  # with no model, only a paid search provider costs
        for warning in asyncio.run(lifecycle.check_models(prepared)):
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


def _info(as_json: bool) -> lifecycle.Info:
    from deep_research.frontends import render

    return _quiet if as_json else render.info


def _quiet(_message: str | JobEvent) -> None:
    pass


def main() -> None:
    app()


if __name__ == "__main__":
    main()
