"""The CLI as a client of a running service (``--server URL`` / DEEP_RESEARCH_SERVER_URL): a
run and a resume go through the HTTP API of a real `deep-research serve`, the terminal
follows their events and prints the report; what the service refuses is refused here in
one line with the exit code its error means."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.clirun import cli
from tests.fake_openai import FakeOpenAI
from tests.serving import free_port, serve_process
from tests.test_cli_kb_runs import kb_env, no_model  # noqa: F401 - the fixture
from tests.world import ResearchWorld, plan_task

REPO = Path(__file__).resolve().parents[1]

TOKEN = "a-service-token-long-enough-to-guard-money"
QUESTION = "When does a research node start, and how are costs capped?"


@pytest.fixture
def service(kb_env: dict[str, str], tmp_path: Path) -> Iterator[str]:  # noqa: F811 - fixture
    """`deep-research serve` with no model (extractive runs) over the sample notes, its
    token set; its URL."""
    env = no_model(kb_env) | {"DEEP_RESEARCH_API_TOKEN": TOKEN}
    with serve_process(env, log=tmp_path / "serve.log") as base:
        yield base


@pytest.fixture
def client(kb_env: dict[str, str], tmp_path: Path, service: str) -> dict[str, str]:  # noqa: F811
    """A terminal elsewhere: a data directory of its own, the service's URL and token."""
    return no_model(kb_env) | {
        "DEEP_RESEARCH_HOME": str(tmp_path / "client-home"),
        "DEEP_RESEARCH_SERVER_URL": service,
        "DEEP_RESEARCH_API_TOKEN": TOKEN,
    }


