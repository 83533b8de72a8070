"""A search provider is one module and an entry point: the settings take its name, its key
comes from the variable it names, and search-and-read asks it like a built-in one."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from deep_research.adapters.web import search
from deep_research.adapters.web.search import ENTRY_POINTS, default_rate_limits, make_provider
from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError
from deep_research.core.scope import WebScope
from deep_research.sources.search import search_key


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    info = tmp_path / "site" / "echo_search-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-search\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINTS}]\nechosearch = tests.echo_search:PROVIDER\n"
        "gone = tests.no_such_module:PROVIDER\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    search._catalog.cache_clear()
    yield
    search._catalog.cache_clear()


async def test_a_plugin_provider_is_chosen_keyed_and_asked_like_a_built_in(
    installed: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_SEARCH_KEY", "k-echo-1234")
    settings = Settings(_env_file=None, search_provider="echosearch")  # type: ignore[call-arg]
    key = search_key(settings, "echosearch", "ECHO_SEARCH_KEY")
    assert key is not None
    assert key.get_secret_value() == "k-echo-1234"
    asked: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        items = [{"link": "https://pypi.org/project/x/", "name": "x", "text": "about x"}]
        return httpx.Response(200, json={"items": items})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    search = make_provider(
        "echosearch",
        limits=default_rate_limits(),
        api_key=key,
        http_client=client,
        scope=WebScope(),
    )
    outcome = await search.search("what is x", 3)
    await search.aclose()
    await client.aclose()
    assert [h.url for h in outcome.hits] == ["https://pypi.org/project/x/"]
    assert search.price_usd == pytest.approx(0.001), "its list price"
    [request] = asked
    assert request.url.host == "echo-search.example"
    assert request.headers["X-Key"] == "k-echo-1234"


def test_a_plugin_provider_that_cannot_load_is_named_when_asked_for(installed: None) -> None:
    with pytest.raises(ConfigError, match=r"'gone': tests.no_such_module:PROVIDER could not"):
        make_provider("gone", limits=default_rate_limits())


def test_the_settings_name_the_plugins_among_the_providers(installed: None) -> None:
    with pytest.raises(ValidationError, match=r"one of duckduckgo, .*exa, echosearch"):
        Settings(_env_file=None, search_provider="nosuch")  # type: ignore[call-arg]


def test_the_search_package_loads_no_provider_until_one_is_asked_for() -> None:
    """A KB-only run prices its search provider (one module), never imports ddgs."""
    probe = (
        "import sys, json\n"
        "from deep_research.adapters.web.search import provider\n"
        "before = 'ddgs' in sys.modules\n"
        "provider('tavily')\n"
        "print(json.dumps([before, 'ddgs' in sys.modules, "
        "'deep_research.adapters.web.search.brave' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(done.stdout) == [False, False, False]


def test_the_run_help_names_every_built_in_provider() -> None:
    from deep_research.app.setting_types import SEARCH_PROVIDERS
    from tests.clirun import cli

    code, out, _ = cli({}, "run", "--help")
    assert code == 0
    words = " ".join(out.split())
    said = words[words.index("--search-provider") : words.index("--domains")]
    assert all(name in said for name in SEARCH_PROVIDERS), said
