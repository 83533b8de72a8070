"""Every surface imports and starts on this install, in a fresh process (as a user meets it),
and ``doctor`` says which one does not and how to fix it.

A fresh process matters: the test process has imported half the package already, so an
import that fails only on a fresh install (a package pip did not install) passes in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SURFACES = textwrap.dedent(
    """
    import asyncio, json, sys
    from starlette.testclient import TestClient

    from deep_research.app.loading import load_settings

    settings = load_settings()
    seen = {}

    # The page reader: trafilatura (and lxml's html cleaner) extract a page's main text.
    import trafilatura
    from deep_research.adapters.web import reader
    html = "<html><body><article><h1>Title</h1><p>" + "Main text of the page. " * 20
    html += "</p></article></body></html>"
    seen["page_reader"] = "Main text" in (trafilatura.extract(html) or "")

    # The MCP server: built, with its tools listed as a client would see them.
    from deep_research.frontends.mcp import server as mcp_server
    server = mcp_server.create_server(settings)
    tools = asyncio.run(server.list_tools())
    seen["mcp_tools"] = sorted(tool.name for tool in tools)

    # The ASGI app and the browser-free parts of the page: its files as the server sends them.
    from deep_research.frontends.http.app import create_app
    with TestClient(create_app(settings), base_url="http://127.0.0.1:8000") as client:
        for path in ("/", "/app.js", "/app.css", "/openapi.json", "/sessions"):
            reply = client.get(path)
            seen[path] = [reply.status_code, reply.headers.get("content-type", "")]
    print(json.dumps(seen))
    """
)


def fresh_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_RESEARCH_"))}
    return {**env, "DEEP_RESEARCH_HOME": str(tmp_path / "home")}


def test_every_surface_imports_and_answers_in_a_fresh_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SURFACES],
        capture_output=True,
        text=True,
        env=fresh_env(tmp_path),
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["page_reader"] is True
    assert {"research_start", "kb_search", "verify_claim", "fetch"} <= set(seen["mcp_tools"])
    assert seen["/"] == [200, "text/html; charset=utf-8"]
    assert seen["/app.js"][0] == 200
    assert "javascript" in seen["/app.js"][1]
    assert seen["/app.css"][0] == 200
    assert "text/css" in seen["/app.css"][1]
    assert seen["/openapi.json"][0] == 200
    assert seen["/sessions"][0] == 200


def doctor(
    tmp_path: Path, *, prelude: str = "", env: dict[str, str] | None = None
) -> tuple[int, dict[str, object]]:
    """``deep-research doctor --json`` in a fresh process, after ``prelude`` ran in it."""
    code = f"{prelude}\nimport sys\nsys.argv = ['deep-research', 'doctor', '--json']\n"
    code += "from deep_research.__main__ import main\nmain()\n"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env or fresh_env(tmp_path),
        cwd=tmp_path,
        timeout=300,
    )
    report: dict[str, object] = json.loads(done.stdout)
    return done.returncode, report


def checks_of(report: dict[str, object]) -> dict[str, dict[str, str]]:
    checks = report["checks"]
    assert isinstance(checks, list)
    return {check["name"]: check for check in checks}


def test_doctor_with_no_model_is_fine_and_says_runs_are_extractive(tmp_path: Path) -> None:
    code, report = doctor(tmp_path)
    assert code == 0, report["problems"]
    checks = checks_of(report)
    assert checks["models"]["status"] == "note"
    assert "extractively" in checks["models"]["detail"]
    assert "OPENAI_API_KEY" in checks["models"]["fix"]
    for surface in ("page reader", "web search", "HTTP API", "MCP server", "page"):
        assert checks[surface]["status"] == "ok", checks[surface]


def test_doctor_names_a_package_pip_left_out_and_the_command_that_installs_it(
    tmp_path: Path,
) -> None:
    # What pip 23 did to a fresh install: lxml's html cleaner, which trafilatura needs, missing.
    hide = "import sys; sys.modules['lxml_html_clean'] = None"
    code, report = doctor(tmp_path, prelude=hide)
    assert code == 1
    checks = checks_of(report)
    reader = checks["page reader"]
    assert reader["status"] == "fail"
    assert "lxml_html_clean" in reader["detail"]
    assert reader["fix"].endswith("-m pip install lxml_html_clean")
    # One missing package fails only what needs it (the MCP server loads the reader lazily,
    # for verify_claim on a URL: the page reader's line covers it).
    for surface in ("HTTP API", "MCP server", "web search"):
        assert checks[surface]["status"] == "ok", checks[surface]
    assert any("page reader" in problem for problem in report["problems"])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://me:s3cret-pass@127.0.0.1:9/v1", "http://***@127.0.0.1:9/v1"),
        ("http://127.0.0.1:9/v1?api-key=s3cret-pass", "http://127.0.0.1:9/v1?api-key=%2A%2A%2A"),
    ],
)
def test_doctor_masks_credentials_in_the_base_url(tmp_path: Path, url: str, shown: str) -> None:
    env = {**fresh_env(tmp_path), "OPENAI_BASE_URL": url, "DEEP_RESEARCH_CHECK_MODELS": "false"}
    _, report = doctor(tmp_path, env=env)
    settings = report["settings"]
    assert isinstance(settings, dict)
    assert settings["openai_base_url"] == shown
    assert "s3cret-pass" not in json.dumps(report)


def test_doctor_masks_credentials_in_every_url_setting(tmp_path: Path) -> None:
    env = {
        **fresh_env(tmp_path),
        "DEEP_RESEARCH_SEARXNG_URL": "https://admin:hunter2-pass@searx.example/",
        "DEEP_RESEARCH_CHROMA_HOST": "http://kb:hunter2-pass@chroma.internal",
    }
    _, report = doctor(tmp_path, env=env)
    settings = report["settings"]
    assert isinstance(settings, dict)
    assert settings["searxng_url"] == "https://***@searx.example/"
    assert "hunter2-pass" not in json.dumps(report)
