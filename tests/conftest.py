"""Shared pytest fixtures. Keep each group short and labelled."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import openai
import pytest
from langchain_openai import ChatOpenAI

from tests.fake_openai import FakeOpenAI

# --- fake OpenAI server (tests/fake_openai.py) --------------------------------------------
# Every client below is built per test and closed at teardown: an HTTP pool belongs to
# the event loop that first used it, and each test has its own loop ("Event loop is
# closed"). langchain-openai also caches its default pool per (base_url, timeout) for
# the whole process, so ChatOpenAI always gets its own `http_async_client` here.


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A loopback OpenAI-compatible server for this test; fails the test on handler errors."""
    with FakeOpenAI() as fake:
        yield fake
    if fake.errors:
        pytest.fail("FakeOpenAI saw errors:\n" + "\n".join(fake.errors))


@pytest.fixture
async def openai_client(
    fake_openai: FakeOpenAI,
) -> AsyncIterator[Callable[..., openai.AsyncOpenAI]]:
    """Factory of `openai.AsyncOpenAI` clients on `fake_openai` (kwargs pass through)."""
    clients: list[openai.AsyncOpenAI] = []

    def make(**kwargs: Any) -> openai.AsyncOpenAI:
        kwargs.setdefault("api_key", "test")
        clients.append(openai.AsyncOpenAI(base_url=fake_openai.base_url, **kwargs))
        return clients[-1]

    yield make
    for client in clients:
        await client.close()


@pytest.fixture
async def chat_openai(fake_openai: FakeOpenAI) -> AsyncIterator[Callable[..., ChatOpenAI]]:
    """Factory of `ChatOpenAI` models on `fake_openai` (default model gpt-4.1-mini)."""
    pools: list[openai.DefaultAsyncHttpxClient] = []

    def make(**kwargs: Any) -> ChatOpenAI:
        pools.append(openai.DefaultAsyncHttpxClient())
        kwargs.setdefault("model", "gpt-4.1-mini")
        kwargs.setdefault("api_key", "test")
        return ChatOpenAI(base_url=fake_openai.base_url, http_async_client=pools[-1], **kwargs)

    yield make
    for pool in pools:
        await pool.aclose()
