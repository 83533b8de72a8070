"""Checks before anything is spent: known prices and the worst case of a run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deep_research.adapters.prices import PriceTable
from deep_research.adapters.web.openai_jobs import JobSpec
from deep_research.app.config import Settings
from deep_research.app.preflight import check_prices, configured_models, estimate
from deep_research.app.reserves import price_book
from deep_research.app.sources import job_spec
from deep_research.core.errors import ConfigError
from deep_research.core.models import Usage
from tests.clirun import cli


def settings(tmp_path: Path, **values: object) -> Settings:
    return Settings(home=tmp_path, openai_api_key="sk-x", **values)  # type: ignore[arg-type]


def test_an_unpriced_model_on_openai_is_an_error_naming_the_way_out(tmp_path: Path) -> None:
    s = settings(tmp_path, web_model="gpt-6.2-sol")  # not in genai-prices 0.2.3
    refs = configured_models(s, job_spec(s))
    with pytest.raises(ConfigError) as info:
        check_prices(s, refs, price_book(s))
    message = str(info.value)
    assert "gpt-6.2-sol" in message
    assert "DEEP_RESEARCH_PRICES" in message
    assert "DEEP_RESEARCH_WEB_MODEL" in message
    assert "\n" not in message


def test_a_price_override_or_an_explicit_allowance_lets_it_run(tmp_path: Path) -> None:
    priced = settings(tmp_path, web_model="gpt-6.2-sol", prices={"gpt-6.2-sol": (3, 0.3, 15)})
    check_prices(priced, configured_models(priced, job_spec(priced)), price_book(priced))
    allowed = settings(tmp_path, web_model="gpt-6.2-sol", allow_unpriced=True)
    check_prices(allowed, configured_models(allowed, job_spec(allowed)), price_book(allowed))


def test_an_unpriced_local_model_counts_zero_as_before(tmp_path: Path) -> None:
    s = settings(tmp_path, openai_base_url="http://127.0.0.1:11434/v1", planner_model="llama3.1")
    check_prices(s, configured_models(s, job_spec(s)), price_book(s))
    assert PriceTable().cost("llama3.1", Usage(input_tokens=1000, output_tokens=1000)) == 0.0


def test_every_default_model_is_live_and_priced(tmp_path: Path) -> None:
    s = settings(tmp_path)
    refs = configured_models(s, job_spec(s))
    assert {r.model for r in refs} == {"gpt-6-sol", "gpt-6-luna", "gpt-5.5"}
    assert all(PriceTable().knows(r.model) for r in refs)
    check_prices(s, refs, price_book(s))


def test_the_default_budget_admits_the_default_parallel_web_jobs(tmp_path: Path) -> None:
    s = settings(tmp_path)
    worst = estimate(s, job_spec(s), price_book(s), final_reserve_usd=0.5, engine="openai")
    assert worst.parallel == s.max_parallel
    assert worst.jobs_admitted >= s.max_parallel
    assert worst.parallel_usd + worst.final_reserve_usd <= s.max_cost_usd
    assert 0 < worst.run_worst_usd <= s.max_cost_usd
    kb_only = estimate(s, None, price_book(s), final_reserve_usd=0.5)
    assert (kb_only.per_job_usd, kb_only.jobs_admitted) == (0.0, 0)


def test_a_bigger_job_costs_more_in_the_estimate(tmp_path: Path) -> None:
    s = settings(tmp_path)
    small = estimate(s, JobSpec("gpt-5.5", max_tool_calls=4), price_book(s), 0.0, engine="openai")
    large = estimate(s, JobSpec("gpt-5.5", max_tool_calls=40), price_book(s), 0.0, engine="openai")
    assert large.per_job_usd > small.per_job_usd


def test_every_default_model_is_live_in_the_pinned_sdk(tmp_path: Path) -> None:
    """The SDK's model list carries announced shutdowns in its docstring: no default may
    appear there (checked against the installed openai package, not a copy)."""
    import inspect
    import typing

    from openai.types.shared import chat_model

    listed = set(typing.get_args(chat_model.ChatModel))
    deprecated = inspect.getsource(chat_model).split('"""Deprecated values:', 1)[1]
    s = settings(tmp_path)
    for ref in configured_models(s, job_spec(s)):
        assert ref.model in listed, f"{ref.model} ({ref.setting}) is not in the SDK's list"
        assert f'"{ref.model}"' not in deprecated, f"{ref.model} has an announced shutdown"


def test_the_estimate_refuses_an_unpriced_model_as_the_run_does(env: dict[str, str]) -> None:
    """``--estimate`` prices nothing it cannot: on OpenAI's API an unpriced web model is
    refused with the run's own error, and no figures (it once printed "$0.16 each … admits
    119" while the run refused)."""
    on_openai = {k: v for k, v in env.items() if k != "OPENAI_BASE_URL"}  # contacts nobody
    question = ("How does the page reader keep to its limits per host?", "--web-model")
    code, out, err = cli(on_openai, *question, "gpt-6.2-sol", "--estimate")
    assert (code, out) == (3, "")
    said = " ".join(err.split())
    assert said.startswith("error: no known price for gpt-6.2-sol: the cost limit could not")
    code, out, _ = cli(on_openai, *question, "gpt-6.2-sol", "--estimate", "--json")
    assert (code, json.loads(out)["error"]["code"]) == (3, "invalid_settings")
    code, out, err = cli(on_openai, *question, "gpt-6.2-sol", "--yes")
    assert (code, " ".join(err.split())) == (3, said)
