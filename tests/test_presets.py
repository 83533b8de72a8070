"""Run presets (``app/presets.py``): one choice that sets the defaults of the settings that
shape how far a run goes. ``standard`` is today's defaults; anything given explicitly (a flag,
the environment, `.env`, an option over HTTP or MCP) wins; a run's preset is saved and
replayed by ``resume``, whatever the environment says then."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from deep_research.app import lifecycle, preparation, presets
from deep_research.app.config import Settings
from deep_research.app.loading import load_settings
from deep_research.app.options import BudgetOverrides, RunOptions
from deep_research.app.presets import CHANGES, values
from deep_research.frontends.mcp.server import create_server
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI

KNOBS: tuple[str, ...] = presets.knobs()
"""The settings a preset sets."""
PRESETS = {name: values(name) for name in CHANGES}

QUESTION = "When does a research node start?"
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")

DOCUMENTED = {
    "quick": {
        "max_iterations",
        "max_nodes_per_plan",
        "web_effort",
        "web_max_tool_calls",
        "report_max_sections",
        "report_section_words",
    },
    "deep": set(KNOBS),
}
"""What each preset changes of ``standard`` (README "Presets")."""


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No setting in the environment, no `.env`: the working directory is ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("DEEP_RESEARCH_", "OPENAI_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(tmp_path / "home"))
    return tmp_path


def knobs(settings: Settings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in KNOBS}


# --- the table -----------------------------------------------------------------------------


def test_standard_is_every_default_as_it_is() -> None:
    assert Settings.model_fields["preset"].default == "standard"
    assert set(PRESETS) == {"quick", "standard", "deep"}
    assert CHANGES["standard"] == {}, "the settings' own defaults, declared there only"
    plain = Settings(_env_file=None)  # type: ignore[call-arg]
    assert presets.apply(plain, "standard").model_dump() == plain.model_dump()


@pytest.mark.parametrize("name", ["quick", "deep"])
def test_quick_and_deep_change_exactly_the_documented_settings(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEEP_RESEARCH_CHECK_FETCH")  # no setting given at all
    plain = Settings(_env_file=None)  # type: ignore[call-arg]
    applied = presets.apply(plain, name)  # validated: every value within the settings' bounds
    changed = {k for k in KNOBS if PRESETS[name][k] != PRESETS["standard"][k]}
    assert changed == DOCUMENTED[name]
    assert knobs(applied) == PRESETS[name]
    rest = set(KNOBS) | {"preset"}
    assert applied.model_dump(exclude=rest) == plain.model_dump(exclude=rest)
    assert applied.model_fields_set == set(), "a preset's values are no one's explicit choice"


def test_quick_goes_less_far_and_deep_further() -> None:
    quick, standard, deep = (PRESETS[n] for n in ("quick", "standard", "deep"))
    for knob in KNOBS:
        if knob == "web_effort":
            order = [EFFORTS.index(str(p[knob])) for p in (quick, standard, deep)]
        else:
            order = [int(str(p[knob])) for p in (quick, standard, deep)]
        assert order[0] <= order[1] <= order[2], knob
    assert quick["max_iterations"] in (1, 2)


# --- explicit settings win -------------------------------------------------------------------


def test_the_environment_and_dotenv_win_over_the_preset(
    clean: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean / "kb").mkdir()  # the sample docs a run with no model answers from
    (clean / "kb" / "note.md").write_text("# Note\n\nA note.\n", encoding="utf-8")
    monkeypatch.setenv("DEEP_RESEARCH_PRESET", "deep")
    monkeypatch.setenv("DEEP_RESEARCH_MAX_NODES_PER_PLAN", "5")
    monkeypatch.setenv("DEEP_RESEARCH_MAX_PARALLEL", "4")  # standard's, but given
    (clean / ".env").write_text("DEEP_RESEARCH_WEB_MAX_TOOL_CALLS=20\n")
    prepared = preparation.prepare(load_settings(), QUESTION, RunOptions(kb_only=True))
    assert knobs(prepared.settings) == {
        "max_iterations": 5,
        "max_nodes_per_plan": 5,
        "max_parallel": 4,
        "web_effort": "xhigh",
        "web_max_tool_calls": 20,
        "summary_max_tokens": 4000,
        "report_max_sections": 12,
        "report_section_words": 1200,
    }
    assert prepared.limits.max_iterations == 5
    # An option's preset wins over the environment's; its explicit values over both.
    options = RunOptions(preset="quick", max_iterations=2, web_effort="medium", kb_only=True)
    prepared = preparation.prepare(load_settings(), QUESTION, options)
    assert prepared.settings.preset == "quick"
    assert knobs(prepared.settings) == {
        "max_iterations": 2,
        "max_nodes_per_plan": 5,
        "max_parallel": 4,
        "web_effort": "medium",
        "web_max_tool_calls": 20,
        "summary_max_tokens": 2000,
        "report_max_sections": 4,
        "report_section_words": 500,
    }
    assert prepared.limits.max_iterations == 2


def test_the_estimate_is_the_presets_and_a_flag_wins(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    standard = run_json(env, QUESTION, "--estimate")
    quick = run_json(env, QUESTION, "--estimate", "--preset", "quick")
    deep = run_json({**env, "DEEP_RESEARCH_PRESET": "deep"}, QUESTION, "--estimate")
    shown = {
        name: (data["iterations"], data["max_nodes"], data["parallel"], data["web_model"])
        for name, data in (("quick", quick), ("standard", standard), ("deep", deep))
    }
    assert shown == {
        "quick": (1, 4, 4, "gpt-5.5 (effort low)"),
        "standard": (3, 24, 4, "gpt-5.5 (effort high)"),
        "deep": (5, 60, 6, "gpt-5.5 (effort xhigh)"),
    }
    assert quick["per_job_usd"] < standard["per_job_usd"] < deep["per_job_usd"], "tool calls"
    assert quick["run_worst_usd"] < standard["run_worst_usd"] <= deep["run_worst_usd"]
    flags = ("--max-iterations", "2", "--max-parallel", "3", "--web-effort", "medium")
    mixed = run_json({**env, "DEEP_RESEARCH_PRESET": "deep"}, QUESTION, "--estimate", *flags)
    assert (mixed["iterations"], mixed["max_nodes"], mixed["parallel"]) == (2, 24, 3)
    assert mixed["web_model"] == "gpt-5.5 (effort medium)"
    assert mixed["per_job_usd"] == deep["per_job_usd"], "deep's tool calls, not given"
    assert fake_openai.requests == [], "an estimate asks nobody"


# --- an unknown preset -------------------------------------------------------------------------


def test_an_unknown_preset_is_a_usage_error_naming_the_three(env: dict[str, str]) -> None:
    code, out, err = cli(env, QUESTION, "--preset", "fast")
    assert code == 2
    assert err.strip().splitlines() == [
        "error: --preset must be 'quick', 'standard' or 'deep' (got 'fast')"
    ]
    assert out == ""
    code, _, err = cli({**env, "DEEP_RESEARCH_PRESET": "fast"}, QUESTION, "--estimate")
    assert code == 3, "a bad setting, as any other"
    assert len(err.strip().splitlines()) == 1
    assert "DEEP_RESEARCH_PRESET" in err
    assert all(name in err for name in ("quick", "standard", "deep"))
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists()


async def test_the_mcp_tool_refuses_an_unknown_preset_and_takes_a_known_one(
    offline: Settings,
) -> None:
    store = SessionStore(offline.sessions_dir)
    async with Client(create_server(offline)) as client:
        refused = await client.call_tool("research_start", {"question": QUESTION, "preset": "x"})
        assert refused.is_error
        text = " ".join(getattr(b, "text", "") for b in refused.content)
        assert "preset" in text
        assert all(name in text for name in ("quick", "standard", "deep"))
        assert not offline.sessions_dir.exists() or not list(offline.sessions_dir.iterdir())
        given = {"question": QUESTION, "preset": "deep", "max_parallel": 2, "kb_only": True}
        started = await client.call_tool("research_start", given)
        assert not started.is_error, started.content
        assert started.structured_content is not None
        session_id = started.structured_content["session_id"]
        await client.call_tool("research_follow", {"session_id": session_id})
        status = await client.call_tool("research_status", {"session_id": session_id})
        assert not status.is_error, status.content
    state = store.load(session_id)
    assert (state.run_spec.preset, state.run_spec.max_parallel) == ("deep", 2)
    assert state.limits.max_iterations == 5


# --- resume and saved sessions ---------------------------------------------------------------


async def started_session(settings: Settings, options: RunOptions) -> str:
    prepared = preparation.prepare(settings, QUESTION, options)
    with lifecycle.start(prepared, lambda _line: None) as run:
        await lifecycle.execute(run, lambda _event: None)
    return run.state.session_id


def reopened(settings: Settings, session_id: str) -> Settings:
    """The settings ``resume`` runs the session with (nothing is researched)."""
    with lifecycle.reopen(
        settings,
        session_id,
        BudgetOverrides(),
        max_parallel=None,
        retry_cancelled=False,
        on_info=lambda _line: None,
    ) as run:
        assert run.state.run_spec.preset == run.prepared.settings.preset
        return run.prepared.settings


async def test_resume_replays_the_saved_preset_not_the_environments(
    offline: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await started_session(offline, RunOptions(preset="deep", kb_only=True))
    store = SessionStore(offline.sessions_dir)
    assert store.load(session_id).run_spec.preset == "deep"
    monkeypatch.setenv("DEEP_RESEARCH_PRESET", "quick")
    today = Settings(home=offline.home, kb_path=offline.kb_path, _env_file=None)  # type: ignore[call-arg]
    assert today.preset == "quick"
    resumed = reopened(today, session_id)
    assert resumed.preset == "deep"
    assert knobs(resumed) == PRESETS["deep"]
    # A setting given today wins over the saved preset, as it did when the run started.
    monkeypatch.setenv("DEEP_RESEARCH_MAX_NODES_PER_PLAN", "3")
    today = Settings(home=offline.home, kb_path=offline.kb_path, _env_file=None)  # type: ignore[call-arg]
    resumed = reopened(today, session_id)
    assert knobs(resumed) == {**PRESETS["deep"], "max_nodes_per_plan": 3}


def test_the_cli_resumes_with_the_saved_preset_and_shows_it(offline: Settings) -> None:
    session_id = asyncio.run(started_session(offline, RunOptions(preset="quick", kb_only=True)))
    env = {
        "DEEP_RESEARCH_HOME": str(offline.home),
        "DEEP_RESEARCH_KB_PATH": str(offline.kb_path),
        "DEEP_RESEARCH_PRESET": "deep",
    }
    data = run_json(env, "resume", session_id)
    assert data["session_id"] == session_id
    assert session_state(env, session_id)["run_spec"]["preset"] == "quick"
    shown = run_json(env, "sessions", "show", session_id)
    assert shown["run_spec"]["preset"] == "quick"
    code, out, err = cli(env, "sessions", "show", session_id)
    assert code == 0, err
    assert "preset:   quick" in out
