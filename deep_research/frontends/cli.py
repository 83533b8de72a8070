"""The `deep-research` command. Errors are mapped to one stderr line + exit code in ``main``.

deep-research "question"            research a question (same as `deep-research run`)
deep-research resume ID             continue a stopped, interrupted or crashed run
deep-research check ID              check the claims of a session's report
deep-research sessions list|show    past runs
deep-research kb ingest|search|...  the markdown knowledge base
deep-research serve                 the HTTP API and its page
deep-research submit|worker         a team's queued runs (PostgreSQL, DBOS)
deep-research mcp                   the MCP server (a question named like a command: `run "mcp"`)

The commands only parse, call the use-cases in ``app/`` and print: the MCP server and the
HTTP API run research through the same ones. This module is the root command, the small
commands and the one place errors are mapped; ``run`` and ``resume`` live in ``run_cli``,
``serve`` and ``mcp`` in ``serve_cli``, the ``sessions`` and ``kb`` groups in ``sessions_cli``
and ``kb_cli``. Each command imports what it uses in its body, so `--help`, `--version` and
`sessions list` never load pydantic models, Chroma or LangChain.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

from deep_research.core.errors import (
    EXIT_BUG,
    EXIT_INTERRUPTED,
    DeepResearchError,
    StorageError,
    UsageError,
)
from deep_research.frontends.common import JsonOpt, error_code, error_json, print_json
from deep_research.frontends.kb_cli import kb_app
from deep_research.frontends.run_cli import resume, run
from deep_research.frontends.serve_cli import mcp, serve
from deep_research.frontends.sessions_cli import sessions_app
from deep_research.frontends.worker_cli import submit, worker

_debug = False
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
                word = _question_word(self.commands["run"], args[index:])
                meant = mistyped_command(word, self.commands) if word else None
                if word and meant:  # before anything loads, let alone spends
                    said = (
                        f"{word!r} is a command: its options go after it (`deep-research "
                        f"{meant} --help`)"
                        if word.lower() == meant and word != arg  # `--json doctor`
                        else f"{word!r} is no command: did you mean `{meant}`?"
                    )
                    research = f"(to research it: deep-research -- {word})"
                    _fail(ctx, f"{said} {research}", "bad_request", UsageError.exit_code)
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


def _question_word(run: Any, args: list[str]) -> str | None:
    """The one positional word of `run`'s ``args`` (`--yes doctr`, `--max-cost 3 doctr`);
    None when there are more or none, or when `--` forces the question."""
    valued = {
        opt for p in run.params if p.param_type_name == "option" and not p.is_flag for opt in p.opts
    }
    words: list[str] = []
    skip = False
    for arg in args:
        if arg == "--":
            return None
        if skip:
            skip = False
        elif arg.startswith("-") and arg != "-":
            skip = arg in valued  # `--max-cost 3`; `--max-cost=3` holds its value
        else:
            words.append(arg)
    return words[0] if len(words) == 1 else None


def mistyped_command(word: str, commands: Iterable[str]) -> str | None:
    """The command of 4+ letters that ``word``, a question of one word, is one typo away
    from (a letter added, dropped, changed or two swapped): ``doctr`` is `doctor`, while
    ``docker``, ``map`` and ``kv`` are questions."""
    if word.startswith("-") or len(word.split()) != 1:
        return None
    word = word.lower()  # `Doctor` is `doctor` as well
    return next((c for c in commands if len(c) >= 4 and (word == c or _one_typo(word, c))), None)


def _one_typo(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by exactly one edit (optimal string alignment distance 1)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = next((k for k in range(len(a)) if a[k] != b[k]), len(a))
    if len(a) < len(b):
        return a[i:] == b[i + 1 :]
    swapped = i + 1 < len(a) and a[i] == b[i + 1] and a[i + 1] == b[i] and a[i + 2 :] == b[i + 2 :]
    return a[i + 1 :] == b[i + 1 :] or swapped


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
        "  deep-research check 7f3c --json\n"
        "  deep-research sessions list\n"
        "  deep-research kb ingest ~/notes   (your own markdown notes)\n"
        "  deep-research serve --port 8000\n"
        "  claude mcp add deep-research -- deep-research mcp\n"
        '  deep-research run "mcp"        (a question that is also a command name)\n\n'
        "With no OPENAI_API_KEY / OPENAI_BASE_URL, runs are extractive over the knowledge "
        "base. Settings: DEEP_RESEARCH_* (doctor --settings lists them)."
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
db_app = typer.Typer(
    help="A team's PostgreSQL database (DEEP_RESEARCH_DATABASE_URL; the team extra).",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(db_app, name="db")
app.command()(worker)  # a team's queued runs: `submit` queues one, `worker` researches them
app.command()(submit)


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


app.command()(run)
app.command()(resume)


@app.command()
def check(
    session_id: Annotated[str, typer.Argument(help="The session's id (or a unique prefix).")],
    as_json: JsonOpt = False,
) -> None:
    """Check every claim of a session's report against the text of the sources it cites,
    and write the report again with a mark where a claim is not supported. Verdicts are kept
    in claims.json beside it; a claim already checked against the same text is not checked
    again. Cited pages are read through the page reader (DEEP_RESEARCH_CHECK_FETCH=off: not)."""
    import asyncio

    from deep_research.app.checking import check_session
    from deep_research.app.loading import load_settings
    from deep_research.frontends import render

    checked = asyncio.run(check_session(load_settings(), session_id))
    totals = checked.state.claims
    assert totals is not None, "the check counts its claims"
    if as_json:
        print_json(
            {
                "session_id": checked.state.session_id,
                "claims": totals.model_dump(mode="json"),
                "report_path": checked.report_path,
                "claims_path": checked.ledger_path,
            }
        )
        return
    counts = ", ".join(f"{n} {verdict}" for verdict, n in totals.by_verdict.items())
    render.info(f"{totals.claims} claims checked: {counts or 'none'}")
    render.info(f"report: {checked.report_path}")
    render.info(f"claims: {checked.ledger_path}")


@cache_app.command("clear")
def cache_clear(as_json: JsonOpt = False) -> None:
    """Empty the cache: repeated questions are researched (and paid for) again."""
    from deep_research.app import maintenance
    from deep_research.app.loading import load_settings
    from deep_research.frontends import render

    freed = maintenance.clear_cache(load_settings())
    if as_json:
        print_json({"freed_bytes": freed})
    else:
        render.info(f"cache cleared ({freed / 1_000_000:.1f} MB)")


@db_app.command("upgrade")
def db_upgrade(as_json: JsonOpt = False) -> None:
    """Create the sessions schema in DEEP_RESEARCH_DATABASE_URL, or migrate it to this
    version's: once per release, before the workers start (safe to run again, or from two
    machines at once)."""
    from deep_research.app import maintenance
    from deep_research.app.loading import load_settings
    from deep_research.frontends import render

    where, applied, version = maintenance.upgrade_database(load_settings())
    if as_json:
        print_json({"database": where, "applied": applied, "version": version})
    elif applied:
        shown = ", ".join(map(str, applied))
        render.info(f"{where}: schema at version {version} (applied {shown})")
    else:
        render.info(f"{where}: schema at version {version} already")


app.command()(serve)
app.command()(mcp)


@app.command()
def doctor(
    as_json: JsonOpt = False,
    show_settings: Annotated[
        bool,
        typer.Option(
            "--settings",
            help="Also list every setting as its .env line (secrets only said set or not).",
        ),
    ] = False,
) -> None:
    """Check the set-up, one line a check: models, web research, knowledge bases, the page
    reader, HTTP API and MCP server imports, price data. Exits 1 when a check fails, naming
    the command that fixes it; no model configured is fine (runs answer extractively)."""
    import asyncio

    from deep_research.app.doctor import doctor as run_doctor
    from deep_research.app.loading import load_settings
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
            from deep_research.app.doctor import env_lines

            for line in env_lines(report["settings"]):
                render.out.print(line, markup=False, highlight=False, soft_wrap=True)
        else:
            render.out.print("[dim]every setting, as .env lines: doctor --settings[/]")
    if report["problems"]:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
