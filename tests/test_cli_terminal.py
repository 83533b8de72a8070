"""The CLI at a terminal (issue 33): a report's first screen, a command's typo refused before
anything loads, Ctrl-C's last screen, the spend line, `sessions watch` after `resume`, what
`sessions list|show|report` print, help without internals, `doctor --settings` as `.env`
lines, and Ctrl-C at any moment of `serve`.

A terminal is made with rich's ``TTY_COMPATIBLE=1``: rich then draws as on one."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from deep_research.app import preparation
from deep_research.core.events import RunEvent
from deep_research.core.report import Report
from deep_research.frontends.cli import app
from deep_research.persistence.events import FILE_NAME, EventLog
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI
from tests.test_cli_search_runs import (  # noqa: F401 (the search run's fixtures)
    BISECT,
    COLORSYS,
    QUERIES,
    outside,
    search,
    search_env,
    web,
)
from tests.test_cli_search_runs import QUESTION as QUESTION_WEB
from tests.world import ResearchWorld, plan_task

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How do vector databases handle deletes and compaction?"
TERMINAL = {"TTY_COMPATIBLE": "1", "COLUMNS": "100", "NO_COLOR": "1"}
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def store(env: dict[str, str]) -> SessionStore:
    return SessionStore(Path(env["DEEP_RESEARCH_HOME"]) / "sessions")


def report_of(path: str) -> Report:
    return Report.model_validate_json((Path(path).parent / "report.json").read_text())


def two_branch_run(env: dict[str, str], fake_openai: FakeOpenAI) -> dict[str, Any]:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    return run_json(env, QUESTION)


# --- 1. the first screen ----------------------------------------------------------------


def test_on_a_terminal_a_run_prints_the_answer_the_contents_and_the_path(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    code, out, err = cli({**env, **TERMINAL}, QUESTION)
    assert code == 0, err
    [session_id] = [p.name for p in store(env).root.iterdir()]
    path = store(env).path(session_id) / "report.md"
    report = report_of(str(path))
    assert "Answer" in out
    assert "A finding that rests on evidence" in out, "the answer's text"
    titles = [p.title for p in report.parts() if p.title and p.title != "Answer"]
    assert titles, "the report has more than its answer"
    contents = out[out.index("Contents") :]
    for title in [*titles, "Sources", "Findings by sub-question"]:
        assert title in contents
    # what the contents name is not printed: no claim list, no sources, no findings
    assert "C1 · uncited" not in out
    assert "https://source1.example/page" not in out
    assert "researched by gpt-5.5" not in out
    assert "Spend: $" not in out
    assert f"report: {path}" in err
    assert f"deep-research sessions report {session_id} --full" in err


def test_full_on_a_terminal_and_piped_output_print_the_whole_report(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]] * 2).install(fake_openai)
    code, out, err = cli({**env, **TERMINAL}, QUESTION, "--full")
    assert code == 0, err
    assert "researched by gpt-5.5" in out, "the findings by sub-question"
    assert "Spend: $" in out, "the footer"
    assert "--full" not in err

    code, piped, err = cli(env, "sessions", "report", sorted(store(env).root.iterdir())[0].name)
    assert code == 0, err
    [session] = store(env).list()
    assert piped.strip() == Path(session.report_path or "").read_text().strip(), "as written"


def test_sessions_report_prints_a_saved_report_again(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    data = two_branch_run(env, fake_openai)
    session_id = data["session_id"]
    code, out, _ = cli({**env, **TERMINAL}, "sessions", "report", session_id[:6])
    assert code == 0
    assert "Contents" in out
    assert "researched by gpt-5.5" not in out
    assert "Spend: $" not in out
    code, out, _ = cli({**env, **TERMINAL}, "sessions", "report", session_id, "--full")
    assert code == 0
    assert "researched by gpt-5.5" in out
    assert "Spend: $" in out


def test_sessions_report_of_an_unknown_or_unwritten_session_is_one_line_exit_4(
    env: dict[str, str],
) -> None:
    code, out, err = cli(env, "sessions", "report", "ffffffff")
    assert (code, out, err.count("\n")) == (4, "", 1)
    state = store(env).create("Never finished?")
    state.status = "interrupted"
    store(env).save(state)
    code, out, err = cli(env, "sessions", "report", state.session_id)
    assert (code, out, err.count("\n")) == (4, "", 1)
    assert f"deep-research resume {state.session_id}" in err


# --- 2. a command's typo --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "meant"),
    [
        ("doctr", "doctor"),
        ("Doctor", "doctor"),
        ("sesions", "sessions"),
        ("resme", "resume"),
        ("chekc", "check"),
    ],
)
def test_a_one_word_question_one_typo_from_a_command_is_refused(
    env: dict[str, str], word: str, meant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(preparation, "prepare", lambda *a, **k: asked.append(a[1]))
    code, out, err = cli(env, word)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"did you mean `{meant}`?" in err
    assert f"deep-research -- {word}" in err
    assert asked == [], "refused before any run was prepared"
    code, out, _ = cli(env, word, "--json")
    assert code == 2
    assert json.loads(out)["error"]["code"] == "bad_request"


@pytest.mark.parametrize(
    "args",
    [
        ["--yes", "doctr"],
        ["--estimate", "doctr"],
        ["--max-cost", "3", "doctr"],
        ["--preset=quick", "-y", "doctr", "--json"],
    ],
)
def test_a_typo_after_leading_options_is_refused_too(
    env: dict[str, str], args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(preparation, "prepare", lambda *a, **k: asked.append(a[1]))
    code, _, err = cli(env, *args)
    assert code == 2
    assert "'doctr' is no command: did you mean `doctor`?" in err
    assert asked == [], "refused before any run was prepared"


@pytest.mark.parametrize("args", [["--json", "doctor"], ["--yes", "Sessions"]])
def test_a_command_after_leading_options_is_named_a_command(
    env: dict[str, str], args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(preparation, "prepare", lambda *a, **k: asked.append(a[1]))
    code, _, err = cli(env, *args)
    assert code == 2
    assert f"{args[1]!r} is a command: its options go after it" in err
    assert "did you mean" not in err
    assert asked == []


@pytest.mark.parametrize(
    ("args", "question"),
    [
        (["--estimate", "--", "doctr"], "doctr"),
        (["run", "doctr", "--estimate"], "doctr"),
        (["docker", "--estimate"], "docker"),
        (["map", "--estimate"], "map"),
        (["kv", "--estimate"], "kv"),
    ],
)
def test_other_words_and_a_forced_typo_are_researched(
    env: dict[str, str], args: list[str], question: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    real_prepare = preparation.prepare

    def prepare(settings, question, options, *flags):  # type: ignore[no-untyped-def]
        asked.append(question)
        return real_prepare(settings, question, options, *flags)

    monkeypatch.setattr(preparation, "prepare", prepare)
    code, _, err = cli(env, "--debug", *args)  # --debug first: the word is still looked at
    assert code == 0, err
    assert "did you mean" not in err
    assert asked == [question]


# --- 3. Ctrl-C ------------------------------------------------------------------------------


def test_ctrl_c_leaves_the_running_nodes_shown_running_and_the_resume_hint_last(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    child = subprocess.Popen(
        [sys.executable, "-m", "deep_research", QUESTION],
        env={**os.environ, **env, **TERMINAL, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    fake_openai.wait_for(lambda: sum(fake_openai.retrieves.values()) >= 1, 60)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    [session_id] = [p.name for p in store(env).root.iterdir()]
    assert session_state(env, session_id)["nodes"]["t1"]["status"] == "pending", "as saved"
    lines = [line for line in ANSI.sub("", err).replace("\r", "\n").splitlines() if line.strip()]
    assert f"deep-research resume {session_id}" in lines[-1], "the last line printed"
    rows = [line for line in lines if line.startswith("t1 ")]
    print("\n".join(dict.fromkeys(rows)))
    assert rows, err
    assert " running " in rows[-1], "the last frame shows the node as it was: running"


# --- 4. the spend line ------------------------------------------------------------------


def test_the_spend_printed_and_in_the_report_is_the_sessions_spend(
    search_env: dict[str, str],  # noqa: F811 (the fixture)
    fake_openai: FakeOpenAI,
) -> None:
    """A search run keeps its pages' text: the claim check reads them and pays a model to
    revise claims, after the report's first draft (and its footer) was made."""
    world = ResearchWorld(
        plans=[[plan_task("w1", question=BISECT), plan_task("w2", question=COLORSYS)]],
        queries=QUERIES,
    )
    world.install(fake_openai)
    code, out, err = cli(search_env, QUESTION_WEB, "--web-engine", "search")
    assert code == 0, err
    assert world.calls.get("reviser"), "the claim check paid a model after the first draft"
    [summary] = store(search_env).list()
    state = store(search_env).load(summary.session_id)
    spent = sum(entry.cost_usd for entry in state.ledger)
    assert f"${spent:.4f}" in err.splitlines()[-1]
    assert re.findall(r"Spend: \$([0-9.]+)", out) == [f"{spent:.4f}"]


