"""Team mode from the command line: ``DEEP_RESEARCH_DATABASE_URL`` puts the sessions in
PostgreSQL (``db upgrade`` first), and every command reads and writes them there."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from deep_research.core.errors import ConfigError, DeepResearchError
from deep_research.persistence.daily import Book, DailyLedger, DayIsSpent, FileBook
from deep_research.persistence.port import open_sessions, team_extra
from deep_research.persistence.postgres_db import DatabaseBook
from tests.clirun import cli, run_json
from tests.pg import execute, fresh_database
from tests.test_cli_kb_runs import kb_env, no_model  # noqa: F401 - the fixture

DATABASE = "DEEP_RESEARCH_DATABASE_URL"


# Set up before ``env``, which clears every DEEP_RESEARCH_ variable, the test server's too.
@pytest.fixture
def empty_database() -> Iterator[str]:
    with fresh_database(upgraded=False) as conninfo:
        yield conninfo


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database() as conninfo:
        yield conninfo


def test_db_upgrade_without_a_database_url_says_there_is_none(env: dict[str, str]) -> None:
    code, out, err = cli(env, "db", "upgrade")
    assert code == 3, err
    assert out == ""
    assert err.strip().splitlines() == [
        "error: DEEP_RESEARCH_DATABASE_URL is not set: without it sessions are files, "
        "and there is no database to upgrade"
    ]


def test_a_blank_database_url_is_unset_for_every_command(env: dict[str, str]) -> None:
    blank = env | {DATABASE: "  "}
    code, _, err = cli(blank, "db", "upgrade")
    assert code == 3, err
    assert "DEEP_RESEARCH_DATABASE_URL is not set" in err
    assert _listed(blank) == []
    checks = {c["name"] for c in run_json(blank, "doctor")["checks"]}
    assert "data directory" in checks
    assert "sessions" not in checks


def test_an_address_that_does_not_parse_never_shows_its_password(env: dict[str, str]) -> None:
    bad = env | {DATABASE: "postgresql://postgres:s3cret%zz@127.0.0.1:9/x"}
    code, out, err = cli(bad, "sessions", "list")
    assert code != 0
    assert err.strip().splitlines() == [
        "error: the database at postgresql://(unparsable address): the address does not parse "
        "(DEEP_RESEARCH_DATABASE_URL)"
    ]
    code, out, err = cli(bad, "doctor", "--json")
    assert "s3cret" not in out + err


def test_a_missing_driver_names_the_team_extra() -> None:
    with pytest.raises(ConfigError, match=r"pip install 'deep-research\[team\]'"), team_extra():
        raise ImportError("No module named 'psycopg'", name="psycopg")
    with pytest.raises(ImportError, match="numpy"), team_extra():
        raise ImportError("No module named 'numpy'", name="numpy")  # not ours to explain


def test_db_upgrade_creates_the_schema_once_and_never_shows_the_password(
    empty_database: str, env: dict[str, str]
) -> None:
    url = f"{empty_database} password=s3cret-pw"  # trust authentication ignores it
    first = run_json(env | {DATABASE: url}, "db", "upgrade")
    assert first["applied"]
    assert first["applied"][-1] == first["version"]
    again = run_json(env | {DATABASE: url}, "db", "upgrade")
    assert (again["applied"], again["version"]) == ([], first["version"])
    code, out, err = cli(env | {DATABASE: url}, "db", "upgrade")
    assert code == 0, err
    assert "already" in err
    assert "s3cret-pw" not in json.dumps([first, again]) + out + err


def test_a_run_keeps_its_session_in_the_database_and_every_command_reads_it(
    database: str,
    kb_env: dict[str, str],  # noqa: F811 - the fixture
) -> None:
    env = no_model(kb_env) | {DATABASE: database}
    done = run_json(env, "How are costs capped?")
    assert done["status"] == "complete"
    session_id = done["session_id"]
    sessions_dir = Path(env["DEEP_RESEARCH_HOME"]) / "sessions"
    assert not sessions_dir.exists() or not any(sessions_dir.iterdir()), "no files"

    assert [row["session_id"] for row in _listed(env)] == [session_id]
    shown = run_json(env, "sessions", "show", session_id[:6])
    assert shown["status"] == "complete"
    assert shown["report_path"] == f"db:{session_id}/report.md"
    code, out, err = cli(env, "sessions", "report", session_id)
    assert code == 0, err
    assert "Extractive mode" in out

    events = [json.loads(line) for line in _watched(env, session_id)]
    assert [e["id"] for e in events] == list(range(events[0]["id"], events[-1]["id"] + 1))
    assert events[-1]["type"] == "end"

    without = {k: v for k, v in env.items() if k != DATABASE}
    assert _listed(without) == [], "the files hold none"

    [check] = [c for c in run_json(env, "doctor")["checks"] if c["name"] == "sessions"]
    assert check["status"] == "ok"
    assert check["detail"].endswith("(1 sessions)")


def test_doctor_names_a_database_it_cannot_reach(env: dict[str, str]) -> None:
    closed = "postgresql://someone:s3cret-pw@127.0.0.1:9/nowhere?connect_timeout=2"
    code, out, err = cli(env | {DATABASE: closed}, "doctor", "--json")
    [check] = [c for c in json.loads(out)["checks"] if c["name"] == "sessions"]
    assert check["status"] == "fail"
    assert "127.0.0.1:9/nowhere" in check["detail"]
    assert "\n" not in check["detail"]
    assert "s3cret-pw" not in out + err
    assert code != 0


def _listed(env: dict[str, str]) -> list[dict[str, object]]:
    code, out, err = cli(env, "sessions", "list", "--json")
    assert code == 0, err
    rows: list[dict[str, object]] = json.loads(out)
    return rows


def _watched(env: dict[str, str], session_id: str) -> list[str]:
    code, out, err = cli(env, "sessions", "watch", session_id, "--json")
    assert code == 0, err
    return out.strip().splitlines()


# --- the servers' daily budget, one figure for every machine -------------------------------


@pytest.fixture(params=["files", "postgresql"])
def two_books(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Book, Book, str]]:
    """Two servers' handles on one ledger (and the sessions their figure reads)."""
    if request.param == "files":
        yield FileBook(tmp_path / "daily"), FileBook(tmp_path / "daily"), ""
        return
    with fresh_database() as conninfo:
        yield DatabaseBook(conninfo), DatabaseBook(conninfo), conninfo


