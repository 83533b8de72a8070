"""The `deep-research` command. Errors are mapped to one stderr line + exit code in ``main``.

deep-research "question"            research a question (same as `deep-research run`)
deep-research resume ID             continue a stopped, interrupted or crashed run
deep-research sessions list|show    past runs
deep-research kb ingest|search|...  the markdown knowledge base
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from datetime import date
from typing import Annotated, Any

import openai
import typer
from typer.core import TyperGroup

from deep_research.adapters.web.openai_jobs import JobSpec
from deep_research.app import preflight, render
from deep_research.app.cli_common import JsonOpt, print_json, run_summary
from deep_research.app.config import Settings, load_settings
from deep_research.app.kb_cli import kb_app
from deep_research.app.sessions_cli import sessions_app
from deep_research.app.wiring import (
    Built,
    build,
    job_spec,
    open_default_kb,
    price_book,
    replay,
    run_spec,
)
from deep_research.core.budget import totals
from deep_research.core.errors import (
    EXIT_DECLINED,
    EXIT_INTERRUPTED,
    ConfigError,
    DeepResearchError,
    UsageError,
)
from deep_research.core.guard import BudgetGuard, call_cost_estimate
from deep_research.core.models import Limits, SessionState, SourcePolicy
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import JobEvent, PriceBook
from deep_research.core.report import build_report
from deep_research.core.tree import ResearchTree
from deep_research.kb.ingest import ingest
from deep_research.kb.store import KBStore, open_kb
from deep_research.persistence.sessions import Checkpointer, SessionStore

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
app.add_typer(sessions_app, name="sessions")
app.add_typer(kb_app, name="kb")


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
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
    kb: Annotated[str | None, typer.Option("--kb", help="Knowledge base name.")] = None,
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
        web_model=web_model,
        web_reasoning_effort=web_effort,
        kb_name=kb,
    )
    policy: SourcePolicy = "kb_only" if kb_only else "web_only" if web_only else "auto"
    if not settings.has_model:
        if web_only:
            raise ConfigError("web research needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
        policy = "kb_only"
    extractive = not settings.has_model
    if not extractive:
        _check_token_limit(settings, _limits(settings))
    spec = None if policy == "kb_only" else job_spec(settings)
    if estimate_only and extractive:
        if as_json:
            print_json({"run_worst_usd": 0.0, "mode": "extractive"})
        else:
            render.out.print("no model is configured: an extractive run costs nothing")
        raise typer.Exit(0)
    if estimate_only or not extractive:
        _preflight(settings, spec, estimate_only=estimate_only, yes=yes, as_json=as_json)
    built = _engine(settings, policy, extractive=extractive, quiet=as_json, spec=spec)
    store = SessionStore(settings.sessions_dir)  # created only now: a setup error saves nothing
    state = store.create(
        question,
        mode="extractive" if extractive else "llm",
        source_policy=policy,
        limits=_limits(settings),
        run_spec=run_spec(settings, spec),
    )
    with store.lock(state.session_id):
        _drive(settings, store, state, built, as_json=as_json)


@app.command()
def resume(
    session_id: Annotated[str, typer.Argument(help="Session id (or a unique prefix).")],
    max_parallel: ParallelOpt = None,
    max_iterations: IterOpt = None,
    max_cost: CostOpt = None,
    max_tokens: TokensOpt = None,
    max_runtime: TimeOpt = None,
    retry_cancelled: Annotated[
        bool,
        typer.Option(
            "--retry-cancelled", help="Research again the nodes whose jobs were cancelled."
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Continue a run where it stopped; optionally with a new budget or more iterations.

    Research jobs still running at the provider (after Ctrl-C or a crash) are re-attached
    by their saved ids, never submitted again."""
    given = {
        "max_iterations": max_iterations,
        "max_cost_usd": max_cost,
        "max_total_tokens": max_tokens,
        "max_runtime_seconds": max_runtime,
    }
    settings = load_settings(max_parallel_branches=max_parallel, **given)  # validates the values
    store = SessionStore(settings.sessions_dir)
    session_id = store.resolve(session_id)
    # Loaded inside the lock: a resume that finished meanwhile is never overwritten by a
    # stale snapshot (whose done nodes would run, and be paid for, again).
    with store.lock(session_id):
        state = store.load(session_id)
        settings = replay(settings, state.run_spec, max_parallel=max_parallel)
        state.limits = state.limits.model_copy(
            update={k: v for k, v in given.items() if v is not None}
        )
        if state.mode == "llm" and not settings.has_model:
            raise ConfigError("this session needs a model: set OPENAI_API_KEY or OPENAI_BASE_URL")
        extractive = state.mode == "extractive"
        if not extractive:
            _check_token_limit(settings, state.limits)
        spec = None if state.source_policy == "kb_only" or extractive else job_spec(settings)
        state.run_spec = run_spec(settings, spec)
        if not extractive:
            _preflight(settings, spec, estimate_only=False, yes=True, as_json=as_json)
        if retry_cancelled and ResearchTree(state.nodes).retry_cancelled():
            state.phase = "execute"  # research them now, whatever phase the run had reached
        policy = state.source_policy
        built = _engine(settings, policy, extractive=extractive, quiet=as_json, spec=spec)
        _drive(settings, store, state, built, as_json=as_json)


