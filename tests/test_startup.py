"""An instant CLI: what `--help`, `--version` and `sessions` load, and the small commands
around the question (stdin, a file, the version, a crash log). Not timed: bench/startup.py
measures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deep_research.app import preparation
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli, run_json

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("openai", "langchain", "chromadb", "genai_prices", "mcp", "trafilatura")
PROBE = """
import json, sys
sys.argv = ["deep-research", *json.loads(sys.argv[1])]
from deep_research.__main__ import main
try:
    main()
except SystemExit:
    pass
loaded = sorted({m.split(".")[0] for m in sys.modules})
sys.stderr.write("\\nLOADED " + json.dumps(loaded) + "\\n")
"""


def probed(probe: str, args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """The CLI with ``args`` in a fresh process, run by ``probe`` (which reports on stderr)."""
    env = {
        **os.environ,
        "DEEP_RESEARCH_HOME": str(home),
        "PYTHONPATH": str(REPO),
        "OPENAI_API_KEY": "sk-not-used",
    }
    return subprocess.run(
        [sys.executable, "-c", probe, json.dumps(args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home.parent,
    )


def loaded_by(args: list[str], home: Path) -> set[str]:
    done = probed(PROBE, args, home)
    line = done.stderr.rsplit("LOADED ", 1)[1]
    return set(json.loads(line))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    state = SessionStore(path / "sessions").create("What is in the store?")
    (path / "session-id").write_text(state.session_id)
    return path


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--version"], ["sessions", "list"], ["sessions", "show", "SESSION"]],
)
def test_light_commands_load_no_heavy_library(home: Path, args: list[str]) -> None:
    session_id = (home / "session-id").read_text()
    loaded = loaded_by([session_id if a == "SESSION" else a for a in args], home)
    assert "typer" in loaded, "the probe ran the CLI"
    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


def test_the_probe_sees_heavy_libraries_when_a_command_loads_them(home: Path) -> None:
    assert "chromadb" in loaded_by(["kb", "list"], home), "the check is not vacuous"


def test_kb_search_loads_chromadb_but_not_langchain(home: Path) -> None:
    """A search reads Chroma directly: LangChain (~0.2 s of a search's start) loads only
    with langchain-chroma, for an ingest's writes."""
    notes = home.parent / "notes"
    notes.mkdir()
    (notes / "cost.md").write_text("# Cost\n\nEvery web job reserves its worst-case cost.\n")
    ingest = probed(PROBE, ["kb", "ingest", str(notes)], home)
    assert "langchain_core" in ingest.stderr.rsplit("LOADED ", 1)[1], ingest.stderr
    done = probed(PROBE, ["kb", "search", "worst-case cost", "--json"], home)
    assert "cost.md" in done.stdout, done.stderr
    loaded = set(json.loads(done.stderr.rsplit("LOADED ", 1)[1]))
    assert "chromadb" in loaded
    assert sorted(m for m in loaded if m.startswith(("langchain", "openai"))) == []


EXIT_PROBE = PROBE.replace(
    "except SystemExit:\n    pass",
    "except SystemExit as exit:\n    sys.stderr.write(f'\\nEXIT {exit.code}\\n')",
)


@pytest.mark.parametrize(
    ("args", "exit_code"),
    [
        ([""], 2),
        (["x" * 5000], 2),
        (["How?", "--kb-only", "--web-only"], 2),
        (["How?", "--max-parallel", "0"], 2),
        (["How?", "--web-effort", "extreme"], 2),
        (["How?", "--kb", "../notes"], 2),
        (["resume", "ffffffff"], 4),
        (["resume", "nope"], 4),
        (["sessions", "show", "ffffffff"], 4),
    ],
)
def test_a_mistake_fails_before_the_engine_loads(
    home: Path, args: list[str], exit_code: int
) -> None:
    """An empty or huge question, a bad flag, an unknown session: checked before the engine's
    libraries load (seconds of CPU), so the error is instant."""
    done = probed(EXIT_PROBE, args, home)
    assert f"\nEXIT {exit_code}\n" in done.stderr, done.stderr
    assert done.stderr.startswith("error: "), done.stderr
    loaded = set(json.loads(done.stderr.rsplit("LOADED ", 1)[1]))
    assert sorted(m for m in loaded if m.startswith(HEAVY)) == []


@pytest.mark.parametrize("args", [["sessions", "list"], ["sessions", "show", "SESSION"]])
def test_sessions_list_loads_neither_pydantic_settings_nor_asyncio(
    home: Path, args: list[str]
) -> None:
    """What `sessions list|show` need, no more (bench/startup.py times them): the data
    directory (app.home), not every setting; a fifth of their start went to pydantic-settings
    and the asyncio it imports."""
    session_id = (home / "session-id").read_text()
    loaded = loaded_by([session_id if a == "SESSION" else a for a in args], home)
    assert "deep_research" in loaded
    assert {"pydantic_settings", "asyncio", "dotenv"} & loaded == set()
    assert "httpx" not in loaded, "the --server client loads only with a service to call"


def test_sessions_list_finds_a_data_directory_given_only_in_dotenv(home: Path) -> None:
    (home.parent / ".env").write_text(f"DEEP_RESEARCH_HOME={home}\n")
    env = {k: v for k, v in os.environ.items() if k.upper() != "DEEP_RESEARCH_HOME"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(["sessions", "list", "--json"])],
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home.parent,
    )
    listed = [row["session_id"] for row in json.loads(done.stdout)]
    assert listed == [(home / "session-id").read_text()], done.stderr
    loaded = set(json.loads(done.stderr.rsplit("LOADED ", 1)[1]))
    assert {"pydantic_settings", "asyncio"} & loaded == set()


