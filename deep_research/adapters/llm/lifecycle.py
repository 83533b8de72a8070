"""Model lifecycle checks, before a run spends anything: is every configured model served?

Invariants:
- A model is *bad* when the server says it does not have it (a 404 from
  ``models.retrieve`` and a model list that lacks it) or when its ``shutdown_date``
  is on or before today; all bad models are named in one ``ConfigError`` line, each
  with the setting(s) that chose it, the first configured setting first.
- A server that cannot say (no models API: vLLM, llama.cpp, some gateways; or an
  unreachable one, or a timeout) is never an error here: the run itself reports
  provider failures. Only a refused key (401/403) raises ``ProviderError``.
- ``models.list`` is fetched at most once per call, shared by every model.
- Lookups run concurrently, each bounded by ``LOOKUP_TIMEOUT``; answers a server gave
  about a model it has are cached for a day under (base_url, model), never the key.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Protocol

import openai

from deep_research.core.errors import ConfigError, ProviderError
from deep_research.persistence.cache import ResultCache

LOOKUP_TIMEOUT = 10.0  # seconds for one model's answer, list fallback included
CACHE_TTL = 24 * 3600
WARN_DAYS = 30
_NO_ENDPOINT = frozenset({404, 405, 501})

# Shutdowns announced by OpenAI, only to say *why* a server no longer has a model: once shut
# down, it answers 404. Every id the pinned openai SDK 3.57 dates ("Deprecated values" in the
# docstring of `model` in openai/types/responses/response_compact_params.py, the same list as
# types/shared/chat_model.py plus the Responses-only models), checked 2026-11-26. OpenAI's
# deprecations page (developers.openai.com/api/docs/deprecations, read 2026-11-26) names the
# replacements: gpt-6.1-sol for gpt-5 and o3, gpt-6.1-terra for gpt-5-mini, gpt-6-luna for
# gpt-5-nano, gpt-4.1 and gpt-4o. gpt-5.5 and gpt-5.5-pro have no date.
# By date: the ids shut down on it.
_SHUTDOWN_DAYS: dict[date, str] = {
    date(2024, 9, 13): (
        "gpt-3.5-turbo-16k gpt-3.5-turbo-0301 gpt-3.5-turbo-0613 gpt-3.5-turbo-16k-0613"
    ),
    date(2024, 12, 6): "gpt-4-vision-preview",
    date(2025, 6, 6): "gpt-4-32k gpt-4-32k-0314 gpt-4-32k-0613",
    date(2025, 7, 28): "o1-preview o1-preview-2024-09-12",
    date(2025, 10, 10): "gpt-4o-audio-preview-2024-10-01",
    date(2025, 10, 27): "o1-mini o1-mini-2024-09-12",
    date(2026, 2, 12): "codex-mini-latest",
    date(2026, 2, 17): "chatgpt-4o-latest",
    date(2026, 3, 26): "gpt-4-0125-preview gpt-4-turbo-preview gpt-4-0314",
    date(2026, 5, 7): (
        "gpt-4o-audio-preview gpt-4o-audio-preview-2024-12-17 gpt-4o-audio-preview-2025-06-03 "
        "gpt-4o-mini-audio-preview gpt-4o-mini-audio-preview-2024-12-17"
    ),
    date(2026, 7, 23): (
        "o3-deep-research o3-deep-research-2025-06-26 o4-mini-deep-research "
        "o4-mini-deep-research-2025-06-26 gpt-5.1-codex gpt-5.1-codex-max gpt-5.1-chat-latest "
        "gpt-5-chat-latest gpt-5-codex gpt-4o-search-preview gpt-4o-mini-search-preview "
        "gpt-4o-search-preview-2025-03-11 gpt-4o-mini-search-preview-2025-03-11 "
        "computer-use-preview computer-use-preview-2025-03-11"
    ),
    date(2026, 8, 10): "gpt-5.3-chat-latest gpt-5.2-chat-latest",
    date(2026, 9, 28): "gpt-3.5-turbo-1106",
    date(2026, 10, 23): (
        "o4-mini o4-mini-2025-04-16 o3-mini o3-mini-2025-01-31 o1 o1-2024-12-17 o1-pro "
        "o1-pro-2025-03-19 gpt-4.1-nano gpt-4.1-nano-2025-04-14 gpt-4o-2024-05-13 gpt-4-turbo "
        "gpt-4-turbo-2024-04-09 gpt-4-1106-preview gpt-4 gpt-4-0613 gpt-3.5-turbo "
        "gpt-3.5-turbo-0125"
    ),
    date(2026, 12, 11): (
        "gpt-5 gpt-5-2025-08-07 gpt-5-mini gpt-5-mini-2025-08-07 gpt-5-nano gpt-5-nano-2025-08-07 "
        "gpt-5-pro gpt-5-pro-2025-10-06 o3 o3-2025-04-16 o3-pro o3-pro-2025-06-10"
    ),
    date(2027, 1, 14): (
        "gpt-4.1 gpt-4.1-2025-04-14 gpt-4.1-mini gpt-4.1-mini-2025-04-14 gpt-4o gpt-4o-2024-11-20 "
        "gpt-4o-2024-08-06 gpt-4o-mini gpt-4o-mini-2024-07-18"
    ),
    date(2027, 1, 20): "gpt-audio-mini gpt-audio-mini-2025-12-15",
    date(2027, 4, 1): "gpt-5.1 gpt-5.1-2025-11-13 gpt-5.4-nano gpt-5.4-nano-2026-03-17",
}
ANNOUNCED_SHUTDOWNS: dict[str, date] = {
    model: day for day, models in _SHUTDOWN_DAYS.items() for model in models.split()
}


@dataclass(frozen=True)
class ModelRef:
    """One configured model and the setting that chose it."""

    model: str
    setting: str  # e.g. "DEEP_RESEARCH_WEB_MODEL"


@dataclass(frozen=True)
class ModelStatus:
    model: str
    known: bool | None  # None: the server could not say
    shutdown_date: date | None


class LookupCache(Protocol):
    """The model cache (``CacheLookups``): text values with a TTL."""

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str, ttl_seconds: float) -> None: ...


class CacheLookups:
    """`LookupCache` over `ResultCache`, which has no TTL: the expiry travels in the value."""

    _TOOL = "model-lookup"

    def __init__(self, cache: ResultCache) -> None:
        self._cache = cache

    async def get(self, key: str) -> str | None:
        raw = await self._cache.get(self._TOOL, "", key)
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            value, expires = entry["value"], float(entry["expires"])
        except (ValueError, KeyError, TypeError):
            return None
        return value if isinstance(value, str) and time.time() < expires else None

    async def set(self, key: str, value: str, ttl_seconds: float) -> None:
        entry = {"value": value, "expires": time.time() + ttl_seconds}
        await self._cache.set(self._TOOL, "", key, json.dumps(entry))


async def check_models(
    client: openai.AsyncOpenAI,
    refs: Sequence[ModelRef],
    *,
    today: date,
    cache: LookupCache | None,
) -> list[str]:
    """Warnings for models shutting down within 30 days; raises `ConfigError` for bad ones."""
    models = list(dict.fromkeys(ref.model for ref in refs))
    statuses = await lookup_models(client, models, cache=cache)
    return judge(refs, statuses, today=today, server=str(client.base_url).rstrip("/"))


async def lookup_models(
    client: openai.AsyncOpenAI, models: Sequence[str], *, cache: LookupCache | None
) -> dict[str, ModelStatus]:
    """Each model's status. ``client``: one made for lookups (its retries and timeout are
    the lookup policy's, ``app.clients``)."""
    lookups = _Lookups(client, cache)
    results = await asyncio.gather(*(lookups.status(m) for m in models), return_exceptions=True)
    statuses: dict[str, ModelStatus] = {}
    for model, result in zip(models, results, strict=True):
        if isinstance(result, BaseException):
            raise result  # every lookup has finished: nothing is left running
        statuses[model] = result
    return statuses


