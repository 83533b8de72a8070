"""The chat models a run, a claim check and ``doctor`` talk to: each role's LangChain model
(``chat_model``) over the server they share (``chat_server``: its limits, the
structured-output shapes it takes, how a request is sent and retried)."""

from __future__ import annotations

import openai
from langchain_openai import ChatOpenAI

from deep_research.adapters.llm.lifecycle import CacheLookups
from deep_research.adapters.llm.llm import ChatModel
from deep_research.adapters.llm.params import model_params
from deep_research.adapters.llm.probe import read_limits
from deep_research.adapters.llm.server import ChatServer
from deep_research.app.clients import api_key, client_settings, sync_http_client
from deep_research.app.config import Settings
from deep_research.core.models import ChatRole
from deep_research.persistence.cache import ResultCache

OPENAI_URL = "https://api.openai.com/v1"


def chat_server(settings: Settings, cache: ResultCache | None = None) -> ChatServer:
    """What a run's (or a check's, or doctor's) chat models share about their server: its
    limits (settings first, else what a local server says of itself), the structured-output
    shapes it takes (remembered in ``cache``), and how a request is sent and retried."""
    url = settings.openai_base_url or OPENAI_URL
    lookups = CacheLookups(cache) if cache is not None else None
    asks = not settings.on_openai and (
        settings.max_concurrent_calls is None or settings.context_tokens is None
    )

    async def discover() -> tuple[int | None, int | None]:
        limits = await read_limits(url, api_key(settings), lookups)
        return limits.slots, limits.context_tokens

    return ChatServer(
        url=url,
        on_openai=settings.on_openai,
        context_tokens=settings.context_tokens,
        max_concurrent=settings.max_concurrent_calls,
        timeout_seconds=settings.request_timeout_seconds,
        rate_limit_retries=settings.max_retries,
        shapes=lookups,
        discover=discover if asks else None,
    )


def chat_model(
    settings: Settings,
    role: ChatRole,
    http: openai.DefaultAsyncHttpxClient,
    server: ChatServer | None = None,
) -> ChatModel:
    model: str = getattr(settings, f"{role}_model")
    effort: str | None = getattr(settings, f"{role}_reasoning_effort")
    params = model_params(model, effort, settings.temperature)
    made = client_settings(settings, "chat")
    chat = ChatOpenAI(
        model=model,
        api_key=made.api_key,
        base_url=made.base_url,
        temperature=params.temperature,
        reasoning_effort=params.reasoning_effort,
        timeout=made.timeout,
        max_retries=made.max_retries,
        use_responses_api=False,
        # Our own pool: langchain-openai's default one is cached per process and bound to
        # the first event loop that used it.
        http_async_client=http,
        http_client=sync_http_client(),  # never called: every call is async
    )
    return ChatModel(
        chat,
        model,
        role,
        settings.structured_output_retries,
        server or chat_server(settings),
        max_tokens=settings.max_tokens_per_call,
    )
