"""Budget guard: limits, the ledger on nodes, and reservations that wait for work in flight."""

from __future__ import annotations

import asyncio

import pytest

from deep_research.adapters.prices import Price, PriceTable
from deep_research.core.engine import RunConfig
from deep_research.core.guard import BudgetGuard, call_cost_estimate
from deep_research.core.models import Limits, ResearchNode, SessionState, Usage
from deep_research.core.ports import BranchResult, BranchTask, Meter, RemoteJobHook
from tests.fakes import FakeJudge, FakePlanner, Rig, new_state, plan, task, verdict


def guard(max_cost: float = 5.0, prices: PriceTable | None = None, **limits: float) -> BudgetGuard:
    state = SessionState(
        session_id="a" * 12, question="q?", limits=Limits(max_cost_usd=max_cost, **limits)
    )
    state.nodes["n1"] = ResearchNode(id="n1", question="q?")
    return BudgetGuard(state, state.limits, prices=prices or PriceTable())


def test_usage_is_priced_and_lands_on_the_node() -> None:
    g = guard()
    g.meter("n1").record("branch", "gpt-6-sol", Usage(input_tokens=200_000))
    assert round(g.spent_usd, 6) == 0.4
    assert g.state.nodes["n1"].cost_usd == g.spent_usd
    assert g.state.ledger[0].node_id == "n1"
    assert not g.state.ledger[0].usage_unknown


def test_a_current_web_model_is_not_free() -> None:
    g = guard()
    usage = Usage(input_tokens=100_000, output_tokens=10_000, web_search_calls=4)
    g.meter("n1").record("deep_research", "gpt-5.5", usage)
    # 100k * $5 + 10k * $30 (per 1M) + 4 searches at $10 per 1,000
    assert g.state.ledger[0].cost_usd == pytest.approx(0.5 + 0.3 + 0.04)
    assert g.spent_usd == pytest.approx(0.84)


def test_recording_uses_the_guards_price_book() -> None:
    g = guard(prices=PriceTable({"my-model": Price(10.0, 1.0, 20.0), "gpt-5.5": Price(1, 1, 1)}))
    g.meter("n1").record("branch", "my-model", Usage(input_tokens=100_000, output_tokens=50_000))
    g.meter("n1").record("deep_research", "openai/gpt-5.5", Usage(input_tokens=1_000_000))
    assert [e.cost_usd for e in g.state.ledger] == pytest.approx([2.0, 1.0])
    assert g.state.nodes["n1"].cost_usd == pytest.approx(3.0)


def test_a_job_without_reported_usage_is_marked_on_the_ledger() -> None:
    g = guard()
    g.meter("n1").record("deep_research", "gpt-5.5", Usage(), usage_unknown=True)
    g.record("deep_research", "gpt-5.5", Usage(), node_id=None, usage_unknown=True)
    assert [e.usage_unknown for e in g.state.ledger] == [True, True]
    assert g.spent_usd == 0.0


def test_call_cost_estimate_prices_with_the_given_book() -> None:
    # At its worst the whole prompt is written to the cache: gpt-6-sol's $2.50, not $2.
    assert call_cost_estimate("gpt-6-sol", 10_000, 16_000, PriceTable()) == pytest.approx(
        0.025 + 0.16
    )
    # gpt-5.5 bills no writes: its prompt costs what input does.
    assert call_cost_estimate("gpt-5.5", 10_000, 16_000, PriceTable()) == pytest.approx(0.05 + 0.48)
    book = PriceTable({"gpt-6-sol": Price(1.0, 0.1, 1.0)})
    assert call_cost_estimate("gpt-6-sol", 10_000, 16_000, book) == pytest.approx(0.0285)
    assert call_cost_estimate("llama3.1:8b", 10_000, 16_000, PriceTable()) == 0.0


