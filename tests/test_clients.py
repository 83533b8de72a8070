"""One builder for OpenAI clients, with an explicit policy per purpose: every client a run
makes (SDK clients, the chat models, the knowledge base's embeddings) carries its policy."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import openai
from pydantic import SecretStr

from deep_research.adapters.llm.lifecycle import LOOKUP_TIMEOUT
from deep_research.adapters.web.openai_jobs import ResponsesJobs
from deep_research.app import clients
from deep_research.app.chat import chat_model
from deep_research.app.config import Settings
from deep_research.kb.embeddings import make_embeddings
from deep_research.kb.openai_embeddings import OpenAIEmbeddingsNamed


def settings_of(tmp_path: Path, **values: object) -> Settings:
    given: dict[str, object] = {
        "openai_api_key": SecretStr("sk-test"),
        "openai_base_url": "http://127.0.0.1:9/v1",
        "max_retries": 7,
        "request_timeout_seconds": 90.0,
        **values,
    }
    return Settings(home=tmp_path, _env_file=None, **given)  # type: ignore[call-arg, arg-type]


def policy_of(client: openai.AsyncOpenAI | openai.OpenAI) -> tuple[int, object, str, str]:
    return client.max_retries, client.timeout, client.api_key, str(client.base_url)


SERVER = "http://127.0.0.1:9/v1/"


async def test_each_purpose_has_its_own_retry_and_timeout_policy(tmp_path: Path) -> None:
    settings = settings_of(tmp_path)
    async with clients.openai_client(settings, "jobs") as jobs:
        assert policy_of(jobs) == (7, 90.0, "sk-test", SERVER)
        # A research job's create is never resent, whatever the client's policy.
        assert ResponsesJobs(jobs)._create_client.max_retries == 0
    async with clients.openai_client(settings, "lookup") as lookup:
        assert policy_of(lookup) == (1, LOOKUP_TIMEOUT, "sk-test", SERVER)
    quick = settings.model_copy(update={"request_timeout_seconds": 5.0})
    async with clients.openai_client(quick, "lookup") as lookup:
        assert lookup.timeout == LOOKUP_TIMEOUT
    assert get_args(clients.ClientPurpose) == ("jobs", "lookup", "chat", "embed")


async def test_the_chat_models_clients_carry_the_chat_policy(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, max_retries=3, request_timeout_seconds=45.0)
    async with clients.http_client() as http:
        model = chat_model(settings, "planner", http)
        chat = model.chat
        # The client never retries: the model's server does, by its own rules (a timeout
        # or a 5xx once; a 429 that says when, up to max_retries times).
        assert policy_of(chat.root_async_client) == (0, 45.0, "sk-test", SERVER)
        assert chat.root_async_client._client is http  # the run's own pool
        assert chat.root_client is not None
        assert policy_of(chat.root_client) == (0, 45.0, "sk-test", SERVER)
        assert (model.server.rate_limit_retries, model.server.timeout_seconds) == (3, 45.0)
        # The sync pool LangChain wants beside it is the process's one, whatever the role or
        # timeout: not a new one (and a CA bundle read) per base URL and timeout.
        other = settings_of(tmp_path, request_timeout_seconds=5.0)
        judge = chat_model(other, "judge", http).chat
        assert judge.root_client._client is chat.root_client._client
        assert chat.root_client._client is clients.sync_http_client()


def test_the_embeddings_clients_carry_the_embed_policy(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, embedding_provider="openai", max_retries=5)
    embedder = make_embeddings(settings.kb)
    assert isinstance(embedder, OpenAIEmbeddingsNamed)
    inner = embedder._client()
    for made in (inner.client._client, inner.async_client._client):
        assert policy_of(made) == (5, 90.0, "sk-test", SERVER)


def test_a_server_without_a_key_gets_one_placeholder_everywhere(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, embedding_provider="openai", openai_api_key=None)
    for purpose in get_args(clients.ClientPurpose):
        made = clients.client_settings(settings, purpose)
        assert made.api_key.get_secret_value() == clients.KEYLESS
    assert settings.kb.embeddings_client is not None
    assert settings.kb.embeddings_client.api_key.get_secret_value() == clients.KEYLESS


def test_the_key_never_shows_in_the_client_settings(tmp_path: Path) -> None:
    settings = settings_of(tmp_path, embedding_provider="openai")
    assert "sk-test" not in repr(settings.kb)
    assert "sk-test" not in repr(clients.client_settings(settings, "embed"))
    assert "sk-test" not in repr(settings.kb.embeddings_client)


def test_the_settings_read_the_policies_without_importing_the_sdk(tmp_path: Path) -> None:
    """``Settings.kb`` (every ``kb`` command) fills the embeddings' client settings from
    the policies: that must not cost the openai SDK's import."""
    import subprocess
    import sys

    code = (
        "import sys; from deep_research.app.config import Settings; "
        f"Settings(home={str(tmp_path)!r}, embedding_provider='openai', "
        "openai_base_url='http://127.0.0.1:9/v1').kb; "
        "assert 'openai' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
