"""Model lifecycle checks against the fake OpenAI server (tests/fake_openai.py)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from datetime import date
from pathlib import Path

import openai
import pytest

from deep_research.adapters.llm.lifecycle import (
    ANNOUNCED_SHUTDOWNS,
    CacheLookups,
    ModelRef,
    check_models,
)
from deep_research.core.errors import ConfigError, ProviderError
from deep_research.persistence.cache import ResultCache
from tests.fake_openai import FakeOpenAI, Fault

TODAY = date(2026, 11, 23)
WEB = ModelRef("gpt-5.5", "DEEP_RESEARCH_WEB_MODEL")
PLANNER = ModelRef("gpt-6-sol", "DEEP_RESEARCH_PLANNER_MODEL")
MakeClient = Callable[..., openai.AsyncOpenAI]


class DictCache:
    """A LookupCache in memory; records what was stored and for how long."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.ttls: dict[str, float] = {}

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def set(self, key: str, value: str, ttl_seconds: float) -> None:
        self.values[key], self.ttls[key] = value, ttl_seconds


async def test_current_models_pass_quietly(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    refs = [WEB, PLANNER, ModelRef("gpt-6-sol", "DEEP_RESEARCH_JUDGE_MODEL")]
    assert await check_models(openai_client(), refs, today=TODAY, cache=None) == []
    assert fake_openai.count("/v1/models/", "GET") == 2, "one lookup per distinct model"


async def test_a_shut_down_model_names_the_setting(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    web = ModelRef("o4-mini-deep-research", "DEEP_RESEARCH_WEB_MODEL")
    with pytest.raises(ConfigError) as info:
        await check_models(openai_client(), [PLANNER, web], today=TODAY, cache=None)
    assert str(info.value) == (
        "model o4-mini-deep-research was shut down on 2026-07-23: "
        "set DEEP_RESEARCH_WEB_MODEL to a current model (see docs/models-and-prices.md)"
    )
    assert info.value.exit_code == 3


async def test_a_listed_model_past_its_shutdown_date_is_refused(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # A server that still lists a model whose date has passed (a stale gateway).
    fake_openai.add_model("old-model", "2026-11-23")
    fake_openai.today = date(2026, 11, 1)
    with pytest.raises(ConfigError, match="model old-model was shut down on 2026-11-23"):
        await check_models(
            openai_client(),
            [ModelRef("old-model", "DEEP_RESEARCH_BRANCH_MODEL")],
            today=TODAY,
            cache=None,
        )


async def test_unknown_models_are_all_named_in_one_line(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    refs = [
        ModelRef("gpt-7-nova", "DEEP_RESEARCH_PLANNER_MODEL"),
        ModelRef("gpt-7-nova", "DEEP_RESEARCH_JUDGE_MODEL"),
        ModelRef("o3-deep-research", "DEEP_RESEARCH_WEB_MODEL"),
    ]
    with pytest.raises(ConfigError) as info:
        await check_models(openai_client(), refs, today=TODAY, cache=None)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        f"model gpt-7-nova is not available on this server ({fake_openai.base_url}): "
        "set DEEP_RESEARCH_PLANNER_MODEL, DEEP_RESEARCH_JUDGE_MODEL to a model it serves; "
    )
    assert "model o3-deep-research was shut down on 2026-07-23" in message
    assert fake_openai.count("/v1/models", "GET") == 3, "two retrieves, one shared list"


async def test_a_near_shutdown_is_a_warning(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    refs = [ModelRef("gpt-5", "DEEP_RESEARCH_PLANNER_MODEL"), WEB]
    assert await check_models(openai_client(), refs, today=TODAY, cache=None) == [
        "model gpt-5 shuts down on 2026-12-11 (in 18 days): "
        "set DEEP_RESEARCH_PLANNER_MODEL to a newer model"
    ]
    far = [ModelRef("gpt-4.1-mini", "DEEP_RESEARCH_BRANCH_MODEL")]
    assert await check_models(openai_client(), far, today=TODAY, cache=None) == []


async def test_models_the_sdk_dates_are_named_shut_down_when_the_server_lacks_them(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    refs = [
        ModelRef("gpt-5-chat-latest", "DEEP_RESEARCH_PLANNER_MODEL"),
        ModelRef("o1-pro", "DEEP_RESEARCH_JUDGE_MODEL"),
        ModelRef("gpt-3.5-turbo", "DEEP_RESEARCH_BRANCH_MODEL"),
    ]
    with pytest.raises(ConfigError) as info:
        await check_models(openai_client(), refs, today=TODAY, cache=None)
    assert str(info.value) == "; ".join(
        f"model {model} was shut down on {day}: set {setting} to a current model "
        "(see docs/models-and-prices.md)"
        for model, day, setting in (
            ("gpt-5-chat-latest", "2026-07-23", "DEEP_RESEARCH_PLANNER_MODEL"),
            ("o1-pro", "2026-10-23", "DEEP_RESEARCH_JUDGE_MODEL"),
            ("gpt-3.5-turbo", "2026-10-23", "DEEP_RESEARCH_BRANCH_MODEL"),
        )
    )


def sdk_shutdowns() -> dict[str, date]:
    """Every model id the installed openai SDK dates, with its date: the "Deprecated values"
    of the Responses `model` docstring (the chat models' list plus the Responses-only ones)."""
    from openai.types.responses import response_compact_params

    text = inspect.getsource(response_compact_params)
    listed = text[text.index("Deprecated values:") :]
    dated: dict[str, date] = {}
    for item in re.split(r"\n\s*- ", listed)[1:]:
        day = re.search(r"Announced\s+shutdown\s+date:\s+(\d{4}-\d{2}-\d{2})", item)
        ids = re.findall(r'"([\w.-]+)"', item.split(":")[0])
        if day:
            dated |= dict.fromkeys(ids, date.fromisoformat(day.group(1)))
    return dated


def test_the_shutdown_table_is_the_pinned_sdks() -> None:
    dated = sdk_shutdowns()
    assert len(dated) > 80, "the SDK's list was read"
    assert dated["o3-deep-research"] == date(2026, 7, 23)
    assert dated == ANNOUNCED_SHUTDOWNS


async def test_without_retrieve_the_list_decides(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.retrieve_endpoint = False  # vLLM
    fake_openai.add_model("llama3.1")
    local = ModelRef("llama3.1", "DEEP_RESEARCH_PLANNER_MODEL")
    assert await check_models(openai_client(), [local], today=TODAY, cache=None) == []
    missing = ModelRef("qwen3", "DEEP_RESEARCH_BRANCH_MODEL")
    with pytest.raises(ConfigError, match=r"model qwen3 is not available .*BRANCH_MODEL"):
        await check_models(openai_client(), [local, missing], today=TODAY, cache=None)


async def test_a_server_without_a_models_api_cannot_say(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.retrieve_endpoint = fake_openai.list_endpoint = False
    refs = [ModelRef("anything", "DEEP_RESEARCH_PLANNER_MODEL"), WEB]
    assert await check_models(openai_client(), refs, today=TODAY, cache=None) == []
    assert fake_openai.count("/v1/models", "GET") == 3, "two retrieves, one list"


async def test_an_unreachable_server_cannot_say() -> None:
    async with openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x") as client:
        assert await check_models(client, [WEB], today=TODAY, cache=None) == []


async def test_a_refused_key_is_a_provider_error(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.inject(Fault("unauthorized", "/v1/models"))
    with pytest.raises(ProviderError, match=r"refused the API key .*HTTP 401") as info:
        await check_models(openai_client(), [WEB], today=TODAY, cache=None)
    assert "\n" not in str(info.value)


async def test_a_cache_hit_makes_no_request(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    cache = DictCache()
    refs = [ModelRef("gpt-5", "DEEP_RESEARCH_PLANNER_MODEL")]
    first = await check_models(openai_client(api_key="sk-secret"), refs, today=TODAY, cache=cache)
    asked = fake_openai.count("/v1/models")
    again = await check_models(openai_client(), refs, today=TODAY, cache=cache)

    assert first == again != []
    assert fake_openai.count("/v1/models") == asked == 1
    assert list(cache.ttls.values()) == [24 * 3600]
    assert "sk-secret" not in repr(cache.values)
    [key] = cache.values
    assert fake_openai.base_url in key


async def test_unknown_models_are_not_cached(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    cache = DictCache()
    fake_openai.retrieve_endpoint = False
    local = [ModelRef("llama3.1", "DEEP_RESEARCH_PLANNER_MODEL")]
    with pytest.raises(ConfigError):
        await check_models(openai_client(), local, today=TODAY, cache=cache)
    fake_openai.add_model("llama3.1")  # pulled into the local server since
    assert await check_models(openai_client(), local, today=TODAY, cache=cache) == []


async def test_result_cache_adapter_round_trip_and_expiry(tmp_path: Path) -> None:
    store = ResultCache(tmp_path / "cache")
    try:
        lookups = CacheLookups(store)
        await lookups.set("k", "v", ttl_seconds=60)
        await lookups.set("gone", "v", ttl_seconds=-1)
        assert await lookups.get("k") == "v"
        assert await lookups.get("gone") is None
        assert await lookups.get("never") is None
    finally:
        store.close()