async def test_a_reservation_that_cannot_fit_with_nothing_in_flight_is_refused() -> None:
    assert not await guard(max_cost=1.0).reserve(2.0)


async def test_a_reservation_waits_for_work_in_flight_then_fits() -> None:
    g = guard(max_cost=5.0)
    assert await g.reserve(2.0)
    assert await g.reserve(2.0)
    third = asyncio.ensure_future(g.reserve(2.0))
    await asyncio.sleep(0)  # a yield: let it find the budget held and start waiting
    assert not third.done()
    g.meter().record("deep_research", "gpt-6-sol", Usage(input_tokens=100_000))
    g.release(2.0)  # the first job finished, costing $0.20 of its $2 worst case
    assert await third


async def test_a_waiting_reservation_is_refused_once_the_spend_leaves_no_room() -> None:
    g = guard(max_cost=3.0)
    assert await g.reserve(2.0)
    second = asyncio.ensure_future(g.reserve(2.0))
    await asyncio.sleep(0)  # a yield, as above
    g.meter().record("deep_research", "gpt-6-sol", Usage(output_tokens=200_000))
    g.release(2.0)  # that job cost $2: $1 left, the second cannot fit
    assert not await second


async def test_tokens_are_reserved_like_dollars() -> None:
    g = guard(max_cost=100.0, max_total_tokens=1_000_000)
    assert not await g.reserve(0.0, tokens=1_200_000), "a job that could overshoot never starts"
    assert await g.reserve(1.0, tokens=600_000)
    second = asyncio.ensure_future(g.reserve(1.0, tokens=600_000))
    await asyncio.sleep(0)  # a yield: let it find the tokens held and start waiting
    assert not second.done(), "both in flight could overshoot the limit: the second waits"
    g.meter("n1").record("deep_research", "gpt-5.5", Usage(input_tokens=150_000))
    g.release(1.0, tokens=600_000)  # the first used 150,000 of its 600,000
    assert await second
    assert g.remaining_tokens() == 1_000_000 - 150_000 - 600_000


async def test_a_waiting_token_reservation_is_refused_once_spend_leaves_no_room() -> None:
    g = guard(max_cost=100.0, max_total_tokens=1_000_000)
    assert await g.reserve(0.0, tokens=600_000)
    second = asyncio.ensure_future(g.reserve(0.0, tokens=600_000))
    await asyncio.sleep(0)
    g.meter("n1").record("deep_research", "gpt-5.5", Usage(input_tokens=500_000))
    g.release(0.0, tokens=600_000)
    assert not await second


def test_reservations_alone_never_stop_the_run() -> None:
    g = guard(max_cost=4.0)
    g._reserved_usd = 4.0  # all of it held by work in flight
    assert g.stop_reason() is None
    g.meter().record("branch", "gpt-6-sol", Usage(output_tokens=400_000))  # $4
    assert g.stop_reason() == "cost_limit"


class ReservingExecutor:
    """Like Deep Research: reserves a $2 worst case, then costs far less."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        assert await meter.reserve(2.0)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0)  # a yield: let the other branches interleave
            meter.record("deep_research", "gpt-5.5", Usage(input_tokens=10_000))
        finally:
            self.in_flight -= 1
            meter.release(2.0)
        return BranchResult("done [1]", (), 0.5)


async def test_budget_bounds_parallel_deep_research_without_ending_the_run() -> None:
    executor = ReservingExecutor()
    rig = Rig(
        planner=FakePlanner([plan(*(task(f"w{i}") for i in range(5)))]),
        executor=executor,  # type: ignore[arg-type]
        judge=FakeJudge([verdict(True)]),
    )
    state = new_state(max_cost_usd=5.0)
    await rig.orchestrator(state, config=RunConfig(max_parallel=5)).run()
    assert state.stop_reason == "complete"
    assert all(n.status == "done" for n in state.nodes.values())
    assert executor.peak == 2, "only two $2 worst cases fit in $5 at once"
