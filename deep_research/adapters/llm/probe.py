"""What a local server says of its own limits: requests served at once, each one's context.

llama.cpp's ``llama-server`` answers ``GET /props`` (beside ``/v1``) with ``total_slots`` and
the per-slot context (``default_generation_settings.n_ctx``); checked 2026-11-26 against the
llama.cpp that llama-cpp-python 0.3.36 vendors (``tools/server/server-context.cpp``). Other
servers answer 404 or nothing: their limits stay unknown (None), and the settings
``DEEP_RESEARCH_MAX_CONCURRENT_CALLS`` / ``DEEP_RESEARCH_CONTEXT_TOKENS`` say them instead.
Never asked of OpenAI's own API. Answers are cached for a day under the server's URL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx2

from deep_research.adapters.llm.lifecycle import LookupCache

PROBE_TIMEOUT = 5.0
CACHE_TTL = 24 * 3600


@dataclass(frozen=True)
class ServerLimits:
    slots: int | None = None
    context_tokens: int | None = None


async def read_limits(
    base_url: str, api_key: str, cache: LookupCache | None = None
) -> ServerLimits:
    """The server's limits, with the key its API takes (llama-server's ``--api-key`` guards
    ``/props`` too); the key is sent, never stored."""
    key = json.dumps([base_url, "server-limits"])
    url = base_url.rstrip("/").removesuffix("/v1") + "/props"  # .../v1 -> .../props
    if cache is not None and (saved := await cache.get(key)) is not None:
        return _decode(saved)
    try:
        async with httpx2.AsyncClient(timeout=PROBE_TIMEOUT) as client:
            reply = await client.get(url, headers={"Authorization": f"Bearer {api_key}"})
        props = reply.json() if reply.status_code == 200 else None
    except (httpx2.HTTPError, ValueError):
        return ServerLimits()  # unreachable or not JSON: unknown, and not remembered
    limits = _limits(props)
    if cache is not None:
        await cache.set(key, json.dumps([limits.slots, limits.context_tokens]), CACHE_TTL)
    return limits


def _limits(props: object) -> ServerLimits:
    if not isinstance(props, dict):
        return ServerLimits()
    settings = props.get("default_generation_settings")
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return ServerLimits(_positive(props.get("total_slots")), _positive(n_ctx))


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _decode(raw: str) -> ServerLimits:
    try:
        slots, context = json.loads(raw)
    except (ValueError, TypeError):
        return ServerLimits()
    return ServerLimits(_positive(slots), _positive(context))
