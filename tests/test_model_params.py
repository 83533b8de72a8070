"""Which parameters each chat model gets, by its name (checked 2026-11-23)."""

from __future__ import annotations

import pytest

from deep_research.adapters.llm.params import ModelParams, accepted_efforts, model_params


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        # GPT-6 and gpt-5.x: an effort, and a temperature only when they do not reason.
        ("gpt-6-sol", "low", ModelParams(None, "low")),
        ("gpt-6.1-terra", "none", ModelParams(0.2, "none")),
        ("openai/gpt-6-luna", "medium", ModelParams(None, "medium")),
        ("gpt-5.5", "xhigh", ModelParams(None, "xhigh")),
        ("gpt-5.6-sol", None, ModelParams(None, None)),
        # gpt-5 and o-series: no temperature ever; efforts they lack move to the nearest.
        ("gpt-5-mini", "none", ModelParams(None, "minimal")),
        ("o3", "xhigh", ModelParams(None, "high")),
        ("o4-mini-2025-04-16", "minimal", ModelParams(None, "low")),
        # Anything else (local models) keeps today's behaviour.
        ("llama3.1:8b", "low", ModelParams(0.2, None)),
        ("qwen3", None, ModelParams(0.2, None)),
        ("gpt-4.1", "low", ModelParams(0.2, None)),
    ],
)
def test_parameters_follow_the_model_name(
    model: str, effort: str | None, expected: ModelParams
) -> None:
    assert model_params(model, effort, 0.2) == expected


def test_only_reasoning_models_take_an_effort() -> None:
    assert accepted_efforts("gpt-6-astra")[-1] == "xhigh"
    assert accepted_efforts("o1") == ("low", "medium", "high")
    assert accepted_efforts("gpt-4o-mini") == ()
    assert accepted_efforts("ollama/gemma3") == ()
