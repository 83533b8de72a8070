from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deep_research.adapters.prices import PriceTable
from deep_research.app.loading import load_settings
from deep_research.core.budget import make_entry
from deep_research.core.errors import SessionError, SessionLocked, StorageError
from deep_research.core.models import (
    Citation,
    ResearchNode,
    SessionState,
    Usage,
)
from deep_research.persistence import sessions
from deep_research.persistence.checkpoints import Checkpointer
from deep_research.persistence.sessions import (
    SCHEMA_VERSION,
    SessionStore,
    new_session_id,
)
from tests.clirun import cli, run_json
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task, verdict

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(tmp_path / "sessions")


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make `create` hand out the ids appended to the returned list, in order."""
    ids: list[str] = []
    monkeypatch.setattr(sessions, "new_session_id", lambda: ids.pop(0))
    return ids


def files_in(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()}


# --- ids ---------------------------------------------------------------------------


def test_new_session_ids_are_12_hex_and_distinct() -> None:
    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{12}", i) for i in ids)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "../x",
        "../../etc",
        "/etc",
        "abc",  # too short to be a useful prefix
        "a" * 33,
        "ABCDEF12",  # ids are lowercase
        "abcd/..",
        "abcd\n",
        "１２３４５",  # fullwidth digits
        "abcdé",
        "abcd ",
        ".",
    ],
)
def test_malformed_ids_are_rejected_before_touching_the_disk(store: SessionStore, bad: str) -> None:
    with pytest.raises(SessionError, match="invalid session id"):
        store.load(bad)
    with pytest.raises(SessionError, match="invalid session id"):
        store.path(bad)
    assert not store.root.exists()


# --- create / save / load ----------------------------------------------------------


def test_create_then_load_round_trips(store: SessionStore) -> None:
    state = store.create("What is Chroma?", source_policy="kb_only")
    assert files_in(store.path(state.session_id)) == {"state.json"}
    loaded = store.load(state.session_id)
    assert loaded == state
    assert loaded.source_policy == "kb_only"


def test_save_is_atomic_and_leaves_no_temp_files(store: SessionStore) -> None:
    state = store.create("q")
    before = state.updated_at
    for i in range(20):
        state.summary = f"round {i}"
        store.save(state)
    assert state.updated_at > before
    assert files_in(store.path(state.session_id)) == {"state.json"}
    assert store.load(state.session_id).summary == "round 19"


def test_failed_save_keeps_the_previous_state_and_cleans_up(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = store.create("q")
    state.summary = "saved"
    store.save(state)

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sessions.os, "replace", disk_full)
    state.summary = "lost"
    with pytest.raises(StorageError, match=r"cannot save session .*No space left"):
        store.save(state)
    monkeypatch.undo()
    assert files_in(store.path(state.session_id)) == {"state.json"}
    assert store.load(state.session_id).summary == "saved"


def test_a_session_that_cannot_be_saved_at_creation_leaves_nothing_behind(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sessions.os, "replace", disk_full)
    with pytest.raises(StorageError, match=r"No space left"):
        store.create("q")
    monkeypatch.undo()
    assert store.list() == []
    assert list(store.root.iterdir()) == []


def test_saving_an_unknown_session_is_a_session_error(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="no session abcdef123456"):
        store.save(SessionState(session_id="abcdef123456", question="q"))


def test_saved_state_contains_no_secrets(
    env: dict[str, str], fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "LEAKCANARY7f3a9c"  # also catches a key cut short or partly masked
    secret = f"sk-proj-{canary}0123456789abcdefABCDEF"
    env = {**env, "OPENAI_API_KEY": secret}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = load_settings()
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == secret  # the key really is loaded
    assert settings.home == Path(env["DEEP_RESEARCH_HOME"])

    # A run stopped by its iteration limit, then a resume: Settings -> the real clients,
    # SessionStore and Checkpointer, the web results into the cache, the report.
    ResearchWorld(
        plans=[[plan_task("t1")], [plan_task("t2", "t1")]],
        verdicts=[verdict(False, "more"), verdict(True)],
    ).install(fake_openai)
    first = run_json(env, "How do deletes work?", "--max-iterations", "1")
    assert first["stop_reason"] == "max_iterations"
    done = run_json(env, "resume", first["session_id"], "--max-iterations", "2")
    assert done["status"] == "complete"
    assert fake_openai.count("/v1/responses", "POST") == 2
    assert all(r.authorized for r in fake_openai.requests), "the key went out with each call"

    files = {p: p.read_bytes() for p in settings.home.rglob("*") if p.is_file()}
    session = settings.sessions_dir / first["session_id"]
    assert {session / "state.json", session / "report.md"} <= set(files)
    cached = [data for p, data in files.items() if settings.cache_dir in p.parents]
    assert any(b"Claim number 1" in data for data in cached), "the web results were cached"
    assert [str(p) for p, data in files.items() if canary.encode() in data] == []


# --- resolution ---------------------------------------------------------------------


def test_unique_prefix_resolves(store: SessionStore, fixed_ids: list[str]) -> None:
    fixed_ids += ["abc123000000", "abd456000000"]
    first = store.create("first")
    store.create("second")
    assert store.resolve("abc1") == "abc123000000"
    assert store.load("abc12").question == "first"
    assert store.load(first.session_id).question == "first"


def test_ambiguous_prefix_lists_candidates(store: SessionStore, fixed_ids: list[str]) -> None:
    fixed_ids += ["abc123000000", "abc1ff000000"]
    store.create("one")
    store.create("two")
    with pytest.raises(SessionError, match="ambiguous") as info:
        store.load("abc1")
    assert "abc123000000" in str(info.value)
    assert "abc1ff000000" in str(info.value)


def test_unknown_id_points_at_sessions_list(store: SessionStore) -> None:
    store.create("q")
    with pytest.raises(SessionError) as info:
        store.load("ffffffffffff")
    assert str(info.value) == "no session ffffffffffff; see `deep-research sessions list`"


def test_unknown_id_without_any_sessions_dir(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="no session abcd"):
        store.load("abcd")


# --- corrupt state -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "is not valid JSON"),
        (b"\xff\xfe\x00garbage", "is not valid JSON"),
        (b"", "is not valid JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (b'{"schema_version": V, "session_id": "SID"}', "question: Field required"),
        (
            b'{"schema_version": V, "session_id": "SID", "question": "q", "status": "weird"}',
            "status",
        ),
        (
            b'{"schema_version": V, "session_id": "SID", "question": "q", '
            b'"limits": {"max_runtime_seconds": null}}',
            "limits.max_runtime_seconds",
        ),
        (b'{"schema_version": 99, "session_id": "SID", "question": "q"}', "(schema 99, "),
        (b'{"session_id": "SID", "question": "q"}', "(schema none, "),
        (b'{"schema_version": "V", "session_id": "SID", "question": "q"}', "(schema 'V', "),
        (b'{"schema_version": V, "session_id": "ffffffffffff", "question": "q"}', "belongs to"),
    ],
)
def test_corrupt_state_is_a_session_error_naming_the_file(
    store: SessionStore, content: bytes, message: str
) -> None:
    state = store.create("q")
    file = store.path(state.session_id) / "state.json"
    content = content.replace(b"SID", state.session_id.encode())
    content = content.replace(b"V,", str(SCHEMA_VERSION).encode() + b",")
    file.write_bytes(content)
    with pytest.raises(SessionError) as info:
        store.load(state.session_id)
    assert str(file) in str(info.value)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert file.read_bytes() == content  # never overwritten
    [row] = store.list()
    assert row.status == "corrupt"
    assert file.read_bytes() == content


def test_missing_state_file_is_reported(store: SessionStore) -> None:
    state = store.create("q")
    (store.path(state.session_id) / "state.json").unlink()
    with pytest.raises(SessionError, match=r"state\.json is missing"):
        store.load(state.session_id)


# --- listing ------------------------------------------------------------------------


def test_list_is_newest_first_with_figures(store: SessionStore) -> None:
    now = datetime.now(UTC)
    old = store.create("old", created_at=now - timedelta(days=2))
    new = store.create("new", created_at=now)
    mid = store.create("mid", created_at=now - timedelta(days=1))
    new.nodes = {
        "t1": ResearchNode(id="t1", question="a", status="done"),
        "t2": ResearchNode(id="t2", question="b", status="failed"),
        "t3": ResearchNode(id="t3", question="c", status="done"),
    }
    new.ledger = [
        make_entry(
            "planner", "gpt-4.1", Usage(input_tokens=1000, output_tokens=100), prices=PriceTable()
        ),
        make_entry(
            "branch",
            "gpt-4.1-mini",
            Usage(input_tokens=5000, output_tokens=500),
            "t1",
            prices=PriceTable(),
        ),
    ]
    new.sources = {"S1": Citation(ref="S1", kind="web", url="https://example.com")}
    new.status = "complete"
    new.stop_reason = "complete"
    new.report_path = str(store.write_report(new.session_id, "# r"))
    store.save(new)

    rows = store.list()
    assert [r.session_id for r in rows] == [new.session_id, mid.session_id, old.session_id]
    top = rows[0]
    assert top.question == "new"
    assert top.status == "complete"
    assert top.stop_reason == "complete"
    assert (top.nodes_done, top.nodes_total) == (2, 3)
    assert top.cost_usd == pytest.approx(sum(e.cost_usd for e in new.ledger))
    assert top.report_path is not None
    assert Path(top.report_path).read_text() == "# r"


def test_list_shows_corrupt_sessions_and_ignores_strays(store: SessionStore) -> None:
    good = store.create("good")
    bad = store.create("bad")
    (store.path(bad.session_id) / "state.json").write_text("{truncated")
    (store.root / ".tmp-stuff").mkdir()
    (store.root / "README.txt").write_text("not a session")
    (store.root / "abcdef").write_text("a file named like an id")
    rows = {r.session_id: r for r in store.list()}
    assert set(rows) == {good.session_id, bad.session_id}
    assert rows[good.session_id].status == "interrupted"  # nobody holds its lock
    assert rows[bad.session_id].status == "corrupt"
    assert rows[bad.session_id].error is not None
    assert "not valid JSON" in rows[bad.session_id].error


def test_list_without_sessions_dir_is_empty(store: SessionStore) -> None:
    assert store.list() == []


# --- lock ---------------------------------------------------------------------------

HOLD_LOCK = """
import sys
from pathlib import Path
from deep_research.persistence.sessions import SessionStore

