"""The MCP server driven by the SDK's own client: over stdio (a real `deep-research mcp`
subprocess whose every stdout line must be JSON-RPC), over streamable HTTP (a real uvicorn
on loopback), and in-process for the shapes of its tools. Research runs against the fake
OpenAI server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult

from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError
from deep_research.core.models import SessionState
from deep_research.core.report import assemble
from deep_research.frontends.mcp.server import MCP_PATH, create_server, http_app, public_hosts
from deep_research.kb.store import LEXICAL_FILE
from tests.clirun import cli, session_state
from tests.fake_openai import FakeOpenAI
from tests.serving import free_port, serving
from tests.world import ResearchWorld, plan_task

QUESTION = "How do vector databases handle deletes?"
TOKEN = "s3cret-token-for-the-mcp-tests-0123456789"


def documented_tools() -> set[str]:
    """The tools docs/mcp.md's table names (its first column): the one list of them in
    prose, which the server must serve exactly."""
    section = (Path(__file__).parents[1] / "docs" / "mcp.md").read_text().split("## Tools")[1]
    rows = [line.split("|") for line in section.split("\n## ")[0].splitlines()]
    return {name for row in rows if len(row) > 2 for name in row[1].split("`")[1::2]}


TOOLS = documented_tools()


def settings_of(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


@asynccontextmanager
async def stdio_server(env: dict[str, str], cwd: Path) -> AsyncIterator[tuple[Client, Path]]:
    """`deep-research mcp` as a subprocess, its stdout copied to a file by `tee`, its stderr
    written to ``cwd/stderr.txt``."""
    wire = cwd / "stdout.jsonl"
    errors = shlex.quote(str(cwd / "stderr.txt"))
    command = (
        f"{shlex.quote(sys.executable)} -m deep_research.frontends.cli mcp 2> {errors}"
        f" | tee {shlex.quote(str(wire))}"
    )
    params = StdioServerParameters(
        command="sh", args=["-c", command], env={**os.environ, **env}, cwd=cwd
    )
    # sh's own stderr to a file too: the SDK's default is the sys.stderr of the moment it was
    # imported, which a test's output capture may have been (no file descriptor).
    with (cwd / "sh-stderr.txt").open("w") as shell_errors:
        transport = stdio_client(params, errlog=shell_errors)
        async with Client(transport, read_timeout_seconds=60) as client:
            yield client, wire


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(getattr(block, "text", "") for block in result.content)


def every_line_is_json_rpc(wire: Path) -> int:
    lines = wire.read_text().splitlines()
    for line in lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
    return len(lines)


async def test_a_run_over_stdio_from_start_to_report(
    kb_env: dict[str, str], fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    world = ResearchWorld(plans=[[plan_task("t1"), plan_task("t2", "t1")]])
    world.install(fake_openai)
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with stdio_server(kb_env, tmp_path) as (client, wire):
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS

        hits = data(await client.call_tool("kb_search", {"query": "worst-case cost reserved"}))
        hit = hits["hits"][0]
        assert hit["source"] == "budgets.md"
        chunk = data(await client.call_tool("kb_fetch", {"chunk_id": hit["chunk_id"]}))
        assert chunk["text"] == hit["text"]
        assert chunk["locator"] == hit["locator"]

        started = data(await client.call_tool("research_start", {"question": QUESTION}))
        session_id = started["session_id"]
        followed = data(
            await client.call_tool(
                "research_follow", {"session_id": session_id}, progress_callback=on_progress
            )
        )
        assert followed["ended"] is True
        assert followed["status"]["status"] == "complete"
        assert [value for value, _ in progress] == list(range(1, len(progress) + 1))
        assert followed["events"] == len(progress) > 4
        messages = [message or "" for _, message in progress]
        assert any("t2" in message for message in messages)

        status = data(await client.call_tool("research_status", {"session_id": session_id}))
        assert status["status"] == "complete"
        arguments = {"session_id": session_id, "limit": 1}
        evidence = data(await client.call_tool("research_evidence", arguments))
        assert evidence["total"] == status["evidence_units"] > 0
        assert len(evidence["units"]) == 1
        assert {node["id"]: node["status"] for node in status["nodes"]} == {
            "t1": "done",
            "t2": "done",
        }
        report = data(await client.call_tool("research_report", {"session_id": session_id}))
        assert report["final"] is True
        assert report["markdown"].startswith(f"# {QUESTION}")

        claim = "Every web job reserves its worst-case cost before it starts [1]."
        supported = data(
            await client.call_tool("verify_claim", {"claim": claim, "source": hit["chunk_id"]})
        )
        assert supported["support"]["verdict"] == "supported"
        assert supported["support"]["verifier"] == "text", "sure: no judge asked"
        assert supported["passage"] in chunk["text"]
        unsure = data(
            await client.call_tool(
                "verify_claim",
                {"claim": "Every web job is retried three times.", "source": hit["chunk_id"]},
            )
        )
        assert unsure["support"]["verdict"] == "unsupported"
        assert unsure["support"]["verifier"] == Settings.model_fields["judge_model"].default
        assert unsure["support"]["explanation"].startswith("Scripted")

        unknown = await client.call_tool("research_status", {"session_id": "abcdef012345"})
        assert "no session" in error_text(unknown)
        assert "Traceback" not in error_text(unknown)
    assert every_line_is_json_rpc(wire) > 10
    assert world.calls["verifier"] == 1


def lexical_indexes(home: Path) -> list[Path]:
    return list(home.rglob(LEXICAL_FILE))


async def test_the_stdio_server_writes_no_debug_or_info_lines(
    kb_env: dict[str, str], tmp_path: Path
) -> None:
    """An MCP client shows the server's stderr to its user. bm25s sets its logger to DEBUG
    and logs while it builds an index, and the SDK logs a failed tool at INFO."""
    home = Path(kb_env["DEEP_RESEARCH_HOME"])
    for index in lexical_indexes(home):
        index.unlink()  # the server builds it again (as after an upgrade)
    async with stdio_server(kb_env, tmp_path) as (client, _wire):
        hits = data(await client.call_tool("kb_search", {"query": "worst-case cost reserved"}))
        failed = await client.call_tool("research_status", {"session_id": "abcdef012345"})
    assert hits["hits"]
    assert "no session" in error_text(failed)
    assert lexical_indexes(home), "the index was built in the server"
    assert not re.search(r"\b(DEBUG|INFO)\b", (tmp_path / "stderr.txt").read_text())


def test_warnings_still_reach_stderr() -> None:
    probe = (
        "import logging\n"
        "from deep_research.frontends.mcp.server import log_warnings_only\n"
        "log_warnings_only()\n"
        "noisy = logging.getLogger('noisy')\n"
        "noisy.setLevel(logging.DEBUG)\n"
        "noisy.debug('a debug line'); noisy.info('an info line'); noisy.warning('a warning')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr == "WARNING noisy: a warning\n"


def server_pid(cwd: Path) -> int:
    """The `deep-research mcp` process working in ``cwd`` (each test has its own)."""
    for proc in Path("/proc").iterdir():
        try:
            if (
                proc.name.isdigit()
                and (proc / "cwd").resolve() == cwd.resolve()
                and b"deep_research.frontends.cli\0mcp" in (proc / "cmdline").read_bytes()
            ):
                return int(proc.name)
        except OSError:
            continue
    raise AssertionError("no server process")


def alive(pid: int) -> bool:
    """Running, not exited (a zombie waits for `sh` to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.parametrize("goodbye", ["stdin closed", "SIGTERM"])
async def test_a_client_going_away_mid_run_leaves_it_saved_interrupted(
    env: dict[str, str], fake_openai: FakeOpenAI, tmp_path: Path, goodbye: str
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    async with stdio_server(env, tmp_path) as (client, wire):
        started = data(await client.call_tool("research_start", {"question": QUESTION}))
        session_id = started["session_id"]
        await asyncio.to_thread(
            fake_openai.wait_for, lambda: any(fake_openai.retrieves.values()), 30
        )
        if goodbye == "SIGTERM":
            pid = server_pid(tmp_path)
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):  # polled: a grandchild (under `sh`) cannot be waited on
                if not alive(pid):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("SIGTERM did not stop the server")
    # The server saved the run before it exited, with its job.
    state = session_state(env, session_id)
    assert state["status"] == "interrupted"
    job_id = state["nodes"]["t1"]["remote_jobs"]["deep_research"]
    every_line_is_json_rpc(wire)
    fake_openai.complete(job_id)
    code, out, err = await asyncio.to_thread(cli, env, "resume", session_id, "--json")
    assert code == 0, err
    assert json.loads(out)["status"] == "complete"
    assert len(fake_openai.retrieves) == 1, "the resume took up the same job"


async def test_streamable_http_with_a_token(
    kb_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_of(kb_env, monkeypatch).with_overrides(api_token=TOKEN)
    port = free_port()
    app = http_app(settings, create_server(settings), port)
    async with serving(app, port) as base:
        url = base + MCP_PATH
        async with httpx.AsyncClient() as plain:
            refused = await plain.post(url, json={})
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
            wrong = await plain.post(url, json={}, headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            rebound = await plain.post(
                url,
                json={},
                headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"},
            )
            assert rebound.status_code in (403, 421)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS
            hits = data(await client.call_tool("kb_search", {"query": "parallel nodes"}))
            assert hits["hits"][0]["source"] == "scheduling.md"


def test_a_public_url_without_a_token_is_refused(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_of(env, monkeypatch).with_overrides(kb_mcp_url="https://kb.example.org/mcp")
    with pytest.raises(ConfigError, match="DEEP_RESEARCH_API_TOKEN"):
        http_app(settings, create_server(settings), free_port())


# --- in process: the shapes of the tools ---------------------------------------------------


async def test_every_tool_has_typed_input_and_output_and_a_description(
    offline: Settings,
) -> None:
    async with Client(create_server(offline)) as client:
        tools = (await client.list_tools()).tools
    for tool in tools:
        assert len(tool.description or "") > 40, tool.name
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.output_schema is not None, tool.name
    start = next(tool for tool in tools if tool.name == "research_start")
    assert start.input_schema["required"] == ["question"]
    assert start.annotations is not None
    assert start.annotations.read_only_hint is False


async def test_search_and_fetch_have_the_connector_shape(kb_env: dict[str, str]) -> None:
    settings = Settings(_env_file=None, **{"home": kb_env["DEEP_RESEARCH_HOME"]})  # type: ignore[arg-type]
    async with Client(create_server(settings)) as client:
        found = data(await client.call_tool("search", {"query": "independent nodes in parallel"}))
        first = found["results"][0]
        assert set(first) == {"id", "title", "url"}
        assert first["url"].startswith("kb://kb/scheduling.md#")
        document = data(await client.call_tool("fetch", {"id": first["id"]}))
        assert set(document) == {"id", "title", "text", "url", "metadata"}
        assert "Independent nodes run in parallel" in document["text"]
        assert document["url"] == first["url"]
        claim = "Independent nodes run in parallel, up to max_parallel at once."
        checked = data(
            await client.call_tool("verify_claim", {"claim": claim, "source": first["url"]})
        )
        assert checked["support"]["verdict"] == "supported"
        assert checked["location"] == document["metadata"]["locator"]
        bad = await client.call_tool("fetch", {"id": "../../etc/passwd"})
        assert "not a chunk id" in error_text(bad)


async def test_kb_search_gives_front_matter_titles_tags_and_a_score_in_0_1(
    kb_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "kb" / "oncall.md").write_text(
        "---\ntitle: On-call handbook\ntags: [ops, pager]\n---\n# Paging\n\n"
        "Escalate a page after fifteen minutes of silence.\n",
        encoding="utf-8",
    )
    code, _, err = cli(kb_env, "kb", "ingest", "kb")
    assert code == 0, err
    settings = Settings(_env_file=None, **{"home": kb_env["DEEP_RESEARCH_HOME"]})  # type: ignore[arg-type]
    async with Client(create_server(settings)) as client:
        [tool] = [t for t in (await client.list_tools()).tools if t.name == "kb_search"]
        found = data(await client.call_tool("kb_search", {"query": "escalate a page", "k": 3}))
    first, *others = found["hits"]
    assert (first["source"], first["title"], first["tags"]) == (
        "oncall.md",
        "On-call handbook",
        ["ops", "pager"],
    )
    assert first["score"] == 1.0
    assert all(0.0 <= hit["score"] < 1.0 for hit in others)
    assert {hit["title"] for hit in others} <= {"Scheduling", "Budgets"}  # no front matter
    assert all(hit["tags"] == [] for hit in others)
    assert tool.output_schema is not None
    score = tool.output_schema["$defs"]["KbHit"]["properties"]["score"]
    assert "[0, 1]" in score["description"]


async def test_a_report_before_the_run_ends_holds_the_findings_so_far_as_its_sections(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    code, out, err = await asyncio.to_thread(cli, env, QUESTION, "--json")
    assert code == 0, err
    state = SessionState.model_validate(session_state(env, json.loads(out)["session_id"]))
    state.status = "interrupted"
    state.writing = None  # as before its report was written
    text = assemble(state).markdown
    assert text.startswith(f"# {QUESTION}")
    assert "interrupted by the user" not in text
    assert "1/1 sub-questions researched" in text
    assert "Not written yet: the findings of this sub-question so far." in text
    first_finding = state.nodes["t1"].notes.split(" [S", 1)[0]
    assert first_finding in text
    cited = [line for line in text.splitlines() if re.match(r"\d+\. \[Source", line)]
    assert cited
    assert all(re.fullmatch(r"\d+\. \[Source \d\]\(<https://\S+>\)", line) for line in cited)


FORGED_TITLE = "NIST](https://phish.example/t) [x"


def test_the_report_so_far_quotes_titles_and_notes_without_forging_links() -> None:
    from markdown_it import MarkdownIt

    from deep_research.core.models import Citation, ResearchNode

    state = SessionState(session_id="d" * 12, question="q?")
    state.nodes["t1"] = ResearchNode(
        id="t1",
        question="Which one?](https://phish.example/q) [x",
        status="done",
        notes="It is so [S1].\n\n[S1]: https://phish.example/def",
        citations=[Citation(ref="S1", kind="web", url="https://nist.gov/p", title=FORGED_TITLE)],
    )
    state.sources["S1"] = state.nodes["t1"].citations[0]
    text = assemble(state).markdown
    hrefs = re.findall(r'href="([^"]*)"', MarkdownIt("commonmark").render(text))
    assert hrefs == ["https://nist.gov/p"]
    assert "1. [NIST\\](https://phish.example/t) \\[x](<https://nist.gov/p>)" in text


async def test_a_run_is_cancelled_and_its_findings_read_before_any_report(
    env: dict[str, str], fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    async with Client(create_server(settings_of(env, monkeypatch))) as client:
        started = data(await client.call_tool("research_start", {"question": QUESTION}))
        session_id = started["session_id"]
        await asyncio.to_thread(
            fake_openai.wait_for, lambda: any(fake_openai.retrieves.values()), 30
        )
        early = data(await client.call_tool("research_report", {"session_id": session_id[:6]}))
        assert early["final"] is False
        assert (early["nodes_done"], early["nodes_total"]) == (0, 1)
        assert "No report yet: the run is running" in early["markdown"]

        cancelled = data(await client.call_tool("research_cancel", {"session_id": session_id}))
        assert [job["status"] for job in cancelled["jobs"]] == ["cancelled"]
        assert cancelled["recorded"] is True
        status = data(await client.call_tool("research_status", {"session_id": session_id}))
        assert status["status"] == "interrupted"
        listed = data(await client.call_tool("research_list", {}))
        assert [row["session_id"] for row in listed["sessions"]] == [session_id]

        too_dear = await client.call_tool(
            "research_start", {"question": QUESTION, "max_cost_usd": 10_000}
        )
        assert "DEEP_RESEARCH_SERVER_MAX_COST_USD" in error_text(too_dear)


@pytest.mark.parametrize(
    ("url", "hosts"),
    [
        ("https://KB.Example.org/mcp", ["kb.example.org"]),
        ("https://user@kb.example.org:8443/mcp", ["kb.example.org", "kb.example.org:8443"]),
        ("https://[2001:db8::1]:443/mcp", ["[2001:db8::1]", "[2001:db8::1]:443"]),
    ],
)
def test_the_public_urls_host_is_allowed_as_a_tunnel_sends_it(url: str, hosts: list[str]) -> None:
    assert public_hosts(url) == hosts


async def test_the_public_host_passes_the_rebinding_check_and_others_do_not(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_of(env, monkeypatch).with_overrides(
        kb_mcp_url="https://kb.example.org/mcp", api_token=TOKEN
    )
    port = free_port()
    app = http_app(settings, create_server(settings), port)
    auth = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    async with serving(app, port) as base, httpx.AsyncClient() as plain:
        public = await plain.post(
            base + MCP_PATH, json={}, headers={**auth, "Host": "kb.example.org"}
        )
        assert public.status_code not in (401, 403, 421), public.text
        other = await plain.post(base + MCP_PATH, json={}, headers={**auth, "Host": "example.org"})
        assert other.status_code in (403, 421)


async def test_a_second_host_header_is_refused_over_http(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's rebinding check reads the first ``Host``; ours (``serve``'s) refuses two."""
    settings = settings_of(env, monkeypatch)
    port = free_port()
    app = http_app(settings, create_server(settings), port)

    async def ask(*hosts: str) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        lines = "".join(f"Host: {h}\r\n" for h in hosts)
        body = "{}"
        writer.write(
            f"POST {MCP_PATH} HTTP/1.1\r\n{lines}Content-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}".encode()
        )
        await writer.drain()
        reply = await reader.read()
        writer.close()
        return reply

    async with serving(app, port):
        ours = f"127.0.0.1:{port}"
        assert b" 421 " not in (await ask(ours)).split(b"\r\n", 1)[0], "the control passes"
        for hosts in ((ours, "evil.example"), ("evil.example", ours), (ours, ours)):
            reply = await ask(*hosts)
            assert b" 421 " in reply.split(b"\r\n", 1)[0], hosts
            assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "wrong_host"


async def test_sigterm_on_the_http_server_saves_its_runs(
    env: dict[str, str], fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "deep_research.frontends.cli",
        "mcp",
        "--http",
        str(port),
        env={**os.environ, **env},
        cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = f"http://127.0.0.1:{port}{MCP_PATH}"
        for _ in range(200):  # polling the port: the process says nothing when it is bound
            try:
                async with httpx.AsyncClient() as probe:
                    await probe.get(url, timeout=1)
                break
            except httpx.TransportError:
                await asyncio.sleep(0.05)
        async with Client(url) as client:
            started = data(await client.call_tool("research_start", {"question": QUESTION}))
            session_id = started["session_id"]
            await asyncio.to_thread(
                fake_openai.wait_for, lambda: any(fake_openai.retrieves.values()), 30
            )
            server.send_signal(signal.SIGTERM)
            # uvicorn stops gracefully, then re-raises the signal it caught
            assert await asyncio.wait_for(server.wait(), 20) == -signal.SIGTERM
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    state = session_state(env, session_id)
    assert state["status"] == "interrupted"
    assert state["nodes"]["t1"]["remote_jobs"], "the job's id is kept for resume"


async def test_unknown_arguments_are_refused_naming_the_ones_a_tool_takes(
    offline: Settings,
) -> None:
    """The SDK drops arguments a tool does not take: `max_cost` for `max_cost_usd` would
    start a run on the default budget."""
    async with Client(create_server(offline)) as client:
        tools = (await client.list_tools()).tools
        typo = await client.call_tool("research_start", {"question": QUESTION, "max_cost": 1})
        strays = {
            tool.name: await client.call_tool(tool.name, {"no_such_argument": 1}) for tool in tools
        }
        several = await client.call_tool("research_list", {"a b": 1, "c\nd": 2})
        missing = await client.call_tool("research_status", {})
    assert error_text(typo) == (
        "unknown argument max_cost (did you mean max_cost_usd?); research_start takes: "
        "question, max_cost_usd, max_iterations, max_total_tokens, max_runtime_seconds, "
        "max_parallel, preset, chat_model, planner_model, branch_model, web_model, web_effort, "
        "web_tier, web_engine, search_provider, domains, exclude_domains, since, location, "
        "kb_name, kb_only, web_only"
    )
    assert not offline.sessions_dir.exists() or not list(offline.sessions_dir.iterdir())
    for tool in tools:
        assert tool.input_schema["additionalProperties"] is False, tool.name
        assert f"unknown argument no_such_argument; {tool.name} takes: " in error_text(
            strays[tool.name]
        )
    assert error_text(several) == "unknown arguments 'a b', 'c\\nd'; research_list takes: limit"
    assert error_text(missing) == "missing argument session_id"


@pytest.mark.parametrize("value", [-1.0, 0.0, 1e9])
async def test_absurd_budgets_are_refused_naming_the_argument(
    offline: Settings, value: float
) -> None:
    async with Client(create_server(offline)) as client:
        started = await client.call_tool(
            "research_start", {"question": QUESTION, "max_cost_usd": value}
        )
        assert "max_cost_usd" in error_text(started)
        assert len(error_text(started).splitlines()) == 1
        resumed = await client.call_tool(
            "research_resume", {"session_id": "abcdef012345", "max_cost_usd": value}
        )
        assert "max_cost_usd" in error_text(resumed)
    assert not offline.sessions_dir.exists() or not list(offline.sessions_dir.iterdir())


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
async def test_non_finite_budgets_are_refused_naming_the_argument(
    offline: Settings, value: float
) -> None:
    """As the server receives `Infinity` or `NaN` on the wire (the SDK's JSON parser takes
    them; the SDK's own client cannot send them)."""
    server = create_server(offline)
    with pytest.raises(ToolError, match="max_cost_usd"):
        await server.call_tool("research_start", {"question": QUESTION, "max_cost_usd": value})
    with pytest.raises(ToolError, match="max_cost_usd"):
        await server.call_tool(
            "research_resume", {"session_id": "abcdef012345", "max_cost_usd": value}
        )
    assert not offline.sessions_dir.exists() or not list(offline.sessions_dir.iterdir())