def test_two_servers_admit_against_one_daily_figure(
    two_books: tuple[Book, Book, str], tmp_path: Path
) -> None:
    first, second, conninfo = two_books
    store = open_sessions(tmp_path / "sessions", conninfo or None)
    ledgers = [DailyLedger(first, store, 10.0), DailyLedger(second, store, 10.0)]

    def admitted(i: int) -> bool:
        try:
            ledgers[i % 2].reserve(1.0, exact=True)
        except DayIsSpent:
            return False
        return True

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(admitted, range(20)))
    assert sum(results) == 10, "never more than the day's budget, whichever server asks"
    assert ledgers[1].committed().reserved == pytest.approx(10.0)
    held = ledgers[0].reservations()
    ledgers[1].release(held[0].id)
    assert ledgers[0].committed().reserved == pytest.approx(9.0)


def test_a_damaged_ledger_in_the_database_refuses_admissions_and_says_where(
    database: str,
) -> None:
    ledger = DailyLedger(DatabaseBook(database), open_sessions(Path("unused"), database), 10.0)
    ledger.reserve(1.0, exact=True)
    execute(database, "UPDATE daily_book SET book = '{torn' WHERE id = 1")
    with pytest.raises(DeepResearchError, match=r"daily_book\) is damaged"):
        ledger.reserve(1.0, exact=True)
    [[kept]] = execute(database, "SELECT book FROM daily_book")
    assert kept == "{torn", "a refused change writes nothing"


def test_research_job_slots_are_shared_by_processes_and_freed_with_a_connection(
    database: str,
) -> None:
    from deep_research.core.errors import StorageError
    from deep_research.persistence.slots import JobSlots

    first, second = JobSlots(database, 2), JobSlots(database, 2)
    try:
        assert (first.try_take(), second.try_take()) == (0, 1)
        assert first.try_take() is None, "both slots held: one each"
        second.close()  # a worker gone: its connection, and its slots, with it
        backends = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        until(lambda: execute(database, backends) == [(1,)], "its backend has exited")
        assert first.try_take() == 1
        first.give_back(0)
        assert first.taken == {1}
        execute(
            database,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        until(lambda: execute(database, backends) == [(0,)], "the backend has exited")
        with pytest.raises(StorageError, match="could not take a research-job slot"):
            first.try_take()
        assert first.taken == set(), "its slots went with its connection"
        assert first.try_take() == 0, "a new connection, the slots free again"
    finally:
        first.close()
        second.close()


def until(check: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what}: not after {seconds} s"
        time.sleep(0.01)
