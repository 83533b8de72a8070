"""Embeddings from any OpenAI-compatible embeddings endpoint ("openai"), through
``langchain_openai``, which is imported on the first text."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.settings import OpenAIClientSettings

if TYPE_CHECKING:
    from langchain_openai import OpenAIEmbeddings


class OpenAIEmbeddingsNamed(NamedEmbeddings):
    """`langchain_openai.OpenAIEmbeddings`, built on first use, with a model identity."""

    def __init__(self, model: str, client: OpenAIClientSettings) -> None:
        self.model = model
        self._settings = client
        self._inner: OpenAIEmbeddings | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"openai:{self.model}"

    def _client(self) -> OpenAIEmbeddings:
        with self._lock:
            if self._inner is None:
                from langchain_openai import OpenAIEmbeddings

                made = self._settings
                self._inner = OpenAIEmbeddings(
                    model=self.model,
                    openai_api_key=made.api_key,
                    openai_api_base=made.base_url,
                    max_retries=made.max_retries,
                    request_timeout=made.timeout,
                    # True would make tiktoken download its encodings: fails offline.
                    check_embedding_ctx_length=False,
                )
            return self._inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._client().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._client().embed_query(text)
