"""End to end: the real CLI against the loopback fake OpenAI server.

In-process runs use typer's CliRunner; the kill -9 and Ctrl-C tests run the CLI as a child
process. Every run gets its own DEEP_RESEARCH_HOME and working directory (no `.env`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from deep_research.persistence.sessions import SessionStore
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
    ("flags", "reason", "t2", "said"),
    [
        # A $4.00 worst case per job: t1 fits in $4.90, t2 no longer does once t1 spent ~$0.8.
        (["--max-cost", "4.9"], "cost_limit", "pending", "the cost limit was reached"),
        # 87,300 kept for the report; a web job reserves its worst case, 1,222,000 tokens:
        # t1's fits, and after its ~300,000 are spent t2's no longer does.
        (["--max-tokens", "1400000"], "token_limit", "pending", "the token budget was used up"),
        (["--max-iterations", "1"], "max_iterations", "done", "the iteration limit was reached"),
    ],
)
def test_each_budget_stops_the_run_with_a_report(
    env: dict[str, str], fake_openai: FakeOpenAI, flags: list[str], reason: str, t2: str, said: str
) -> None:
    world = ResearchWorld(
        plans=[[plan_task("t1"), plan_task("t2", "t1")]], verdicts=[verdict(False, "more")]
    )
    world.install(fake_openai)

    def heavy(req: Any) -> ResearchReport:  # a long job: ~$0.78 at gpt-5.5's long-context tier
        return replace(world.research(req), input_tokens=300_000, cached_tokens=250_000)

    fake_openai.research_handler = heavy
    data = run_json(env, QUESTION, *flags)
    assert data["stop_reason"] == reason
    assert data["status"] == "stopped"
    state = session_state(env, data["session_id"])
    nodes = state["nodes"]
    # Real work happened before the stop, and was paid for on the ledger.
    assert nodes["t1"]["status"] == "done", "it researched before stopping"
    t1_spend = [e for e in state["ledger"] if e["node_id"] == "t1"]
    [job] = [e for e in t1_spend if e["role"] == "deep_research"]
    assert job["usage"]["input_tokens"] == 300_000
    assert job["cost_usd"] > 0.5
    assert nodes["t1"]["cost_usd"] == pytest.approx(sum(e["cost_usd"] for e in t1_spend))
    # Each budget stops at its own point: cost and tokens before t2 is even submitted.
    assert nodes["t2"]["status"] == t2
    assert world.calls["deep_research"] == (2 if t2 == "done" else 1)
    spent = sum(e["cost_usd"] for e in state["ledger"])
    assert spent == pytest.approx(data["usage"]["cost_usd"])
    if reason == "cost_limit":
        assert spent <= 4.9
    report = Path(data["report_path"]).read_text()
    assert said in report
    assert "## Coverage and limitations" in report


def test_time_limit_cancels_the_deep_research_job(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    code, out, err = cli(env, QUESTION, "--max-runtime", "1", "--json")
    assert code == 12, err  # stopped before any finding: not 0
    data = json.loads(out)
    assert data["stop_reason"] == "time_limit"
    [job] = fake_openai.response_ids
    assert fake_openai.cancels[job] == 1
    node = session_state(env, data["session_id"])["nodes"]["t1"]
    assert node["remote_jobs"] == {}, "forgotten once the provider confirmed the cancel"
    assert node["status"] == "pending"
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


def test_garbage_plans_fall_back_to_researching_the_question(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[]).install(fake_openai)
    answers = fake_openai.chat_handler
    assert answers is not None
    fake_openai.chat_handler = lambda req: (
        "this is not json" if req.schema_name == "Plan" else answers(req)
    )
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    state = session_state(env, data["session_id"])
    (node,) = state["nodes"].values()
    assert node["question"] == QUESTION
    plans = [r for r in fake_openai.requests if "Allowed here:" in str(r.body)]
    assert len(plans) == 3, "the plan, then two repairs that send the bad reply's problem back"
    assert len({str(r.body) for r in plans}) >= 2, "a repair is not the same request again"


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
    assert shown["nodes"][0]["researched_by"] == "gpt-5.5 (effort high)"
    assert shown["run_spec"]["web_model"] == "gpt-5.5"
    code, out, _ = cli(env, "sessions", "show", run["session_id"])
    assert "research tree" in out
    assert "gpt-5.5 (effort high)" in out


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
    assert code == 2, "a bad flag is a usage error, naming the flag"
    assert err.startswith("error: --max-parallel must be")
    code, _, err = cli({**env, "DEEP_RESEARCH_TEMPERATURE": "hot"}, QUESTION)
    assert code == 3, "a bad setting is a configuration error, naming its variable"
    assert err.startswith("error: invalid DEEP_RESEARCH_TEMPERATURE:")
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists() or not any(
        (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    ), "bad input creates no session"


# --- child processes: kill -9 and Ctrl-C -------------------------------------------------


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "deep_research.frontends.cli", *args],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def only_session(env: dict[str, str]) -> str:
    [session] = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    return session.name


def kill_9_once_two_jobs_poll(
    env: dict[str, str], fake_openai: FakeOpenAI, world: ResearchWorld
) -> str:
    """Run ``world`` in a child whose jobs never finish; kill -9 it once two jobs are being
    polled (their ids are on disk: saved before any poll). The session's id."""
    world.install(fake_openai)
    fake_openai.hold_responses = True
    child = spawn(env, QUESTION, "--json")
    try:
        fake_openai.wait_for(lambda: sum(1 for n in fake_openai.retrieves.values() if n) >= 2, 60)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return only_session(env)


