"""Embeddings from any OpenAI-compatible embeddings endpoint ("openai"), through
``langchain_openai``, which is imported on the first text."""

from __future__ import annotations

import threading

from langchain_core.embeddings import Embeddings

from deep_research.kb.embeddings import NamedEmbeddings


class OpenAIEmbeddingsNamed(NamedEmbeddings):
    """`langchain_openai.OpenAIEmbeddings`, built on first use, with a model identity."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 120.0,
    ) -> None:
        self.model = model
        self._api_key = api_key
        self._base_url = base_url
        self._max_retries = max_retries
        self._timeout = timeout
        self._inner: Embeddings | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}"

    def _client(self) -> Embeddings:
        with self._lock:
            if self._inner is None:
                from langchain_openai import OpenAIEmbeddings
                from pydantic import SecretStr

                self._inner = OpenAIEmbeddings(
                    model=self.model,
                    # A local server needs no key, but the client refuses to start without one.
                    openai_api_key=SecretStr(self._api_key or "not-needed"),
                    openai_api_base=self._base_url,
                    max_retries=self._max_retries,
                    request_timeout=self._timeout,
                    # True would make tiktoken download its encodings: fails offline.
                    check_embedding_ctx_length=False,
                )
            return self._inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._client().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._client().embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        return await self._client().aembed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        return await self._client().aembed_query(text)
