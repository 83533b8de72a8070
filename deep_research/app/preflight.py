"""Checks before a run or resume spends anything: live models, known prices, the worst case.

Each is a one-line ``ConfigError`` (exit 3) naming the setting to change, or a warning.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Literal

import openai

from deep_research.adapters.llm.lifecycle import CacheLookups, ModelRef, check_models
from deep_research.adapters.prices import PriceTable
from deep_research.app import sources
from deep_research.app.config import Settings
from deep_research.app.reserves import chat_call_tokens, chat_prompt_tokens
from deep_research.app.run_spec import CHAT_ROLES
from deep_research.core.budget import web_job_worst_usage
from deep_research.core.errors import ConfigError
from deep_research.core.guard import call_cost_estimate
from deep_research.core.models import WebEngine
from deep_research.persistence.cache import ResultCache

if TYPE_CHECKING:
    from deep_research.adapters.web.openai_jobs import JobSpec
    from deep_research.app.sources import Source

NODE_CHAT_CALLS = 3  # a KB branch's notes or a web report's compression, a summary fold, slack
ROUND_CHAT_CALLS = 3  # plan, draft, verdict


def configured_models(settings: Settings, spec: JobSpec | None) -> list[ModelRef]:
    """Every model a run will call, with the setting that chose it."""
    refs = [
        ModelRef(getattr(settings, f"{role}_model"), f"DEEP_RESEARCH_{role.upper()}_MODEL")
        for role in CHAT_ROLES
    ]
    if spec is not None:
        refs.append(ModelRef(spec.model, "DEEP_RESEARCH_WEB_MODEL"))
    return refs


def check_prices(settings: Settings, refs: list[ModelRef], prices: PriceTable) -> None:
    """On OpenAI's own API every model must have a price, or ``--max-cost`` would not bind.

    Elsewhere (a local server) an unpriced model counts $0, as its tokens cost nothing."""
    if not settings.on_openai or settings.allow_unpriced:
        return
    unpriced = [ref for ref in refs if not prices.knows(ref.model)]
    if unpriced:
        first = unpriced[0]
        names = ", ".join(sorted({r.model for r in unpriced}))
        raise ConfigError(
            f"no known price for {names}: the cost limit could not bind. Price it in "
            f"DEEP_RESEARCH_PRICES (e.g. '{{\"{first.model}\": [input, cached, output]}}' USD "
            f"per 1M tokens), pick a priced model for {first.setting}, upgrade genai-prices, "
            "or set DEEP_RESEARCH_ALLOW_UNPRICED=true"
        )


async def check_live_models(
    settings: Settings, client: openai.AsyncOpenAI, refs: list[ModelRef], *, today: date
) -> list[str]:
    """Warnings for models near their shutdown; raises for shut-down or unknown ones."""
    if not settings.check_models:
        return []
    cache = ResultCache(settings.cache_dir)
    try:
        return await check_models(client, refs, today=today, cache=CacheLookups(cache))
    except ConfigError as exc:
        if "DEEP_RESEARCH_WEB_MODEL" in str(exc) and not settings.on_openai:
            # A local server rarely runs web research jobs: say how to go without them.
            raise ConfigError(f"{exc}; or research only the knowledge base: --kb-only") from None
        raise
    finally:
        cache.close()


LIKELY_SHARE = 0.35
"""What a branch or call is guessed to cost, as a share of its worst case: a web job that
makes half its tool calls and writes a quarter of its output cap costs 0.35 of its worst
case at gpt-5.5's prices, and a chat reply seldom nears its cap. A guess, not a bound."""


