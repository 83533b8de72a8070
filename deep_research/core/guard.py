"""Guardrails: the usage ledger as the run sees it, limits, and budget reservations.

Invariants:
- every model call's usage lands in ``state.ledger`` and on its node, priced at record time;
- ``remaining_usd`` and ``remaining_tokens`` are net of the spend so far, of reservations
  held by calls in flight, and of a reserve kept for the final synthesis — so work never
  starts that the budget could not cover, no limit is overshot by work in flight, and the
  report can always be written;
- limits are checked before anything new starts (``stop_reason``); nothing here cancels;
- a reservation that does not fit waits while other reservations are held (their work may
  cost far less than its worst case); it is refused only when nothing is left to free.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from deep_research.core.budget import make_entry
from deep_research.core.models import Limits, Role, SessionState, StopReason, Usage
from deep_research.core.ports import PriceBook


class BudgetGuard:
    def __init__(
        self,
        state: SessionState,
        limits: Limits,
        *,
        prices: PriceBook,
        final_reserve_usd: float = 0.0,
        final_reserve_tokens: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state = state
        self.limits = limits
        self.prices = prices
        self.final_reserve_usd = final_reserve_usd
        self.final_reserve_tokens = final_reserve_tokens
        self._clock = clock
        self._started = clock()
        self._reserved_usd = 0.0
        self._reserved_tokens = 0
        self._freed = asyncio.Event()
        self.spent_usd = sum(e.cost_usd for e in state.ledger)
        self.spent_tokens = sum(e.usage.total_tokens for e in state.ledger if not e.cached)

    def record(
        self,
        role: Role,
        model: str,
        usage: Usage,
        *,
        node_id: str | None,
        cached: bool = False,
        usage_unknown: bool = False,
        tier: str = "default",
    ) -> None:
        """Price and book one call. ``usage_unknown``: the provider reported none (a cancelled
        or failed job), so ``usage`` is what we know, not what was billed. ``tier``: the
        service tier the reply says it ran on."""
        entry = make_entry(
            role,
            model,
            usage,
            node_id=node_id,
            cached=cached,
            prices=self.prices,
            usage_unknown=usage_unknown,
            tier=tier,
        )
        self.state.ledger.append(entry)
        self.spent_usd += entry.cost_usd
        if not cached:
            self.spent_tokens += usage.total_tokens
        node = self.state.nodes.get(node_id) if node_id else None
        if node is not None:
            node.usage = node.usage + usage
            node.cost_usd += entry.cost_usd

    def meter(self, node_id: str | None = None) -> NodeMeter:
        return NodeMeter(self, node_id)

    def start(self) -> None:
        """The run's time limit counts from here, its start, not from the guard's making (a
        server's run may wait for a slot first)."""
        self._started = self._clock()

    @property
    def elapsed(self) -> float:
        return self._clock() - self._started

    def remaining_usd(self) -> float:
        """What new work may still claim: net of spend, reservations and the final reserve."""
        return self._unspent() - self._reserved_usd

    def _unspent(self) -> float:
        return self.limits.max_cost_usd - self.spent_usd - self.final_reserve_usd

    def remaining_tokens(self) -> int:
        """Tokens new work may still claim: net of spend, reservations and the final reserve."""
        return self._unspent_tokens() - self._reserved_tokens

    def _unspent_tokens(self) -> int:
        return self.limits.max_total_tokens - self.spent_tokens - self.final_reserve_tokens

    def stop_reason(self) -> StopReason | None:
        """Why nothing new may start now, or None. The final synthesis is already reserved."""
        if self.elapsed >= self.limits.max_runtime_seconds:
            return "time_limit"
        if self._unspent_tokens() <= 0:
            return "token_limit"
        if self._unspent() <= 0:  # reservations are not spend: in-flight work may cost less
            return "cost_limit"
        return None

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        while amount_usd > self.remaining_usd() or tokens > self.remaining_tokens():
            in_flight = self._reserved_usd > 0 or self._reserved_tokens > 0
            if not in_flight or amount_usd > self._unspent() or tokens > self._unspent_tokens():
                return False  # nothing in flight could free enough
            self._freed.clear()
            await self._freed.wait()
        self._reserved_usd += amount_usd
        self._reserved_tokens += tokens
        return True

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        self._reserved_usd = max(0.0, self._reserved_usd - amount_usd)
        self._reserved_tokens = max(0, self._reserved_tokens - tokens)
        self._freed.set()


class NodeMeter:
    """The ``Meter`` port bound to one node (or to none, for planner/judge/synthesis): the
    guard's budget, each call booked on the node."""

    def __init__(self, guard: BudgetGuard, node_id: str | None) -> None:
        self._guard = guard
        self.node_id = node_id
        self.remaining_usd = guard.remaining_usd
        self.remaining_tokens = guard.remaining_tokens
        self.reserve = guard.reserve
        self.release = guard.release

    def record(
        self,
        role: Role,
        model: str,
        usage: Usage,
        *,
        cached: bool = False,
        usage_unknown: bool = False,
        tier: str = "default",
    ) -> None:
        self._guard.record(
            role,
            model,
            usage,
            node_id=self.node_id,
            cached=cached,
            usage_unknown=usage_unknown,
            tier=tier,
        )


def call_cost_estimate(
    model: str, input_tokens: int, output_tokens: int, prices: PriceBook
) -> float:
    """Worst-case USD of one chat call: nothing read from the cache, all of the prompt written
    to it (GPT-6 bills writes at 1.25x input; elsewhere a write costs what input does); 0 for
    models without a known price."""
    usage = Usage(
        input_tokens=input_tokens, cache_write_tokens=input_tokens, output_tokens=output_tokens
    )
    return prices.cost(model, usage)
