"""End to end: the real CLI against the loopback fake OpenAI server.

In-process runs use typer's CliRunner; the kill -9 and Ctrl-C tests run the CLI as a child
process. Every run gets its own DEEP_RESEARCH_HOME and working directory (no `.env`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI, Fault, ResearchReport
from tests.world import ResearchWorld, plan_task, verdict

REPO = Path(__file__).resolve().parents[1]


QUESTION = "How do vector databases handle deletes and compaction?"


def test_full_run_writes_a_cited_report(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    world = ResearchWorld(
        plans=[[plan_task("t1"), plan_task("t2"), plan_task("t3", "t1", "t2")]],
        verdicts=[verdict(True)],
    )
    world.install(fake_openai)
    data = run_json(env, QUESTION)

    assert data["status"] == "complete"
    assert data["stop_reason"] == "complete"
    assert set(data) >= {"session_id", "status", "stop_reason", "report_path", "usage"}
    assert data["usage"]["cost_usd"] > 0
    assert data["usage"]["web_search_calls"] == 6
    report = Path(data["report_path"]).read_text()
    assert "## Sources" in report
    assert "https://source1.example/page" in report
    assert "[1]" in report
    assert "Spend: $" in report
    # the dependent branch's Deep Research input carried its dependencies' findings
    inputs = [r.body["input"] for r in fake_openai.requests if r.path == "/v1/responses"]
    assert any("earlier research" in json.dumps(i) for i in inputs)
    # secrets never reach the session directory
    session_dir = Path(data["report_path"]).parent
    for file in session_dir.iterdir():
        assert "sk-test-secret-value" not in file.read_text(errors="replace")
    assert world.calls["deep_research"] == 3


def test_repeated_question_is_served_from_the_cache(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")], [plan_task("t1")]]).install(fake_openai)
    first = run_json(env, QUESTION)
    second = run_json(env, QUESTION)
    assert len(fake_openai.research_inputs) == 1
    assert sum(fake_openai.research_inputs.values()) == 1, "the second run made no DR call"
    assert second["usage"]["web_search_calls"] == 0
    assert second["usage"]["cost_usd"] < first["usage"]["cost_usd"]


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--max-cost", "1.0"], "cost_limit"),
        (["--max-tokens", "1500"], "token_limit"),
        (["--max-iterations", "1"], "max_iterations"),
    ],
)
def test_each_budget_stops_the_run_with_a_report(
    env: dict[str, str], fake_openai: FakeOpenAI, flags: list[str], reason: str
) -> None:
    ResearchWorld(
        plans=[[plan_task("t1"), plan_task("t2", "t1")]], verdicts=[verdict(False, "more")]
    ).install(fake_openai)
    data = run_json(env, QUESTION, *flags)
    assert data["stop_reason"] == reason
    assert data["status"] == "stopped"
    report = Path(data["report_path"]).read_text()
    assert "## Coverage and limitations" in report


def test_time_limit_cancels_the_deep_research_job(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    data = run_json(env, QUESTION, "--max-runtime", "1")
    assert data["stop_reason"] == "time_limit"
    [job] = fake_openai.response_ids
    assert fake_openai.cancels[job] == 1
    assert "time limit" in Path(data["report_path"]).read_text()


def test_failing_branch_is_reported_and_blocks_its_dependents(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(plans=[[plan_task("good"), plan_task("bad"), plan_task("after", "bad")]])
    world.install(fake_openai)
    ok = world.research

    def research(req: Any) -> ResearchReport:
        if "aspect bad" in req.input_text:
            return ResearchReport(text="nothing", status="failed")
        return ok(req)

    fake_openai.research_handler = research
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    nodes = session_state(env, data["session_id"])["nodes"]
    assert nodes["bad"]["status"] == "failed"
    assert nodes["after"]["status"] == "blocked"
    assert nodes["good"]["status"] == "done"
    report = Path(data["report_path"]).read_text()
    assert "**Failed:**" in report
    assert "**Blocked:**" in report


def test_malformed_plan_is_repaired_not_fatal(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    ResearchWorld(
        plans=[[plan_task("a", "c"), plan_task("b", "a"), plan_task("c", "b", "ghost")]]
    ).install(fake_openai)
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    state = session_state(env, data["session_id"])
    reasons = [i["reason"] for i in state["iterations"][0]["plan_issues"]]
    assert any("cycle" in r for r in reasons)
    assert any("unknown dependency 'ghost'" in r for r in reasons)
    assert all(n["status"] == "done" for n in state["nodes"].values())


def test_garbage_plans_fail_cleanly_with_exit_6(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    fake_openai.script("Plan", ["this is not json"] * 3)
    code, _out, err = cli(env, QUESTION)
    assert code == 6
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: "), err
    assert "no valid Plan" in last


def test_sessions_list_and_show(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    run = run_json(env, QUESTION)
    code, out, _ = cli(env, "sessions", "list", "--json")
    rows = json.loads(out)
    assert code == 0
    assert [r["session_id"] for r in rows] == [run["session_id"]]
    assert {"session_id", "question", "status", "created_at"} <= set(rows[0])
    code, out, _ = cli(env, "sessions", "show", run["session_id"][:6], "--json")
    shown = json.loads(out)
    assert shown["session_id"] == run["session_id"]
    assert shown["nodes"][0]["status"] == "done"
    code, out, _ = cli(env, "sessions", "show", run["session_id"])
    assert "research tree" in out


@pytest.mark.parametrize("bad_id", ["../etc", "nope", "ffffffff"])
def test_unknown_or_malformed_session_ids_exit_4(env: dict[str, str], bad_id: str) -> None:
    for command in (["resume", bad_id], ["sessions", "show", bad_id]):
        code, out, err = cli(env, *command)
        assert code == 4, err
        assert out == ""
        assert err.startswith("error:")


def test_bad_input_gets_one_line_errors_and_distinct_codes(env: dict[str, str]) -> None:
    code, _, err = cli(env, "   ")
    assert (code, "empty" in err) == (2, True)
    code, _, err = cli(env, "x" * 5000)
    assert (code, "limit is 4,000" in err) == (2, True)
    code, _, err = cli(env, QUESTION, "--max-parallel", "0")
    assert code == 3
    assert "max_parallel_branches" in err
    code, _, err = cli({**env, "DEEP_RESEARCH_TEMPERATURE": "hot"}, QUESTION)
    assert code == 3
    assert "temperature" in err
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists() or not any(
        (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    ), "bad input creates no session"


# --- child processes: kill -9 and Ctrl-C -------------------------------------------------


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "deep_research.cli", *args],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def only_session(env: dict[str, str]) -> str:
    [session] = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    return session.name


def test_kill_9_then_resume_reattaches_and_never_resubmits(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(plans=[[plan_task("t1"), plan_task("t2"), plan_task("t3", "t1")]])
    world.install(fake_openai)
    fake_openai.hold_responses = True
    child = spawn(env, QUESTION, "--json")
    try:
        # Once two jobs are being polled, their ids are on disk (saved before any poll).
        fake_openai.wait_for(lambda: sum(1 for n in fake_openai.retrieves.values() if n) >= 2, 60)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    session_id = only_session(env)
    saved = session_state(env, session_id)
    assert saved["status"] == "running"
    _, listed, _ = cli(env, "sessions", "list", "--json")
    assert json.loads(listed)[0]["status"] == "interrupted", "a dead run is not 'running'"
    in_flight = {n["id"]: n["remote_jobs"] for n in saved["nodes"].values() if n["remote_jobs"]}
    assert len(in_flight) == 2

    fake_openai.hold_responses = False
    for response_id in fake_openai.response_ids:
        fake_openai.complete(response_id)
    data = run_json(env, "resume", session_id[:8])
    assert data["status"] == "complete"
    assert all(count == 1 for count in fake_openai.research_inputs.values()), (
        "no deep-research input was submitted twice"
    )
    assert sum(fake_openai.research_inputs.values()) == 3
    state = session_state(env, session_id)
    assert all(n["status"] == "done" for n in state["nodes"].values())


def interrupt_a_held_run(env: dict[str, str], fake_openai: FakeOpenAI) -> tuple[int, str]:
    """Start a one-node run whose Deep Research job never finishes, Ctrl-C it once it polls."""
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    child = spawn(env, QUESTION)
    fake_openai.wait_for(lambda: sum(fake_openai.retrieves.values()) >= 1, 60)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    return child.returncode, err


def test_ctrl_c_saves_and_prints_the_resume_command(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, err = interrupt_a_held_run(env, fake_openai)
    assert code == 130, err
    session_id = only_session(env)
    assert f"deep-research resume {session_id}" in err
    state = session_state(env, session_id)
    assert state["status"] == "interrupted"
    assert state["nodes"]["t1"]["status"] == "pending"
    [job] = fake_openai.response_ids
    assert fake_openai.cancels[job] == 1, "Ctrl-C cancels the remote job"


def test_rate_limits_and_flaky_servers_are_retried(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.inject(
        Fault("rate_limit", path_prefix="/v1/chat/completions"),
        Fault("server_error", path_prefix="/v1/responses"),
    )
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    assert fake_openai.faults_pending() == 0
    assert sum(fake_openai.research_inputs.values()) == 1, "a failed create is not double-billed"


def test_a_provider_that_keeps_failing_exits_6_with_one_line(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    fake_openai.inject(Fault("server_error", path_prefix="/v1/chat/completions", times=50))
    code, out, err = cli(env, QUESTION)
    assert code == 6
    assert out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: gpt-4.1: the provider failed (HTTP 5xx)")
    [session] = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    assert json.loads((session / "state.json").read_text())["status"] == "failed"


def test_resume_after_ctrl_c_resubmits_the_cancelled_job_and_completes(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _ = interrupt_a_held_run(env, fake_openai)
    assert code == 130
    fake_openai.hold_responses = False
    data = run_json(env, "resume", only_session(env))
    assert data["status"] == "complete"
    assert len(fake_openai.response_ids) == 2, "the cancelled job was submitted anew"


def test_chat_model_flag_sets_every_chat_role(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    run_json(env, QUESTION, "--chat-model", "llama3.1", "--branch-model", "qwen3")
    chat_models = {r.body["model"] for r in fake_openai.requests if "messages" in (r.body or {})}
    assert chat_models == {"llama3.1"}, "no KB branch ran, so qwen3 is never asked"
    research_models = {r.body["model"] for r in fake_openai.requests if r.path == "/v1/responses"}
    assert research_models == {"o4-mini-deep-research"}


def test_a_malformed_reply_is_retried_like_a_bad_structured_output(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.inject(Fault("malformed", path_prefix="/v1/chat/completions"))
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    assert fake_openai.faults_pending() == 0