def test_kill_9_then_resume_reattaches_and_never_resubmits(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(plans=[[plan_task("t1"), plan_task("t2"), plan_task("t3", "t1")]])
    session_id = kill_9_once_two_jobs_poll(env, fake_openai, world)
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


def test_a_create_whose_id_never_reached_disk_is_not_submitted_again_unless_asked(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    """A process killed between the provider's create reply and the id's save leaves an
    intent and no id (``bench/create_window.py`` lands real kills there; here the session
    is put in that state by hand): resume fails the node, never pays again; only
    ``--resubmit-lost`` does, and says what it may cost."""
    world = ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]])
    session_id = kill_9_once_two_jobs_poll(env, fake_openai, world)
    store = SessionStore(Path(env["DEEP_RESEARCH_HOME"]) / "sessions")
    saved = store.load(session_id)
    lost = saved.nodes["t1"]
    lost_job = lost.remote_jobs.pop("deep_research")
    lost.job_intents = {"deep_research": datetime(2026, 11, 26, 12, tzinfo=UTC)}
    store.save(saved)
    fake_openai.hold_responses = False
    for response_id in fake_openai.response_ids:
        fake_openai.complete(response_id)

    data = run_json(env, "resume", session_id)
    state = session_state(env, session_id)
    assert fake_openai.count("/v1/responses", "POST") == 2, "nothing was submitted again"
    assert state["nodes"]["t1"]["status"] == "failed"
    assert "may be running at the provider without its id" in state["nodes"]["t1"]["error"]
    assert f"resume {session_id} --resubmit-lost" in state["nodes"]["t1"]["error"]
    assert state["nodes"]["t2"]["status"] == "done"
    assert data["status"] == "complete"

    code, _, err = cli(env, "resume", session_id, "--resubmit-lost")
    assert code == 0, err
    assert fake_openai.count("/v1/responses", "POST") == 3, "asked: submitted once more"
    assert "submitting 1 research job(s) again" in err
    assert "(t1): up to $" in err
    state = session_state(env, session_id)
    assert state["nodes"]["t1"]["status"] == "done"
    assert state["nodes"]["t1"]["job_intents"] == {}
    assert lost_job in fake_openai.response_ids  # the first, lost job: still the provider's


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
    assert fake_openai.cancels[job] == 0, "Ctrl-C pauses: the paid job keeps running"
    assert state["nodes"]["t1"]["remote_jobs"] == {"deep_research": job}
    assert f"deep-research sessions cancel {session_id}" in err