def test_sessions_show_reads_a_run_as_the_service_does(tmp_path: Path) -> None:
    """`show` reads the store itself (no Settings): a run no process holds is interrupted,
    and its report path is given once there is a report, as ``saved.status`` has it."""
    env = {"DEEP_RESEARCH_HOME": str(tmp_path / "home")}
    store = SessionStore(tmp_path / "home" / "sessions")
    state = store.create("Still running?", status="running")
    shown = run_json(env, "sessions", "show", state.session_id)
    assert (shown["status"], shown["report_path"]) == ("interrupted", None)
    report = store.write_report(state.session_id, "# Report\n")
    with store.lock(state.session_id):
        shown = run_json(env, "sessions", "show", state.session_id[:6])
    assert (shown["status"], shown["report_path"]) == ("running", report)


ENGINE = ("chromadb", "langchain", "openai", "trafilatura", "onnxruntime", "bm25s", "genai_prices")
MCP_PROBE = """
import sys
from deep_research.frontends.mcp import server as mcp_server

build = mcp_server.create_server


def create_server(*args, **kwargs):
    server = build(*args, **kwargs)

    @server.tool()
    def loaded_modules() -> list[str]:
        \"\"\"The top-level modules this process has imported.\"\"\"
        return sorted({m.split(".")[0] for m in sys.modules})

    return server


mcp_server.create_server = create_server
sys.argv = ["deep-research", "mcp"]
from deep_research.__main__ import main
main()
"""