def judge(
    refs: Sequence[ModelRef], statuses: dict[str, ModelStatus], *, today: date, server: str
) -> list[str]:
    """Pure: the warnings, or one `ConfigError` naming every bad model and its settings."""
    settings: dict[str, dict[str, None]] = {}  # model -> its settings, in order, each once
    for ref in refs:
        settings.setdefault(ref.model, {})[ref.setting] = None
    problems: list[str] = []
    warnings: list[str] = []
    for model, names in settings.items():
        status = statuses.get(model)
        if status is None or status.known is None:
            continue
        which = ", ".join(names)
        shutdown = status.shutdown_date
        if not status.known:
            gone = ANNOUNCED_SHUTDOWNS.get(model)
            if gone is not None and gone <= today:
                shutdown = gone
            else:
                problems.append(
                    f"model {model} is not available on this server ({server}): "
                    f"set {which} to a model it serves"
                )
                continue
        if shutdown is None:
            continue
        days = (shutdown - today).days
        if days <= 0:
            problems.append(
                f"model {model} was shut down on {shutdown.isoformat()}: "
                f"set {which} to a current model (see docs/models-and-prices.md)"
            )
        elif days <= WARN_DAYS:
            warnings.append(
                f"model {model} shuts down on {shutdown.isoformat()} (in {days} days): "
                f"set {which} to a newer model"
            )
    if problems:
        raise ConfigError("; ".join(problems))
    return warnings


