"""Choosing the web engine, saving it with the session and replaying it; search fees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deep_research.adapters.prices import PriceTable, search_model
from deep_research.adapters.web.search import provider
from deep_research.app import lifecycle, preparation, reserves, run_spec, sources
from deep_research.app.config import Settings
from deep_research.app.options import BudgetOverrides, RunOptions
from deep_research.core.errors import ConfigError
from deep_research.core.models import RunSpec, Usage
from deep_research.sources.search import search_key
from tests.fake_openai import FakeOpenAI


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return Settings(home=tmp_path / "home", _env_file=None)  # type: ignore[call-arg]


def with_(settings: Settings, **values: Any) -> Settings:
    return settings.with_overrides(**values)


@pytest.mark.parametrize(
    ("values", "policy", "engine"),
    [
        ({"openai_api_key": "sk-x"}, "auto", "openai"),  # OpenAI's own API runs research jobs
        (
            {"openai_api_key": "sk-x", "openai_base_url": "https://api.openai.com/v1"},
            "auto",
            "openai",
        ),
        ({"openai_base_url": "http://localhost:11434/v1"}, "auto", "search"),  # Ollama
        (
            {"openai_base_url": "http://localhost:11434/v1", "web_engine": "openai"},
            "auto",
            "openai",
        ),
        ({"openai_api_key": "sk-x", "web_engine": "search"}, "web_only", "search"),
        ({"openai_api_key": "sk-x"}, "kb_only", None),
        ({}, "auto", None),  # no model: the knowledge base only, no network
        ({"web_engine": "search"}, "auto", "search"),  # ...unless search is asked for
    ],
)
def test_the_engine_follows_the_server_unless_chosen(
    settings: Settings, values: dict[str, Any], policy: Any, engine: str | None
) -> None:
    assert sources.default_web(with_(settings, **values), policy) == engine


def test_a_run_saves_its_engine_and_a_resume_replays_it(settings: Settings) -> None:
    local = with_(
        settings,
        openai_base_url="http://localhost:11434/v1",
        search_provider="brave",
        brave_api_key="k-brave",
    )
    prepared = preparation.prepare(local, "How does Raft elect a leader?", RunOptions())
    assert prepared.engine == "search"
    assert prepared.spec is None, "no research job is specified"
    saved = run_spec.record(prepared.settings, prepared.spec, prepared.engine)
    assert (saved.web_engine, saved.search_provider) == ("search", "brave")
    # Today's environment says otherwise; the session's choice wins.
    today = with_(settings, openai_api_key="sk-x", web_engine="openai")
    replayed = run_spec.replay(today, saved, max_parallel=None)
    assert (replayed.web_engine, replayed.search_provider) == ("search", "brave")


def test_the_flags_choose_engine_and_provider(settings: Settings) -> None:
    options = RunOptions(web_engine="search", search_provider="exa")
    keyed = with_(settings, openai_api_key="sk-x", exa_api_key="k-exa")
    prepared = preparation.prepare(keyed, "q?", options)
    assert (prepared.engine, prepared.settings.search_provider) == ("search", "exa")


def test_search_fees_are_list_prices_unless_overridden(settings: Settings) -> None:
    """A run's price book holds its provider's list price (the one provider it may use) and
    the fees the user set."""
    book = reserves.price_book(
        with_(settings, search_provider="brave", search_prices={"tavily": 0.005})
    )
    assert book.cost(search_model("tavily"), Usage(web_search_calls=4)) == pytest.approx(0.02)
    assert book.cost(search_model("brave"), Usage(web_search_calls=2)) == pytest.approx(
        2 * provider("brave").price_usd
    )
    assert not book.knows(search_model("exa")), "a provider the run does not use"
    free = reserves.price_book(settings)
    assert free.cost(search_model("duckduckgo"), Usage(web_search_calls=9)) == 0
    assert free.knows(search_model("duckduckgo"))
    assert not PriceTable().knows(search_model("exa")), "a fee is known only when given"


def test_the_estimate_prices_a_search_branch(settings: Settings) -> None:
    paid = with_(
        settings,
        openai_base_url="http://localhost:11434/v1",
        search_provider="tavily",
        tavily_api_key="k-tavily",
        search_max_queries=2,
        search_extra_rounds=1,
    )
    prepared = preparation.prepare(paid, "q?", RunOptions())
    worst = preparation.estimate(prepared)
    assert worst.web_model == "search and read via tavily, up to 4 searches"
    # Four searches at Tavily's fee, and the branch model's calls (unpriced here: $0).
    assert worst.per_job_usd >= 4 * provider("tavily").price_usd


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"search_prices": {"bing": 0.01}}, "unknown search provider 'bing'"),
        ({"search_prices": {"tavily": -1}}, ">= 0"),
        ({"search_rate_per_second": {"brave": 0}}, "> 0"),
        ({"fetch_allow": "http://intranet/"}, "not host or host:port"),
        ({"fetch_allow": "intranet:http"}, "not host or host:port"),
        ({"search_provider": "google"}, "search_provider"),
        ({"web_engine": "bing"}, "web_engine"),
    ],
)
def test_bad_web_settings_are_one_line_errors(
    settings: Settings, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        with_(settings, **values)
    assert "\n" not in str(caught.value)


def test_the_allow_list_is_parsed(settings: Settings) -> None:
    allow = with_(settings, fetch_allow=" wiki.corp , 10.0.0.5:8080,").fetch_allow_list
    assert allow == ("wiki.corp", "10.0.0.5:8080")


def test_search_keys_are_secrets(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAVILY_API_KEY", "tvly-secret")
    loaded = Settings(home=settings.home, _env_file=None)  # type: ignore[call-arg]
    key = search_key(loaded, "tavily")
    assert key is not None
    assert key.get_secret_value() == "tvly-secret"
    assert "tvly-secret" not in repr(loaded)
    assert search_key(loaded, "duckduckgo") is None


# --- auto on a server other than OpenAI's: does it serve the web model? ----------------------


@pytest.fixture
def gateway(settings: Settings, fake_openai: FakeOpenAI) -> Settings:
    """The fake server as a compatible gateway (not OpenAI's own API), engine left to auto."""
    return with_(settings, openai_base_url=fake_openai.base_url, openai_api_key="sk-x")


async def test_auto_runs_research_jobs_on_a_server_that_serves_the_web_model(
    gateway: Settings, fake_openai: FakeOpenAI
) -> None:
    prepared = preparation.prepare(gateway, "q?", RunOptions())
    assert prepared.engine == "search", "decided only once the server is asked"
    chosen = await preparation.choose_engine(prepared)
    assert chosen.engine == "openai"
    assert chosen.spec is not None
    assert chosen.spec.model == "gpt-5.5"
    assert fake_openai.count("/v1/models") >= 1


@pytest.mark.parametrize("serves", ["not at all", "shut down", "cannot say"])
async def test_auto_searches_when_the_server_does_not_serve_it(
    gateway: Settings, fake_openai: FakeOpenAI, serves: str
) -> None:
    if serves == "not at all":
        fake_openai.models.pop("gpt-5.5")
    elif serves == "shut down":
        fake_openai.models["gpt-5.5"] = "2026-01-01"
    else:  # vLLM, llama.cpp: no models API
        fake_openai.retrieve_endpoint = fake_openai.list_endpoint = False
    prepared = preparation.prepare(gateway, "q?", RunOptions())
    said: list[str] = []
    chosen = await preparation.choose_engine(prepared, said.append)
    assert (chosen.engine, chosen.spec) == ("search", None)
    assert chosen.notices == tuple(said), "said, and kept for the session's event log"
    [notice] = chosen.notices
    assert "search and read pages instead" in notice


async def test_a_chosen_engine_is_not_second_guessed(
    gateway: Settings, fake_openai: FakeOpenAI
) -> None:
    prepared = preparation.prepare(gateway, "q?", RunOptions(web_engine="search"))
    assert (await preparation.choose_engine(prepared)).engine == "search"
    assert fake_openai.count("/v1/models") == 0, "nothing asked"


@pytest.mark.parametrize(
    ("saved", "engine"),
    [
        (RunSpec(web_engine="search", search_provider="searxng"), "search"),
        (RunSpec(web_model="gpt-5.5", web_engine="openai"), "openai"),
    ],
)
def test_a_resume_and_a_replay_read_the_saved_engine_alike(
    settings: Settings, saved: RunSpec, engine: str | None
) -> None:
    from deep_research.persistence.sessions import SessionStore

    today = with_(
        settings, openai_api_key="sk-x", web_engine="search", searxng_url="http://search.lan"
    )
    assert run_spec.replay(today, saved, max_parallel=None).web_engine == (engine or "search")
    store = SessionStore(today.sessions_dir)
    state = store.create("How does Raft elect a leader?", status="interrupted")
    state.run_spec = saved
    store.save(state)
    with lifecycle.reopen(
        today,
        state.session_id,
        BudgetOverrides(),
        max_parallel=None,
        retry_cancelled=False,
        on_info=lambda _: None,
    ) as run:
        assert run.prepared.engine == engine


def test_a_resume_with_nothing_to_research_is_refused_before_it_starts(
    settings: Settings,
) -> None:
    """A session that searched no web and has no knowledge base today: one line, not a run
    whose every node fails."""
    from deep_research.persistence.sessions import SessionStore

    today = with_(settings, openai_api_key="sk-x")
    store = SessionStore(today.sessions_dir)
    state = store.create("How does Raft elect a leader?", status="interrupted")
    refused = pytest.raises(ConfigError, match=r"no source can research this run \(kb: no know")
    with (
        refused,
        lifecycle.reopen(
            today,
            state.session_id,
            BudgetOverrides(),
            max_parallel=None,
            retry_cancelled=False,
            on_info=lambda _: None,
        ),
    ):
        pass


def test_a_web_source_that_cannot_work_is_refused_before_the_run(settings: Settings) -> None:
    """``--web-engine search`` with a provider whose key is missing: one line with the fix,
    before anything is spent or saved (it once failed only when the run was built)."""
    local = with_(settings, openai_base_url="http://localhost:11434/v1", search_provider="brave")
    with pytest.raises(ConfigError, match="the brave search provider needs BRAVE_API_KEY: set"):
        preparation.prepare(local, "How does Raft elect a leader?", RunOptions())
