"""The ``Sessions`` contract (``persistence.port``), run against every implementation: the
files (``SessionStore``) and PostgreSQL (``PgSessions``, on a database of its own made on
the server ``DEEP_RESEARCH_TEST_DATABASE_URL`` names: ``tests/pg.py``). Below them, what only
PostgreSQL has: leases that a worker can lose, fenced writes, the schema's versions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from deep_research.core.errors import SessionError, SessionLocked, StorageError
from deep_research.core.events import RunEvent
from deep_research.core.ledger import ClaimLedger
from deep_research.core.models import EvidenceUnit, ResearchNode, SessionState
from deep_research.core.report import Report
from deep_research.persistence import sessions as file_sessions
from deep_research.persistence.records import prune
from deep_research.persistence.sessions import SessionStore
from tests.pg import execute, fresh_database

if TYPE_CHECKING:
    from deep_research.persistence.port import Sessions


@dataclass
class Backend:
    """One implementation: ``open()`` is another handle on the same sessions, as a second
    process holds one (``conninfo``: the database, for PostgreSQL)."""

    kind: str
    open: Callable[[], Sessions]
    conninfo: str = ""


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with fresh_database() as conninfo:
        yield conninfo


@contextlib.contextmanager
def pg_backend(conninfo: str, **options: Any) -> Iterator[Backend]:
    """PostgreSQL, its sessions emptied first; every handle closed after."""
    from deep_research.persistence.postgres import PgSessions

    execute(conninfo, "TRUNCATE sessions CASCADE")
    opened: list[PgSessions] = []

    def open_one() -> PgSessions:
        opened.append(PgSessions(conninfo, **options))
        return opened[-1]

    try:
        yield Backend("postgresql", open_one, conninfo)
    finally:
        for store in opened:
            store.close()


@pytest.fixture(params=["files", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "files":
        yield Backend("files", lambda: SessionStore(tmp_path / "sessions"))
    else:
        with pg_backend(request.getfixturevalue("database")) as backend:
            yield backend


@pytest.fixture
def pg(database: str) -> Iterator[Backend]:
    """PostgreSQL alone, for what only it has."""
    with pg_backend(database) as backend:
        yield backend


@pytest.fixture
def store(backend: Backend) -> Sessions:
    return backend.open()


@pytest.fixture
def fixed_ids(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> list[str]:
    """Make ``create`` hand out the ids appended to the returned list, in order."""
    ids: list[str] = []
    monkeypatch.setattr(file_sessions, "new_session_id", lambda: ids.pop(0))
    if backend.kind == "postgresql":
        from deep_research.persistence import postgres

        monkeypatch.setattr(postgres, "new_session_id", lambda: ids.pop(0))
    return ids


def running_node(state: SessionState, node_id: str) -> ResearchNode:
    state.nodes[node_id] = ResearchNode(id=node_id, question=f"q{node_id}", status="running")
    return state.nodes[node_id]


def unit(node_id: str, n: int, finding: str = "") -> EvidenceUnit:
    return EvidenceUnit(
        id=f"{node_id}.{n}", node_id=node_id, question="q", finding=finding or f"f{n}"
    )


# --- state -------------------------------------------------------------------------


def test_create_then_load_round_trips(store: Sessions) -> None:
    state = store.create("What is Chroma?", source_policy="kb_only")
    loaded = store.load(state.session_id)
    assert loaded == state
    assert loaded.source_policy == "kb_only"
    state.summary = "saved"
    store.save(state)
    assert store.load(state.session_id).summary == "saved"


def test_ids_resolve_by_unique_prefix_like_git(store: Sessions, fixed_ids: list[str]) -> None:
    fixed_ids += ["abcd12345678", "abcd1234", "ef0000000001"]
    long, short, other = (store.create(f"q{i}").session_id for i in range(3))
    assert store.resolve("ef00") == other
    assert store.resolve("abcd1234") == short, "a full id wins over the ids it prefixes"
    assert store.load("abcd12345").session_id == long
    with pytest.raises(SessionError, match="session id abcd is ambiguous: abcd1234, abcd12345678"):
        store.resolve("abcd")
    with pytest.raises(SessionError, match="no session 0123"):
        store.load("0123")


@pytest.mark.parametrize("bad", ["../x", "ABCD1234", "abcd\n", "abc", "abcd%", "abcd_"])
def test_malformed_ids_are_refused_before_any_lookup(store: Sessions, bad: str) -> None:
    store.create("q")
    for use in (store.load, store.resolve, store.remove, store.is_locked, store.events):
        with pytest.raises(SessionError, match="invalid session id"):
            use(bad)


def test_list_is_newest_first_and_shows_a_corrupt_session(
    store: Sessions, fixed_ids: list[str]
) -> None:
    fixed_ids += ["aaaa00000001", "bbbb00000002", "cccc00000003"]
    for day in (1, 2, 3):
        store.create(f"q{day}", created_at=datetime(2020, 1, day, tzinfo=UTC))
    store.write_serialized("bbbb00000002", '{"schema_version": 5, "session_id": ')
    rows = store.list()
    assert [(row.session_id, row.status) for row in rows] == [
        ("bbbb00000002", "corrupt"),  # dated by its last write: now
        ("cccc00000003", "interrupted"),
        ("aaaa00000001", "interrupted"),
    ]
    assert "not valid JSON" in (rows[0].error or "")
    with pytest.raises(SessionError, match="session bbbb00000002 is corrupt") as caught:
        store.load("bbbb")
    assert "\n" not in str(caught.value)


def test_a_schema_version_not_read_is_refused_in_one_line(store: Sessions) -> None:
    state = store.create("q")
    data = json.loads(store.serialize(state)) | {"schema_version": 99}
    store.write_serialized(state.session_id, json.dumps(data))
    with pytest.raises(SessionError, match=r"schema 99, this one reads 5") as caught:
        store.load(state.session_id)
    assert "\n" not in str(caught.value)
    assert [row.status for row in store.list()] == ["corrupt"]


def test_saving_an_unknown_session_is_refused(store: Sessions) -> None:
    state = store.create("q")
    with pytest.raises(SessionError, match="no session abcdef123456"):
        store.write_serialized("abcdef123456", store.serialize(state))
    with pytest.raises(SessionError, match="no session abcdef123456"):
        store.events("abcdef123456")


# --- the paid jobs' journal --------------------------------------------------------


def test_a_job_id_kept_after_the_last_snapshot_is_read_back(store: Sessions) -> None:
    state = store.create("q")
    node = running_node(state, "a")
    store.save(state)
    node.job_intents["web"] = datetime(2026, 11, 27, tzinfo=UTC)
    store.save_jobs(state, "a")
    intended = store.load(state.session_id).nodes["a"]
    assert (intended.job_intents, intended.remote_jobs) == (dict(node.job_intents), {})
    del node.job_intents["web"]
    node.remote_jobs["web"] = "resp_1"
    store.save_jobs(state, "a")
    loaded = store.load(state.session_id).nodes["a"]
    assert (loaded.job_intents, loaded.remote_jobs) == ({}, {"web": "resp_1"})


def test_a_snapshot_holds_the_journal_before_it(store: Sessions) -> None:
    state = store.create("q")
    node = running_node(state, "a")
    node.remote_jobs["web"] = "resp_1"
    store.save_jobs(state, "a")
    node.remote_jobs.clear()  # the job ended: the next snapshot has none
    node.status = "done"
    store.save(state)
    loaded = store.load(state.session_id)
    assert loaded.nodes["a"].remote_jobs == {}, "an old line never undoes a newer snapshot"
    assert loaded.jobs_journaled == 1


def test_a_replayed_state_saved_elsewhere_is_not_replayed_again(backend: Backend) -> None:
    runner, canceller = backend.open(), backend.open()
    state = runner.create("q")
    running_node(state, "a").remote_jobs["web"] = "resp_1"
    runner.save(state)
    runner.save_jobs(state, "a")
    cancelled = canceller.load(state.session_id)  # `sessions cancel`, in another process
    assert cancelled.nodes["a"].remote_jobs == {"web": "resp_1"}
    cancelled.nodes["a"].remote_jobs.clear()
    canceller.save(cancelled)
    assert runner.load(state.session_id).nodes["a"].remote_jobs == {}


# --- who runs it -------------------------------------------------------------------


def test_the_lock_is_exclusive_and_goes_with_its_holder(backend: Backend) -> None:
    store, other = backend.open(), backend.open()
    state = store.create("q")
    assert not store.is_locked(state.session_id)
    with store.lock(state.session_id):
        assert store.is_locked(state.session_id)
        assert other.is_locked(state.session_id)
        for contender in (store, other):
            with (
                pytest.raises(SessionLocked, match=r"is being run by (another|this) process"),
                contender.lock(state.session_id),
            ):
                pass
        with pytest.raises(SessionLocked):
            other.remove(state.session_id)
    assert not other.is_locked(state.session_id)
    with other.lock(state.session_id):
        assert store.is_locked(state.session_id)


def test_an_unfinished_run_nobody_holds_reads_as_interrupted(store: Sessions) -> None:
    state = store.create("q")
    assert store.shown_status(state) == "interrupted"
    with store.lock(state.session_id):
        assert store.shown_status(state) == "running"
    state.status = "stopped"
    assert store.shown_status(state) == "interrupted", "stopped with no report yet"
    store.write_report(state.session_id, "# Report")
    assert store.shown_status(state) == "stopped"


def test_a_queued_run_reads_as_queued_until_a_worker_holds_it(store: Sessions) -> None:
    state = store.create("q", status="queued")
    assert store.shown_status(state) == "queued", "not interrupted: a worker will take it"
    with store.lock(state.session_id):
        assert store.shown_status(state) == "running"


# --- events ------------------------------------------------------------------------


def test_event_ids_go_on_across_a_resume(backend: Backend) -> None:
    first, resumed = backend.open(), backend.open()
    session_id = first.create("q").session_id
    log = first.events(session_id)
    seen: list[RunEvent] = []
    log.listeners.append(seen.append)
    assert [log.append(RunEvent(type=t)).id for t in ("start", "end")] == [1, 2]
    assert [event.id for event in seen] == [1, 2]
    log.close()
    again = resumed.events(session_id)
    assert again.opened_after == again.last_id == 2
    kept = again.append(RunEvent(type="start", message="resumed"))
    assert kept.id == 3
    assert [(e.id, e.type, e.message) for e in again.read(after=1)] == [
        (2, "end", ""),
        (3, "start", "resumed"),
    ]
    again.close()


async def test_follow_sees_events_as_they_are_kept_and_stops_after_the_end(
    backend: Backend,
) -> None:
    store, runner = backend.open(), backend.open()
    session_id = store.create("q").session_id
    log = runner.events(session_id)
    log.append(RunEvent(type="start"))
    following = store.follow(session_id, poll_seconds=0.01)
    async with asyncio.timeout(10):
        assert (await anext(following)).type == "start"
        log.append(RunEvent(type="message", message="later"))
        assert (await anext(following)).message == "later"
        log.append(RunEvent(type="end"))
        log.append(RunEvent(type="start"))  # a resume: after the end, not followed
        assert (await anext(following)).type == "end"
        with pytest.raises(StopAsyncIteration):
            await anext(following)


async def test_follow_stops_once_nobody_runs_the_session(store: Sessions) -> None:
    session_id = store.create("q").session_id
    store.events(session_id).append(RunEvent(type="start"))
    async with asyncio.timeout(10):
        seen = [e.type async for e in store.follow(session_id, 0, running=lambda: False)]
    assert seen == ["start"]


# --- evidence, claims, report --------------------------------------------------------


async def test_a_rerun_nodes_units_replace_its_earlier_ones(store: Sessions) -> None:
    session_id = store.create("q").session_id
    evidence = store.evidence(session_id)
    await evidence.keep("t1", [unit("t1", 1), unit("t1", 2)])
    await evidence.keep("t2", [unit("t2", 1, finding="a \x00 in page text")])
    await evidence.keep("t1", [unit("t1", 1, finding="rerun")])  # t1 again, after a crash
    await evidence.keep("t3", [unit("t3", 1)])
    await evidence.keep("t3", [])  # rerun with nothing found
    units, damage = store.evidence(session_id).read()
    assert [(u.id, u.finding) for u in units] == [
        ("t2.1", "a \x00 in page text"),
        ("t1.1", "rerun"),
    ]
    assert damage == ""
    assert store.claims(session_id).units() == units


def test_vectors_round_trip_under_their_embedder_only(store: Sessions) -> None:
    evidence = store.evidence(store.create("q").session_id)
    assert evidence.vectors("model-a") == {}
    evidence.save_vectors("model-a", {"x": [1.0, 0.5], "y é": [0.25, -2.0]})
    assert evidence.vectors("model-a") == {"x": [1.0, 0.5], "y é": [0.25, -2.0]}
    assert evidence.vectors("model-b") == {}
    evidence.save_vectors("model-b", {"z": [3.0]})
    assert (evidence.vectors("model-a"), evidence.vectors("model-b")) == ({}, {"z": [3.0]})


def test_the_claim_ledger_round_trips(store: Sessions) -> None:
    session_id = store.create("q").session_id
    claims = store.claims(session_id)
    assert (claims.load(), store.claims_location(session_id)) == (None, None)
    ledger = ClaimLedger(session_id=session_id, notes=["no verifier"])
    claims.save(ledger)
    assert store.claims(session_id).load() == ledger
    assert store.claims_location(session_id) is not None


def test_the_report_is_kept_with_its_data(store: Sessions) -> None:
    session_id = store.create("q").session_id
    assert store.report(session_id) is None
    assert store.report_data(session_id) is None
    assert store.report_location(session_id) is None
    data = Report(title="T", status="complete").model_dump_json()
    where = store.write_report(session_id, "# T\x1b]0;owned\x07\n\ttext", data)
    assert store.report_location(session_id) == where
    assert store.report(session_id) == "# T]0;owned\n\ttext", "control characters left out"
    assert store.report_data(session_id) == data
    store.write_report(session_id, "# Again")
    assert (store.report(session_id), store.report_data(session_id)) == ("# Again", None)


# --- removing ----------------------------------------------------------------------


def test_remove_and_prune(backend: Backend) -> None:
    store, runner = backend.open(), backend.open()
    gone, old, running = (store.create(f"q{i}") for i in range(3))
    assert store.remove(gone.session_id[:6]) == gone.session_id
    with pytest.raises(SessionError, match=f"no session {gone.session_id}"):
        store.load(gone.session_id)
    later = datetime.now(UTC) + timedelta(days=2)
    with runner.lock(running.session_id):
        assert prune(store, timedelta(days=3), now=later) == ([], []), "none is that old"
        removed, skipped = prune(store, timedelta(days=1), now=later, dry_run=True)
        assert ([row.session_id for row in removed], skipped) == (
            [old.session_id],
            [running.session_id],
        )
        assert len(store.list()) == 2, "a dry run removes nothing"
        removed, skipped = prune(store, timedelta(days=1), now=later)
    assert ([row.session_id for row in removed], skipped) == (
        [old.session_id],
        [running.session_id],
    )
    assert [row.session_id for row in store.list()] == [running.session_id]


def test_changed_since_finds_the_sessions_saved_since(store: Sessions) -> None:
    state = store.create("q")
    before = datetime.now(UTC)
    store.save(state)
    assert state.session_id in store.changed_since(before)
    assert store.changed_since(before + timedelta(hours=1)) == []


# --- PostgreSQL only: leases, fencing, the schema -----------------------------------


def expire_lease(conninfo: str, session_id: str) -> None:
    """What a holder that stopped renewing (cut off, frozen) leaves behind."""
    execute(
        conninfo,
        "UPDATE sessions SET lease_expires = now() - interval '1 second' WHERE session_id = %s",
        (session_id,),
    )


def test_a_worker_whose_lease_was_taken_over_cannot_write(pg: Backend) -> None:
    stale, taker = pg.open(), pg.open()
    state = stale.create("q")
    node = running_node(state, "a")
    stale.save(state)
    stale_events = stale.events(state.session_id)
    with contextlib.ExitStack() as held:
        held.enter_context(stale.lock(state.session_id))
        expire_lease(pg.conninfo, state.session_id)
        held.enter_context(taker.lock(state.session_id))
        newer = taker.load(state.session_id)
        newer.summary = "the newer worker's"
        taker.save(newer)
        state.summary = "the stale worker's"
        node.remote_jobs["web"] = "resp_stale"
        writes: list[Callable[[], Any]] = [
            lambda: stale.save(state),
            lambda: stale.write_serialized(state.session_id, stale.serialize(state)),
            lambda: stale.save_jobs(state, "a"),
            lambda: stale_events.append(RunEvent(type="message")),
            lambda: stale.evidence(state.session_id).save_vectors("m", {"x": [1.0]}),
            lambda: asyncio.run(stale.evidence(state.session_id).keep("a", [unit("a", 1)])),
            lambda: stale.claims(state.session_id).save(ClaimLedger(session_id=state.session_id)),
            lambda: stale.write_report(state.session_id, "# stale"),
        ]
        for write in writes:
            with pytest.raises(StorageError, match="was taken over by another worker"):
                write()
        assert taker.is_locked(state.session_id)
    loaded = taker.load(state.session_id)
    assert (loaded.summary, loaded.nodes["a"].remote_jobs) == ("the newer worker's", {})
    assert stale_events.read() == []
    assert taker.report(state.session_id) is None


def test_a_lease_left_to_expire_is_taken_and_its_old_holder_frees_nothing(pg: Backend) -> None:
    first, second, onlooker = pg.open(), pg.open(), pg.open()
    session_id = first.create("q").session_id
    held = contextlib.ExitStack()
    held.enter_context(first.lock(session_id))
    with pytest.raises(SessionLocked):
        second.lock(session_id).__enter__()
    expire_lease(pg.conninfo, session_id)
    assert not onlooker.is_locked(session_id)
    with second.lock(session_id):
        held.close()  # the first holder ends: the lease is no longer its to release
        assert onlooker.is_locked(session_id)
    assert not onlooker.is_locked(session_id)


def test_a_held_lease_is_renewed_before_it_runs_out(database: str) -> None:
    with pg_backend(database, lease_seconds=1.5) as quick:
        store = quick.open()
        session_id = store.create("q").session_id

        def lease() -> tuple[datetime, datetime]:
            """When the lease runs out, and the server's time now."""
            query = "SELECT lease_expires, clock_timestamp() FROM sessions WHERE session_id = %s"
            expires, now = execute(database, query, (session_id,))[0]
            return expires, now

        with store.lock(session_id):
            first, now = lease()
            expires = first
            while expires == first and now < first:
                time.sleep(0.02)
                expires, now = lease()
            assert expires > first, "renewed before it ran out"
            assert store.is_locked(session_id)


