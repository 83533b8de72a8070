"""Ledger arithmetic and worst cases. Pure: no I/O, no clock, no provider calls.

Prices reach it through the ``PriceBook`` port (``adapters.prices`` reads genai-prices).

Invariants:
- Every figure is USD.
- A cache hit costs nothing: ``make_entry(..., cached=True)`` records cost 0 while
  keeping the original usage for reporting.
- A worst case is an upper bound on what a call can cost, reserved before it starts.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field

from deep_research.core.models import LedgerEntry, Role, Usage
from deep_research.core.ports import PriceBook

# The worst case of one background web research job (a reasoning model calling web_search).
# Each internal turn re-sends the whole context, so input grows quadratically with the calls.
# - WEB_BASE_INPUT_TOKENS: our instructions (~1k tokens) + the question + dependency findings
#   (capped at ~10k chars, ~3-4k tokens) + OpenAI's web_search tool framing (~1k): ~6k.
# - WEB_INPUT_TOKENS_PER_TOOL_CALL: what one call adds to the context: a search result page
#   is ~2-4k tokens, an opened page up to ~8k; with the reasoning and text between calls,
#   8k assumes every call is a full page (most are cheaper searches, which offsets reasoning
#   kept in context). Every call is also counted as a billed search, though opens are free.
WEB_BASE_INPUT_TOKENS = 6_000
WEB_INPUT_TOKENS_PER_TOOL_CALL = 8_000


def web_job_worst_usage(
    *,
    max_tool_calls: int,
    max_output_tokens: int,
    base_input_tokens: int = WEB_BASE_INPUT_TOKENS,
    growth_per_call: int = WEB_INPUT_TOKENS_PER_TOOL_CALL,
) -> Usage:
    """The most one web research job can use, as one aggregate ``Usage``.

    Turn k = 0..max_tool_calls sends ``base + growth*k`` input tokens; from k >= 1 the
    earlier turns' part (``base + growth*(k-1)``) is a prompt-cache hit, and each turn's new
    part is written to the cache (the next turn reads it), which GPT-6 bills at 1.25x input.
    Output is bounded by ``max_output_tokens`` (reasoning included), and every tool call is a
    billed search.
    """
    turns = max_tool_calls + 1
    input_tokens = turns * base_input_tokens + growth_per_call * max_tool_calls * turns // 2
    cached = max_tool_calls * base_input_tokens + growth_per_call * (
        (max_tool_calls - 1) * max_tool_calls // 2
    )
    return Usage(
        input_tokens=input_tokens,
        cached_input_tokens=cached,
        cache_write_tokens=input_tokens - cached,
        output_tokens=max_output_tokens,
        web_search_calls=max_tool_calls,
    )


def web_job_worst_case(
    prices: PriceBook,
    model: str,
    *,
    max_tool_calls: int,
    max_output_tokens: int,
) -> float:
    """A conservative USD bound for one web research job, to reserve before dispatch: at
    the default service tier whatever tier the job is sent to. Whether OpenAI serves flex
    to background ``web_search`` jobs could not be checked (2026-11-26), and a reply that
    names the default tier is booked at it: a flex reservation (half the tokens) would be
    overshot.

    The long-context tier (gpt-5.5: > 272k input tokens) is the one genai-prices applies to
    the *aggregate* usage. OpenAI may apply it per turn, where each turn is far smaller, so
    the aggregate is an upper bound, not the likely bill: with 16 calls gpt-5.5 crosses the
    tier in aggregate although no single turn does.
    """
    usage = web_job_worst_usage(max_tool_calls=max_tool_calls, max_output_tokens=max_output_tokens)
    return prices.cost(model, usage)


class Totals(BaseModel):
    """Sums over a ledger.

    ``usage`` counts only tokens actually spent: cache hits are left out, so they
    never push a run into its token limit. (A node's own spend is on the node.)
    """

    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    by_role: dict[str, float] = Field(default_factory=dict)


def totals(entries: Iterable[LedgerEntry]) -> Totals:
    usage = Usage()
    cost = 0.0
    by_role: dict[str, float] = {}
    for entry in entries:
        if not entry.cached:
            usage = usage + entry.usage
        cost += entry.cost_usd
        by_role[entry.role] = by_role.get(entry.role, 0.0) + entry.cost_usd
    return Totals(usage=usage, cost_usd=cost, by_role=by_role)


def make_entry(
    role: Role,
    model: str,
    usage: Usage,
    node_id: str | None = None,
    cached: bool = False,
    *,
    prices: PriceBook,
    usage_unknown: bool = False,
    tier: str = "default",
) -> LedgerEntry:
    """A ledger entry with its cost computed (at the service ``tier`` the call ran on); a
    cache hit is free but keeps its usage."""
    return LedgerEntry(
        role=role,
        model=model,
        node_id=node_id,
        usage=usage,
        cost_usd=0.0 if cached else prices.cost(model, usage, tier=tier),
        cached=cached,
        usage_unknown=usage_unknown,
    )