@dataclass(frozen=True)
class Estimate:
    """The most a run can spend, before it spends anything; and a guess of what it will."""

    web_model: str | None
    per_job_usd: float
    parallel: int
    parallel_usd: float
    chat_call_usd: float
    final_reserve_usd: float
    budget_usd: float
    jobs_admitted: int
    """Web branches the cost and token limits admit at their worst case, after the report's
    reserve and the first plan call (0 without web research)."""
    max_nodes: int

    iterations: int = 1
    web_unit: str = "web research job"
    """What one web branch is: an OpenAI research job, or a search-and-read branch."""
    source_branch_usd: float = 0.0
    """The most a branch of a source with a hint of its own (``app/sources.py``) may cost."""
    planned_nodes: int = 1
    """Sub-questions a plan proposes at most (``max_nodes_per_plan``): the first round's."""
    token_limit: int = 0
    final_reserve_tokens: int = 0
    call_tokens: int = 0
    """One research chat call at its ceiling (0: a run with no model spends no tokens)."""
    job_tokens: int = 0
    """The tokens a web research job reserves (0: its branches reserve none)."""

    @property
    def run_worst_usd(self) -> float:
        """Every sub-question's job and chat calls (branch or compression, summary, and a
        share of a rebuilt draft), every round's plan, draft and verdict, and the final
        report — bounded by the budget, which each call is checked against before it starts."""
        uncapped = self.max_nodes * self._per_node_usd() + self.iterations * self._round_usd()
        return min(self.budget_usd, uncapped + self.final_reserve_usd)

    @property
    def likely_usd(self) -> float:
        """A guess, not a bound: one round of the plan's sub-questions, each branch and call
        at ``LIKELY_SHARE`` of its worst case, and the report; never above the worst case."""
        one_round = self.planned_nodes * self._per_node_usd() + self._round_usd()
        return min(self.run_worst_usd, LIKELY_SHARE * (one_round + self.final_reserve_usd))

    def _per_node_usd(self) -> float:
        branch = max(self.per_job_usd, self.source_branch_usd)
        return branch + NODE_CHAT_CALLS * self.chat_call_usd

    def _round_usd(self) -> float:
        return ROUND_CHAT_CALLS * self.chat_call_usd

    @property
    def research_usd(self) -> float:
        """What the cost limit leaves for research once the report's reserve and the first
        plan call (at its worst) are kept back."""
        return self.budget_usd - self.final_reserve_usd - self.chat_call_usd

    @property
    def research_tokens(self) -> int:
        return self.token_limit - self.final_reserve_tokens - self.call_tokens

    @property
    def short_of(self) -> Literal["cost", "tokens"] | None:
        """The limit that admits no research (after the report's reserve and the first plan
        call: nothing left, or less than one web branch's worst case); None: it fits."""
        if self.research_usd < 0 or (self.web_model and self.per_job_usd > self.research_usd):
            return "cost"
        if self.research_tokens < 0 or self.job_tokens > self.research_tokens:
            return "tokens"
        return None

    def shortfall(self) -> str | None:
        """Why the limits admit no research, with the figures; None when they admit some."""
        short = self.short_of
        if short is None:
            return None
        if short == "cost":
            limit = f"the budget of ${self.budget_usd:.2f}"
            left = f"${max(0.0, self.research_usd):.2f} is left after ${self.final_reserve_usd:.2f}"
            plan = f"${self.chat_call_usd:.2f}"
            job = f"cost up to ${self.per_job_usd:.2f}"
            admits_jobs = bool(self.web_model) and self.research_usd >= 0
        else:
            limit = f"the token limit of {self.token_limit:,}"
            left = f"{max(0, self.research_tokens):,} are left after {self.final_reserve_tokens:,}"
            plan = f"{self.call_tokens:,}"
            job = f"use up to {self.job_tokens:,} tokens"
            admits_jobs = bool(self.job_tokens) and self.research_tokens >= 0
        left += f" kept for the report and {plan} for the plan"
        if not admits_jobs:
            return f"{limit} admits no research: {left}"
        return f"{limit} admits no {self.web_unit}: one may {job}, and {left}"

    @property
    def jobs_by_cost(self) -> int:
        """Web branches the cost limit admits at their worst case (``research_usd``)."""
        money, each = self.research_usd, self.per_job_usd
        return math.floor(money / each) if each > 0 and money > 0 else 0

    def lines(self) -> list[str]:
        out = []
        if self.web_model:
            out += [
                f"{self.web_unit} ({self.web_model}): up to ${self.per_job_usd:.2f} each",
                f"{self.parallel} in parallel: up to ${self.parallel_usd:.2f} at once",
                f"the budget of ${self.budget_usd:.2f} admits {self.jobs_by_cost} "
                f"of them (after ${self.final_reserve_usd:.2f} kept for the final report and "
                f"${self.chat_call_usd:.2f} for the plan)",
            ]
        if self.job_tokens:
            out.append(
                f"the token limit of {self.token_limit:,} admits "
                f"{max(0, self.research_tokens) // self.job_tokens} of them, at up to "
                f"{self.job_tokens:,} tokens each (after {self.final_reserve_tokens:,} kept for "
                f"the final report and {self.call_tokens:,} for the plan)"
            )
        out += [
            f"a chat call: up to ${self.chat_call_usd:.4f}",
            f"at most {self.max_nodes} sub-questions: worst case of this run "
            f"${self.run_worst_usd:.2f} (the cost limit binds at ${self.budget_usd:.2f})",
            f"likely about ${self.likely_usd:.2f}: a guess, for {self.planned_nodes} "
            "sub-questions in one round at typical use",
        ]
        return out


