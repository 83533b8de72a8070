"""What a tool that keeps sessions and caches needs: sessions rm / prune, cache clear,
doctor, and where the data lives."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.cells import cell_len

from deep_research.app import preparation
from deep_research.app.home import data_home
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli, run_json
from tests.fake_openai import FakeOpenAI


def sessions(env: dict[str, str]) -> SessionStore:
    return SessionStore(Path(env["DEEP_RESEARCH_HOME"]) / "sessions")


def test_sessions_rm_deletes_one_session_and_refuses_a_running_one(env: dict[str, str]) -> None:
    store = sessions(env)
    keep, gone, busy = (store.create(q) for q in ("Keep?", "Gone?", "Busy?"))
    code, _, err = cli(env, "sessions", "rm", gone.session_id[:8])
    assert code == 2, "nobody can be asked: --yes is needed"
    assert "--yes" in err
    code, _, err = cli(env, "sessions", "rm", gone.session_id[:8], "--yes")
    assert code == 0, err
    assert f"removed session {gone.session_id}" in err
    assert {row.session_id for row in store.list()} == {keep.session_id, busy.session_id}
    with store.lock(busy.session_id):
        code, _, err = cli(env, "sessions", "rm", busy.session_id, "--yes")
    assert code == 5
    assert "being run by another process" in err
    assert busy.session_id in {row.session_id for row in store.list()}
    code, _, err = cli(env, "sessions", "rm", "abcdef0123", "--yes")
    assert code == 4


def test_sessions_prune_removes_old_sessions_but_never_a_running_one(env: dict[str, str]) -> None:
    store = sessions(env)
    old, running, fresh = (store.create(q) for q in ("Old?", "Old but running?", "Fresh?"))
    for state in (old, running):
        state.updated_at = datetime.now(UTC) - timedelta(days=40)
        store.write_serialized(state.session_id, store.serialize(state))
    code, out, err = cli(env, "sessions", "prune", "--older-than", "30d", "--dry-run", "--json")
    assert code == 0, err
    assert set(json.loads(out)["removed"]) == {old.session_id, running.session_id}
    assert len(store.list()) == 3, "a dry run deletes nothing"
    with store.lock(running.session_id):
        code, out, err = cli(env, "sessions", "prune", "--older-than", "30d", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["removed"] == [old.session_id]
    assert data["running"] == [running.session_id]
    assert {r.session_id for r in store.list()} == {running.session_id, fresh.session_id}
    code, _, err = cli(env, "sessions", "prune", "--older-than", "soon")
    assert code == 2
    assert "30d" in err


def test_cache_clear_empties_the_cache(env: dict[str, str]) -> None:
    cache = Path(env["DEEP_RESEARCH_HOME"]) / "cache"
    cache.mkdir(parents=True)
    (cache / "cache.db").write_bytes(b"x" * 2_000_000)
    code, out, err = cli(env, "cache", "clear", "--json")
    assert code == 0, err
    assert json.loads(out) == {"freed_bytes": 2_000_000}
    assert not cache.exists()


def test_doctor_reports_the_setup_with_secrets_masked(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, out, err = cli(env, "doctor", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["problems"] == []
    assert report["settings"]["openai_api_key"] == "set"
    assert env["OPENAI_API_KEY"] not in out
    assert report["data_dir"] == env["DEEP_RESEARCH_HOME"]
    assert report["price_data"].startswith("genai-prices ")
    assert report["web_research"] == "OpenAI research jobs (gpt-5.5)"
    assert fake_openai.count("/v1/models") >= 1, "the models were looked up"


def test_doctor_says_when_auto_switches_to_search_and_read(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    fake_openai.models.pop("gpt-5.5")  # a gateway that does not serve the default web model
    code, out, err = cli({**env, "DEEP_RESEARCH_WEB_ENGINE": "auto"}, "doctor", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["web_research"].startswith("search and read via ")
    [note] = [c for c in report["checks"] if c["name"] == "web research" and c["status"] == "note"]
    assert note["detail"].startswith(
        "web engine auto: search (search and read via duckduckgo), as "
    )
    assert "does not serve gpt-5.5" in note["detail"]


def test_doctor_says_which_engine_auto_chose_and_why(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, out, err = cli({**env, "DEEP_RESEARCH_WEB_ENGINE": "auto"}, "doctor")
    assert code == 0, err
    [line] = [line for line in out.splitlines() if "web engine auto" in line]
    assert "web engine auto: openai (OpenAI research jobs (gpt-5.5)), as " in line
    assert line.endswith(" serves gpt-5.5")


def test_doctor_says_what_a_search_provider_lacks(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    search = {
        **env,
        "DEEP_RESEARCH_WEB_ENGINE": "search",
        "DEEP_RESEARCH_SEARCH_PROVIDER": "tavily",
    }
    code, out, _ = cli({**search, "TAVILY_API_KEY": "tvly-secret-key"}, "doctor", "--json")
    report = json.loads(out)
    assert (code, report["web_research"]) == (0, "search and read via tavily")
    assert report["settings"]["tavily_api_key"] == "set"
    assert "tvly-secret-key" not in out
    code, out, _ = cli(search, "doctor", "--json")
    assert code == 1
    assert "the tavily search provider needs TAVILY_API_KEY" in json.loads(out)["problems"][0]


def test_doctor_says_when_the_server_cannot_be_reached(env: dict[str, str]) -> None:
    code, out, _ = cli({**env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "doctor")
    assert code == 1
    failed = [line for line in out.splitlines() if line.startswith("✗")]
    assert len(failed) == 1, out
    assert "models: could not look up" in failed[0]
    assert "is the server reachable?" in failed[0]


def test_the_data_dir_is_the_platforms_unless_deep_research_home_names_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform = tmp_path / "platform" / "deep-research"
    monkeypatch.setattr("platformdirs.user_data_dir", lambda *a, **k: str(platform))
    monkeypatch.delenv("DEEP_RESEARCH_HOME", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here
    assert data_home() == platform
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(tmp_path / "mine"))
    assert data_home() == tmp_path / "mine"


@pytest.mark.parametrize("name", ["mcp", "serve", "sessions"])
def test_run_asks_a_question_named_like_a_command(
    env: dict[str, str], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    real_prepare = preparation.prepare

    def prepare(settings, question, options, *flags):  # type: ignore[no-untyped-def]
        asked.append(question)
        return real_prepare(settings, question, options, *flags)

    monkeypatch.setattr(preparation, "prepare", prepare)
    data = run_json(env, "run", name, "--estimate")
    assert data["run_worst_usd"] > 0
    assert asked == [name]


@pytest.mark.parametrize("args", [["sessions", "list"], ["sessions", "list", "--json"]])
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(
    env: dict[str, str], args: list[str]
) -> None:
    import os
    import subprocess
    import sys

    sessions(env).create("Piped?")
    read, write = os.pipe()
    os.close(read)  # `| head -1` that has already gone: every write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "deep_research", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            timeout=120,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize("columns", [80, 120])
def test_sessions_list_is_one_line_a_session_at_any_width(
    env: dict[str, str], columns: int
) -> None:
    import os
    import subprocess
    import sys

    store = sessions(env)
    long = "How do the leading vector databases handle deletes, compaction and " * 3
    wide = "向量数据库如何处理删除和压缩？" * 6  # two terminal cells a character
    for question in (long, "Short?", "Another fairly long question about something " * 2, wide):
        store.create(question)
    done = subprocess.run(
        [sys.executable, "-m", "deep_research", "sessions", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env, "COLUMNS": str(columns), "TERM": "dumb"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.rstrip("\n").splitlines()
    assert len(lines) == 1 + 4, done.stdout  # the header, then one line each
    assert all(cell_len(line) <= columns for line in lines)
    assert any("Short?" in line for line in lines)
    assert any(line.rstrip().endswith("…") for line in lines), "the long question is cut"


def test_a_data_directory_that_cannot_be_used_is_one_line_naming_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "not-a-folder").write_text("a file where the data directory should be")
    home = tmp_path / "not-a-folder" / "deep-research"
    bad = {**env, "DEEP_RESEARCH_HOME": str(home)}
    for args in (["sessions", "list"], ["kb", "ingest", str(tmp_path)]):
        code, _, err = cli(bad, *args)
        assert code == 8, err
        [line] = err.strip().splitlines()
        assert line.startswith(f"error: cannot use {home}")
        assert "Not a directory" in line
        assert "a bug" not in line


# --- with --json, an error is a JSON object on stdout too ------------------------------------


@pytest.mark.parametrize(
    ("args", "exit_code", "code"),
    [
        (["", "--json"], 2, "bad_request"),
        (["How?", "--max-parallel", "abc", "--json"], 2, "bad_request"),  # click's own check
        (["How?", "--web-effort", "extreme", "--json"], 2, "bad_request"),
        (["resume", "ffffffff", "--json"], 4, "unknown_session"),
        (["resume", "BUSY", "--json"], 5, "session_busy"),
        (["sessions", "show", "ffffffff", "--json"], 4, "unknown_session"),
        (["sessions", "watch", "ffffffff", "--json"], 4, "unknown_session"),
        (["sessions", "cancel", "ffffffff", "--json"], 4, "unknown_session"),
        (["sessions", "prune", "--older-than", "soon", "--json"], 2, "bad_request"),
        (["sessions", "prune", "--older-than", "30d", "--json", "BAD_ENV"], 3, "invalid_settings"),
        (["cache", "clear", "--json", "BAD_ENV"], 3, "invalid_settings"),
        (["doctor", "--json", "BAD_ENV"], 3, "invalid_settings"),
        (["kb", "list", "--json", "BAD_ENV"], 3, "invalid_settings"),
        (["sessions", "list", "--json", "NO_HOME"], 8, "storage"),
    ],
)
def test_with_json_an_error_is_one_object_on_stdout_and_one_line_on_stderr(
    env: dict[str, str], tmp_path: Path, args: list[str], exit_code: int, code: str
) -> None:
    store = sessions(env)
    busy = store.create("Busy?", status="interrupted")
    if "BAD_ENV" in args:
        env = {**env, "DEEP_RESEARCH_MAX_COST_USD": "-5"}
    if "NO_HOME" in args:
        (tmp_path / "a-file").write_text("where the data directory should be")
        env = {**env, "DEEP_RESEARCH_HOME": str(tmp_path / "a-file" / "home")}
    args = [busy.session_id if a == "BUSY" else a for a in args if a not in ("BAD_ENV", "NO_HOME")]
    with store.lock(busy.session_id):
        got, out, err = cli(env, *args)
    assert got == exit_code, err
    [line] = out.strip().splitlines()
    error = json.loads(line)["error"]
    assert (error["code"], error["exit_code"]) == (code, exit_code)
    assert error["message"] in err.replace("\n", " ")
    if "--max-parallel" not in args:  # click prints its usage lines before its error
        assert err.strip().splitlines() == [f"error: {error['message']}"]


def test_every_json_error_code_has_an_http_status() -> None:
    from deep_research.frontends.common import ERROR_CODES
    from deep_research.frontends.http.guard import HTTP_STATUS

    assert [code for _, code, _ in ERROR_CODES] == list(HTTP_STATUS), "no code twice"


def test_json_output_keeps_text_as_it_is_in_every_command(env: dict[str, str]) -> None:
    """One ``print_json`` for the run, sessions and kb commands: UTF-8, no ``\\u`` escapes."""
    sessions(env).create("Wie groß ist Köln?", status="interrupted")
    got, out, err = cli(env, "sessions", "list", "--json")
    assert got == 0, err
    assert "Wie groß ist Köln?" in out
    assert json.loads(out)[0]["question"] == "Wie groß ist Köln?"
    got, out, err = cli(env, "kb", "list", "--json")
    assert got == 0, err
    json.loads(out)
