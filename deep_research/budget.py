"""Prices and ledger arithmetic. Pure: no I/O, no clock, no provider calls.

Invariants:
- Every figure is USD. Prices are per 1M tokens; a web search call is a flat fee.
- ``Usage.cached_input_tokens`` is a subset of ``Usage.input_tokens`` and
  ``Usage.reasoning_tokens`` a subset of ``Usage.output_tokens`` (OpenAI's
  accounting), so neither is billed twice.
- A model we have no price for costs 0 here (a local Ollama/vLLM model), but its
  tokens still count against the token limit: callers meter tokens separately.
- A cache hit costs nothing: ``make_entry(..., cached=True)`` records cost 0 while
  keeping the original usage for reporting.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from deep_research.models import LedgerEntry, Role, Usage

_PER_TOKEN = 1 / 1_000_000


@dataclass(frozen=True)
class Price:
    """USD per 1M tokens."""

    input: float
    cached_input: float
    output: float


PRICES: dict[str, Price] = {
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "o3": Price(2.00, 0.50, 8.00),
    "o4-mini": Price(1.10, 0.275, 4.40),
    "o3-deep-research": Price(10.00, 2.50, 40.00),
    "o4-mini-deep-research": Price(2.00, 0.50, 8.00),
    "text-embedding-3-small": Price(0.02, 0.02, 0.0),
    "text-embedding-3-large": Price(0.13, 0.13, 0.0),
}

WEB_SEARCH_USD_PER_CALL = 0.01  # $10 per 1,000 calls

_DATED_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def price_for(model: str) -> Price | None:
    """The price of ``model``: exact name, then without a dated snapshot suffix
    (``o3-deep-research-2025-06-26``), then the longest known prefix that ends at a
    ``-`` boundary (``gpt-4.1-mini-custom`` -> ``gpt-4.1-mini``). None when unknown.

    The boundary rule keeps ``gpt-4o`` from pricing a hypothetical ``gpt-4omega``.
    """
    name = model.strip().lower()
    if name in PRICES:
        return PRICES[name]
    undated = _DATED_SUFFIX.sub("", name)
    if undated in PRICES:
        return PRICES[undated]
    candidates = [known for known in PRICES if undated.startswith(known + "-")]
    if not candidates:
        return None
    return PRICES[max(candidates, key=len)]


def cost_of(model: str, usage: Usage) -> float:
    """USD for one call (or a sum of calls) of ``model`` with ``usage``."""
    fees = usage.web_search_calls * WEB_SEARCH_USD_PER_CALL
    price = price_for(model)
    if price is None:
        return fees
    # Clamp: a provider reporting more cached than total input must not yield a
    # negative uncached count (and so a discount).
    cached = min(max(usage.cached_input_tokens, 0), usage.input_tokens)
    uncached = usage.input_tokens - cached
    # reasoning_tokens are already inside output_tokens: not added again.
    tokens_usd = (
        uncached * price.input + cached * price.cached_input + usage.output_tokens * price.output
    ) * _PER_TOKEN
    return tokens_usd + fees


# Assumptions of the pre-dispatch estimate (deliberately pessimistic):
# - the first request carries ~20k input tokens (instructions, question, dependency findings);
# - every tool call feeds back ~10k tokens of page content, all billed as uncached input;
# - the run spends its whole output allowance (reasoning included) and every allowed
#   tool call is a billed web search.
DR_BASE_INPUT_TOKENS = 20_000
DR_INPUT_TOKENS_PER_TOOL_CALL = 10_000


def deep_research_worst_case(
    model: str, max_tool_calls: int, max_output_tokens: int = 100_000
) -> float:
    """A conservative USD estimate for one Deep Research run, to check before dispatch.

    o4-mini-deep-research with 30 tool calls: ~$1.74; o3-deep-research: ~$7.50.
    """
    usage = Usage(
        input_tokens=DR_BASE_INPUT_TOKENS + DR_INPUT_TOKENS_PER_TOOL_CALL * max_tool_calls,
        output_tokens=max_output_tokens,
        web_search_calls=max_tool_calls,
    )
    return cost_of(model, usage)


class Totals(BaseModel):
    """Sums over a ledger.

    ``usage`` counts only tokens actually spent: cache hits are left out, so they
    never push a run into its token limit. ``by_node`` leaves out entries not tied
    to a node (planner, judge, synthesis); ``by_role`` covers every entry.
    """

    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    by_role: dict[str, float] = Field(default_factory=dict)
    by_node: dict[str, float] = Field(default_factory=dict)


def totals(entries: Iterable[LedgerEntry]) -> Totals:
    usage = Usage()
    cost = 0.0
    by_role: dict[str, float] = {}
    by_node: dict[str, float] = {}
    for entry in entries:
        if not entry.cached:
            usage = usage + entry.usage
        cost += entry.cost_usd
        by_role[entry.role] = by_role.get(entry.role, 0.0) + entry.cost_usd
        if entry.node_id is not None:
            by_node[entry.node_id] = by_node.get(entry.node_id, 0.0) + entry.cost_usd
    return Totals(usage=usage, cost_usd=cost, by_role=by_role, by_node=by_node)


def make_entry(
    role: Role,
    model: str,
    usage: Usage,
    node_id: str | None = None,
    cached: bool = False,
) -> LedgerEntry:
    """A ledger entry with its cost computed; a cache hit is free but keeps its usage."""
    return LedgerEntry(
        role=role,
        model=model,
        node_id=node_id,
        usage=usage,
        cost_usd=0.0 if cached else cost_of(model, usage),
        cached=cached,
    )