def estimate(
    settings: Settings,
    spec: JobSpec | None,
    prices: PriceTable,
    final_reserve_usd: float,
    *,
    engine: WebEngine | None = None,
    others: Sequence[Source] = (),
    final_reserve_tokens: int = 0,
) -> Estimate:
    """The run's worst case (and a guess of its likely spend) from prices alone.
    ``final_reserve_tokens`` is what the guard keeps for the report (0: a run with no model,
    whose token limit then binds nothing)."""
    prompt = chat_prompt_tokens(settings)
    chat = max(
        call_cost_estimate(
            getattr(settings, f"{role}_model"), prompt, settings.max_tokens_per_call, prices
        )
        if settings.has_model
        else 0.0
        for role in CHAT_ROLES
    )
    per_job, web, unit = 0.0, None, "web branch"
    if engine is not None:
        worst = sources.source(engine).worst_case(settings, prices, chat, spec)
        per_job, web, unit = worst.per_branch_usd, worst.description, worst.unit
    job_tokens = 0
    if spec is not None and engine is not None and sources.source(engine).runs_jobs:
        job_tokens = web_job_worst_usage(
            max_tool_calls=spec.max_tool_calls, max_output_tokens=spec.max_output_tokens
        ).total_tokens
    figures = Estimate(
        web_model=web,
        per_job_usd=per_job,
        parallel=settings.max_parallel,
        parallel_usd=per_job * settings.max_parallel,
        chat_call_usd=chat,
        final_reserve_usd=final_reserve_usd,
        budget_usd=settings.max_cost_usd,
        jobs_admitted=0,
        max_nodes=settings.max_nodes_per_plan * settings.max_iterations,
        iterations=settings.max_iterations,
        web_unit=unit,
        source_branch_usd=max(
            (s.worst_case(settings, prices, chat, spec).per_branch_usd for s in others), default=0
        ),
        planned_nodes=settings.max_nodes_per_plan,
        token_limit=settings.max_total_tokens if settings.has_model else 0,
        final_reserve_tokens=final_reserve_tokens if settings.has_model else 0,
        call_tokens=chat_call_tokens(settings) if settings.has_model else 0,
        job_tokens=job_tokens if settings.has_model else 0,
    )
    admitted = figures.jobs_by_cost
    if figures.job_tokens:
        admitted = min(admitted, max(0, figures.research_tokens) // figures.job_tokens)
    return dataclasses.replace(figures, jobs_admitted=admitted)