def test_a_run_through_the_service_is_researched_there_and_printed_here(
    client: dict[str, str], service: str, tmp_path: Path
) -> None:
    code, out, err = cli(client, QUESTION)
    assert code == 0, err
    assert "Extractive mode" in out, "the report, printed as a local run prints it"
    assert f"runs at {service}" in err
    assert "started" in err, "its events followed as it ran"
    assert "ingesting kb/ first" not in err, "nothing built here"
    assert not (tmp_path / "client-home" / "sessions").exists(), "nothing saved here"
    last = err.strip().splitlines()[-1]
    assert last.startswith("session ")
    assert last.endswith(": complete (complete) · $0.0000 · 0 tokens")

    code, out, err = cli(client, QUESTION, "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert (summary["status"], summary["exit_code"]) == ("complete", 0)

    session_id = summary["session_id"]
    code, out, err = cli(client, "resume", session_id, "--json")
    assert code == 0, err
    assert json.loads(out)["session_id"] == session_id

    listed = json.loads(cli(client, "sessions", "list", "--json")[1])
    assert [row["status"] for row in listed] == ["complete", "complete"]
    assert session_id in {row["session_id"] for row in listed}
    code, out, err = cli(client, "sessions", "list")
    assert code == 0, err
    assert session_id in out
    shown = json.loads(cli(client, "sessions", "show", session_id, "--json")[1])
    assert (shown["session_id"], shown["status"]) == (session_id, "complete")
    code, out, err = cli(client, "sessions", "show", session_id)
    assert code == 0, err
    assert out.startswith(f"question: {QUESTION}\nstatus:   complete (complete)\n")
    code, out, err = cli(client, "sessions", "report", session_id)
    assert code == 0, err
    assert "Extractive mode" in out
    code, out, err = cli(client, "sessions", "watch", session_id, "--json")
    assert code == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert (events[0]["type"], events[-1]["type"]) == ("start", "end"), "its latest run"
    assert [e["id"] for e in events] == list(range(events[0]["id"], events[-1]["id"] + 1))
    code, out, err = cli(client, "sessions", "cancel", session_id, "--json")
    assert code == 0, err
    assert json.loads(out) == {"session_id": session_id, "recorded": True, "jobs": []}


def test_what_the_service_refuses_is_refused_in_one_line_with_its_exit_code(
    client: dict[str, str], service: str
) -> None:
    code, _, err = cli(client, "resume", "abcdef012345")
    assert code == 4, err
    assert err.strip().splitlines() == [
        "error: no session abcdef012345; see `deep-research sessions list`"
    ]

    code, _, err = cli(client | {"DEEP_RESEARCH_API_TOKEN": "x" * 40}, QUESTION)
    assert code == 3, err
    assert "the service refused the token (DEEP_RESEARCH_API_TOKEN)" in err
    assert "x" * 40 not in err

    gone = f"http://127.0.0.1:{free_port()}"
    code, _, err = cli(client, QUESTION, "--server", gone)
    assert code == 3, err
    assert err.startswith(f"error: cannot reach the service at {gone} (--server): ")
    assert TOKEN not in err

    code, _, err = cli(client, QUESTION, "--estimate")
    assert code == 2, err
    assert "--estimate works a run out here: leave out --server" in err


def test_ctrl_c_stops_following_and_leaves_the_run_going_on_in_the_service(
    env: dict[str, str], fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True  # its research job in flight until released
    with serve_process(env, log=tmp_path / "serve.log") as base:
        client = env | {"DEEP_RESEARCH_HOME": str(tmp_path / "client"), "PYTHONPATH": str(REPO)}
        follower = subprocess.Popen(
            [sys.executable, "-m", "deep_research", "What is HNSW?", "--server", base],
            env={**os.environ, **client},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        fake_openai.wait_for(lambda: any(fake_openai.retrieves.values()), 30)
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
        assert follower.returncode == 130, err
        [session_id] = re.findall(r"session (\w+) runs at", err)
        assert err.strip().splitlines()[-1] == (
            f"stopped following; the run goes on at the service: `deep-research sessions watch "
            f"{session_id} --server {base}` follows it, `deep-research sessions cancel "
            f"{session_id} --server {base}` stops it."
        )
        assert httpx.get(f"{base}/research/{session_id}").json()["status"] == "running"
        fake_openai.hold_responses = False
        fake_openai.complete(fake_openai.response_ids[0])
        code, out, err = cli(client, "sessions", "watch", session_id, "--server", base)
        assert code == 0, err
        assert "report" in out.splitlines()[-2], "followed to its end"
        assert httpx.get(f"{base}/research/{session_id}").json()["status"] == "complete"


def test_the_live_view_of_a_run_in_the_service_is_rebuilt_from_its_events() -> None:
    from datetime import UTC, datetime, timedelta

    from deep_research.core.budget import totals
    from deep_research.core.events import EventType, RunEvent
    from deep_research.core.ports import JobEvent
    from deep_research.frontends.remote import Replica

    at = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)

    def event(
        type_: EventType, message: str, node: str | None = None, s: int = 0, **data: object
    ) -> RunEvent:
        at_s = at + timedelta(seconds=s)
        return RunEvent(type=type_, message=message, node_id=node, at=at_s, data=data)

    replica = Replica("abcdef012345")
    node = {"question": "What is HNSW?", "source_hint": "web", "depends_on": [], "iteration": 2}
    said = [
        replica.apply(event("start", "session abcdef012345 started")),
        replica.apply(event("node", "t1 pending", "t1", 1, status="pending", **node)),
        replica.apply(event("node", "t1 running", "t1", 2, status="running", **node)),
        replica.apply(
            event(
                "job",
                "t1: queued",
                "t1",
                3,
                job_id="resp_1",
                model="m",
                status="queued",
                polls=0,
                elapsed_seconds=0.1,
                note="",
            )
        ),
        replica.apply(event("spend", "$0.0100 · 300 tokens", None, 4, cost_usd=0.01, tokens=300)),
        replica.apply(event("node", "t1 done", "t1", 9, status="done", cost_usd=0.01, **node)),
        replica.apply(event("end", "session abcdef012345: complete", None, 10, status="complete")),
    ]
    assert said[0] == "session abcdef012345 started"
    assert said[1:3] == [None, None], "the table shows a node's changes"
    assert isinstance(said[3], JobEvent)
    assert (said[3].job_id, said[3].status) == ("resp_1", "queued")
    assert said[4:6] == [None, None]
    state = replica.state
    [t1] = state.nodes.values()
    assert (t1.status, t1.question, t1.cost_usd, t1.iteration) == ("done", "What is HNSW?", 0.01, 2)
    assert t1.started_at is not None
    assert t1.finished_at is not None
    assert (t1.finished_at - t1.started_at).total_seconds() == 7
    spend = totals(state.ledger)
    assert (spend.cost_usd, spend.usage.total_tokens) == (0.01, 300)
    assert (state.iteration, state.status) == (2, "complete")


def test_a_resumed_run_in_the_service_shows_what_it_had_done_before_its_events() -> None:
    from deep_research.core.budget import totals
    from deep_research.frontends.remote import Replica

    node = {"question": "q", "status": "done", "source_hint": "web", "depends_on": []}
    detail = {
        "session_id": "abcdef012345",
        "question": "What is HNSW?",
        "iteration": 2,
        "usage": {"cost_usd": 0.25, "total_tokens": 1200},
        "nodes": [{"id": f"t{i}", **node, "cost_usd": 0.1} for i in (3, 1, 2)],
    }
    state = Replica.of(detail).state
    assert (state.question, state.iteration) == ("What is HNSW?", 2)
    ordered = sorted(state.nodes.values(), key=lambda n: n.created_at)
    assert [n.id for n in ordered] == ["t3", "t1", "t2"], "the table keeps the run's order"
    assert {n.status for n in ordered} == {"done"}
    spend = totals(state.ledger)
    assert (spend.cost_usd, spend.usage.total_tokens) == (0.25, 1200)
