from __future__ import annotations

import pytest

from deep_research.adapters.prices import Price, PriceTable
from deep_research.core.budget import (
    WEB_BASE_INPUT_TOKENS,
    WEB_INPUT_TOKENS_PER_TOOL_CALL,
    make_entry,
    totals,
    web_job_worst_case,
    web_job_worst_usage,
)
from deep_research.core.models import Usage

M = 1_000_000
BOOK = PriceTable()


@pytest.mark.parametrize(
    ("model", "price"),
    [
        # gpt-5.5 has no write price: its writes bill as input. GPT-6 bills them at 1.25x.
        ("gpt-5.5", Price(5.0, 0.50, 30.0, 5.0)),
        ("gpt-6-sol", Price(2.0, 0.20, 10.0, 2.5)),
        ("gpt-6.1-terra", Price(1.0, 0.05, 5.0, 1.25)),
        ("gpt-6-luna", Price(0.10, 0.01, 0.50, 0.125)),
    ],
)
def test_current_models_bill_genai_prices_figures(model: str, price: Price) -> None:
    # Each part alone, well below the 272k long-context tier.
    assert BOOK.cost(model, Usage(input_tokens=100_000)) == pytest.approx(price.input / 10)
    cached = Usage(input_tokens=100_000, cached_input_tokens=100_000)
    assert BOOK.cost(model, cached) == pytest.approx(price.cached_input / 10)
    written = Usage(input_tokens=100_000, cache_write_tokens=100_000)
    assert BOOK.cost(model, written) == pytest.approx(price.write / 10)
    assert BOOK.cost(model, Usage(output_tokens=100_000)) == pytest.approx(price.output / 10)


def test_o3_pro_no_longer_prices_like_o3() -> None:
    usage = Usage(input_tokens=100_000, output_tokens=10_000)
    assert BOOK.cost("o3-pro", usage) == pytest.approx(0.1 * 20 + 0.01 * 80)
    assert BOOK.cost("o3", usage) == pytest.approx(0.1 * 2 + 0.01 * 8)


def test_long_context_tier_starts_above_272k_input_tokens() -> None:
    at = Usage(input_tokens=272_000, output_tokens=10_000)
    above = Usage(input_tokens=272_001, output_tokens=10_000)
    assert BOOK.cost("gpt-5.5", at) == pytest.approx(0.272 * 5 + 0.01 * 30)
    # 2x input, 1.5x output, on all of it.
    assert BOOK.cost("gpt-5.5", above) == pytest.approx(0.272001 * 10 + 0.01 * 45)


@pytest.mark.parametrize(
    "name", ["gpt-5.5-2026-04-23", "GPT-5.5", "openai/gpt-5.5", " OpenAI/GPT-5.5 "]
)
def test_prices_follow_the_name_wherever_served(name: str) -> None:
    usage = Usage(input_tokens=10_000, cached_input_tokens=4_000, output_tokens=2_000)
    assert BOOK.knows(name)
    assert BOOK.cost(name, usage) == pytest.approx(BOOK.cost("gpt-5.5", usage))
    assert BOOK.cost(name, usage) > 0


@pytest.mark.parametrize("model", ["llama3.1:8b", "qwen2.5", "", "o5", "gpt-6.2-sol"])
def test_unknown_models_have_no_price(model: str) -> None:
    assert BOOK.cost(model, Usage(input_tokens=M, output_tokens=M)) == 0.0
    assert not BOOK.knows(model)


def test_cost_bills_cached_input_at_cached_rate() -> None:
    usage = Usage(input_tokens=200_000, cached_input_tokens=80_000, output_tokens=10_000)
    # 120k * $5 + 80k * $0.50 + 10k * $30 (per 1M)
    assert BOOK.cost("gpt-5.5", usage) == pytest.approx(0.6 + 0.04 + 0.3)


def test_reasoning_tokens_are_not_billed_twice() -> None:
    plain = Usage(input_tokens=1000, output_tokens=50_000)
    with_reasoning = Usage(input_tokens=1000, output_tokens=50_000, reasoning_tokens=40_000)
    assert BOOK.cost("gpt-6-sol", with_reasoning) == pytest.approx(BOOK.cost("gpt-6-sol", plain))


