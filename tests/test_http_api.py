"""The HTTP API through a real uvicorn on loopback, with httpx: runs started, followed over
SSE (reconnecting with Last-Event-ID), cancelled, resumed from the CLI; and the guards of a
server that spends the user's money."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest

from deep_research.adapters.report_html import render_html
from deep_research.app import saved
from deep_research.app.config import Settings
from deep_research.app.runs import Caps, RunManager
from deep_research.core.errors import ConfigError
from deep_research.core.models import Citation
from deep_research.core.report import Report
from deep_research.frontends.http.app import create_app
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli
from tests.fake_openai import ChatReply, ChatRequest, FakeOpenAI, ResearchReport, ResearchRequest
from tests.serving import free_port, serving
from tests.world import ResearchWorld, plan_task

QUESTION = "How do vector databases handle deletes?"
JSON = {"Content-Type": "application/json"}
TOKEN = "s3cret-token-0123456789012345678"  # 32 characters, the least a token may have

Serve = Callable[..., Any]


@pytest.fixture
def llm_settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start the API on a free loopback port; yields an httpx client factory."""
    async with AsyncExitStack() as stack:

        async def start(
            settings: Settings, *, token: str | None = None, **caps: Any
        ) -> httpx.AsyncClient:
            if token is not None:
                settings = settings.with_overrides(api_token=token)
            runs = RunManager(settings, Caps(**caps) if caps else None)
            port = free_port()
            app = create_app(settings, host="127.0.0.1", port=port, runs=runs)
            base = await stack.enter_async_context(serving(app, port))
            return await stack.enter_async_context(httpx.AsyncClient(base_url=base, timeout=30))

        yield start


