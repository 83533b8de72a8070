"""Budgets that do something: a limit that admits no research is refused before anything is
spent (naming what would fit, with the figures ``--estimate`` shows), a small limit writes a
smaller report (for tokens as for money), a run that found nothing does not exit 0, and the
question before a run compares its likely spend, not its worst case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from deep_research.app import preflight, presets, reserves
from deep_research.app.config import Settings
from deep_research.app.sources import job_spec
from deep_research.core.errors import EXIT_NO_FINDINGS, BudgetTooSmall
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI, ResearchReport
from tests.world import ResearchWorld, plan_task, verdict

QUESTION = "How do vector databases handle deletes and compaction?"


def nothing_was_spent(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    assert fake_openai.count("/v1/chat/completions") == 0
    assert fake_openai.count("/v1/responses") == 0
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists()


# --- refused before anything is spent ----------------------------------------------------


def test_a_cost_limit_that_admits_no_job_is_refused_naming_what_fits(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _out, err = cli(env, QUESTION, "--max-cost", "3")
    assert code == BudgetTooSmall.exit_code == 11
    [line] = err.strip().splitlines()
    assert "the budget of $3.00 admits no web research job" in line
    assert "up to $4.00" in line
    assert "--web-engine search" in line
    assert "--kb-only" not in line, "there is no knowledge base to research alone"
    assert "--web-effort low" not in line, "a lower effort does not lower the worst case"
    nothing_was_spent(env, fake_openai)

    least = line.rsplit("--max-cost ", 1)[1]
    admitted = run_json(env, QUESTION, "--max-cost", least, "--estimate")
    assert (admitted["jobs_admitted"], admitted["refused"]) == (1, None), "the named N fits"
    below = f"{float(least) - 0.01:.2f}"
    code, _, _ = cli(env, QUESTION, "--max-cost", below, "--estimate")
    assert code == 11, "and it is the least that does"


def test_with_a_knowledge_base_the_refusal_names_researching_it_alone(
    kb_env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _, err = cli(kb_env, QUESTION, "--max-cost", "3")
    assert code == 11
    assert "--kb-only" in err
    ResearchWorld(plans=[[plan_task("k1", source="kb")]]).install(fake_openai)
    code, _, err = cli(kb_env, QUESTION, "--max-cost", "3", "--kb-only")
    assert code == 0, err


def test_the_estimate_and_the_refusal_give_the_same_figures(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    _, _, refused = cli(env, QUESTION, "--max-cost", "3")
    code, out, err = cli(env, QUESTION, "--max-cost", "3", "--estimate")
    assert code == 11, "the estimate exits as the run would"
    assert "the budget of $3.00 admits 0 of them" in " ".join(out.split())
    assert err == refused
    code, out, _ = cli(env, QUESTION, "--max-cost", "3", "--estimate", "--json")
    assert code == 11
    [line] = out.strip().splitlines()
    data = json.loads(line)
    assert data["jobs_admitted"] == 0
    assert data["refused"] in refused
    assert data["final_reserve_usd"] == round(data["final_reserve_usd"], 4)
    nothing_was_spent(env, fake_openai)


def test_a_token_limit_that_admits_no_job_is_refused_too(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _, err = cli(env, QUESTION, "--max-tokens", "60000")
    assert code == 11
    [line] = err.strip().splitlines()
    assert "the token limit of 60,000 admits no web research job" in line
    assert "up to 1,222,000 tokens" in line
    assert "--web-engine search" in line
    assert "--kb-only" not in line
    least = line.rsplit("--max-tokens ", 1)[1]
    assert run_json(env, QUESTION, "--max-tokens", least, "--estimate")["jobs_admitted"] == 1
    nothing_was_spent(env, fake_openai)


def test_a_token_limit_below_the_floor_names_the_floor(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    settings = presets.apply(Settings(openai_api_key="sk-x"))
    floor = reserves.least_token_limit(settings)
    assert floor == 42_100, "one section's writing and one chat call, at the defaults"
    code, _, err = cli(env, QUESTION, "--kb-only", "--max-tokens", str(floor - 1000))
    assert code == 11
    assert f"--max-tokens {floor} is the least that researches" in err
    # (search and read: its branches reserve no job's tokens, as a KB-only run's do not)
    data = run_json(
        env, QUESTION, "--web-engine", "search", "--max-tokens", str(floor), "--estimate"
    )
    assert data["refused"] is None
    nothing_was_spent(env, fake_openai)


# --- a small budget writes a smaller report ---------------------------------------------


def default_settings(**values: Any) -> Settings:
    return presets.apply(Settings(_env_file=None, openai_api_key="sk-x", **values))  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("limit", "sections", "words"),
    [
        ({"max_total_tokens": 60_000}, 1, 250),
        ({"max_total_tokens": 200_000}, 4, 450),
        ({"max_cost_usd": 1.0}, 3, 337),
        ({"max_cost_usd": 0.2}, 1, 250),
        ({"max_total_tokens": 5_000_000, "max_cost_usd": 20.0}, 8, 900),
    ],
)
def test_a_small_limit_writes_fewer_shorter_sections(
    limit: dict[str, Any], sections: int, words: int
) -> None:
    settings = default_settings(**limit)
    prices = reserves.price_book(settings)
    written = reserves.writing_limits(settings, prices)
    assert (written.max_sections, written.section_words) == (sections, words)
    kept = reserves.final_reserve_tokens(settings)
    assert kept == written.reserve_tokens(settings.section_max_tokens), "all the writer uses"
    if sections > 1:
        assert kept <= reserves.REPORT_SHARE * settings.max_total_tokens


def test_a_small_token_limit_researches_and_writes_one_short_section(
    kb_env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(
        plans=[[plan_task("k1", source="internal"), plan_task("k2", source="internal")]],
        verdicts=[verdict(True)],
    ).install(fake_openai)
    data = run_json(
        kb_env, "When does a research node start?", "--kb-only", "--max-tokens", "60000"
    )
    assert data["exit_code"] == 0
    state = session_state(kb_env, data["session_id"])
    assert {n["status"] for n in state["nodes"].values()} == {"done"}
    assert len(state["writing"]["sections"]) == 1, "one section, where 87,300 tokens were asked"
    bodies = [json.dumps(r.body) for r in fake_openai.requests if r.path == "/v1/chat/completions"]
    assert any("at most 250 words" in b for b in bodies), "and a shorter one"


# --- a run that found nothing ------------------------------------------------------------


def test_a_run_with_no_findings_does_not_exit_0(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(plans=[[plan_task("t1")]])
    world.install(fake_openai)

    def failed(req: Any) -> ResearchReport:
        return ResearchReport(text="nothing", status="failed")

    fake_openai.research_handler = failed
    code, out, _ = cli(env, QUESTION, "--json")
    assert code == EXIT_NO_FINDINGS == 12
    [line] = out.strip().splitlines()
    data = json.loads(line)
    assert data["exit_code"] == 12
    assert session_state(env, data["session_id"])["nodes"]["t1"]["status"] == "failed"
    code, out, _ = cli(env, QUESTION)
    assert code == 12
    assert "No findings were produced" in out


def test_a_run_that_found_something_exits_0_and_says_so(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]], verdicts=[verdict(True)]).install(fake_openai)
    assert run_json(env, QUESTION)["exit_code"] == 0


# --- the question before a run ------------------------------------------------------------


def test_the_likely_spend_is_a_guess_below_the_worst_case() -> None:
    settings = default_settings()
    prices = reserves.price_book(settings)
    worst = preflight.estimate(settings, job_spec(settings), prices, 0.6, engine="openai")
    assert worst.planned_nodes == settings.max_nodes_per_plan == 8
    assert 0 < worst.likely_usd < worst.run_worst_usd
    one_node = preflight.estimate(
        settings.with_overrides(max_nodes_per_plan=1),
        job_spec(settings),
        prices,
        0.6,
        engine="openai",
    )
    assert one_node.likely_usd < worst.likely_usd / 4, "it follows the plan's size"
    searching = preflight.estimate(settings, None, prices, 0.6, engine="search")
    assert searching.likely_usd < settings.confirm_above_usd < searching.run_worst_usd


def ask(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from deep_research.frontends import render
    from deep_research.frontends.cli import app

    monkeypatch.setattr(render, "interactive", lambda: True)
    result = CliRunner().invoke(app, [QUESTION, *args], env=env, input="n\n")
    return result.exit_code, result.stdout + result.stderr


def test_the_question_compares_the_likely_spend_and_shows_both(
    env: dict[str, str], fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, said = ask({**env, "DEEP_RESEARCH_CONFIRM_ABOVE_USD": "12"}, monkeypatch)
    assert code == 10
    assert (
        "This run will likely spend about $13.07 (a guess for up to 8 sub-questions; at most "
        "$20.00), above your $12.00 confirmation limit, DEEP_RESEARCH_CONFIRM_ABOVE_USD. Go on?"
    ) in said
    nothing_was_spent(env, fake_openai)


def test_no_question_when_only_the_worst_case_is_above_the_limit(
    env: dict[str, str], fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]], verdicts=[verdict(True)]).install(fake_openai)
    code, said = ask({**env, "DEEP_RESEARCH_CONFIRM_ABOVE_USD": "15"}, monkeypatch)
    assert code == 0, said
    assert "Go on?" not in said


def test_no_question_when_the_cost_limit_is_given(
    env: dict[str, str], fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]], verdicts=[verdict(True)]).install(fake_openai)
    code, said = ask(
        {**env, "DEEP_RESEARCH_CONFIRM_ABOVE_USD": "1"}, monkeypatch, "--max-cost", "20"
    )
    assert code == 0, said
    assert "Go on?" not in said