def test_web_searches_cost_ten_dollars_a_thousand() -> None:
    tokens = Usage(input_tokens=10_000, output_tokens=1_000)
    searched = Usage(input_tokens=10_000, output_tokens=1_000, web_search_calls=7)
    for model in ("gpt-5.5", "gpt-6-luna", "o3-pro", "llama3.1:8b"):
        assert BOOK.cost(model, searched) == pytest.approx(BOOK.cost(model, tokens) + 0.07), model


def test_cached_count_above_input_never_gives_a_discount() -> None:
    usage = Usage(input_tokens=1000, cached_input_tokens=5000)
    assert BOOK.cost("gpt-5.5", usage) == pytest.approx(1000 * 0.50 / M)
    book = PriceTable({"mine": Price(2.0, 0.5, 8.0)})
    assert book.cost("mine", usage) == pytest.approx(1000 * 0.50 / M)


def test_unknown_model_costs_nothing_but_still_pays_search_fees() -> None:
    assert BOOK.cost("llama3.1:8b", Usage(input_tokens=M, output_tokens=M)) == 0.0
    assert BOOK.cost("llama3.1:8b", Usage(web_search_calls=2)) == pytest.approx(0.02)


def test_embeddings_bill_input_only() -> None:
    assert BOOK.cost("text-embedding-3-small", Usage(input_tokens=M)) == pytest.approx(0.02)


def test_an_override_wins_over_genai_prices_and_ignores_tiers() -> None:
    book = PriceTable({"OpenAI/GPT-5.5": Price(1.0, 0.1, 2.0), "local-llm": Price(0.5, 0.5, 1.0)})
    usage = Usage(
        input_tokens=400_000, cached_input_tokens=100_000, output_tokens=50_000, web_search_calls=3
    )
    # 300k * $1 + 100k * $0.10 + 50k * $2 (per 1M) + 3 searches
    expected = 0.3 + 0.01 + 0.1 + 0.03
    assert book.cost("gpt-5.5", usage) == pytest.approx(expected)
    assert book.cost("openai/gpt-5.5", usage) == pytest.approx(expected)
    assert book.knows("local-llm")
    assert book.cost("local-llm", Usage(input_tokens=M)) == pytest.approx(0.5)
    assert BOOK.cost("gpt-5.5", usage) > expected  # the default book is untouched


def test_worst_usage_models_every_turn_resending_the_context() -> None:
    usage = web_job_worst_usage(
        max_tool_calls=3, max_output_tokens=32_000, base_input_tokens=1000, growth_per_call=100
    )
    # Turns send 1000, 1100, 1200, 1300; turns 1..3 re-send 1000, 1100, 1200 from cache.
    assert usage.input_tokens == 4600
    assert usage.cached_input_tokens == 3300
    assert usage.output_tokens == 32_000
    assert usage.web_search_calls == 3
    no_tools = web_job_worst_usage(max_tool_calls=0, max_output_tokens=1000)
    assert no_tools.input_tokens == WEB_BASE_INPUT_TOKENS
    assert no_tools.cached_input_tokens == 0
    assert no_tools.web_search_calls == 0


def test_worst_case_prices_the_aggregate_across_the_272k_tier() -> None:
    def cost(growth: int) -> float:
        usage = web_job_worst_usage(
            max_tool_calls=1,
            max_output_tokens=10_000,
            base_input_tokens=100_000,
            growth_per_call=growth,
        )
        return BOOK.cost("gpt-5.5", usage)

    # Aggregate input 100k + 172k = 272,000, of which 100k cached: base prices.
    assert cost(72_000) == pytest.approx(0.172 * 5 + 0.1 * 0.5 + 0.01 * 30 + 0.01)
    # One token more in aggregate (though no turn is near 272k): the long-context tier.
    assert cost(72_001) == pytest.approx(0.172001 * 10 + 0.1 * 1.0 + 0.01 * 45 + 0.01)


def test_worst_case_uses_the_default_context_model_and_the_book() -> None:
    usage = web_job_worst_usage(max_tool_calls=16, max_output_tokens=32_000)
    assert usage.input_tokens == 17 * WEB_BASE_INPUT_TOKENS + WEB_INPUT_TOKENS_PER_TOOL_CALL * 136
    worst = web_job_worst_case(BOOK, "gpt-5.5", max_tool_calls=16, max_output_tokens=32_000)
    assert worst == pytest.approx(BOOK.cost("gpt-5.5", usage))
    book = PriceTable({"gpt-5.5": Price(0.0, 0.0, 0.0)})
    free = web_job_worst_case(book, "gpt-5.5", max_tool_calls=16, max_output_tokens=32_000)
    assert free == pytest.approx(0.16)  # the searches alone


