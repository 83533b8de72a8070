"""Whole runs against local OpenAI-compatible servers, as the loopback fake plays them:
llama-cpp-python's server (no JSON schema: HTTP 500; no ``/models/{id}``; ``max_tokens``
only) and llama.cpp's own llama-server (a schema as a grammar, ``/props`` with its slots and
context). What a user of either must get: a report, each request sent at most twice
unchanged, caps a small model can live with, and no more calls in flight than the server
serves. (bench/real_model.py runs the same against the real llama-server.)"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI, Flavor
from tests.world import ResearchWorld, plan_task, verdict

NOTES = {
    "scheduling.md": "# Scheduling\n\nA research node starts as soon as its dependencies are "
    "done. Independent nodes run in parallel, up to max_parallel at once.\n",
    "budgets.md": "# Budgets\n\nEvery web job reserves its worst-case cost before it starts, "
    "and the reservation is released when the job's real usage is recorded.\n",
}
MODEL = "smollm2"


def local_env(tmp_path: Path, fake: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb"
    kb.mkdir()
    for name, text in NOTES.items():
        (kb / name).write_text(text)
    fake.add_model(MODEL)
    return {
        "DEEP_RESEARCH_HOME": str(tmp_path / "home"),
        "OPENAI_BASE_URL": fake.base_url,  # no key: a local server
        "DEEP_RESEARCH_CHECK_FETCH": "off",
    }


@pytest.fixture
def llama_cpp_python() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(flavor="llama-cpp-python") as fake:
        yield fake
    assert not fake.errors, fake.errors


@pytest.fixture
def llama_server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(flavor="llama-server", slots=2) as fake:
        yield fake
    assert not fake.errors, fake.errors


def session_dir(env: dict[str, str], session_id: str) -> Path:
    return Path(env["DEEP_RESEARCH_HOME"]) / "sessions" / session_id


def chat_bodies(fake: FakeOpenAI) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.path == "/v1/chat/completions"]


def most_sends_of_one_body(fake: FakeOpenAI) -> int:
    bodies = Counter(json.dumps(b, sort_keys=True) for b in chat_bodies(fake))
    return max(bodies.values())


def world() -> ResearchWorld:
    return ResearchWorld(
        plans=[[plan_task("k1", source="internal"), plan_task("k2", source="internal")]],
        verdicts=[verdict(True)],
    )


def format_of(body: dict[str, Any]) -> str | None:
    """The body's ``response_format`` type; None for a plain-text request."""
    requested = body.get("response_format")
    return requested.get("type") if isinstance(requested, dict) else None


def kb_run(env: dict[str, str], question: str, *more: str) -> dict[str, Any]:
    """A ``--kb-only`` run with the local model: its ``--json`` reply, which must be complete."""
    data = run_json(env, question, "--kb-only", "--chat-model", MODEL, *more)
    assert data["status"] == "complete", data
    return data