def test_rate_limits_and_flaky_servers_are_retried(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.inject(
        Fault("rate_limit", path_prefix="/v1/chat/completions"),
        Fault("rate_limit", path_prefix="/v1/responses"),  # a refused create: safe to resend
        Fault("server_error", path_prefix="/v1/responses/", times=4),  # polls
    )
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    assert fake_openai.faults_pending() == 0
    assert sum(fake_openai.research_inputs.values()) == 1, "a failed create is not double-billed"


def test_a_lost_create_reply_fails_only_that_node_and_is_never_resent(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    fake_openai.inject(Fault("drop_after", path_prefix="/v1/responses"))
    data = run_json(env, QUESTION, "--max-parallel", "1")
    state = session_state(env, data["session_id"])
    failed = [n for n in state["nodes"].values() if n["status"] == "failed"]
    assert len(failed) == 1
    assert "a job may be running" in failed[0]["error"]
    assert data["session_id"] in failed[0]["error"]
    assert fake_openai.count("/v1/responses", "POST") == 2, "one create per node, none resent"


def test_a_provider_that_keeps_failing_exits_6_with_one_line(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    fake_openai.inject(Fault("server_error", path_prefix="/v1/chat/completions", times=50))
    code, out, err = cli(env, QUESTION)
    assert code == 6
    assert out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: gpt-6-sol: the provider failed (HTTP 5xx)")
    [session] = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    assert json.loads((session / "state.json").read_text())["status"] == "failed"


def test_resume_after_ctrl_c_reattaches_to_the_running_job(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _ = interrupt_a_held_run(env, fake_openai)
    assert code == 130
    fake_openai.hold_responses = False
    [job] = fake_openai.response_ids
    fake_openai.complete(job)
    data = run_json(env, "resume", only_session(env))
    assert data["status"] == "complete"
    assert fake_openai.response_ids == [job], "re-attached, never submitted anew"


def test_chat_model_flag_sets_every_chat_role(env: dict[str, str], fake_openai: FakeOpenAI) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.add_model("llama3.1")
    fake_openai.add_model("qwen3")
    run_json(env, QUESTION, "--chat-model", "llama3.1", "--branch-model", "qwen3")
    chat_models = {r.body["model"] for r in fake_openai.requests if "messages" in (r.body or {})}
    assert chat_models == {"llama3.1"}, "no KB branch ran, so qwen3 is never asked"
    research_models = {r.body["model"] for r in fake_openai.requests if r.path == "/v1/responses"}
    assert research_models == {"gpt-5.5"}
    chat = [r.body for r in fake_openai.requests if "messages" in (r.body or {})]
    assert all(b.get("temperature") == 0.2 and "reasoning_effort" not in b for b in chat)


def test_a_malformed_reply_is_retried_like_a_bad_structured_output(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.inject(Fault("malformed", path_prefix="/v1/chat/completions"))
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    assert fake_openai.faults_pending() == 0


# --- today's models, prices and remote jobs ------------------------------------------------


def test_defaults_are_current_models_with_the_parameters_they_take(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    data = run_json(env, QUESTION)
    assert data["status"] == "complete"
    chat = [r.body for r in fake_openai.requests if r.path == "/v1/chat/completions"]
    assert {b["model"] for b in chat} == {"gpt-6-sol", "gpt-6-luna"}
    assert all("temperature" not in b and b["reasoning_effort"] for b in chat)
    [create] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert create["model"] == "gpt-5.5"
    assert create["tools"] == [{"type": "web_search", "user_location": {"type": "approximate"}}]
    assert create["reasoning"] == {"effort": "high"}
    assert {"background", "store", "max_tool_calls", "max_output_tokens"} <= set(create)
    looked_up = {r.path for r in fake_openai.requests if r.path.startswith("/v1/models/")}
    assert looked_up == {"/v1/models/gpt-6-sol", "/v1/models/gpt-6-luna", "/v1/models/gpt-5.5"}
    report = Path(data["report_path"]).read_text()
    assert "researched by gpt-5.5 (effort high)" in report
    assert data["usage"]["cost_usd"] > 0, "current models are priced"
    state = session_state(env, data["session_id"])
    assert state["run_spec"]["web_model"] == "gpt-5.5"
    assert state["run_spec"]["web_effort"] == "high"


def test_a_shut_down_model_stops_the_run_before_anything_is_spent(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, out, err = cli(env, QUESTION, "--web-model", "o4-mini-deep-research")
    assert code == 3, err
    assert out == ""
    assert "o4-mini-deep-research" in err
    assert "DEEP_RESEARCH_WEB_MODEL" in err
    assert len(err.strip().splitlines()) == 1
    assert fake_openai.count("/v1/responses") == 0
    assert fake_openai.count("/v1/chat") == 0
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists()


def test_estimate_prints_the_worst_case_and_spends_nothing(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    data = run_json(env, QUESTION, "--estimate", "--max-parallel", "3")
    assert data["per_job_usd"] > 0.5
    assert data["parallel_usd"] == pytest.approx(3 * data["per_job_usd"])
    assert data["jobs_admitted"] >= 3
    assert 0 < data["run_worst_usd"] <= data["budget_usd"]
    assert fake_openai.requests == []
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists()
    code, out, _ = cli(env, QUESTION, "--estimate")
    assert code == 0
    assert "web research job (gpt-5.5 (effort high)): up to $" in out


def test_sessions_cancel_after_ctrl_c_records_the_node_and_resume_leaves_it(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, _ = interrupt_a_held_run(env, fake_openai)
    assert code == 130
    session_id = only_session(env)
    [job] = fake_openai.response_ids
    code, out, err = cli(env, "sessions", "cancel", session_id)
    assert code == 0, err
    assert out.split() == ["t1", job, "cancelled"]
    assert fake_openai.response_status(job) == "cancelled"
    node = session_state(env, session_id)["nodes"]["t1"]
    assert (node["status"], node["remote_jobs"]) == ("cancelled", {})
    code, out, _ = cli(env, "sessions", "cancel", session_id)
    assert (code, "no research jobs in flight" in _ + out) == (0, True)

    code, out, err = cli(env, "resume", session_id, "--json")
    assert code == 12, err  # its only node cancelled: nothing was found
    data = json.loads(out)
    assert fake_openai.response_ids == [job], "a cancelled node is not resubmitted"
    assert data["stop_reason"] == "nothing_to_do"
    fake_openai.hold_responses = False
    data = run_json(env, "resume", session_id, "--retry-cancelled")
    assert len(fake_openai.response_ids) == 2
    assert session_state(env, session_id)["nodes"]["t1"]["status"] == "done"


def test_sessions_cancel_while_another_process_runs_the_session(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    fake_openai.hold_responses = True
    child = spawn(env, QUESTION, "--json")
    try:
        fake_openai.wait_for(lambda: sum(1 for n in fake_openai.retrieves.values() if n) >= 2, 60)
        session_id = only_session(env)
        code, out, err = cli(env, "sessions", "cancel", session_id, "--json")
        assert code == 0, err
        result = json.loads(out)
        assert result["recorded"] is False, "the running process records it"
        assert sorted(j["status"] for j in result["jobs"]) == ["cancelled", "cancelled"]
        out, err = child.communicate(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert child.returncode == 12, err  # every node cancelled: nothing was found
    state = session_state(env, session_id)
    assert {n["status"] for n in state["nodes"].values()} == {"cancelled"}
    assert all(n["remote_jobs"] == {} for n in state["nodes"].values())


def test_a_server_without_the_web_model_says_how_to_go_without_it(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_model("llama3.1")
    del fake_openai.models["gpt-5.5"]
    code, _, err = cli(env, QUESTION, "--chat-model", "llama3.1")
    assert code == 3
    assert "model gpt-5.5 is not available on this server" in err
    assert "--kb-only" in err
    assert fake_openai.count("/v1/chat") == 0


@pytest.mark.parametrize(("answer", "code"), [("n\n", 10), ("y\n", 0)])
def test_an_expensive_run_asks_first_on_a_terminal(
    env: dict[str, str],
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    answer: str,
    code: int,
) -> None:
    from typer.testing import CliRunner

    from deep_research.frontends import render
    from deep_research.frontends.cli import app

    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    monkeypatch.setattr(render, "interactive", lambda: True)
    env = {**env, "DEEP_RESEARCH_CONFIRM_ABOVE_USD": "1"}
    result = CliRunner().invoke(app, [QUESTION], env=env, input=answer)
    assert result.exit_code == code, result.stderr
    said = result.stdout + result.stderr
    assert "This run will likely spend about $" in said, "the guess, compared with the limit"
    assert "at most $20.00" in said, "and the worst case beside it"
    if code == 10:
        [said] = [line for line in result.stderr.splitlines() if "nothing was spent" in line]
        assert "--max-cost" in said
        assert "--yes" in said
    creates = fake_openai.count("/v1/responses", "POST")
    assert creates == (0 if code == 10 else 1)
    sessions = Path(env["DEEP_RESEARCH_HOME"]) / "sessions"
    assert sessions.exists() is (code == 0), "declining saves nothing"
    result = CliRunner().invoke(app, [QUESTION, "--yes"], env=env, input="")
    assert result.exit_code == 0


def test_resume_replays_the_run_choices_not_todays_settings(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    fake_openai.add_model("llama3.1")
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    Path("notes").mkdir()  # a KB named for a run must exist
    Path("notes", "intro.md").write_text("# Intro\n\nOur notes.\n", encoding="utf-8")
    assert cli(env, "kb", "ingest", "notes", "--kb", "notes")[0] == 0
    fake_openai.hold_responses = True
    child = spawn(
        env, QUESTION, "--chat-model", "llama3.1", "--kb", "notes", "--web-effort", "xhigh"
    )
    fake_openai.wait_for(lambda: sum(fake_openai.retrieves.values()) >= 1, 60)
    child.send_signal(signal.SIGINT)
    child.communicate(timeout=60)
    assert child.returncode == 130
    session_id = only_session(env)
    spec = session_state(env, session_id)["run_spec"]
    assert spec["models"] == dict.fromkeys(
        ("planner", "synthesizer", "judge", "branch", "summarizer"), "llama3.1"
    )
    assert (spec["kb_name"], spec["web_effort"]) == ("notes", "xhigh")

    fake_openai.hold_responses = False
    for job in fake_openai.response_ids:
        fake_openai.complete(job)
    before = len(fake_openai.requests)
    data = run_json({**env, "DEEP_RESEARCH_WEB_EFFORT": "low"}, "resume", session_id)
    assert data["status"] == "complete"
    after = fake_openai.requests[before:]
    chat = {r.body["model"] for r in after if r.path == "/v1/chat/completions"}
    assert chat == {"llama3.1"}, "today's defaults never replace the run's models"
    assert session_state(env, session_id)["run_spec"]["web_effort"] == "xhigh"


def test_resume_of_a_session_another_process_holds_does_nothing(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    from deep_research.persistence.sessions import SessionStore

    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    data = run_json(env, QUESTION)
    store = SessionStore(Path(env["DEEP_RESEARCH_HOME"]) / "sessions")
    shutil.rmtree(Path(env["DEEP_RESEARCH_HOME"]) / "cache")  # model lookups would be asked
    before = len(fake_openai.requests)
    with store.lock(data["session_id"]):
        code, _out, err = cli(env, "resume", data["session_id"])
    assert code == 5, err
    assert "being run by another process" in err
    assert len(fake_openai.requests) == before, "no model lookup, no engine, nothing spent"


def test_a_binary_dotenv_is_a_one_line_config_error(tmp_path: Path) -> None:
    (tmp_path / ".env").write_bytes(b"\xff\xfe\x00\x01binary")
    done = subprocess.run(
        [sys.executable, "-m", "deep_research", "sessions", "list"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "DEEP_RESEARCH_HOME": str(tmp_path / "h")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        f"error: cannot read {tmp_path / '.env'}: it is not UTF-8 text (byte 0); fix or remove it"
    ]


def test_a_token_limit_below_the_final_reserve_is_a_usage_error(env: dict[str, str]) -> None:
    code, _, err = cli(env, QUESTION, "--max-tokens", "1500")
    assert code == 11
    assert "1,500" in err
    assert "20,100 tokens are kept for writing the report" in err, "one section's worth"
    assert "--max-tokens 42100 is the least that researches" in err
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists()


def test_research_jobs_search_the_kb_through_its_mcp_url_with_the_token(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    token = "kb-token-0123456789-0123456789-0123"  # 32 characters or more
    served = {
        **env,
        "DEEP_RESEARCH_KB_MCP_URL": "https://kb.example.org/mcp",
        "DEEP_RESEARCH_API_TOKEN": token,
    }
    data = run_json(served, QUESTION, "--web-only")
    [create] = [r for r in fake_openai.requests if r.path == "/v1/responses" and r.method == "POST"]
    [kb] = [t for t in create.body["tools"] if t["type"] == "mcp"]
    assert kb == {
        "type": "mcp",
        "server_label": "knowledge_base",
        "server_description": kb["server_description"],
        "server_url": "https://kb.example.org/mcp",
        "allowed_tools": ["search", "fetch"],
        "require_approval": "never",
        "authorization": token,
    }
    assert {"type": "web_search", "user_location": {"type": "approximate"}} in create.body["tools"]
    home = Path(env["DEEP_RESEARCH_HOME"])
    for file in home.rglob("*"):  # sessions, events, cache, logs
        if file.is_file():
            assert token.encode() not in file.read_bytes(), file
    assert data["status"] == "complete"


def test_a_public_kb_url_without_a_token_is_refused(env: dict[str, str]) -> None:
    code, _, err = cli({**env, "DEEP_RESEARCH_KB_MCP_URL": "https://kb.example.org/mcp"}, QUESTION)
    assert code == 3
    assert "DEEP_RESEARCH_API_TOKEN" in err


# --- auto and the web model: an explicit choice is never switched away silently -------------


def test_a_web_model_the_server_does_not_serve_is_an_error_not_a_silent_switch(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    auto = {**env, "DEEP_RESEARCH_WEB_ENGINE": "auto"}  # a gateway: not OpenAI's own API
    code, _, err = cli(auto, QUESTION, "--web-model", "gpt-9-nowhere", "--estimate")
    assert code == 3, err
    [line] = err.strip().splitlines()
    assert "does not serve the web model gpt-9-nowhere" in line
    assert "--web-model" in line
    assert "--web-engine search" in line
    chosen = {**auto, "DEEP_RESEARCH_WEB_MODEL": "gpt-9-nowhere"}
    code, _, err = cli(chosen, QUESTION, "--estimate")
    assert code == 3, err
    assert "DEEP_RESEARCH_WEB_MODEL" in err

    fake_openai.models.pop("gpt-5.5")  # the default web model, which nobody chose
    code, out, err = cli(auto, QUESTION, "--estimate")
    assert code == 0, err
    [note] = [line for line in err.splitlines() if "does not serve gpt-5.5" in line]
    assert "search and read pages instead" in note
    assert "search and read via duckduckgo" in out
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists(), "nothing was saved"


def test_the_report_is_claim_checked_and_check_rechecks_a_saved_session(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    run = run_json(env, QUESTION)
    session_dir = Path(run["report_path"]).parent
    report = Path(run["report_path"]).read_text()
    assert "## Claim check" in report
    assert "## Citation check" not in report
    ledger = json.loads((session_dir / "claims.json").read_text())
    assert ledger["claims"]
    assert all(c["verdict"] for c in ledger["claims"])
    # the fake's pages are not served (DEEP_RESEARCH_CHECK_FETCH=off): the research jobs'
    # citations have no text to check against, and the report says so
    verdicts = {c["verdict"] for c in ledger["claims"]}
    assert verdicts <= {"unverifiable", "uncited"}
    assert "DEEP\\_RESEARCH\\_CHECK\\_FETCH=off" in report

    code, out, _ = cli(env, "sessions", "show", run["session_id"], "--json")
    shown = json.loads(out)
    assert code == 0
    assert shown["claims"]["claims"] == len(ledger["claims"])

    (session_dir / "claims.json").unlink()
    code, out, _ = cli(env, "check", run["session_id"][:6], "--json")
    checked = json.loads(out)
    assert code == 0
    assert checked["claims"]["claims"] == len(ledger["claims"])
    assert checked["claims"]["by_verdict"] == shown["claims"]["by_verdict"]
    assert json.loads((session_dir / "claims.json").read_text())["claims"] == ledger["claims"]
    assert "## Claim check" in Path(checked["report_path"]).read_text()

    code, _, err = cli(env, "check", "ffffffff")
    assert code == 4
    assert err.count("\n") == 1