with SessionStore(Path(sys.argv[1])).lock(sys.argv[2]):
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_lock_is_exclusive_within_a_process(store: SessionStore) -> None:
    state = store.create("q")
    with store.lock(state.session_id):
        assert (store.path(state.session_id) / "lock").read_text().strip() == str(os.getpid())
        with pytest.raises(SessionLocked, match=f"pid {os.getpid()}"), store.lock(state.session_id):
            pass
    with store.lock(state.session_id):  # released on exit
        pass


def test_lock_held_by_another_process_and_freed_when_it_dies(store: SessionStore) -> None:
    state = store.create("q")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store.root), state.session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()  # returns once the child holds the lock
        assert line == "locked\n", child.stderr.read() if child.stderr else ""
        with pytest.raises(SessionLocked) as info, store.lock(state.session_id):
            pass
        assert str(info.value) == (
            f"session {state.session_id} is being run by another process (pid {child.pid})"
        )
        assert info.value.exit_code == 5
        child.kill()  # SIGKILL: no cleanup code runs in the child
        child.wait()
        with store.lock(state.session_id):
            pass
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                stream.close()


def test_lock_of_unknown_session_is_a_session_error(store: SessionStore) -> None:
    with pytest.raises(SessionError, match="no session"), store.lock("abcdef123456"):
        pass