def _preflight(
    settings: Settings, spec: JobSpec | None, *, estimate_only: bool, yes: bool, as_json: bool
) -> None:
    """Before anything is spent: the estimate (and exit, or ask), known prices, live models."""
    prices = price_book(settings)
    refs = preflight.configured_models(settings, spec)
    worst = preflight.estimate(settings, spec, prices, _final_reserve_usd(settings, prices))
    if estimate_only:
        if as_json:
            print_json(asdict(worst) | {"run_worst_usd": round(worst.run_worst_usd, 4)})
        else:
            for line in worst.lines():
                render.out.print(line, highlight=False)
        raise typer.Exit(0)
    preflight.check_prices(settings, refs, prices)
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    client = openai.AsyncOpenAI(
        api_key=key or "not-needed",
        base_url=settings.openai_base_url,
        timeout=min(30.0, settings.request_timeout_seconds),
        max_retries=1,
    )

    async def check() -> list[str]:
        async with client:
            return await preflight.check_live_models(settings, client, refs, today=date.today())

    for warning in asyncio.run(check()):
        render.warn(warning)
    too_much = worst.run_worst_usd > settings.confirm_above_usd
    if too_much and not yes and not as_json and render.interactive():
        render.info("\n".join(worst.lines()))
        if not typer.confirm(f"This run may spend up to ${worst.run_worst_usd:.2f}. Go on?"):
            raise typer.Exit(EXIT_DECLINED)


def _final_reserve_tokens(settings: Settings) -> int:
    """Tokens kept back for the final report: its prompt (two summaries and the frame) and
    its reply."""
    return settings.summary_max_tokens * 2 + 2000 + settings.max_tokens_per_call


def _check_token_limit(settings: Settings, limits: Limits) -> None:
    reserve = _final_reserve_tokens(settings)
    if limits.max_total_tokens <= reserve:
        raise UsageError(
            f"the token limit of {limits.max_total_tokens:,} leaves nothing to research: "
            f"{reserve:,} tokens are kept for the final report (2 × "
            f"DEEP_RESEARCH_SUMMARY_MAX_TOKENS + 2,000 + DEEP_RESEARCH_MAX_TOKENS_PER_CALL); "
            "raise --max-tokens"
        )


def _final_reserve_usd(settings: Settings, prices: PriceBook) -> float:
    """Kept back from the budget so the final report can always be written."""
    return call_cost_estimate(
        settings.synthesizer_model,
        settings.summary_max_tokens * 2 + 2000,
        settings.max_tokens_per_call,
        prices,
    )


def _engine(
    settings: Settings,
    policy: SourcePolicy,
    *,
    extractive: bool,
    quiet: bool,
    spec: JobSpec | None = None,
) -> Built:
    kb = _knowledge_base(settings, policy, extractive=extractive, quiet=quiet)
    return build(settings, policy, kb, extractive=extractive, spec=spec)


def _drive(
    settings: Settings, store: SessionStore, state: SessionState, built: Built, *, as_json: bool
) -> None:
    """Run (or continue) a session, then write and show the report. The caller holds the
    session's lock."""
    prices = price_book(settings)
    guard = BudgetGuard(
        state,
        state.limits,
        prices=prices,
        final_reserve_usd=_final_reserve_usd(settings, prices),
        # An extractive run spends no tokens: nothing to keep back.
        final_reserve_tokens=0 if state.mode == "extractive" else _final_reserve_tokens(settings),
    )
    show_live = not as_json and render.err.is_terminal
    with render.live_view(state, enabled=show_live) as view:
        emit = view.event if show_live else render.Progress() if not as_json else _quiet
        for notice in built.notices:
            emit(notice)
        orchestrator = ResearchOrchestrator(
            state, built.engine, Checkpointer(store), guard, built.config, on_event=emit
        )
        try:
            asyncio.run(_run(orchestrator, built))
        except KeyboardInterrupt:
            store.save(state)
            running = sum(len(n.remote_jobs) for n in state.nodes.values())
            jobs = (
                f" {running} research job(s) keep running at the provider: resume "
                f"re-attaches; `deep-research sessions cancel {state.session_id}` stops them."
                if running
                else ""
            )
            render.info(
                f"interrupted; saved. Resume with: deep-research resume {state.session_id}." + jobs
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None
    markdown = build_report(state, orchestrator.final_text)
    path = store.write_report(state.session_id, markdown)
    state.report_path = str(path)
    store.save(state)
    if as_json:
        print_json(run_summary(state))
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


def _quiet(_message: str | JobEvent) -> None:
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
