"""OpenAI clients: the one place they are made, with an explicit policy per purpose.

Every OpenAI client of a process takes its key, server, retries and timeout from here:
the SDK clients (``openai_client``), the chat models (``chat.chat_model``, from
``client_settings(..., "chat")``) and the knowledge base's embeddings (from
``client_settings(..., "embed")``, handed to ``kb/`` in its settings). Every SDK client
shares one TLS context (making one reads the CA bundle); each gets a fresh async connection
pool, because pools are bound to the event loop that opened them (the one sync pool, which
LangChain's chat models want and never call, is the process's). ``openai`` is imported on
the first client, not with this module: the settings read the policies.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Literal

from pydantic import SecretStr

from deep_research.kb.settings import OpenAIClientSettings

if TYPE_CHECKING:
    import ssl

    import openai

    from deep_research.adapters.web.reader import ReaderSettings
    from deep_research.app.config import Settings


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The process's TLS context for the OpenAI clients: making one reads the CA bundle
    (~25 ms of CPU), and every run makes clients. The same trust as the SDK's default
    (``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else the system's CAs)."""
    import httpx2

    return httpx2.create_ssl_context()


def http_client() -> openai.DefaultAsyncHttpxClient:
    """A new connection pool (pools are bound to their event loop: one per run or call)
    on the process's TLS context. Whoever makes it closes it."""
    import openai

    return openai.DefaultAsyncHttpxClient(verify=tls_context())


@functools.cache
def sync_http_client() -> openai.DefaultHttpxClient:
    """The process's one synchronous pool, on its TLS context: for LangChain's chat models,
    which want one beside the async pool every call goes through, and else make one per
    base URL and timeout (each reading the CA bundle again)."""
    import openai

    return openai.DefaultHttpxClient(verify=tls_context())


ClientPurpose = Literal["jobs", "lookup", "chat", "embed"]


def client_settings(settings: Settings, purpose: ClientPurpose) -> OpenAIClientSettings:
    """The key, server, retries and timeout of a client made for ``purpose``: what every
    OpenAI client is made with, whoever makes it."""
    retries: dict[ClientPurpose, int] = {
        # Research jobs: polls and cancels retry as every call does. Creates never do: they
        # go out with max_retries=0 whatever this says (``ResponsesJobs``: a resent POST whose
        # reply was lost would start and bill a second job).
        "jobs": settings.max_retries,
        # A few short requests before a run and in doctor (model lookups): one retry, 10 s a
        # request; ``adapters.llm.lifecycle.LOOKUP_TIMEOUT`` also bounds each model's answer.
        "lookup": 1,
        # The chat models (planner, branches, summarizer, synthesizer, judge): the client
        # never retries; ``adapters.llm.server.ChatServer.send`` does, by its own rules (a
        # timeout or a 5xx once, a refused request shape never, a 429 with retry-after up to
        # max_retries).
        "chat": 0,
        # The knowledge base's embeddings (``embedding_provider=openai``).
        "embed": settings.max_retries,
    }
    return OpenAIClientSettings(
        api_key=SecretStr(api_key(settings)),
        base_url=settings.openai_base_url,
        max_retries=retries[purpose],
        timeout=10.0 if purpose == "lookup" else settings.request_timeout_seconds,
    )


def openai_client(
    settings: Settings, purpose: ClientPurpose, http: openai.DefaultAsyncHttpxClient | None = None
) -> openai.AsyncOpenAI:
    """The one way an OpenAI SDK client is made, with the retry and timeout policy of its
    ``purpose``. ``http``: a pool the caller owns; without one the client gets its own,
    closed with it (``async with``)."""
    import openai

    made = client_settings(settings, purpose)
    return openai.AsyncOpenAI(
        api_key=made.api_key.get_secret_value(),
        base_url=made.base_url,
        timeout=made.timeout,
        max_retries=made.max_retries,
        http_client=http or http_client(),
    )


KEYLESS = "not-needed"
"""What a client sends without a key: a local OpenAI-compatible server takes any key, and
the SDK refuses to start without one."""


def api_key(settings: Settings) -> str:
    """The key a client sends; a local server without one gets a placeholder."""
    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else ""
    return key or KEYLESS


_LINK = "https://example.com/"
_SAMPLE_RESPONSE: dict[str, Any] = {
    "id": "resp_warm",
    "object": "response",
    "created_at": 0,
    "status": "completed",
    "model": "warm-up",
    "output": [
        {"id": "rs_warm", "type": "reasoning", "summary": [{"type": "summary_text", "text": "."}]},
        {
            "id": "ws_warm",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": ".", "sources": [{"type": "url", "url": _LINK}]},
        },
        {
            "id": "msg_warm",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {
                    "type": "output_text",
                    "text": ".",
                    "annotations": [
                        {
                            "type": "url_citation",
                            "url": _LINK,
                            "title": ".",
                            "start_index": 0,
                            "end_index": 1,
                        },
                    ],
                }
            ],
        },
    ],
    "usage": {
        "input_tokens": 1,
        "output_tokens": 1,
        "total_tokens": 2,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": 0},
    },
}
_SAMPLE_COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-warm",
    "object": "chat.completion",
    "created": 0,
    "model": "warm-up",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "."}}
    ],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def touch_apis(settings: Settings) -> None:
    """A server's warm-up: the SDK builds each API's client (and imports its module) on
    first use, so build the ones a run uses, on a client that sends nothing."""
    import openai

    with openai.OpenAI(api_key="warm-up", base_url=settings.openai_base_url) as client:
        _apis = (client.models, client.chat.completions, client.responses)


def build_reply_types() -> None:
    """A server's warm-up: the SDK builds each reply type's validator on its first reply
    (~0.4 s of CPU for a research job's): build the ones a run reads, from samples."""
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response

    Response.model_construct(**_SAMPLE_RESPONSE)
    ChatCompletion.model_construct(**_SAMPLE_COMPLETION)


def reader_settings(settings: Settings) -> ReaderSettings:
    """The page reader's settings: every reader of a process is made with these, so that
    they share one reader and its per-host politeness (``adapters/web/shared.py``)."""
    from deep_research.adapters.web.reader import ReaderSettings  # lazy: trafilatura

    return ReaderSettings(
        allow=settings.fetch_allow_list,
        page_timeout=settings.fetch_timeout_seconds,
        max_bytes=settings.fetch_max_bytes,
        per_host_concurrency=settings.fetch_per_host_concurrency,
        per_host_rate=settings.fetch_per_host_rate,
    )
