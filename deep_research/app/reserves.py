"""What a run may spend and what it keeps back: the price book, the writing phase's
limits and worst-case costs, the final reserve (money and tokens) kept from research for
writing the report and checking its claims, and the session's budget guard."""

from __future__ import annotations

import dataclasses

from deep_research.adapters.prices import Price, PriceTable
from deep_research.app.config import Settings
from deep_research.core.authoring import (
    REVISION_PROMPT_TOKENS,
    REVISION_REPLY_TOKENS,
    WriteCosts,
    WritingLimits,
)
from deep_research.core.errors import UsageError
from deep_research.core.guard import BudgetGuard, call_cost_estimate
from deep_research.core.models import Limits, SessionState
from deep_research.core.ports import PriceBook


def search_fees(settings: Settings) -> dict[str, float]:
    """USD per request of every search provider: list prices, then the user's."""
    # Lazy: ddgs and httpx, which a run's checks before the engine loads do without.
    from deep_research.adapters.web.search import DEFAULTS

    return {name: d.price_usd for name, d in DEFAULTS.items()} | settings.search_prices


def price_book(settings: Settings) -> PriceTable:
    return PriceTable(
        {m: Price(*figures) for m, figures in settings.prices.items()}, search_fees(settings)
    )


def writing_limits(settings: Settings, prices: PriceTable) -> WritingLimits:
    """How the report is written: its ceilings (a preset sets them), each call's budgets,
    and what each call may cost at the writer model's price."""
    limits = WritingLimits(
        max_sections=settings.report_max_sections,
        section_words=settings.report_section_words,
        max_parallel=settings.max_parallel_branches,
    )
    reply = settings.section_max_tokens

    def cost_of(prompt: int, reply: int) -> float:
        return call_cost_estimate(settings.synthesizer_model, prompt, reply, prices)

    def cost(prompt: int) -> float:
        return cost_of(prompt, reply)

    costs = WriteCosts(
        outline=cost(limits.outline_prompt_tokens),
        section=cost(limits.section_prompt_tokens),
        lead=cost(limits.lead_prompt_tokens),
        revisions=limits.max_revisions * cost_of(REVISION_PROMPT_TOKENS, revision_reply(settings)),
        condense=cost_of(limits.condense_prompt_tokens, min(reply, limits.condense_reply_tokens)),
    )
    return dataclasses.replace(limits, costs=costs)


def revision_worst_usd(settings: Settings, prices: PriceBook) -> float:
    """The most one revision of the claim check can cost: its prompt budget and reply cap
    at the writer's price, every attempt a malformed reply may take (committed before it
    is asked; the final reserve counts one attempt, as it does for a section)."""
    attempts = settings.structured_output_retries + 1
    one = call_cost_estimate(
        settings.synthesizer_model, REVISION_PROMPT_TOKENS, revision_reply(settings), prices
    )
    return attempts * one


def revision_reply(settings: Settings) -> int:
    """A revision's reply cap: ``REVISION_REPLY_TOKENS``, or a section's if that is lower."""
    return min(REVISION_REPLY_TOKENS, settings.section_max_tokens)


def final_reserve_tokens(settings: Settings) -> int:
    """Tokens kept back for writing the report: the outline, the lead and every section,
    each its prompt budget plus ``section_max_tokens``."""
    limits = writing_limits(settings, PriceTable())
    return limits.reserve_tokens(settings.section_max_tokens)


REPORT_SHARE = 0.25
"""Past the cost of the outline, the lead and one section, a run keeps at most this share of
its cost limit for writing: a small budget still researches, and writes fewer sections."""


def final_reserve_usd(
    settings: Settings, prices: PriceTable, max_cost_usd: float | None = None
) -> float:
    """Kept back from the budget so the report can always be written: every section at its
    ceiling, or under a small cost limit (``max_cost_usd``, default the setting's) its share,
    never less than the outline, the lead and one section (the claim check's revisions,
    counted in full, are the first to go)."""
    costs = writing_limits(settings, prices).costs
    full = costs.reserve(settings.report_max_sections)
    least = costs.reserve(1, revisions=False)
    limit = settings.max_cost_usd if max_cost_usd is None else max_cost_usd
    return round(min(full, max(least, REPORT_SHARE * limit)), 4)


def check_token_limit(settings: Settings, limits: Limits) -> None:
    reserve = final_reserve_tokens(settings)
    if limits.max_total_tokens <= reserve:
        raise UsageError(
            f"the token limit of {limits.max_total_tokens:,} leaves nothing to research: "
            f"{reserve:,} tokens are kept for writing the report (the outline, the lead and "
            f"{settings.report_max_sections} sections, each its prompt budget plus "
            "DEEP_RESEARCH_SECTION_MAX_TOKENS); raise --max-tokens"
        )


def guard_for(settings: Settings, state: SessionState) -> BudgetGuard:
    """The session's budget guard, with the final report's share kept back."""
    prices = price_book(settings)
    return BudgetGuard(
        state,
        state.limits,
        prices=prices,
        final_reserve_usd=final_reserve_usd(settings, prices, state.limits.max_cost_usd),
        # An extractive run spends no tokens: nothing to keep back.
        final_reserve_tokens=0 if state.mode == "extractive" else final_reserve_tokens(settings),
    )