def test_a_connection_cut_while_idle_is_replaced(pg: Backend) -> None:
    store = pg.open()
    state = store.create("q")
    execute(
        pg.conninfo,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'deep-research' AND datname = current_database()",
    )
    state.summary = "after the cut"
    store.save(state)
    assert store.load(state.session_id).summary == "after the cut"


def test_an_append_whose_commit_reply_was_lost_is_kept_once(
    pg: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    from deep_research.persistence.postgres_db import Database

    store = pg.open()
    log = store.events(store.create("q").session_id)
    committed = Database._attempt
    lost: list[str] = []

    def reply_lost(db: Database, work: Any) -> Any:
        result = committed(db, work)
        if not lost:  # the commit reached the server; its answer never came back
            lost.append("once")
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    monkeypatch.setattr(Database, "_attempt", reply_lost)
    kept = log.append(RunEvent(type="start"))
    monkeypatch.undo()
    assert lost == ["once"]
    assert (
        [(event.id, event.type) for event in log.read()] == [(kept.id, "start")] == [(1, "start")]
    )


def test_the_password_never_reaches_a_message(pg: Backend) -> None:
    from psycopg.conninfo import make_conninfo

    from deep_research.persistence.postgres import PgSessions

    wrong = make_conninfo(pg.conninfo, password="s3cret-pw", dbname="no_such_database")
    store = PgSessions(wrong)
    with pytest.raises(StorageError) as caught:
        store.list()
    assert "s3cret-pw" not in str(caught.value)
    assert "no_such_database" in str(caught.value)
    assert "s3cret-pw" not in store.where


def test_upgrade_is_idempotent_and_serialized() -> None:
    from deep_research.persistence.schema import VERSION, upgrade

    with fresh_database(upgraded=False) as conninfo:
        applied: list[list[int]] = []
        racers = [threading.Thread(target=lambda: applied.append(upgrade(conninfo))) for _ in "ab"]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        assert sorted(applied) == [[], list(range(1, VERSION + 1))]
        assert upgrade(conninfo) == []
        assert execute(conninfo, "SELECT count(*) FROM schema_migrations") == [(VERSION,)]


def test_a_database_at_another_schema_version_is_refused() -> None:
    from deep_research.persistence.postgres import PgSessions
    from deep_research.persistence.schema import VERSION, upgrade

    with fresh_database(upgraded=False) as conninfo:
        with pytest.raises(StorageError, match=r"version 0, .*run `deep-research db upgrade`"):
            PgSessions(conninfo).list()
        upgrade(conninfo)
        execute(conninfo, "INSERT INTO schema_migrations (version) VALUES (%s)", (VERSION + 1,))
        store = PgSessions(conninfo)
        with pytest.raises(StorageError, match=r"newer than this deep-research knows") as caught:
            store.list()
        assert "\n" not in str(caught.value)
        assert "deep-research db upgrade" in str(caught.value)
        with pytest.raises(StorageError, match="newer than this deep-research knows"):
            upgrade(conninfo)


@pytest.mark.parametrize(
    "address",
    [
        "postgresql://postgres:s3cret%zz@127.0.0.1:9/x",  # a bad percent-escape
        "postgresql://postgres:s3cret@[::1:9/x",  # an unclosed IPv6 bracket
        "postgresql://u:s3 cret@127.0.0.1:9/x",  # a space
    ],
)
def test_an_address_that_does_not_parse_is_said_to_without_quoting_it(address: str) -> None:
    """libpq quotes the part of an address it cannot parse, the password with it."""
    from deep_research.persistence.postgres import PgSessions

    with pytest.raises(StorageError) as caught:
        PgSessions(address).list()
    assert "does not parse" in str(caught.value)
    assert "s3cret" not in str(caught.value)
    assert "s3 cret" not in str(caught.value)


def test_a_lease_is_taken_at_once_after_the_connection_was_cut(pg: Backend) -> None:
    store = pg.open()
    state = store.create("q")
    store.load(state.session_id)  # the connection has served: a cut one is replaced
    execute(
        pg.conninfo,
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'deep-research' AND datname = current_database()",
    )
    with store.lock(state.session_id):
        assert pg.open().is_locked(state.session_id)
    assert not pg.open().is_locked(state.session_id)


def test_a_statement_stuck_on_one_session_never_stops_another_lease_being_renewed(
    database: str,
) -> None:
    import psycopg

    with pg_backend(database, lease_seconds=1.5) as pg:
        store = pg.open()
        stuck, running = store.create("stuck"), store.create("running")
        with psycopg.connect(database) as other, store.lock(running.session_id):
            other.execute(  # another client holds stuck's row (its transaction stays open)
                "SELECT 1 FROM sessions WHERE session_id = %s FOR UPDATE",
                (stuck.session_id,),
            )
            writer = threading.Thread(target=store.save, args=(stuck,), daemon=True)
            writer.start()  # waits on that row, holding store's connection
            time.sleep(3.0)  # two lease times: only a renewal keeps it
            assert pg.open().is_locked(running.session_id), "renewed on its own connection"
            other.rollback()
            writer.join(10)
        assert not writer.is_alive()
