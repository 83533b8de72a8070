"""Which parameters each model gets, by its name (facts checked 2026-11-26: see
``adapters/llm/params.py``), and a run's requests against the strict fake OpenAI server."""

from __future__ import annotations

from typing import Any

import pytest

from deep_research.adapters.llm.params import (
    EFFORTS,
    FAMILIES,
    ModelParams,
    accepted_efforts,
    model_params,
    nearest_effort,
)
from deep_research.app import sources
from deep_research.app.config import Settings
from tests.clirun import run_json
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task

NEVER_NONE = ("gpt-6-astra", "gpt-6.1-sol", "gpt-6.2-astra", "gpt-6.2-sol")
"""GPT-6 models that refuse `none` (and `minimal`): always reasoning, never a temperature."""


@pytest.mark.parametrize(
    ("model", "effort", "expected"),
    [
        # gpt-6-sol / -luna and gpt-6.1-terra: none … max, no minimal (moved to low).
        ("gpt-6-sol", "low", ModelParams(None, "low")),
        ("gpt-6-sol", "minimal", ModelParams(None, "low")),
        ("gpt-6-sol", "none", ModelParams(0.2, "none")),
        ("gpt-6-sol", "max", ModelParams(None, "max")),
        ("openai/gpt-6-luna", "minimal", ModelParams(None, "low")),
        ("gpt-6.1-terra", "none", ModelParams(0.2, "none")),
        ("gpt-6.1-terra", "max", ModelParams(None, "max")),
        # astra, 6.1-sol, 6.2: low … max; none and minimal move to low, no temperature.
        ("gpt-6-astra", "none", ModelParams(None, "low")),
        ("gpt-6-astra", "minimal", ModelParams(None, "low")),
        ("gpt-6-astra", "max", ModelParams(None, "max")),
        ("gpt-6.1-sol", "none", ModelParams(None, "low")),
        ("gpt-6.2-astra", "xhigh", ModelParams(None, "xhigh")),
        ("gpt-6.2-sol", "none", ModelParams(None, "low")),
        # gpt-5.6: none … max; gpt-5.2 … 5.5: none … xhigh; gpt-5.1: none … high.
        ("gpt-5.6-sol", "max", ModelParams(None, "max")),
        ("gpt-5.6-terra", "minimal", ModelParams(None, "low")),
        ("gpt-5.6-sol", None, ModelParams(None, None)),
        ("gpt-5.5", "xhigh", ModelParams(None, "xhigh")),
        ("gpt-5.5", "max", ModelParams(None, "xhigh")),
        ("gpt-5.5-2026-04-23", "none", ModelParams(0.2, "none")),
        ("gpt-5.4-mini", "minimal", ModelParams(None, "low")),
        ("gpt-5.1", "xhigh", ModelParams(None, "high")),
        ("gpt-5.1", "none", ModelParams(0.2, "none")),
        # pro models: gpt-5-pro takes high only; the later ones medium … xhigh.
        ("gpt-5-pro", "low", ModelParams(None, "high")),
        ("gpt-5.5-pro", "none", ModelParams(None, "medium")),
        ("gpt-5.5-pro", "max", ModelParams(None, "xhigh")),
        # gpt-5 (-mini/-nano) and o-series: no temperature ever; no none, no xhigh.
        ("gpt-5-mini", "none", ModelParams(None, "minimal")),
        ("gpt-5", "max", ModelParams(None, "high")),
        ("o3", "xhigh", ModelParams(None, "high")),
        ("o3", "none", ModelParams(None, "low")),
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
    assert accepted_efforts("gpt-6-astra") == ("low", "medium", "high", "xhigh", "max")
    assert accepted_efforts("o1") == ("low", "medium", "high")
    assert accepted_efforts("gpt-4o-mini") == ()
    assert accepted_efforts("ollama/gemma3") == ()
    assert accepted_efforts("gpt-60") == (), "a family's name ends at its end or a '-'"


def test_max_is_taken_by_gpt_5_6_and_gpt_6_only() -> None:
    takes_max = {
        m: "max" in accepted_efforts(m)
        for m in ("gpt-6-sol", "gpt-6-luna", "gpt-6.1-terra", *NEVER_NONE, "gpt-5.6-luna")
    } | {m: "max" in accepted_efforts(m) for m in ("gpt-5.5", "gpt-5.4", "gpt-5.1", "gpt-5", "o3")}
    assert [m for m, takes in takes_max.items() if not takes] == [
        "gpt-5.5",
        "gpt-5.4",
        "gpt-5.1",
        "gpt-5",
        "o3",
    ]


def test_no_model_after_gpt_5_takes_minimal() -> None:
    later = ("gpt-6-sol", "gpt-6-luna", "gpt-6.1-terra", *NEVER_NONE, "gpt-5.6-sol", "gpt-5.1")
    assert [m for m in later if "minimal" in accepted_efforts(m)] == []
    assert "minimal" in accepted_efforts("gpt-5-nano")


@pytest.mark.parametrize("model", NEVER_NONE)
def test_astra_and_the_6_1_and_6_2_models_never_get_a_temperature(model: str) -> None:
    for effort in (*EFFORTS, None):
        assert model_params(model, effort, 0.7).temperature is None, effort


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.pattern)
def test_every_effort_moves_to_one_its_family_takes(family: Any) -> None:
    assert family.efforts, "a family takes some effort"
    assert list(family.efforts) == sorted(family.efforts, key=EFFORTS.index)
    for effort in EFFORTS:
        moved = nearest_effort(_a_model_of(family.pattern), effort)
        assert moved in family.efforts
        if effort in family.efforts:
            assert moved == effort


def _a_model_of(pattern: str) -> str:
    """A model name the family's pattern matches (its first listed alternative)."""
    examples = {
        r"gpt-6-(?:sol|luna)": "gpt-6-sol",
        r"gpt-6\.1-terra": "gpt-6.1-terra",
        r"gpt-6(?:\.\d+)?": "gpt-6-astra",
        r"gpt-5\.(?:[6-9]|\d{2,})": "gpt-5.6-terra",
        r"gpt-5\.\d+-pro": "gpt-5.5-pro",
        r"gpt-5\.[2-5]": "gpt-5.2",
        r"gpt-5\.1": "gpt-5.1",
        r"gpt-5-pro": "gpt-5-pro",
        r"gpt-5": "gpt-5-nano",
        r"o\d": "o3",
    }
    model = examples[pattern]
    assert next(f for f in FAMILIES if f.matches(model)).pattern == pattern
    return model


def test_the_web_job_gets_the_nearest_effort_its_model_takes() -> None:
    def sent(model: str, effort: str) -> str:
        settings = Settings.model_validate({"web_model": model, "web_effort": effort})
        return sources.job_spec(settings).reasoning_effort

    assert sent("gpt-6-astra", "minimal") == "low"
    assert sent("gpt-6-astra", "none") == "low"
    assert sent("gpt-6.2-astra", "max") == "max"
    assert sent("gpt-5.5", "max") == "xhigh"
    assert sent("gpt-5.5", "none") == "none"


# --- a run's requests, against the fake that refuses what OpenAI refuses -------------------

CHAT_SENT = {"minimal": "low", "max": "max", "none": "none"}
"""What gpt-6-sol / gpt-6-luna are sent for a configured effort (the others: as configured)."""
WEB_SENT = {"minimal": "low", "max": "xhigh", "none": "none"}
"""What gpt-5.5, the default web model, is sent."""
ROLES = ("PLANNER", "SYNTHESIZER", "JUDGE", "BRANCH", "SUMMARIZER")


@pytest.mark.parametrize("effort", EFFORTS)
def test_a_run_with_any_configured_effort_is_accepted_by_the_default_models(
    env: dict[str, str], fake_openai: FakeOpenAI, effort: str
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    efforts = {f"DEEP_RESEARCH_{role}_REASONING_EFFORT": effort for role in ROLES}
    data = run_json({**env, **efforts}, "When does a research node start?", "--web-effort", effort)
    assert data["status"] == "complete"
    chat = [r.body for r in fake_openai.requests if r.path == "/v1/chat/completions"]
    assert {b["model"] for b in chat} == {"gpt-6-sol", "gpt-6-luna"}
    assert {b["reasoning_effort"] for b in chat} == {CHAT_SENT.get(effort, effort)}
    temperatures = {b.get("temperature") for b in chat}
    assert temperatures == ({0.2} if effort == "none" else {None})
    assert all("max_tokens" not in b and b["max_completion_tokens"] > 0 for b in chat)
    [create] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert create["reasoning"]["effort"] == WEB_SENT.get(effort, effort)


def test_a_web_job_on_astra_is_sent_low_for_minimal(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    question = "When does a research node start?"
    args = ("--web-model", "gpt-6-astra", "--web-effort", "minimal")
    data = run_json(env, question, *args)
    assert data["status"] == "complete"
    [create] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert (create["model"], create["reasoning"]["effort"]) == ("gpt-6-astra", "low")
