from __future__ import annotations

import pytest

from deep_research.budget import (
    PRICES,
    WEB_SEARCH_USD_PER_CALL,
    Price,
    cost_of,
    deep_research_worst_case,
    make_entry,
    price_for,
    totals,
)
from deep_research.models import Usage


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4.1", "gpt-4.1"),
        ("gpt-4.1-mini", "gpt-4.1-mini"),
        ("o3-deep-research-2025-06-26", "o3-deep-research"),
        ("o4-mini-deep-research-2025-06-26", "o4-mini-deep-research"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("o3-2025-04-16", "o3"),
        ("GPT-4o-mini", "gpt-4o-mini"),
        # Longest prefix at a '-' boundary, not the first one that matches.
        ("gpt-4o-mini-search-preview", "gpt-4o-mini"),
        ("o4-mini-deep-research-custom", "o4-mini-deep-research"),
    ],
)
def test_price_for_known_models(model: str, expected: str) -> None:
    assert price_for(model) == PRICES[expected]


@pytest.mark.parametrize("model", ["llama3.1:8b", "qwen2.5", "gpt-4omega", "", "o5"])
def test_price_for_unknown_models_is_none(model: str) -> None:
    assert price_for(model) is None


def test_deep_research_prices_match_the_published_table() -> None:
    assert PRICES["o3-deep-research"] == Price(10.0, 2.5, 40.0)
    assert PRICES["o4-mini-deep-research"] == Price(2.0, 0.5, 8.0)
    assert round(WEB_SEARCH_USD_PER_CALL * 1000, 9) == 10.0


def test_cost_bills_cached_input_at_cached_rate() -> None:
    usage = Usage(input_tokens=1_000_000, cached_input_tokens=400_000, output_tokens=100_000)
    # 600k * $2 + 400k * $0.50 + 100k * $8 (per 1M)
    assert cost_of("gpt-4.1", usage) == pytest.approx(1.2 + 0.2 + 0.8)


def test_reasoning_tokens_are_not_billed_twice() -> None:
    plain = Usage(input_tokens=1000, output_tokens=50_000)
    with_reasoning = Usage(input_tokens=1000, output_tokens=50_000, reasoning_tokens=40_000)
    assert cost_of("o3", with_reasoning) == pytest.approx(cost_of("o3", plain))


def test_web_search_calls_add_a_flat_fee() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=1_000, web_search_calls=7)
    tokens_only = cost_of("o4-mini-deep-research", Usage(input_tokens=10_000, output_tokens=1_000))
    assert cost_of("o4-mini-deep-research", usage) == pytest.approx(tokens_only + 0.07)


def test_cached_count_above_input_never_gives_a_discount() -> None:
    usage = Usage(input_tokens=1000, cached_input_tokens=5000)
    assert cost_of("gpt-4.1", usage) == pytest.approx(1000 * 0.50 / 1e6)


def test_unknown_model_costs_nothing_but_still_pays_search_fees() -> None:
    assert cost_of("llama3.1:8b", Usage(input_tokens=10**6, output_tokens=10**6)) == 0.0
    assert cost_of("llama3.1:8b", Usage(web_search_calls=2)) == pytest.approx(0.02)


def test_embeddings_bill_input_only() -> None:
    assert cost_of("text-embedding-3-small", Usage(input_tokens=1_000_000)) == pytest.approx(0.02)


def test_worst_case_estimates_are_in_the_documented_ranges() -> None:
    mini = deep_research_worst_case("o4-mini-deep-research", max_tool_calls=30)
    o3 = deep_research_worst_case("o3-deep-research", max_tool_calls=30)
    assert 1.0 <= mini <= 2.0
    assert 5.0 <= o3 <= 8.0
    assert o3 > mini


def test_worst_case_grows_with_tool_calls_and_output() -> None:
    base = deep_research_worst_case("o4-mini-deep-research", max_tool_calls=10)
    assert deep_research_worst_case("o4-mini-deep-research", max_tool_calls=20) > base
    assert deep_research_worst_case("o4-mini-deep-research", 10, max_output_tokens=200_000) > base


def test_worst_case_covers_a_realistic_run() -> None:
    # A plausible o4-mini run: 25 searches, heavy cached context, 30k output tokens.
    real = Usage(
        input_tokens=200_000, cached_input_tokens=120_000, output_tokens=30_000, web_search_calls=25
    )
    assert deep_research_worst_case("o4-mini-deep-research", 30) > cost_of(
        "o4-mini-deep-research", real
    )


def test_make_entry_computes_cost_and_a_cache_hit_is_free() -> None:
    usage = Usage(input_tokens=10_000, output_tokens=2_000)
    paid = make_entry("branch", "gpt-4.1-mini", usage, node_id="t1")
    hit = make_entry("branch", "gpt-4.1-mini", usage, node_id="t1", cached=True)
    assert paid.cost_usd == pytest.approx(cost_of("gpt-4.1-mini", usage))
    assert paid.cost_usd > 0
    assert hit.cost_usd == 0.0
    assert hit.cached
    assert hit.usage == usage


def test_totals_sum_by_role_and_node() -> None:
    entries = [
        make_entry("planner", "gpt-4.1", Usage(input_tokens=1000, output_tokens=500)),
        make_entry("branch", "gpt-4.1-mini", Usage(input_tokens=2000, output_tokens=100), "t1"),
        make_entry("branch", "gpt-4.1-mini", Usage(input_tokens=3000, output_tokens=100), "t2"),
        make_entry(
            "deep_research",
            "o4-mini-deep-research",
            Usage(input_tokens=50_000, output_tokens=8_000, web_search_calls=5),
            "t1",
        ),
    ]
    result = totals(entries)
    assert result.cost_usd == pytest.approx(sum(e.cost_usd for e in entries))
    assert result.usage.input_tokens == 56_000
    assert result.usage.web_search_calls == 5
    assert result.by_role["branch"] == pytest.approx(entries[1].cost_usd + entries[2].cost_usd)
    assert result.by_node["t1"] == pytest.approx(entries[1].cost_usd + entries[3].cost_usd)
    assert set(result.by_node) == {"t1", "t2"}  # the planner belongs to no node
    assert sum(result.by_role.values()) == pytest.approx(result.cost_usd)


def test_totals_leave_cache_hits_out_of_spent_tokens() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100)
    result = totals(
        [
            make_entry("branch", "gpt-4.1-mini", usage, "t1"),
            make_entry("branch", "gpt-4.1-mini", usage, "t2", cached=True),
        ]
    )
    assert result.usage.total_tokens == 1100
    assert result.by_node["t2"] == 0.0


def test_totals_of_nothing_is_zero() -> None:
    result = totals([])
    assert result.cost_usd == 0.0
    assert result.usage.total_tokens == 0
