"""The `deep-research` command. Errors are mapped to one stderr line + exit code in ``main``.

deep-research "question"            research a question (same as `deep-research run`)
deep-research resume ID             continue a stopped, interrupted or crashed run
deep-research sessions list|show    past runs
deep-research kb ingest|search|...  the markdown knowledge base
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from deep_research import render
from deep_research.budget import price_for, totals
from deep_research.config import Settings, load_settings
from deep_research.errors import EXIT_INTERRUPTED, ConfigError, DeepResearchError, UsageError
from deep_research.guard import BudgetGuard, call_cost_estimate
from deep_research.kb.cli import kb_app
from deep_research.kb.ingest import ingest
from deep_research.kb.store import KBStore, open_kb
from deep_research.models import Limits, SessionState
from deep_research.orchestrator import ResearchOrchestrator
from deep_research.report import build_report
from deep_research.sessions import Checkpointer, SessionStore
from deep_research.wiring import Built, SourcePolicy, build, open_default_kb

MAX_QUESTION_CHARS = 4000
_debug = False


class DefaultToRun(TyperGroup):
    """`deep-research "question"` means `deep-research run "question"`."""

    # typer vendors its own click; the context type is not public, hence Any.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        for index, arg in enumerate(args):
            if arg == "--debug":
                continue
            if arg not in self.commands and arg not in ("--help", "-h"):
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
            render.error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            render.error("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None


app = typer.Typer(
    cls=DefaultToRun,
    help="Research a hard question with a tree of sub-questions, on the web (OpenAI Deep "
    "Research) and in your markdown knowledge base, and write a cited report.",
    epilog=(
        'Examples:  deep-research "How do vector databases handle deletes?"  ·  '
        "deep-research resume 7f3c --max-cost 10  ·  deep-research sessions list  ·  "
        "deep-research kb ingest kb/. With no OPENAI_API_KEY / OPENAI_BASE_URL, runs are "
        "extractive over the knowledge base. Settings: see README (DEEP_RESEARCH_*)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
sessions_app = typer.Typer(help="Past runs: list them, show one.", no_args_is_help=True)
app.add_typer(sessions_app, name="sessions")
app.add_typer(kb_app, name="kb")


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
) -> None:
    global _debug
    _debug = debug


# --- shared options -------------------------------------------------------------

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout, nothing else.")
]
ParallelOpt = Annotated[
    int | None, typer.Option("--max-parallel", help="Branches in flight at once.")
]
IterOpt = Annotated[
    int | None, typer.Option("--max-iterations", help="Plan/research/judge rounds.")
]
CostOpt = Annotated[float | None, typer.Option("--max-cost", help="Cost limit in USD.")]
TokensOpt = Annotated[int | None, typer.Option("--max-tokens", help="Total token limit.")]
TimeOpt = Annotated[float | None, typer.Option("--max-runtime", help="Time limit in seconds.")]


def _limits(settings: Settings) -> Limits:
    return Limits(
        max_iterations=settings.max_iterations,
        max_total_tokens=settings.max_total_tokens,
        max_cost_usd=settings.max_cost_usd,
        max_runtime_seconds=settings.max_runtime_seconds,
    )


@app.command()
def run(
    question: Annotated[str, typer.Argument(help="The research question.")],
    max_parallel: ParallelOpt = None,
    max_iterations: IterOpt = None,
    max_cost: CostOpt = None,
    max_tokens: TokensOpt = None,
    max_runtime: TimeOpt = None,
    chat_model: Annotated[
        str | None, typer.Option(help="One model for every chat role (planner, branch, …).")
    ] = None,
    planner_model: Annotated[str | None, typer.Option(help="Model for planning.")] = None,
    branch_model: Annotated[str | None, typer.Option(help="Model for KB branches.")] = None,
    deep_research_model: Annotated[str | None, typer.Option(help="Deep Research model.")] = None,
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge base name.")] = None,
    kb_only: Annotated[
        bool, typer.Option("--kb-only", help="Research only the knowledge base.")
    ] = False,
    web_only: Annotated[bool, typer.Option("--web-only", help="Research only the web.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Research QUESTION and write a cited report (the default command)."""
    question = " ".join(question.split())
    if not question:
        raise UsageError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise UsageError(
            f"the question is {len(question):,} characters; the limit is {MAX_QUESTION_CHARS:,} "
            "(put background material in the knowledge base instead)"
        )
    if kb_only and web_only:
        raise UsageError("--kb-only and --web-only exclude each other")
    settings = load_settings(
        max_parallel_branches=max_parallel,
        max_iterations=max_iterations,
        max_cost_usd=max_cost,
        max_total_tokens=max_tokens,
        max_runtime_seconds=max_runtime,
        planner_model=planner_model or chat_model,
        branch_model=branch_model or chat_model,
        summarizer_model=chat_model,
        synthesizer_model=chat_model,
        judge_model=chat_model,
        deep_research_model=deep_research_model,
        kb_name=kb,
    )
    policy: SourcePolicy = "kb_only" if kb_only else "web_only" if web_only else "auto"
    if not settings.has_model:
        if web_only:
            raise ConfigError("web research needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
        policy = "kb_only"
    extractive = not settings.has_model
    built = _engine(settings, policy, extractive=extractive, quiet=as_json)  # before any saving
    store = SessionStore(settings.sessions_dir)
    state = store.create(
        question,
        mode="extractive" if extractive else "llm",
        source_policy=policy,
        limits=_limits(settings),
    )
    _drive(settings, store, state, built, as_json=as_json)


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    max_parallel: ParallelOpt = None,
    max_iterations: IterOpt = None,
    max_cost: CostOpt = None,
    max_tokens: TokensOpt = None,
    max_runtime: TimeOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run where it stopped; optionally with a new budget or more iterations."""
    given = {
        "max_iterations": max_iterations,
        "max_cost_usd": max_cost,
        "max_total_tokens": max_tokens,
        "max_runtime_seconds": max_runtime,
    }
    settings = load_settings(max_parallel_branches=max_parallel, **given)  # validates the values
    store = SessionStore(settings.sessions_dir)
    state = store.load(session_id)
    state.limits = state.limits.model_copy(update={k: v for k, v in given.items() if v is not None})
    if state.mode == "llm" and not settings.has_model:
        raise ConfigError("this session needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
    extractive = state.mode == "extractive"
    built = _engine(settings, state.source_policy, extractive=extractive, quiet=as_json)
    _drive(settings, store, state, built, as_json=as_json)


def _engine(settings: Settings, policy: SourcePolicy, *, extractive: bool, quiet: bool) -> Built:
    kb = _knowledge_base(settings, policy, extractive=extractive, quiet=quiet)
    return build(settings, policy, kb, extractive=extractive)


def _drive(
    settings: Settings, store: SessionStore, state: SessionState, built: Built, *, as_json: bool
) -> None:
    """Run (or continue) a session under its lock, then write and show the report."""
    with store.lock(state.session_id):
        synth_price = price_for(settings.synthesizer_model)
        guard = BudgetGuard(
            state,
            state.limits,
            final_reserve_usd=call_cost_estimate(
                settings.synthesizer_model,
                settings.summary_max_tokens * 2 + 2000,
                settings.max_tokens_per_call,
            )
            if synth_price
            else 0.0,
            final_reserve_tokens=settings.summary_max_tokens * 2
            + 2000
            + settings.max_tokens_per_call,
        )
        show_live = not as_json and render.err.is_terminal
        with render.live_view(state, enabled=show_live) as view:
            emit = view.event if show_live else render.info if not as_json else _quiet
            for notice in built.notices:
                emit(notice)
            orchestrator = ResearchOrchestrator(
                state, built.engine, Checkpointer(store), guard, built.config, on_event=emit
            )
            try:
                asyncio.run(_run(orchestrator, built))
            except KeyboardInterrupt:
                store.save(state)
                render.info(
                    f"interrupted; saved. Resume with: deep-research resume {state.session_id}"
                )
                raise typer.Exit(EXIT_INTERRUPTED) from None
        markdown = build_report(state, orchestrator.final_text)
        path = store.write_report(state.session_id, markdown)
        state.report_path = str(path)
        store.save(state)
    if as_json:
        _print_json(_run_json(state))
        return
    render.report(markdown)
    spend = totals(state.ledger)
    render.info(
        f"report: {path}\nsession {state.session_id}: {state.status} ({state.stop_reason}) · "
        f"${spend.cost_usd:.4f} · {spend.usage.total_tokens:,} tokens"
    )


async def _run(orchestrator: ResearchOrchestrator, built: Built) -> None:
    async with built.resources:
        await orchestrator.run()


def _quiet(_message: str) -> None:
    pass


def _knowledge_base(
    settings: Settings, policy: SourcePolicy, *, extractive: bool, quiet: bool
) -> KBStore | None:
    """The KB for this run; extractive with no KB yet: ingest ``kb/`` first and say so."""
    if policy == "web_only":
        return None
    kb = open_default_kb(settings)
    if kb is not None or not extractive:
        return kb
    root = settings.kb_path
    if not root.is_dir():
        return None
    if not quiet:
        render.info(f"knowledge base {settings.kb_name!r} is empty: ingesting {root}/ first")
    store = open_kb(settings, create=True)
    summary = ingest(store, root)
    if not quiet:
        render.info(f"ingested {summary.chunks} chunks from {root}/ in {summary.seconds:.1f}s")
    return store


def _run_json(state: SessionState) -> dict[str, Any]:
    spend = totals(state.ledger)
    return {
        "session_id": state.session_id,
        "status": state.status,
        "stop_reason": state.stop_reason,
        "report_path": state.report_path,
        "usage": {
            **spend.usage.model_dump(),
            "total_tokens": spend.usage.total_tokens,
            "cost_usd": round(spend.cost_usd, 6),
        },
    }


def _print_json(value: object) -> None:
    sys.stdout.write(json.dumps(value, default=str) + "\n")


# --- sessions ---------------------------------------------------------------------


@sessions_app.command("list")
def sessions_list(
    as_json: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Show at most N sessions.")] = 50,
) -> None:
    """Past runs, newest first."""
    rows = SessionStore(load_settings().sessions_dir).list()[:limit]
    if as_json:
        _print_json([row.model_dump(mode="json") for row in rows])
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
        data = _run_json(state) | {
            "question": state.question,
            "created_at": state.created_at.isoformat(),
            "iteration": state.iteration,
            "report_path": report_path,
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
                    },
                )
                for n in state.nodes.values()
            ],
        }
        _print_json(data)
    else:
        render.session_detail(state, report_path)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