class _Lookups:
    def __init__(self, client: openai.AsyncOpenAI, cache: LookupCache | None) -> None:
        self._client = client
        self._cache = cache
        self._server = str(client.base_url).rstrip("/")
        self._list_lock = asyncio.Lock()
        self._listed = False
        self._list: dict[str, date | None] | None = None

    def _key(self, model: str) -> str:
        return json.dumps([self._server, model, "shutdown"])

    async def status(self, model: str) -> ModelStatus:
        if self._cache is not None:
            cached = await self._cache.get(self._key(model))
            if cached is not None:  # a model the server has: its shutdown date, or ""
                return ModelStatus(model, True, _date(cached))
        try:
            async with asyncio.timeout(LOOKUP_TIMEOUT):
                status = await self._ask(model)
        except (TimeoutError, openai.APIConnectionError):  # APITimeoutError included
            return ModelStatus(model, None, None)
        if self._cache is not None and status.known:
            # Only what the server has: a model just pulled into a local server must
            # not stay "unknown" for a day.
            shutdown = status.shutdown_date.isoformat() if status.shutdown_date else ""
            await self._cache.set(self._key(model), shutdown, CACHE_TTL)
        return status

    async def _ask(self, model: str) -> ModelStatus:
        try:
            found = await self._client.models.retrieve(model)
        except openai.APIStatusError as exc:
            _raise_if_refused(exc, self._server)
            if exc.status_code not in _NO_ENDPOINT:
                return ModelStatus(model, None, None)  # 429/5xx: the run will say
        else:
            return ModelStatus(model, True, _date(found.shutdown_date))
        listed = await self._listing()
        if listed is None:
            return ModelStatus(model, None, None)
        return ModelStatus(model, model in listed, listed.get(model))

    async def _listing(self) -> dict[str, date | None] | None:
        async with self._list_lock:
            if not self._listed:
                self._list = await self._fetch_list()
                self._listed = True
            return self._list

    async def _fetch_list(self) -> dict[str, date | None] | None:
        try:
            return {m.id: _date(m.shutdown_date) async for m in self._client.models.list()}
        except openai.APIStatusError as exc:
            _raise_if_refused(exc, self._server)
            return None
        except openai.APIConnectionError:
            return None


def _raise_if_refused(exc: openai.APIStatusError, server: str) -> None:
    if exc.status_code in (401, 403):
        raise ProviderError(
            f"the provider refused the API key while checking models at {server} "
            f"(HTTP {exc.status_code}): check OPENAI_API_KEY"
        ) from exc


def _date(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value[:10])
    except ValueError:
        return None