# --- report -------------------------------------------------------------------------


def test_write_report_is_atomic(store: SessionStore) -> None:
    state = store.create("q")
    path = store.write_report(state.session_id, "# One\n")
    path = store.write_report(state.session_id, "# Two — ünïcode\n")
    assert path == str(store.path(state.session_id) / "report.md")
    assert Path(path).read_text(encoding="utf-8") == "# Two — ünïcode\n"
    assert files_in(store.path(state.session_id)) == {"state.json", "report.md"}


# --- checkpointer -------------------------------------------------------------------


class GatedStore(SessionStore):
    """Records every state.json write; the first one waits for `gate`."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.writing = threading.Event()
        self.writes: list[str] = []

    def create_armed(self, question: str) -> SessionState:
        """Create a session (ungated), then arm the gate for the next write."""
        self.gate.set()
        state = self.create(question)
        self.writes.clear()
        self.writing.clear()
        self.gate.clear()
        return state

    def write_serialized(self, session_id: str, payload: str) -> None:
        self.writing.set()
        assert self.gate.wait(10), "test never opened the gate"
        self.writes.append(json.loads(payload)["summary"])
        super().write_serialized(session_id, payload)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedStore]:
    store = GatedStore(tmp_path / "sessions")
    yield store
    store.gate.set()  # never leave a worker thread stuck


async def test_checkpointer_snapshots_at_call_time_and_newest_wins(gated: GatedStore) -> None:
    state = gated.create_armed("q")
    cp = Checkpointer(gated)

    async def save_as(summary: str) -> None:
        state.summary = summary
        await cp.save(state)

    first = asyncio.create_task(save_as("A"))
    await asyncio.to_thread(gated.writing.wait, 10)  # A is being written, off the loop
    state.summary = "changed after the snapshot"
    others = asyncio.gather(save_as("B"), save_as("C"))
    gated.gate.set()
    await asyncio.gather(first, others)

    # B was superseded by C before its turn: skipped, never written after C.
    assert gated.writes == ["A", "C"]
    assert gated.load(state.session_id).summary == "C"


async def test_a_waiting_checkpoint_writes_the_state_as_its_turn_finds_it(
    gated: GatedStore,
) -> None:
    """A save waits for the write in progress, then serializes the state as it is then: the
    saves asked for meanwhile are covered by that one snapshot and return at once."""
    state = gated.create_armed("q")
    cp = Checkpointer(gated)

    state.summary = "A"
    first = asyncio.create_task(cp.save(state))
    await asyncio.to_thread(gated.writing.wait, 10)
    state.summary = "B"
    queued = [asyncio.create_task(cp.save(state)) for _ in range(5)]
    await asyncio.sleep(0)
    state.summary = "C"
    gated.gate.set()
    await asyncio.gather(first, *queued)
    assert gated.writes == ["A", "C"], "one snapshot for the five saves that waited"
    assert gated.load(state.session_id).summary == "C"


async def test_cancelled_checkpoint_never_rolls_back(gated: GatedStore) -> None:
    state = gated.create_armed("q")
    cp = Checkpointer(gated)

    state.summary = "old"
    old = asyncio.create_task(cp.save(state))
    await asyncio.to_thread(gated.writing.wait, 10)
    old.cancel()  # the thread keeps writing "old"; the loop moves on
    with pytest.raises(asyncio.CancelledError):
        await old
    state.summary = "new"
    new = asyncio.create_task(cp.save(state))
    gated.gate.set()
    await new
    assert gated.writes == ["old", "new"]
    assert gated.load(state.session_id).summary == "new"


async def test_save_now_waits_for_an_inflight_write_and_wins(gated: GatedStore) -> None:
    state = gated.create_armed("q")
    cp = Checkpointer(gated)

    state.summary = "async"
    pending = asyncio.create_task(cp.save(state))
    await asyncio.to_thread(gated.writing.wait, 10)
    final = state.model_copy(deep=True)
    final.summary = "shutdown"
    # From another thread, as a signal-handling path might; it must queue behind the write.
    shutdown = asyncio.create_task(asyncio.to_thread(cp.save_now, final))
    gated.gate.set()
    await asyncio.gather(pending, shutdown)
    assert gated.writes == ["async", "shutdown"]
    assert gated.load(state.session_id).summary == "shutdown"


async def test_a_waiting_save_never_writes_a_state_older_than_save_now_did(
    gated: GatedStore,
) -> None:
    state = gated.create_armed("q")
    cp = Checkpointer(gated)

    state.summary = "x"
    inflight = asyncio.create_task(cp.save(state))
    await asyncio.to_thread(gated.writing.wait, 10)
    state.summary = "y"
    queued = asyncio.create_task(cp.save(state))  # serializes only when its turn comes
    await asyncio.sleep(0)
    state.summary = "z"  # a shutdown path then saves the state as it is
    shutdown = asyncio.create_task(asyncio.to_thread(cp.save_now, state))
    gated.gate.set()
    await asyncio.gather(inflight, queued, shutdown)
    assert gated.writes[0] == "x"
    assert "y" not in gated.writes, "no save wrote the state as it was before save_now's"
    assert gated.load(state.session_id).summary == "z"


async def test_many_concurrent_checkpoints_end_with_the_last(store: SessionStore) -> None:
    state = store.create("q")
    cp = Checkpointer(store)

    async def step(i: int) -> None:
        state.nodes[f"t{i}"] = ResearchNode(id=f"t{i}", question=f"q{i}", status="done")
        state.summary = f"after {i}"
        await cp.save(state)

    await asyncio.gather(*(step(i) for i in range(50)))
    loaded = store.load(state.session_id)
    assert loaded.summary == "after 49"
    assert len(loaded.nodes) == 50
    assert files_in(store.path(state.session_id)) == {"state.json"}


def test_save_now_is_synchronous(store: SessionStore) -> None:
    state = store.create("q")
    state.status = "interrupted"
    state.stop_reason = "interrupted"
    Checkpointer(store).save_now(state)
    assert store.load(state.session_id).status == "interrupted"


# --- the paid jobs' journal ------------------------------------------------------------


def test_a_job_id_saved_after_the_last_snapshot_is_read_back(store: SessionStore) -> None:
    state = store.create("q")
    state.nodes["a"] = ResearchNode(id="a", question="qa", status="running")
    checkpoints = Checkpointer(store)
    checkpoints.save_now(state)
    state.nodes["a"].job_intents["web"] = datetime(2026, 11, 27, tzinfo=UTC)
    checkpoints.save_jobs(state, "a")
    intended = store.load(state.session_id).nodes["a"]
    assert (intended.job_intents, intended.remote_jobs) == (
        {"web": state.nodes["a"].job_intents["web"]},
        {},
    )
    del state.nodes["a"].job_intents["web"]
    state.nodes["a"].remote_jobs["web"] = "resp_1"
    checkpoints.save_jobs(state, "a")
    assert store.load(state.session_id).nodes["a"].remote_jobs == {"web": "resp_1"}
    assert store.load(state.session_id).nodes["a"].job_intents == {}
    assert (
        json.loads((store.path(state.session_id) / "state.json").read_text())["nodes"]["a"][
            "remote_jobs"
        ]
        == {}
    ), "the id reached the journal, not the snapshot"


def test_a_snapshot_holds_the_journal_before_it(store: SessionStore) -> None:
    state = store.create("q")
    state.nodes["a"] = ResearchNode(id="a", question="qa", status="running")
    checkpoints = Checkpointer(store)
    state.nodes["a"].remote_jobs["web"] = "resp_1"
    checkpoints.save_jobs(state, "a")
    state.nodes["a"].remote_jobs.clear()  # the job ended: the next snapshot has none
    state.nodes["a"].status = "done"
    checkpoints.save_now(state)
    loaded = store.load(state.session_id)
    assert loaded.nodes["a"].remote_jobs == {}, "an old line never undoes a newer snapshot"
    assert loaded.jobs_journaled == 1


def test_a_replayed_state_saved_elsewhere_is_not_replayed_again(store: SessionStore) -> None:
    state = store.create("q")
    state.nodes["a"] = ResearchNode(id="a", question="qa", status="running")
    store.save(state)
    state.nodes["a"].remote_jobs["web"] = "resp_1"
    Checkpointer(store).save_jobs(state, "a")
    cancelled = SessionStore(store.root).load(state.session_id)  # e.g. `sessions cancel`
    assert cancelled.nodes["a"].remote_jobs == {"web": "resp_1"}
    cancelled.nodes["a"].remote_jobs.clear()
    SessionStore(store.root).save(cancelled)
    assert store.load(state.session_id).nodes["a"].remote_jobs == {}


def test_a_line_torn_by_a_failed_write_is_ended_by_the_next(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = store.create("q")
    state.nodes["a"] = ResearchNode(id="a", question="qa", status="running")
    state.nodes["b"] = ResearchNode(id="b", question="qb", status="running")
    store.save(state)
    journal = store.path(state.session_id) / "jobs.jsonl"
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        journal.write_text('{"node": "a", "remote_jo')  # what reached the disk
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    state.nodes["a"].remote_jobs["web"] = "resp_a"
    with pytest.raises(StorageError, match="No space left"):
        store.save_jobs(state, "a")
    monkeypatch.setattr(os, "fsync", real_fsync)
    state.nodes["b"].job_intents["web"] = datetime(2026, 11, 27, tzinfo=UTC)
    store.save_jobs(state, "b")
    assert store.load(state.session_id).nodes["b"].job_intents, "b's intent reads"


def test_a_journal_that_cannot_be_read_is_one_corrupt_session(store: SessionStore) -> None:
    state = store.create("q")
    (store.path(state.session_id) / "jobs.jsonl").mkdir()  # not a file: read_bytes fails
    with pytest.raises(SessionError, match="cannot read"):
        store.load(state.session_id)
    assert [row.status for row in store.list()] == ["corrupt"]


def test_a_line_torn_by_a_crash_is_skipped_and_ended(store: SessionStore) -> None:
    state = store.create("q")
    state.nodes["a"] = ResearchNode(id="a", question="qa", status="running")
    store.save(state)
    journal = store.path(state.session_id) / "jobs.jsonl"
    journal.write_text('{"node": "a", "remote_jobs": {"web": "resp_')  # killed mid-write
    assert store.load(state.session_id).nodes["a"].remote_jobs == {}
    resumed = SessionStore(store.root)  # the next process
    state.nodes["a"].remote_jobs["web"] = "resp_2"
    resumed.save_jobs(state, "a")
    assert resumed.load(state.session_id).nodes["a"].remote_jobs == {"web": "resp_2"}
    assert resumed.jobs_journaled(state.session_id) == 2


async def test_eight_job_ids_at_once_are_eight_lines_not_eight_snapshots(
    store: SessionStore,
) -> None:
    state = store.create("q")
    checkpoints = Checkpointer(store)
    for i in range(8):
        state.nodes[f"t{i}"] = ResearchNode(id=f"t{i}", question=f"q{i}", status="running")
    await checkpoints.save(state)
    before = (store.path(state.session_id) / "state.json").stat().st_mtime_ns
    for i in range(8):
        state.nodes[f"t{i}"].remote_jobs["web"] = f"resp_{i}"
        checkpoints.save_jobs(state, f"t{i}")
    assert (store.path(state.session_id) / "state.json").stat().st_mtime_ns == before
    loaded = store.load(state.session_id)
    assert {n.remote_jobs["web"] for n in loaded.nodes.values()} == {f"resp_{i}" for i in range(8)}


def test_list_reports_a_running_session_without_a_live_process_as_interrupted(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path)
    state = store.create("q?")
    with store.lock(state.session_id):
        assert store.list()[0].status == "running"
    assert store.list()[0].status == "interrupted"


@pytest.mark.parametrize("saved_as", ["complete", "stopped"])
def test_a_run_stopped_before_its_report_was_written_reads_as_interrupted(
    tmp_path: Path, saved_as: str
) -> None:
    """Killed while writing or checking its report, or stopped by a full disk: "complete"
    with no report would promise what is not there. From every reader the same status."""
    env = {"DEEP_RESEARCH_HOME": str(tmp_path)}
    store = SessionStore(tmp_path / "sessions")
    state = store.create("q?")
    state.status = saved_as  # type: ignore[assignment]
    store.save(state)
    with store.lock(state.session_id):  # its process still writes: as saved
        assert store.list()[0].status == saved_as
    assert store.list()[0].status == "interrupted"
    code, out, err = cli(env, "sessions", "show", state.session_id, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "interrupted"
    code, out, err = cli(env, "sessions", "list", "--json")
    assert json.loads(out)[0]["status"] == "interrupted"
    store.write_report(state.session_id, "# Report\n")
    assert store.list()[0].status == saved_as


@pytest.mark.parametrize("saved", [4, SCHEMA_VERSION + 1, None])
def test_a_session_of_another_schema_is_refused_by_show_and_resume(
    store: SessionStore, env: dict[str, str], saved: int | None
) -> None:
    """Only this version's format is read: another (or none) is one line, exit 4, and the
    file is left as it is."""
    state = store.create("q")
    state.nodes["a"] = ResearchNode(id="a", question="q?", status="done", notes="n [S1]")
    store.save(state)
    file = store.path(state.session_id) / "state.json"
    data = json.loads(file.read_text())
    assert data["schema_version"] == SCHEMA_VERSION, "every save writes the version"
    env = {**env, "DEEP_RESEARCH_HOME": str(store.root.parent)}
    code, out, err = cli(env, "sessions", "show", state.session_id)
    assert code == 0, err
    assert "q?" in out

    if saved is None:
        del data["schema_version"]
    else:
        data["schema_version"] = saved
    file.write_text(json.dumps(data))
    shown = "none" if saved is None else saved
    expected = (
        f"session {state.session_id} was saved by another version of deep-research "
        f"(schema {shown}, this one reads {SCHEMA_VERSION})"
    )
    for command in (("sessions", "show"), ("resume",)):
        code, _, err = cli(env, *command, state.session_id)
        assert code == 4, err
        assert expected in err
        assert len(err.strip().splitlines()) == 1, err
    assert json.loads(file.read_text()) == data, "never rewritten"


# --- damaged beyond parsing ---------------------------------------------------------------


def test_a_deeply_nested_state_is_one_corrupt_session_among_the_others(
    store: SessionStore, tmp_path: Path, env: dict[str, str]
) -> None:
    good = store.create("good")
    bad = store.create("bad")
    depth = 100_000  # past both JSON parsers' recursion limits
    (store.path(bad.session_id) / "state.json").write_bytes(
        b'{"session_id": "x", "question": ' + b"[" * depth + b"]" * depth + b"}"
    )
    rows = {r.session_id: r for r in store.list()}
    assert rows[good.session_id].status == "interrupted"
    assert rows[bad.session_id].status == "corrupt"
    assert "nested too deeply" in (rows[bad.session_id].error or "")
    with pytest.raises(SessionError, match="nested too deeply"):
        store.load(bad.session_id)

    # The same through the CLI: listed as damaged with the others, `show` is exit 4.
    env = {**env, "DEEP_RESEARCH_HOME": str(store.root.parent)}
    listed = {row["session_id"]: row["status"] for row in run_json(env, "sessions", "list")}
    assert listed == {good.session_id: "interrupted", bad.session_id: "corrupt"}
    code, _, err = cli(env, "sessions", "show", bad.session_id)
    assert code == 4, err
    assert "nested too deeply" in err


def test_a_sessions_folder_that_cannot_be_made_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "sessions").write_text("a file where the sessions folder goes")
    store = SessionStore(tmp_path / "sessions")
    with pytest.raises(StorageError, match=r"cannot create a session in .*sessions"):
        store.create("q")