def test_a_run_on_llama_cpp_python_asks_for_json_objects_once_a_schema_is_refused(
    tmp_path: Path, llama_cpp_python: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = local_env(tmp_path, llama_cpp_python, monkeypatch)
    assert cli(env, "kb", "ingest", "kb")[0] == 0
    world().install(llama_cpp_python)
    data = kb_run(env, "When does a research node start?")
    assert Path(data["report_path"]).read_text().strip()

    bodies = chat_bodies(llama_cpp_python)
    formats = [format_of(b) for b in bodies]
    assert formats.count("json_schema") == 1, "refused once, then remembered for the run"
    assert formats[:2] == ["json_schema", "json_object"]
    assert "json_object" in formats[2:], "every later structured call asks as the server takes"
    assert all("max_completion_tokens" not in b for b in bodies), "a name it ignores"
    assert all(isinstance(b.get("max_tokens"), int) for b in bodies)
    assert most_sends_of_one_body(llama_cpp_python) <= 2
    # Caps are sized to each reply, not the 16,000-token ceiling of any call.
    caps = [b["max_tokens"] for b in bodies if format_of(b)]
    assert caps
    assert all(isinstance(cap, int) and cap <= 4_000 for cap in caps), caps

    # The refusal is remembered in the model cache: the next run does not meet it again.
    before = len(bodies)
    world().install(llama_cpp_python)
    kb_run(env, "How are costs capped?")
    later = chat_bodies(llama_cpp_python)[before:]
    assert all(format_of(b) != "json_schema" for b in later)


def test_a_run_on_llama_server_keeps_to_its_slots_and_reads_its_context(
    tmp_path: Path, llama_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = local_env(tmp_path, llama_server, monkeypatch)
    assert cli(env, "kb", "ingest", "kb")[0] == 0
    ResearchWorld(
        plans=[[plan_task(f"k{i}", source="internal") for i in range(6)]],
        verdicts=[verdict(True)],
    ).install(llama_server)
    llama_server.latency = 0.05  # calls overlap, as a served model's do
    data = kb_run(env, "When does a research node start?", "--max-parallel", "6")
    assert llama_server.peak_concurrency <= 2, "never more calls than the server has slots"
    formats = {format_of(b) for b in chat_bodies(llama_server)}
    assert "json_schema" in formats, "a grammar-backed server keeps strict schemas"
    assert most_sends_of_one_body(llama_server) <= 2
    state = session_state(env, data["session_id"])
    assert {n["status"] for n in state["nodes"].values()} == {"done"}


def test_a_server_that_refuses_every_plan_still_researches_the_question(
    tmp_path: Path, llama_cpp_python: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny model that never writes a readable plan: the run researches the question
    itself and says so, instead of ending on "no valid Plan"."""
    env = local_env(tmp_path, llama_cpp_python, monkeypatch)
    assert cli(env, "kb", "ingest", "kb")[0] == 0
    answers = world()
    answers.install(llama_cpp_python)
    llama_cpp_python.chat_handler = lambda req: (
        "I cannot do that." if req.schema_name == "Plan" else answers.chat(req)
    )
    question = "When does a research node start?"
    code, out, err = cli(env, question, "--kb-only", "--chat-model", MODEL, "--json")
    assert code == 0, err
    data = json.loads(out)
    events = session_dir(env, data["session_id"]) / "events.jsonl"
    assert "the plan could not be read" in events.read_text(), "the run says why"
    assert data["status"] == "complete"
    (node,) = session_state(env, data["session_id"])["nodes"].values()
    assert node["question"] == question
    assert most_sends_of_one_body(llama_cpp_python) <= 2


def all_roles(env: dict[str, str], model: str) -> dict[str, str]:
    roles = ("PLANNER", "SYNTHESIZER", "JUDGE", "BRANCH", "SUMMARIZER")
    return env | {f"DEEP_RESEARCH_{role}_MODEL": model for role in roles}


@pytest.mark.parametrize(
    ("flavor", "told"),
    [
        ("llama-cpp-python", "smollm2 replies as json_object (json_schema refused)"),
        ("llama-server", "smollm2 replies as json_schema"),
    ],
)
def test_doctor_names_the_shape_a_local_server_takes_and_its_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flavor: Flavor, told: str
) -> None:
    with FakeOpenAI(flavor=flavor, slots=3) as fake:
        env = all_roles(local_env(tmp_path, fake, monkeypatch), MODEL)
        fake.default_chat_reply = {"answer": "Air scatters blue light more than red."}
        _code, out, err = cli(env, "doctor", "--json")
    assert not fake.errors, fake.errors
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    structured = checks["structured output"]
    assert structured["status"] == "ok", (structured, err)
    assert structured["detail"].startswith(told)
    assert "tokens/s" in structured["detail"]
    if flavor == "llama-server":
        assert "3 calls at once" in structured["detail"]
        assert "context 8,192 tokens" in structured["detail"]


def test_notes_a_tiny_model_cannot_write_in_range_still_leave_the_passages_found(
    tmp_path: Path, llama_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama-server's grammar bounds integers only: SmolLM2 writes ``confidence: 8`` under
    it, every time. The branch then quotes what it retrieved, saying so, and the run ends
    with findings instead of exit 12."""
    env = local_env(tmp_path, llama_server, monkeypatch)
    assert cli(env, "kb", "ingest", "kb")[0] == 0
    answers = world()
    answers.install(llama_server)
    notes_asked: list[dict[str, Any]] = []

    def chat(req: Any) -> Any:
        if req.schema_name != "BranchNotes":
            return answers.chat(req)
        notes_asked.append(req.schema or {})
        return {"notes": "Nodes start when ready [1].", "used_evidence": [1], "confidence": 8}

    llama_server.chat_handler = chat
    code, out, err = cli(
        env, "When does a research node start?", "--kb-only", "--chat-model", MODEL, "--json"
    )
    assert code == 0, (out, err)
    data = json.loads(out)
    assert data["status"] == "complete"
    confidence = notes_asked[0]["properties"]["confidence"]
    assert (confidence["minimum"], confidence["maximum"]) == (0, 1), "the bounds are sent"
    nodes = list(session_state(env, data["session_id"])["nodes"].values())
    assert {n["status"] for n in nodes} == {"done"}, "no branch lost to the notes writer"
    for node in nodes:
        assert "notes could not be read" in node["notes"]
        assert "must be a number from 0 to 1, not 8" in node["notes"], "and why"
        quoted = {c["quote"] for c in node["citations"]}
        assert NOTES["scheduling.md"].split("\n\n")[1].strip() in quoted, "passages quoted"
    assert most_sends_of_one_body(llama_server) <= 2