# --- 5. `sessions watch` after `resume` ---------------------------------------------------------


def test_watch_while_a_resume_holds_the_session_follows_the_new_run(env: dict[str, str]) -> None:
    sessions = store(env)
    state = sessions.create("Resumed?")
    log = EventLog(sessions.path(state.session_id) / FILE_NAME)
    for kind, message in [("start", "first run"), ("message", "old news"), ("end", "first end")]:
        log.append(RunEvent(type=kind, message=message))  # type: ignore[arg-type]
    with sessions.lock(state.session_id):  # the resume: locked, its start not yet written
        watcher = subprocess.Popen(
            [sys.executable, "-m", "deep_research", "sessions", "watch", state.session_id],
            env={**os.environ, **env, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert watcher.stdout is not None
        log.append(RunEvent(type="start", message="second run"))
        first = watcher.stdout.readline()
        log.append(RunEvent(type="end", message="second end"))
        out, err = watcher.communicate(timeout=60)
    log.close()
    assert watcher.returncode == 0, err
    shown = first + out
    assert "second run" in first
    assert "second end" in shown
    assert "old news" not in shown
    assert "first end" not in shown


# --- 6. sessions list and show ------------------------------------------------------------------


def test_sessions_list_keeps_room_for_the_question_beside_a_long_status(
    env: dict[str, str],
) -> None:
    sessions = store(env)
    question = "Which compaction strategies keep tail latency low under heavy deletes?"
    state = sessions.create(question)
    state.status, state.stop_reason = "stopped", "max_iterations"
    sessions.save(state)
    (sessions.path(state.session_id) / "report.md").write_text("# Which?\n")
    sessions.create("Short?")
    done = subprocess.run(
        [sys.executable, "-m", "deep_research", "sessions", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env, "COLUMNS": "80", "TERM": "dumb", "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    [row] = [line for line in lines if "stopped" in line]
    assert question[:20] in row, "not cut to 11 characters for a long status"


def test_sessions_show_prints_the_path_whole_and_the_resume_hint(env: dict[str, str]) -> None:
    sessions = store(env)
    state = sessions.create("Interrupted?")
    state.status, state.stop_reason = "interrupted", "interrupted"
    sessions.save(state)
    long_home = {**env, **TERMINAL, "COLUMNS": "40"}
    path = sessions.path(state.session_id) / "report.md"
    path.write_text("# Interrupted?\n")
    code, out, _ = cli(long_home, "sessions", "show", state.session_id)
    assert code == 0
    assert str(path) in out, "never wrapped"
    assert f"deep-research resume {state.session_id}" in out


def test_sessions_show_of_a_report_with_no_claims_says_none(env: dict[str, str]) -> None:
    from deep_research.core.claim_totals import ClaimTotals

    sessions = store(env)
    state = sessions.create("Checked?")
    state.claims = ClaimTotals()
    sessions.save(state)
    code, out, _ = cli(env, "sessions", "show", state.session_id)
    assert code == 0
    assert "claims:   none\n" in ANSI.sub("", out)


# --- 7. help without internals --------------------------------------------------------------


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in getattr(group, "commands", {}).items():
        yield from commands(command, (*path, name))


def test_no_help_shows_the_codes_internals(env: dict[str, str]) -> None:
    root = typer.main.get_command(app)
    seen = list(commands(root))
    assert ("sessions", "report") in seen
    assert ("kb", "search") in seen
    internals = re.compile(r"settings\.\w|\w+/\w+\.py|<\w+\[|\bkb_path\b|\bkb_name\b")
    for path in seen:
        code, out, err = cli({**env, "COLUMNS": "200"}, *path, "--help")
        assert code == 0, (path, err)
        assert not internals.search(out), (path, internals.search(out))


# --- 8. doctor --settings -----------------------------------------------------------------------


def test_doctor_lists_the_settings_as_env_lines(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    code, out, err = cli(env, "doctor", "--settings")
    assert code == 0, err
    lines = out.splitlines()
    assert "DEEP_RESEARCH_WEB_ENGINE=openai" in lines
    assert "# OPENAI_API_KEY is set" in lines
    assert "# TAVILY_API_KEY is not set" in lines
    assert env["OPENAI_API_KEY"] not in out
    assert not any(line.startswith(("web_engine", "openai_api_key")) for line in lines)
    assert not [line for line in lines if "max_parallel" in line.split("=")[0]]


# --- 9. dollars in JSON ---------------------------------------------------------------------


def test_json_dollars_carry_no_float_noise(env: dict[str, str]) -> None:
    from deep_research.frontends.common import usd_rounded

    noisy = {"a_usd": 51.239999999999995, "nested": [{"cost_usd": 0.1 + 0.2}], "ratio": 0.1 + 0.2}
    assert usd_rounded(noisy) == {"a_usd": 51.24, "nested": [{"cost_usd": 0.3}], "ratio": 0.1 + 0.2}
    data = run_json(env, "--preset", "deep", "What is HNSW?", "--estimate")
    for key, value in data.items():
        if key.endswith("_usd"):
            assert value == round(value, 4), (key, value)


# --- 10. why a page was skipped -----------------------------------------------------------------


def test_the_live_view_wraps_a_long_note_whole() -> None:
    from rich.console import Console

    from deep_research.core.models import SessionState
    from deep_research.frontends.render import LiveView

    view = LiveView(SessionState(session_id="s1", question="q?"))
    reason = "127.0.0.1 is loopback, and not on DEEP_RESEARCH_FETCH_ALLOW " + "x" * 60 + " END"
    view.event(f"skipped http://127.0.0.1:1/page: {reason}")
    console = Console(width=60, record=True, soft_wrap=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(view)
    drawn = console.export_text()
    console.file.close()
    assert "END" in drawn
    assert "DEEP_RESEARCH_FETCH_ALLOW" in drawn.replace("\n", "")


# --- 11. Ctrl-C while `serve` starts ------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.mark.parametrize("wait_for", ["typer", "uvicorn", "fastapi", "serving on"])
def test_ctrl_c_at_any_moment_of_serve_exits_130(
    env: dict[str, str], tmp_path: Path, wait_for: str
) -> None:
    """SIGINT while the CLI imports, while the server starts, and once it serves."""
    port = str(free_port())
    child = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "deep_research", "serve", "--port", port],
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    assert child.stderr is not None
    seen = ""
    while wait_for not in seen:  # -X importtime: a line per module imported
        line = child.stderr.readline()
        assert line, seen[-2000:]
        seen = line
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    assert child.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    assert "Fatal Python error" not in err


def test_ctrl_c_after_the_cli_loaded_but_before_it_maps_errors_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Typer builds its commands before `cli` catches anything (`serve` at 0.18 s)."""
    import gc

    from deep_research import __main__ as entry
    from deep_research.frontends import cli as cli_module

    def interrupted() -> None:
        raise KeyboardInterrupt

    def run_entry() -> None:
        try:
            entry.main()
        except KeyboardInterrupt:  # not let through: pytest would take it as the user's
            pytest.fail("the interrupt escaped: Python prints its traceback")

    monkeypatch.setattr(cli_module, "main", interrupted)
    try:
        with pytest.raises(SystemExit) as exited:
            run_entry()
    finally:
        gc.unfreeze()  # main() freezes the objects of a process about to end
    assert exited.value.code == 130
    assert capsys.readouterr().err == "error: interrupted\n"