def test_default_web_job_worst_cases_fit_four_parallel_jobs_in_twenty_dollars() -> None:
    def worst(model: str) -> float:
        return web_job_worst_case(BOOK, model, max_tool_calls=16, max_output_tokens=32_000)

    assert 3.0 <= worst("gpt-5.5") <= 4.0
    assert 4 * worst("gpt-5.5") + 1.0 <= 20.0
    assert worst("gpt-6.1-terra") < worst("gpt-6-sol") < worst("gpt-5.5")


def test_worst_case_grows_with_tool_calls_and_output() -> None:
    def worst(calls: int, out: int) -> float:
        return web_job_worst_case(BOOK, "gpt-6-sol", max_tool_calls=calls, max_output_tokens=out)

    assert worst(20, 32_000) > worst(10, 32_000)
    assert worst(10, 64_000) > worst(10, 32_000)


def test_worst_case_covers_a_realistic_run() -> None:
    # A plausible gpt-5.5 run: 14 searches, heavy cached context, 25k output tokens.
    real = Usage(
        input_tokens=250_000, cached_input_tokens=180_000, output_tokens=25_000, web_search_calls=14
    )
    worst = web_job_worst_case(BOOK, "gpt-5.5", max_tool_calls=16, max_output_tokens=32_000)
    assert worst > BOOK.cost("gpt-5.5", real)


def test_make_entry_computes_cost_and_a_cache_hit_is_free() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=2_000)
    paid = make_entry("branch", "gpt-6-luna", usage, node_id="t1", prices=BOOK)
    hit = make_entry("branch", "gpt-6-luna", usage, node_id="t1", cached=True, prices=BOOK)
    assert paid.cost_usd == pytest.approx(BOOK.cost("gpt-6-luna", usage))
    assert paid.cost_usd > 0
    assert hit.cost_usd == 0.0
    assert hit.cached
    assert hit.usage == usage


def test_make_entry_uses_the_given_book() -> None:
    book = PriceTable({"my-model": Price(10.0, 1.0, 20.0)})
    entry = make_entry("branch", "my-model", Usage(input_tokens=M), prices=book, usage_unknown=True)
    assert entry.cost_usd == pytest.approx(10.0)
    assert entry.usage_unknown
    assert make_entry("branch", "my-model", Usage(input_tokens=M), prices=BOOK).cost_usd == 0.0


def test_totals_sum_by_role_and_node() -> None:
    entries = [
        make_entry(
            "planner", "gpt-6-sol", Usage(input_tokens=1000, output_tokens=500), prices=BOOK
        ),
        make_entry(
            "branch", "gpt-6-luna", Usage(input_tokens=2000, output_tokens=100), "t1", prices=BOOK
        ),
        make_entry(
            "branch", "gpt-6-luna", Usage(input_tokens=3000, output_tokens=100), "t2", prices=BOOK
        ),
        make_entry(
            "deep_research",
            "gpt-5.5",
            Usage(input_tokens=50_000, output_tokens=8_000, web_search_calls=5),
            "t1",
            prices=BOOK,
        ),
    ]
    result = totals(entries)
    assert result.cost_usd == pytest.approx(sum(e.cost_usd for e in entries))
    assert result.usage.input_tokens == 56_000
    assert result.usage.web_search_calls == 5
    assert result.by_role["branch"] == pytest.approx(entries[1].cost_usd + entries[2].cost_usd)
    assert sum(result.by_role.values()) == pytest.approx(result.cost_usd)


def test_totals_leave_cache_hits_out_of_spent_tokens() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100)
    result = totals(
        [
            make_entry("branch", "gpt-6-luna", usage, "t1", prices=BOOK),
            make_entry("branch", "gpt-6-luna", usage, "t2", cached=True, prices=BOOK),
        ]
    )
    assert result.usage.total_tokens == 1100
    assert result.cost_usd == pytest.approx(BOOK.cost("gpt-6-luna", usage))  # the hit is free


def test_totals_of_nothing_is_zero() -> None:
    result = totals([])
    assert result.cost_usd == 0.0
    assert result.usage.total_tokens == 0
