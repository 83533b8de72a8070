"""Checks before a run or resume spends anything: live models, known prices, the worst case.

Each is a one-line ``ConfigError`` (exit 3) naming the setting to change, or a warning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

import openai

from deep_research.adapters.llm.lifecycle import CacheLookups, ModelRef, check_models
from deep_research.adapters.prices import PriceTable
from deep_research.adapters.web.openai_jobs import JobSpec
from deep_research.app import engines
from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError
from deep_research.core.guard import call_cost_estimate
from deep_research.core.models import WebEngine
from deep_research.persistence.cache import ResultCache

if TYPE_CHECKING:
    from deep_research.app.sources import SourceKind

CHAT_ROLES = ("planner", "synthesizer", "judge", "branch", "summarizer")
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


@dataclass(frozen=True)
class Estimate:
    """The most a run can spend, before it spends anything."""

    web_model: str | None
    per_job_usd: float
    parallel: int
    parallel_usd: float
    chat_call_usd: float
    final_reserve_usd: float
    budget_usd: float
    jobs_admitted: int
    max_nodes: int

    iterations: int = 1
    web_unit: str = "web research job"
    """What one web branch is: an OpenAI research job, or a search-and-read branch."""
    source_branch_usd: float = 0.0
    """The most a branch of a registered source (``app/sources.py``) may cost."""

    @property
    def run_worst_usd(self) -> float:
        """Every sub-question's job and chat calls (branch or compression, summary, and a
        share of a rebuilt draft), every round's plan, draft and verdict, and the final
        report — bounded by the budget, which each call is checked against before it starts."""
        branch = max(self.per_job_usd, self.source_branch_usd)
        per_node = branch + NODE_CHAT_CALLS * self.chat_call_usd
        per_round = ROUND_CHAT_CALLS * self.chat_call_usd
        uncapped = self.max_nodes * per_node + self.iterations * per_round + self.final_reserve_usd
        return min(self.budget_usd, uncapped)

    def lines(self) -> list[str]:
        out = []
        if self.web_model:
            out += [
                f"{self.web_unit} ({self.web_model}): up to ${self.per_job_usd:.2f} each",
                f"{self.parallel} in parallel: up to ${self.parallel_usd:.2f} at once",
                f"the budget of ${self.budget_usd:.2f} admits {self.jobs_admitted} of them "
                f"(after ${self.final_reserve_usd:.2f} kept for the final report)",
            ]
        out += [
            f"a chat call: up to ${self.chat_call_usd:.4f}",
            f"at most {self.max_nodes} sub-questions: worst case of this run "
            f"${self.run_worst_usd:.2f} (the cost limit binds at ${self.budget_usd:.2f})",
        ]
        return out


def estimate(
    settings: Settings,
    spec: JobSpec | None,
    prices: PriceTable,
    final_reserve_usd: float,
    *,
    engine: WebEngine | None = None,
    registered: Sequence[SourceKind] = (),
) -> Estimate:
    prompt = settings.summary_max_tokens * 2 + 2000
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
        worst = engines.engine(engine).worst_case(settings, prices, chat, spec)
        per_job, web, unit = worst.per_branch_usd, worst.description, worst.unit
    spendable = max(0.0, settings.max_cost_usd - final_reserve_usd)
    parallel = settings.max_parallel_branches
    return Estimate(
        web_model=web,
        per_job_usd=per_job,
        parallel=parallel,
        parallel_usd=per_job * parallel,
        chat_call_usd=chat,
        final_reserve_usd=final_reserve_usd,
        budget_usd=settings.max_cost_usd,
        jobs_admitted=math.floor(spendable / per_job) if per_job > 0 else 0,
        max_nodes=settings.max_nodes_per_plan * settings.max_iterations,
        iterations=settings.max_iterations,
        web_unit=unit,
        source_branch_usd=max((k.worst_case_usd(settings, chat) for k in registered), default=0),
    )
