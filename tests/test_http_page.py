"""What the page asks of the server besides runs: the server's caps (``GET /limits``) and the
HTML report's one stylesheet, the page's own, inlined and allowed by its hash alone."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest

from deep_research.adapters.report_html import render_html
from deep_research.app.config import Settings
from deep_research.app.runs import Caps, RunManager
from deep_research.core.models import Citation
from deep_research.core.report import Report
from deep_research.frontends.http.app import create_app
from deep_research.persistence.sessions import SessionStore
from tests.serving import free_port, serving

TOKEN = "limits-token-" + "0123456789" * 2 + "xyz"  # 33 characters
Serve = Callable[..., Any]


@pytest.fixture
def settings(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Settings:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Start the API on a free loopback port; yields an httpx client factory."""
    async with AsyncExitStack() as stack:

        async def start(settings: Settings, caps: Caps | None = None) -> httpx.AsyncClient:
            port = free_port()
            app = create_app(settings, port=port, runs=RunManager(settings, caps))
            base = await stack.enter_async_context(serving(app, port))
            return await stack.enter_async_context(httpx.AsyncClient(base_url=base, timeout=30))

        yield start


async def test_the_server_tells_its_caps_and_preset_and_only_with_the_token(
    settings: Settings, serve: Serve
) -> None:
    settings = settings.with_overrides(max_cost_usd=3.5, preset="quick", api_token=TOKEN)
    client = await serve(settings, Caps(max_runs=1, max_cost_per_run=7.25, daily_budget=40))
    assert (await client.get("/limits")).status_code == 401
    limits = await client.get("/limits", headers={"Authorization": f"Bearer {TOKEN}"})
    assert limits.status_code == 200
    assert limits.json() == {
        "max_cost_usd": 7.25,
        "default_max_cost_usd": 3.5,  # the configured limit, within the cap
        "daily_budget_usd": 40.0,
        "preset": "quick",
    }
    assert TOKEN not in limits.text


async def test_a_configured_limit_over_the_cap_is_shown_as_the_cap(
    settings: Settings, serve: Serve
) -> None:
    client = await serve(settings, Caps(max_cost_per_run=2.0))
    limits = (await client.get("/limits")).json()
    assert (limits["max_cost_usd"], limits["default_max_cost_usd"]) == (2.0, 2.0)
    assert limits["preset"] == "standard"


def style_of(page: str) -> str:
    [style] = re.findall(r"<style>(.*?)</style>", page, re.S)
    return style


def allows(policy: str, style: str) -> bool:
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    [styles] = re.findall(r"style-src ([^;]*)", policy)
    return f"'sha256-{digest}'" in styles.split()


async def test_the_html_report_inlines_the_pages_stylesheet_and_allows_only_it(
    settings: Settings, serve: Serve
) -> None:
    report = Report(
        title="Q <b>",
        status="",
        lead="See [1]. <style>body{display:none}</style>",
        sources=[Citation(kind="web", url="https://example.org/a", title="a", claim="c")],
    )
    store = SessionStore(settings.sessions_dir)
    session = store.create("Q <b>")
    store.write_report(session.session_id, report.markdown, report.model_dump_json())
    client = await serve(settings)
    served = await client.get(
        f"/research/{session.session_id}/report", headers={"Accept": "text/html"}
    )
    assert served.status_code == 200
    stylesheet = (await client.get("/app.css")).text
    assert style_of(served.text) == stylesheet  # one stylesheet: the page's
    assert "system-ui" in stylesheet
    assert "<title>Q &lt;b&gt;</title>" in served.text
    header = served.headers["content-security-policy"]
    [meta] = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', served.text)
    for policy in (header, meta.replace("&#x27;", "'")):
        assert allows(policy, stylesheet), policy
        assert "unsafe-inline" not in policy
        assert not allows(policy, "body{display:none}")
    assert "&lt;style&gt;" in served.text  # a model's style is text, never a stylesheet
    # The page reads that report (its parser checks the style against the page's policy).
    assert allows((await client.get("/")).headers["content-security-policy"], stylesheet)


def test_a_report_rendered_without_a_stylesheet_has_none() -> None:
    page = render_html(Report(title="Q", status="", lead="x", sources=[]))
    assert "<style>" not in page
    assert "sha256-" not in page
    with pytest.raises(ValueError, match="</"):
        render_html("x", stylesheet="p{}</style><script>")