async def test_the_mcp_server_answers_before_it_loads_the_engine(home: Path) -> None:
    """`deep-research mcp` (with a probe tool added) answers initialize and tools/list with
    the engine unloaded; the first tool that needs it loads it."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {
        **os.environ,
        "DEEP_RESEARCH_HOME": str(home),
        "PYTHONPATH": str(REPO),
        "OPENAI_API_KEY": "sk-not-used",
    }
    server = StdioServerParameters(
        command=sys.executable, args=["-c", MCP_PROBE], env=env, cwd=home.parent
    )
    # The server's stderr to a file: the SDK's default is the sys.stderr of the moment it
    # was imported, which a test's output capture may have been (no file descriptor).
    with (home.parent / "mcp-stderr.txt").open("w") as errors:
        transport = stdio_client(server, errlog=errors)
        async with Client(transport, read_timeout_seconds=60) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            at_start = await client.call_tool("loaded_modules", {})
            await client.call_tool("kb_search", {"query": "anything"})
            after_a_search = await client.call_tool("loaded_modules", {})
    assert "research_start" in tools
    assert at_start.structured_content is not None
    loaded = at_start.structured_content["result"]
    assert "mcp" in loaded, "the probe ran the server"
    assert sorted(m for m in loaded if m.startswith(ENGINE)) == []
    assert after_a_search.structured_content is not None
    assert "chromadb" in after_a_search.structured_content["result"], "not vacuous"


def test_version(tmp_path: Path) -> None:
    code, out, _ = cli({"DEEP_RESEARCH_HOME": str(tmp_path)}, "--version")
    assert code == 0
    assert out.startswith("deep-research 0.")


def test_the_question_from_stdin_or_a_file(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from deep_research.frontends.cli import app

    no_model = {k: v for k, v in env.items() if not k.startswith("OPENAI_")}
    (tmp_path / "kb").mkdir()  # the sample docs a run with no model answers from
    (tmp_path / "kb" / "note.md").write_text("# Note\n\nA note.\n", encoding="utf-8")
    asked: list[str] = []
    real_prepare = preparation.prepare

    def prepare(settings, question, options, *flags):  # type: ignore[no-untyped-def]
        asked.append(question)
        return real_prepare(settings, question, options, *flags)

    monkeypatch.setattr(preparation, "prepare", prepare)
    result = CliRunner().invoke(app, ["-", "--estimate"], env=no_model, input="From stdin?\n")
    assert result.exit_code == 0, result.stderr
    question_file = tmp_path / "q.txt"
    question_file.write_text("From a file?\n", encoding="utf-8")
    code, _, err = cli(no_model, "--question-file", str(question_file), "--estimate")
    assert code == 0, err
    assert asked == ["From stdin?\n", "From a file?\n"]

    code, _, err = cli(no_model, "both?", "--question-file", str(question_file))
    assert code == 2
    assert "as an argument, as - (stdin), or --question-file" in err
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe\x00binary")
    code, _, err = cli(no_model, "--question-file", str(tmp_path / "bad.txt"))
    assert code == 2
    assert "cannot read the question" in err


def test_an_unexpected_exception_is_one_line_naming_its_crash_log(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = env["OPENAI_API_KEY"]

    def broken(*_args: object) -> None:
        raise RuntimeError(f"something impossible happened with {secret}")

    monkeypatch.setattr(preparation, "prepare", broken)
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    code, out, err = cli(env, "What is a question?")
    assert code == 70
    assert out == ""
    [line] = err.strip().splitlines()
    assert line.startswith("error: unexpected RuntimeError")
    assert secret not in err
    logs = list((Path(env["DEEP_RESEARCH_HOME"]) / "logs").glob("crash-*.log"))
    assert len(logs) == 1
    assert str(logs[0]) in line
    text = logs[0].read_text()
    assert "Traceback" in text
    assert "broken" in text
    assert secret not in text
    assert "<OPENAI_API_KEY>" in text


def test_a_key_kept_in_dotenv_never_reaches_the_crash_line_or_log(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-dotenv-secret-value-1234"
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={secret}\n")  # env fixture: cwd=tmp_path
    without_key = {k: v for k, v in env.items() if k != "OPENAI_API_KEY"}
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def broken(*_args: object) -> None:
        raise RuntimeError(f"failed with {secret} and sk-another-key-shaped-thing")

    monkeypatch.setattr(preparation, "prepare", broken)
    code, _, err = cli(without_key, "What is a question?")
    assert code == 70
    [log] = (Path(env["DEEP_RESEARCH_HOME"]) / "logs").glob("crash-*.log")
    for text in (err, log.read_text()):
        assert secret not in text
        assert "sk-another-key-shaped-thing" not in text


def test_a_crash_log_that_cannot_be_written_still_gives_one_line(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(preparation, "prepare", broken)
    monkeypatch.setattr("tempfile.gettempdir", lambda: "/proc/no-such-dir")
    code, _, err = cli({**env, "DEEP_RESEARCH_HOME": "/proc/nope"}, "What is a question?")
    assert code == 70
    [line] = err.strip().splitlines()
    assert "no log could be written" in line


def test_short_help_and_a_huge_question_on_stdin(env: dict[str, str]) -> None:
    from typer.testing import CliRunner

    from deep_research.frontends.cli import app

    assert cli(env, "-h")[0] == 0
    result = CliRunner().invoke(app, ["-"], env=env, input="x" * 1_000_000)
    assert result.exit_code == 2
    assert "over 64 KB" in result.stderr


def test_a_crash_log_masks_short_secrets_and_falls_back_to_a_private_folder(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import stat

    from deep_research.frontends import crash

    short = "tok5x"  # under 8 characters: the scrubber used to let it through
    (tmp_path / ".env").write_text(f"EXA_API_KEY={short}\n")  # env fixture: cwd=tmp_path
    home = tmp_path / "read-only-home"
    home.mkdir()
    (home / "logs").write_text("a file where the logs folder should be")
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(home))
    monkeypatch.setattr(crash.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    log = crash.write_crash_log(RuntimeError(f"the provider refused {short}"))
    assert log is not None
    assert log.parent == tmp_path / "tmp" / f"deep-research-logs-{os.getuid()}"
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert short not in text
    assert "<EXA_API_KEY (settings)>" in text


def test_a_short_dummy_key_is_masked_as_a_word_without_garbling_the_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deep_research.frontends import crash

    monkeypatch.setenv("OPENAI_API_KEY", "x")  # a local server's dummy key
    scrubbed = crash.scrub("unexpected IndexError in /home/alex/x/run.py with key x")
    assert scrubbed == (
        "unexpected IndexError in /home/alex/<OPENAI_API_KEY>/run.py with key <OPENAI_API_KEY>"
    )
