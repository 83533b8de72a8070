"""What a run may spend and what it keeps back: the price book, the writing phase's
limits and worst-case costs, the final reserve (money and tokens) kept from research for
writing the report and checking its claims, the session's budget guard, and the worst case
of a call to the judge model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from deep_research.adapters.prices import Price, PriceTable
from deep_research.adapters.web.search import provider
from deep_research.app.config import Settings
from deep_research.core.authoring import (
    REVISION_PROMPT_TOKENS,
    REVISION_REPLY_TOKENS,
    WriteCosts,
    WritingLimits,
)
from deep_research.core.errors import BudgetTooSmall
from deep_research.core.guard import BudgetGuard, call_cost_estimate
from deep_research.core.models import Limits, SessionState
from deep_research.core.ports import PriceBook

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage


def price_book(settings: Settings) -> PriceTable:
    """The models' prices, and USD per request of the run's search provider (the only one it
    may use; a resume replays it): its list price, then what the user priced."""
    name = settings.search_provider
    fees = {name: provider(name).price_usd} | settings.search_prices
    return PriceTable({m: Price(*figures) for m, figures in settings.prices.items()}, fees)


def writing_limits(
    settings: Settings,
    prices: PriceTable,
    *,
    max_cost_usd: float | None = None,
    max_total_tokens: int | None = None,
) -> WritingLimits:
    """How the report is written: its ceilings (a preset sets them), each call's budgets,
    and what each call may cost at the writer model's price.

    Under a small cost or token limit (default the settings') the report is smaller: the
    most sections (at least one) whose writing fits in ``REPORT_SHARE`` of each limit, each
    shorter in proportion (never below ``SHORTEST_SECTION_WORDS``). With no model a run
    spends no tokens, so only the cost limit shrinks it."""
    cost = settings.max_cost_usd if max_cost_usd is None else max_cost_usd
    tokens = settings.max_total_tokens if max_total_tokens is None else max_total_tokens
    fitted = _writing_limits(settings, prices, settings.report_max_sections)
    while fitted.max_sections > 1 and not _fits(fitted, settings, cost, tokens):
        fitted = _writing_limits(settings, prices, fitted.max_sections - 1)
    return fitted


SHORTEST_SECTION_WORDS = 250
"""A smaller report's sections are shortened in proportion to how many it keeps, not below
this (or the setting, when lower)."""


def _writing_limits(settings: Settings, prices: PriceTable, sections: int) -> WritingLimits:
    words = settings.report_section_words
    if sections < settings.report_max_sections:
        shortest = min(words, SHORTEST_SECTION_WORDS)
        words = max(shortest, words * sections // settings.report_max_sections)
    limits = WritingLimits(
        max_sections=sections,
        section_words=words,
        max_parallel=settings.max_parallel,
    )
    reply = settings.section_max_tokens

    def cost(prompt: int, reply: int = reply) -> float:
        return call_cost_estimate(settings.synthesizer_model, prompt, reply, prices)

    costs = WriteCosts(
        outline=cost(limits.outline_prompt_tokens),
        section=cost(limits.section_prompt_tokens),
        lead=cost(limits.lead_prompt_tokens),
        revisions=limits.max_revisions * cost(REVISION_PROMPT_TOKENS, revision_reply(settings)),
        condense=cost(limits.condense_prompt_tokens, min(reply, limits.condense_reply_tokens)),
    )
    return dataclasses.replace(limits, costs=costs)


def _fits(limits: WritingLimits, settings: Settings, cost_usd: float, tokens: int) -> bool:
    """Writing these sections takes at most ``REPORT_SHARE`` of the cost and token limits
    (the claim check's revisions, the first to go, are left out)."""
    money = limits.costs.reserve(limits.max_sections, revisions=False)
    used = limits.reserve_tokens(settings.section_max_tokens) if settings.has_model else 0
    return money <= REPORT_SHARE * cost_usd and used <= REPORT_SHARE * tokens


def revision_worst_usd(settings: Settings, prices: PriceBook) -> float:
    """The most one revision of the claim check can cost: its prompt budget and reply cap
    at the writer's price, every attempt a malformed reply may take (committed before it
    is asked; the final reserve counts one attempt, as it does for a section)."""
    one = call_cost_estimate(
        settings.synthesizer_model, REVISION_PROMPT_TOKENS, revision_reply(settings), prices
    )
    return (settings.structured_output_retries + 1) * one


def revision_reply(settings: Settings) -> int:
    """A revision's reply cap: ``REVISION_REPLY_TOKENS``, or a section's if that is lower."""
    return min(REVISION_REPLY_TOKENS, settings.section_max_tokens)


REPORT_SHARE = 0.25
"""Past the cost of the outline, the lead and one section, a run keeps at most this share of
its cost limit for writing: a small budget still researches, and writes fewer sections."""


def final_reserve_usd(settings: Settings, prices: PriceTable, max_cost_usd: float) -> float:
    """Kept back from the budget so the report can always be written: every section at its
    ceiling, or under a small cost limit (``max_cost_usd``) its share, never less than the
    outline, the lead and one section (the claim check's revisions, counted in full, are the
    first to go)."""
    limits = writing_limits(settings, prices, max_cost_usd=max_cost_usd)
    full = limits.costs.reserve(limits.max_sections)
    least = limits.costs.reserve(1, revisions=False)
    return round(min(full, max(least, REPORT_SHARE * max_cost_usd)), 4)


def final_reserve_tokens(settings: Settings, max_total_tokens: int | None = None) -> int:
    """Tokens kept back for writing the report: the outline, the lead and every section
    ``writing_limits`` writes under the token limit (``max_total_tokens``, default the
    setting's), each its prompt budget plus ``section_max_tokens``."""
    limits = writing_limits(settings, PriceTable(), max_total_tokens=max_total_tokens)
    return limits.reserve_tokens(settings.section_max_tokens)


def chat_prompt_tokens(settings: Settings) -> int:
    """A research chat call's prompt (a plan, a branch's notes) at most: the rolling summary
    twice, and the instructions."""
    return settings.summary_max_tokens * 2 + 2000


def chat_call_tokens(settings: Settings) -> int:
    """The most tokens one research chat call may use: its prompt and its reply cap."""
    return chat_prompt_tokens(settings) + settings.max_tokens_per_call


def least_token_limit(settings: Settings) -> int:
    """The smallest token limit a run with a model researches under: the report's least
    reserve (the outline, the lead and one section) and one chat call at its ceiling."""
    least = _writing_limits(settings, PriceTable(), 1).reserve_tokens(settings.section_max_tokens)
    return least + chat_call_tokens(settings)


def check_token_limit(settings: Settings, limits: Limits) -> None:
    """Refuse a token limit below ``least_token_limit``: it would research nothing."""
    floor = least_token_limit(settings)
    if limits.max_total_tokens < floor:
        reserve = final_reserve_tokens(settings, limits.max_total_tokens)
        raise BudgetTooSmall(
            f"the token limit of {limits.max_total_tokens:,} admits no research: {reserve:,} "
            "tokens are kept for writing the report (the outline, the lead and one section) "
            f"and a chat call may use {chat_call_tokens(settings):,}; --max-tokens "
            f"{floor} is the least that researches"
        )


def guard_for(settings: Settings, state: SessionState) -> BudgetGuard:
    """The session's budget guard, with the final report's share kept back."""
    prices = price_book(settings)
    if state.mode == "extractive":  # the report is written by code: nothing to keep back
        return BudgetGuard(state, state.limits, prices=prices)
    return BudgetGuard(
        state,
        state.limits,
        prices=prices,
        final_reserve_usd=final_reserve_usd(settings, prices, state.limits.max_cost_usd),
        final_reserve_tokens=final_reserve_tokens(settings, state.limits.max_total_tokens),
    )


def judge_worst_usd(
    settings: Settings, messages: Sequence[BaseMessage], prices: PriceBook
) -> float:
    """The most the judge's structured call can cost: a reply cut off at the token cap, then
    every attempt ``ChatModel.structured`` may make at twice the cap. The prompt is counted
    as one token a byte, which no byte-level tokenizer exceeds."""
    from deep_research.adapters.llm.llm import MAX_CAP_TOKENS  # loads LangChain: not at start

    prompt = sum(len(str(m.content).encode("utf-8")) for m in messages) + 100
    cap = settings.max_tokens_per_call
    attempts = settings.structured_output_retries + 1
    model = settings.judge_model
    cut_off = call_cost_estimate(model, prompt, cap, prices)
    enlarged = call_cost_estimate(model, prompt, min(2 * cap, MAX_CAP_TOKENS), prices)
    return cut_off + attempts * enlarged