async def sse(client: httpx.AsyncClient, path: str, **headers: str) -> list[dict[str, Any]]:
    """Every event of the stream until the server ends it: {"id", "event", "data"}."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    async with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if not line:
                if "data" in current:
                    events.append(current)
                current = {}
            elif not line.startswith(":"):
                field, _, value = line.partition(":")
                value = value.removeprefix(" ")
                current[field] = json.loads(value) if field == "data" else value
    return events


async def test_a_run_started_over_http_is_followed_to_its_report(
    llm_settings: Settings, fake_openai: FakeOpenAI, serve: Serve
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2", "t1")]]).install(fake_openai)
    client = await serve(llm_settings, max_cost_per_run=20.0)
    started = await client.post("/research", json={"question": QUESTION})
    assert started.status_code == 202, started.text
    session_id = started.json()["session_id"]
    assert started.json()["events_url"] == f"/research/{session_id}/events"

    events = await sse(client, f"/research/{session_id}/events")
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
    assert events[0]["event"] == "start"
    assert events[-1]["event"] == "end"
    nodes = [
        (e["data"]["node_id"], e["data"]["data"]["status"]) for e in events if e["event"] == "node"
    ]
    assert ("t1", "done") in nodes
    assert ("t2", "done") in nodes
    assert any(e["event"] == "spend" for e in events)

    # A client that lost the stream after event 3 misses nothing and sees nothing twice.
    again = await sse(client, f"/research/{session_id}/events", **{"Last-Event-ID": "3"})
    assert [e["id"] for e in again] == [e["id"] for e in events[3:]]

    status = (await client.get(f"/research/{session_id}")).json()
    assert status["status"] == "complete"
    assert {n["id"] for n in status["nodes"]} == {"t1", "t2"}
    evidence = (await client.get(f"/research/{session_id}/evidence?limit=1")).json()
    assert evidence["total"] == status["evidence_units"] > 0
    assert [unit["node_id"] in {"t1", "t2"} for unit in evidence["units"]] == [True]
    refused = await client.get(f"/research/{session_id}/evidence?limit=0")
    assert refused.status_code in (400, 422), refused.text
    markdown = await client.get(f"/research/{session_id}/report")
    assert markdown.headers["content-type"].startswith("text/markdown")
    assert markdown.text.startswith(f"# {QUESTION}")
    html = await client.get(f"/research/{session_id}/report", headers={"Accept": "text/html"})
    assert html.headers["content-type"].startswith("text/html")
    assert '<a href="#source-1">[1]</a>' in html.text
    assert 'id="source-1"' in html.text
    listed = (await client.get("/sessions")).json()
    assert [row["session_id"] for row in listed] == [session_id]


async def test_a_run_the_server_cancels_is_resumed_from_the_cli(
    llm_settings: Settings, fake_openai: FakeOpenAI, serve: Serve, env: dict[str, str]
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    client = await serve(llm_settings)
    session_id = (await client.post("/research", json={"question": QUESTION})).json()["session_id"]
    await asyncio.to_thread(fake_openai.wait_for, lambda: any(fake_openai.retrieves.values()), 30)
    cancelled = await client.post(f"/research/{session_id}/cancel", headers=JSON)
    assert cancelled.status_code == 200, cancelled.text
    assert [j["status"] for j in cancelled.json()["jobs"]] == ["cancelled"]
    assert (await client.get(f"/research/{session_id}")).json()["status"] == "interrupted"
    fake_openai.hold_responses = False
    code, out, err = await asyncio.to_thread(
        cli, env, "resume", session_id, "--retry-cancelled", "--json"
    )
    assert code == 0, err
    assert json.loads(out)["status"] == "complete"


async def test_a_resume_over_http_continues_a_run(
    llm_settings: Settings, fake_openai: FakeOpenAI, serve: Serve, env: dict[str, str]
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    code, out, err = await asyncio.to_thread(cli, env, QUESTION, "--max-iterations", "1", "--json")
    assert code == 0, err
    session_id = json.loads(out)["session_id"]
    client = await serve(llm_settings)
    body = {"max_iterations": 2, "max_parallel": 3}  # as `resume --max-parallel 3` takes it
    resumed = await client.post(f"/research/{session_id}/resume", json=body)
    assert resumed.status_code == 202, resumed.text
    events = await sse(client, f"/research/{session_id}/events")
    assert events[0]["data"]["data"]["resumed"] is True
    assert events[-1]["event"] == "end"
    state = SessionStore(llm_settings.sessions_dir).load(session_id)
    assert (state.limits.max_iterations, state.run_spec.max_parallel) == (2, 3)


async def test_a_preset_over_http_sets_the_defaults_and_explicit_options_win(
    llm_settings: Settings, fake_openai: FakeOpenAI, serve: Serve
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    client = await serve(llm_settings, max_cost_per_run=20.0)
    body = {"question": QUESTION, "preset": "deep", "max_iterations": 1, "web_effort": "medium"}
    started = await client.post("/research", json=body)
    assert started.status_code == 202, started.text
    session_id = started.json()["session_id"]
    events = await sse(client, f"/research/{session_id}/events")
    assert events[-1]["event"] == "end"
    state = SessionStore(llm_settings.sessions_dir).load(session_id)
    spec = state.run_spec
    assert (spec.preset, spec.max_parallel, spec.web_max_tool_calls) == ("deep", 6, 32)
    assert (spec.web_effort, state.limits.max_iterations) == ("medium", 1)
    [job] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert (job["max_tool_calls"], job["reasoning"]["effort"]) == (32, "medium")


async def test_a_scope_posted_with_lists_of_domains_reaches_the_run(
    llm_settings: Settings, fake_openai: FakeOpenAI, serve: Serve
) -> None:
    """A JSON body may give domains as a list (as it would any list), or as the flags'
    comma-separated text; either is read as the flags are, saved in the run spec and sent."""
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    client = await serve(llm_settings, max_cost_per_run=20.0)
    body = {
        "question": QUESTION,
        "max_iterations": 1,
        "domains": ["https://www.Example.com/docs", "docs.example.org"],
        "exclude_domains": ["spam.example.com"],
        "since": "2025-01-01",
    }
    started = await client.post("/research", json=body)
    assert started.status_code == 202, started.text
    session_id = started.json()["session_id"]
    assert (await sse(client, f"/research/{session_id}/events"))[-1]["event"] == "end"
    scope = SessionStore(llm_settings.sessions_dir).load(session_id).run_spec.scope
    assert scope.domains == ("example.com", "docs.example.org")
    assert (scope.exclude_domains, str(scope.since)) == (("spam.example.com",), "2025-01-01")
    [job] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    [tool] = [t for t in job["tools"] if t["type"] == "web_search"]
    assert tool["filters"] == {"allowed_domains": ["example.com", "docs.example.org"]}
    refused = await client.post("/research", json={"question": QUESTION, "domains": [1, 2]})
    assert refused.status_code == 422, refused.text


async def test_an_unknown_preset_over_http_names_the_three(
    llm_settings: Settings, serve: Serve
) -> None:
    client = await serve(llm_settings)
    response = await client.post("/research", json={"question": "q", "preset": "fast"})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "preset" in message
    assert all(name in message for name in ("quick", "standard", "deep"))


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status", "code"),
    [
        ("get", "/research/not-an-id", {}, 404, "unknown_session"),
        ("get", "/research/..%2F..%2Fetc", {}, 404, None),
        ("get", "/research/abcdef012345", {}, 404, "unknown_session"),
        ("get", "/research/abcdef012345/events", {}, 404, "unknown_session"),
        (
            "post",
            "/research",
            {"content": "question=x", "headers": {"Content-Type": "text/plain"}},
            415,
            "not_json",
        ),
        ("post", "/research", {"json": {"question": "x" * 70_000}}, 413, "too_large"),
        ("post", "/research", {"json": {"question": "   "}}, 400, "bad_request"),
        ("post", "/research", {"json": {"question": "q", "max_cost_usd": 500}}, 400, "bad_request"),
        # A limit that admits no research job: refused before anything is spent or saved.
        ("post", "/research", {"json": {"question": "q", "max_cost_usd": 1}}, 400, "bad_request"),
        ("post", "/research", {"json": {"question": "q", "rm_rf": True}}, 422, None),
        (
            "post",
            "/research",
            {"json": {"question": "q", "preset": "fast"}},
            422,
            "invalid_request",
        ),
        ("get", "/research/abcdef012345", {"headers": {"Host": "evil.example"}}, 421, "wrong_host"),
        (
            "post",
            "/research",
            {"content": b'{"question": "caf\xe9 \xff"}', "headers": JSON},
            422,
            "invalid_request",
        ),
        (
            "post",
            "/research",
            {"json": {"question": "q"}, "headers": {"Origin": "https://evil.example"}},
            403,
            "wrong_origin",
        ),
    ],
)
async def test_bad_requests_get_one_line_json_errors(
    llm_settings: Settings,
    serve: Serve,
    method: str,
    path: str,
    kwargs: dict[str, Any],
    status: int,
    code: str | None,
) -> None:
    client = await serve(llm_settings)
    response = await getattr(client, method)(path, **kwargs)
    assert response.status_code == status, response.text
    if code is not None:
        body = response.json()
        assert body["error"]["code"] == code
        assert "\n" not in body["error"]["message"]
        assert "Traceback" not in response.text
    assert "access-control-allow-origin" not in response.headers
    assert not (llm_settings.sessions_dir).exists() or not list(llm_settings.sessions_dir.iterdir())


async def test_a_second_host_header_is_refused(llm_settings: Settings, serve: Serve) -> None:
    client = await serve(llm_settings)
    host = f"{client.base_url.host}:{client.base_url.port}"

    async def ask(*hosts: str) -> bytes:
        reader, writer = await asyncio.open_connection(client.base_url.host, client.base_url.port)
        lines = "".join(f"Host: {h}\r\n" for h in hosts)
        writer.write(f"GET /sessions HTTP/1.1\r\n{lines}Connection: close\r\n\r\n".encode())
        await writer.drain()
        reply = await reader.read()
        writer.close()
        return reply.split(b"\r\n", 1)[0]

    assert b" 200 " in await ask(host)
    assert b" 421 " in await ask(host, "evil.example")
    assert b" 421 " in await ask("evil.example", host)


async def test_a_token_is_required_when_set(llm_settings: Settings, serve: Serve) -> None:
    client = await serve(llm_settings, token=TOKEN)
    assert (await client.get("/sessions")).status_code == 401
    wrong = await client.get("/sessions", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "unauthorized"
    right = await client.get("/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
    assert right.status_code == 200


async def test_the_page_loads_without_the_token_and_no_data_does(
    llm_settings: Settings, serve: Serve
) -> None:
    """The page is where the user types the token: its files (and the API's description)
    hold no data and need none; every endpoint with data still does."""
    client = await serve(llm_settings, token=TOKEN)
    for path in ("/", "/app.js", "/app.css", "/openapi.json", "/docs"):
        response = await client.get(path)
        assert response.status_code == 200, (path, response.text)
    assert 'id="token"' in (await client.get("/")).text
    for method, path in [
        ("GET", "/sessions"),
        ("GET", "/research/abcdef012345"),
        ("GET", "/research/abcdef012345/events"),
        ("GET", "/research/abcdef012345/report"),
        ("GET", "/kb/search?q=deletes"),
        ("POST", "/research"),
        ("POST", "/research/abcdef012345/cancel"),
        (
            "POST",
            "/",
        ),
    ]:
        response = await client.request(method, path, json={"question": QUESTION})
        assert response.status_code == 401, (method, path, response.text)
    assert not llm_settings.sessions_dir.exists() or not list(llm_settings.sessions_dir.iterdir())


# Run in a fresh interpreter: what a start imports shows what it had to build itself.
FIRST_START = """
import asyncio, json, sys
import httpx
from deep_research.app.loading import load_settings
from deep_research.frontends.http.app import create_app

HEAVY = ("deep_research.app.wiring", "openai", "langchain_openai", "genai_prices", "chromadb")


async def main():
    app = create_app(load_settings(), port=8000)
    before = [m for m in HEAVY if m in sys.modules]
    transport = httpx.ASGITransport(app=app)
    async with app.router.lifespan_context(app):
        warm = app.state.context.warm
        if warm is not None:
            await warm.wait()
        loaded = set(sys.modules)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as c:
            started = await c.post("/research", json={"question": sys.argv[1]})
            session = started.json()["session_id"]
            for _ in range(2000):  # on until its research job is out: planned, then branched
                state = (await c.get(f"/research/{session}")).json()
                if any(node["remote_jobs"] for node in state["nodes"]):
                    break
                await asyncio.sleep(0.01)
            else:
                sys.exit(f"no research job went out: {state}")
        imported = sorted(set(sys.modules) - loaded)
    print(json.dumps({"before": before, "status": started.status_code, "imported": imported}))


asyncio.run(main())
"""


def test_the_server_builds_what_a_run_needs_as_it_starts_not_on_the_first_start(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    """The first POST on a fresh server took 12.7 s (the engine's imports, on a loaded
    machine) with its client waiting: the server builds that as it starts (in the
    background: creating the app builds nothing), and a start then imports nothing."""
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True  # the run goes on until the server stops
    done = subprocess.run(
        [sys.executable, "-c", FIRST_START, QUESTION],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["status"] == 202
    assert result["before"] == [], "creating the app stays cheap"
    # anyio loads its event loop's backend on first use (a few ms, the first request's).
    imported = [m for m in result["imported"] if m.split(".")[0] != "anyio"]
    assert imported == [], f"{len(imported)} imported by the start, {imported[:12]}: {done.stderr}"


def test_binding_off_loopback_without_a_token_is_refused(llm_settings: Settings) -> None:
    with pytest.raises(ConfigError, match="DEEP_RESEARCH_API_TOKEN"):
        create_app(llm_settings, host="0.0.0.0")
    create_app(llm_settings.with_overrides(api_token=TOKEN), host="0.0.0.0")


def test_a_token_shorter_than_32_characters_is_refused(llm_settings: Settings) -> None:
    short = llm_settings.with_overrides(api_token=TOKEN[:-1])
    with pytest.raises(ConfigError, match="API_TOKEN: must be at least 32 characters") as info:
        create_app(short, host="127.0.0.1")
    assert TOKEN[:-1] not in str(info.value)
    assert "secrets.token_urlsafe(32)" in str(info.value)


def route_address(family: socket.AddressFamily, probe: str) -> str | None:
    """The address this machine's default route of ``family`` leaves from (None: no route);
    a UDP connect sends nothing."""
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as udp:
            udp.connect((probe, 9))
            return str(udp.getsockname()[0])
    except OSError:
        return None


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
async def test_a_public_bind_answers_to_the_machines_names_and_refuses_others(
    llm_settings: Settings, bind: str
) -> None:
    """Bound to every address, the server answers loopback, LAN-address and host-name
    clients and the names of DEEP_RESEARCH_PUBLIC_HOSTS (a proxy's), and still no other
    name: a page on evil.example that points its name here (DNS rebinding) is refused."""
    settings = llm_settings.with_overrides(
        api_token=TOKEN, public_hosts="Research.example, proxy.example:8443"
    )
    port = free_port()
    app = create_app(settings, host=bind, port=port)
    name = socket.gethostname()
    lan = [a for a in (route_address(socket.AF_INET, "192.0.2.1"),) if a]
    lan += [f"[{a}]" for a in (route_address(socket.AF_INET6, "2001:db8::1"),) if a]
    good = [
        f"127.0.0.1:{port}",
        f"localhost:{port}",
        f"[::1]:{port}",
        f"{name}:{port}",
        f"{name.upper()}:{port}",
        *(f"{address}:{port}" for address in lan),
        "research.example",
        f"research.example:{port}",
        "proxy.example:8443",
    ]
    bad = [
        "evil.example",
        f"evil.example:{port}",
        f"{name}.evil.example:{port}",
        f"127.0.0.1.nip.io:{port}",
        "proxy.example",  # given with its port only
        "",
    ]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with serving(app, port) as base, httpx.AsyncClient(base_url=base) as client:
        for host in good:
            response = await client.get("/sessions", headers={"Host": host, **auth})
            assert response.status_code == 200, (host, response.text)
        for host in bad:
            response = await client.get("/sessions", headers={"Host": host, **auth})
            assert response.status_code == 421, (host, response.text)
            assert response.json()["error"]["code"] == "wrong_host"
        for origin, status in [
            ("https://research.example", 401),  # an allowed origin, and then the token
            (f"http://{name}:{port}", 401),
            ("https://evil.example", 403),
            (f"http://evil.example:{port}", 403),
        ]:
            response = await client.post(
                "/research", json={"question": "q"}, headers={"Origin": origin}
            )
            assert response.status_code == status, (origin, response.text)


async def test_a_specific_address_answers_to_that_address_alone(
    llm_settings: Settings,
) -> None:
    port = free_port()
    app = create_app(llm_settings.with_overrides(api_token=TOKEN), host="192.0.2.7", port=port)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with serving(app, port) as base, httpx.AsyncClient(base_url=base) as client:
        ok = await client.get("/sessions", headers={"Host": f"192.0.2.7:{port}", **auth})
        assert ok.status_code == 200, ok.text
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"{socket.gethostname()}:{port}"):
            response = await client.get("/sessions", headers={"Host": host, **auth})
            assert response.status_code == 421, host


LOADING = {"script": "src", "img": "src", "iframe": "src", "link": "href", "source": "src"}


class ExternalLoads(HTMLParser):
    """What an HTML page would load from elsewhere: scripts, stylesheets, images, frames
    and other resources by an absolute or scheme-relative URL (links to follow are not)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = LOADING.get(tag)
        for name, value in attrs:
            if name == wanted and value and re.match(r"\s*(https?:)?//", value, re.I):
                self.found.append(f"<{tag} {name}={value}>")

    def handle_data(self, data: str) -> None:  # @import url(//…) and url(https://…) in <style>
        self.found += re.findall(r"url\(\s*['\"]?\s*(?:https?:)?//[^)]*\)", data, re.I)


async def test_nothing_the_server_serves_loads_from_elsewhere(
    llm_settings: Settings, serve: Serve
) -> None:
    """Offline, a page that loads its script from a CDN is blank (Swagger UI at /docs was):
    the server serves no such page, and says where the API's description is."""
    client = await serve(llm_settings)
    pages = {path: (await client.get(path)) for path in ("/", "/docs", "/redoc")}
    report = Report(
        title="Q",
        status="",
        lead="See [1].",
        sources=[Citation(kind="web", url="https://example.org/a", title="a", claim="c")],
    )
    texts = {path: r.text for path, r in pages.items()} | {"report": render_html(report)}
    texts["/app.css"] = (await client.get("/app.css")).text  # fed as text: its url(…)s
    for path, response in pages.items():
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith("text/html"), path
        assert "default-src 'none'" in response.headers["content-security-policy"], path
    for where, text in texts.items():
        parser = ExternalLoads()
        parser.feed(text)
        assert parser.found == [], where
    assert 'href="/openapi.json"' in texts["/docs"]
    assert 'href="/openapi.json"' in texts["/"]
    description = await client.get("/openapi.json")
    assert description.status_code == 200
    assert "/research" in description.json()["paths"]


def test_serve_refuses_a_public_bind_without_a_token(env: dict[str, str]) -> None:
    code, _, err = cli(env, "serve", "--host", "0.0.0.0")
    assert code == 3
    assert "DEEP_RESEARCH_API_TOKEN" in err


def test_reports_are_rendered_without_raw_html() -> None:
    report = Report(
        title="Q",
        status="",
        lead="See <script>alert(1)</script> [1] [2] and [x](javascript:alert(1)).",
        sources=[
            Citation(kind="web", url="javascript:alert(1)", title="x", claim="c"),
            Citation(kind="web", url="https://example.org", title="ok", claim="c"),
        ],
    )
    for page in (render_html(report), render_html(report.markdown)):  # a report before data
        assert "<script>" not in page
        assert "&lt;script&gt;" in page
        assert 'href="javascript' not in page
        assert '<a href="https://example.org">ok</a>' in page
    page = render_html(report)
    assert '<a href="#source-1">[1]</a> <a href="#source-2">[2]</a>' in page
    assert '<li id="source-2"><p><a href="https://example.org">ok</a>' in page
    assert "source-" not in render_html(report.markdown)  # no data: nothing is guessed


class ForgingWorld(ResearchWorld):
    """Pages whose titles hold links of their own, and a report's sections that write their
    own Sources list and link reference definitions, as a prompt-injected model would."""

    def research(self, req: ResearchRequest) -> ResearchReport:
        report = super().research(req)
        forged = tuple(
            dataclasses.replace(c, title=f"{c.title}](https://phish.example/{i}) [real")
            for i, c in enumerate(report.citations, start=1)
        )
        return dataclasses.replace(report, citations=forged)

    def chat(self, req: ChatRequest) -> ChatReply | str | dict[str, Any] | None:
        reply = super().chat(req)
        system = str(req.messages[0].get("content")) if req.messages else ""
        if isinstance(reply, str) and "one section of a research report" in system:
            refs = re.findall(r"\[S\d+\]", reply)
            entries = "\n".join(
                f"{n}. [Source {n}](https://phish.example/list{n})" for n in range(1, 6)
            )
            definitions = "\n".join(f"{ref}: https://phish.example/def" for ref in refs)
            reply += f"\n\n## Sources\n\n{entries}\n\n{definitions}\n"
        return reply


async def test_the_report_is_linked_from_what_the_builder_wrote_never_from_what_it_quotes(
    llm_settings: Settings, fake_openai: FakeOpenAI, serve: Serve
) -> None:
    ForgingWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    client = await serve(llm_settings, max_cost_per_run=20.0)
    started = await client.post("/research", json={"question": QUESTION})
    session_id = started.json()["session_id"]
    await sse(client, f"/research/{session_id}/events")

    html = await client.get(f"/research/{session_id}/report", headers={"Accept": "text/html"})
    markdown = await client.get(f"/research/{session_id}/report")
    for response in (html, markdown):
        assert response.headers["x-content-type-options"] == "nosniff"
        policy = response.headers["content-security-policy"]
        assert "default-src 'none'" in policy
        assert "script-src" not in policy  # a report runs no script at all
        assert "frame-ancestors 'none'" in policy
    assert "\n**Sources**\n\n1. [Source 1](https://phish.example/list1)" in markdown.text

    anchors = re.findall(r'<a href="([^"]*)">([^<]*)</a>', html.text)
    sources = dict(re.findall(r'<li id="source-(\d+)">(?:<p>)?<a href="([^"]*)">', html.text))
    assert sources  # the two jobs' notes are alike: one section states them, citing one
    # every [N] links to its source (a claim's mark links to the Claim check section)
    cited = [(href, text) for href, text in anchors if re.fullmatch(r"\[\d+\]", text.strip())]
    assert cited
    assert all(href == f"#source-{text.strip('[]')}" for href, text in cited)
    assert {text.strip("[]") for _, text in cited} <= set(sources)
    # Each entry N goes where its title says (not to the synthesis's list, nor its title's link).
    for href in sources.values():
        page = re.fullmatch(r"https://source(\d)\.example/page", href)
        assert page, href
        title = next(text for link, text in anchors if link == href)
        assert title == f"Source {page[1]}](https://phish.example/{page[1]}) [real"
    out = {href for href, _ in anchors if "phish" in href and "/list" not in href}
    assert out == set(), "only the synthesis's own list links out, as it reads"

    # A report written before its value was saved is rebuilt from its session; one whose
    # session cannot be read either is shown as written, its [N] not linked.
    path = saved.report_path(llm_settings, session_id)
    assert path is not None
    assert isinstance(saved.read_report_data(saved.sessions(llm_settings), session_id), Report)
    Path(path).with_name("report.json").unlink()
    html = await client.get(f"/research/{session_id}/report", headers={"Accept": "text/html"})
    assert html.status_code == 200
    assert '<li id="source-1">' in html.text
    Path(path).with_name("state.json").write_text("{ damaged")
    html = await client.get(f"/research/{session_id}/report", headers={"Accept": "text/html"})
    assert html.status_code == 200
    assert "#source-" not in html.text


def test_ctrl_c_on_the_server_saves_its_runs_while_a_client_follows_one(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.hold_responses = True
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "deep_research.frontends.cli", "serve", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                httpx.get(base + "/sessions", timeout=1)
                break
            except httpx.TransportError:
                threading.Event().wait(0.05)
        started = httpx.post(base + "/research", json={"question": QUESTION}, timeout=30)
        session_id = started.json()["session_id"]
        fake_openai.wait_for(lambda: any(fake_openai.retrieves.values()), 30)

        def follow() -> None:  # a client still reading the run's events
            with httpx.stream("GET", f"{base}/research/{session_id}/events", timeout=60) as r:
                for _line in r.iter_lines():
                    pass

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        threading.Event().wait(0.3)
        server.send_signal(signal.SIGINT)
        server.wait(timeout=20)
        reader.join(timeout=10)
    finally:
        server.kill()
        server.wait()
    state = json.loads(
        (Path(env["DEEP_RESEARCH_HOME"]) / "sessions" / session_id / "state.json").read_text()
    )
    assert state["status"] == "interrupted"
    assert any(n["remote_jobs"] for n in state["nodes"].values()), "the job's id is kept"
    assert not reader.is_alive(), "the follower's stream was closed, not left hanging"
    log = Path(env["DEEP_RESEARCH_HOME"]) / "sessions" / session_id / "events.jsonl"
    last = json.loads(log.read_text().splitlines()[-1])
    assert (last["type"], last["data"]["status"]) == ("end", "interrupted")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/research", '{"question": "q", "max_cost_usd": NaN}', "max_cost_usd"),
        ("/research", '{"question": "q", "max_cost_usd": Infinity}', "max_cost_usd"),
        ("/research", '{"question": "q", "max_runtime_seconds": Infinity}', "max_runtime_seconds"),
        ("/research", '{"question": "q", "max_runtime_seconds": -Infinity}', "max_runtime_seconds"),
        ("/research", '{"question": "q", "max_cost_usd": 1e400}', "max_cost_usd"),
        ("/research", '{"question": "q", "max_total_tokens": 1e30}', "max_total_tokens"),
        ("/research", '{"question": "q", "max_runtime_seconds": 1e12}', "max_runtime_seconds"),
        ("/research", '{"question": "\\ud800 lone surrogate"}', "question"),
        ("/research", '{"question": "q", "\\udfff": 1}', "body"),
        ("/research", '{"question": "q", "chat_model": "\\ud800"}', "chat_model"),
        ("/research/abcdef012345/resume", '{"max_cost_usd": NaN}', "max_cost_usd"),
        (
            "/research/abcdef012345/resume",
            '{"max_runtime_seconds": Infinity}',
            "max_runtime_seconds",
        ),
        ("/research", '{"question": "q"', "body"),
    ],
)
async def test_non_finite_numbers_and_lone_surrogates_are_422_in_the_api_error_shape(
    llm_settings: Settings, serve: Serve, path: str, body: str, field: str
) -> None:
    client = await serve(llm_settings)
    response = await client.post(path, content=body.encode(), headers=JSON)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert field in error["message"]
    assert "\n" not in error["message"]
    assert not llm_settings.sessions_dir.exists() or not list(llm_settings.sessions_dir.iterdir())


async def test_a_session_nested_past_the_parsers_is_listed_as_corrupt_with_the_others(
    llm_settings: Settings, serve: Serve
) -> None:
    store = SessionStore(llm_settings.sessions_dir)
    good, bad = store.create("good"), store.create("bad")
    (store.path(bad.session_id) / "state.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    client = await serve(llm_settings)
    listed = await client.get("/sessions")
    assert listed.status_code == 200, listed.text
    rows = {row["session_id"]: row["status"] for row in listed.json()}
    assert rows == {good.session_id: "interrupted", bad.session_id: "corrupt"}
    shown = await client.get(f"/research/{bad.session_id}")
    assert shown.status_code == 404
    assert shown.json()["error"]["code"] == "unknown_session"


async def test_an_interrupted_run_says_how_to_resume_it(
    llm_settings: Settings, serve: Serve
) -> None:
    """Killed in writing (saved complete, no report): interrupted, with the command that
    finishes it, as ``sessions show`` prints it; a finished run has none."""
    store = SessionStore(llm_settings.sessions_dir)
    killed, done = store.create("killed in writing?"), store.create("done?")
    for state in (killed, done):
        state.status = "complete"
        store.save(state)
    store.write_report(done.session_id, "# Done\n")
    client = await serve(llm_settings)
    shown = (await client.get(f"/research/{killed.session_id}")).json()
    assert shown["status"] == "interrupted"
    assert shown["resume"] == f"deep-research resume {killed.session_id}"
    finished = (await client.get(f"/research/{done.session_id}")).json()
    assert (finished["status"], finished["resume"]) == ("complete", None)


async def test_a_full_disk_is_507_and_leaves_no_session(
    llm_settings: Settings, serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    client = await serve(llm_settings)

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device", dst)

    monkeypatch.setattr(os, "replace", disk_full)
    response = await client.post("/research", json={"question": QUESTION})
    monkeypatch.undo()
    assert response.status_code == 507, response.text
    assert response.json()["error"]["code"] == "storage"
    assert "No space left" in response.json()["error"]["message"]
    store = SessionStore(llm_settings.sessions_dir)
    assert store.list() == []


async def test_both_servers_take_the_same_authorization_headers(
    llm_settings: Settings, serve: Serve
) -> None:
    """One bearer check (``hosts.bearer_token_matches``) for the HTTP API and the MCP server."""
    from starlette.responses import PlainTextResponse

    from deep_research.frontends.hosts import bearer_token_matches
    from deep_research.frontends.mcp.server import Door

    headers = [None, "Bearer nope", f"bearer {TOKEN}", f"Basic {TOKEN}", f"Bearer  {TOKEN}"]
    headers.append(f"Bearer {TOKEN}")
    api = await serve(llm_settings, token=TOKEN)
    mcp = httpx.AsyncClient(
        transport=httpx.ASGITransport(
            app=Door(PlainTextResponse("ok"), frozenset({"127.0.0.1:8000"}), TOKEN)
        ),
        base_url="http://127.0.0.1:8000",
    )
    async with mcp:
        for header in headers:
            sent = {"Authorization": header} if header is not None else {}
            accepted = bearer_token_matches(header, TOKEN.encode())
            assert ((await api.get("/sessions", headers=sent)).status_code != 401) == accepted
            assert ((await mcp.get("/mcp", headers=sent)).status_code != 401) == accepted
    assert [bearer_token_matches(h, TOKEN.encode()) for h in headers[-3:]] == [False, False, True]
    assert bearer_token_matches(f"bearer {TOKEN}", TOKEN.encode())
