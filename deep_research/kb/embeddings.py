"""Embedding models for the knowledge base, each with a stable identity.

A Chroma collection is only searchable with the model that filled it, so every
embedder carries a `model_id` that the store records next to the collection and
checks on reopen. An embedder also says how long a text it reads whole
(`max_input_tokens`) and counts tokens its own way (`count_tokens`), so chunks are
sized to fit it. Four kinds, a module each:

- `OnnxEmbeddings` (default, "local", in `onnx_embeddings`): all-MiniLM-L6-v2 as int8
  ONNX shipped in `kb/assets/`, run by onnxruntime + tokenizers; no torch, no network.
- `StaticEmbeddings` ("local-fast", in `static_embeddings`): a model2vec-style static
  model distilled from it: token vectors looked up and mean-pooled, ~50x faster, lower
  quality.
- `HashEmbeddings` (in `tests/hash_embeddings.py`): feature hashing, for fast tests; no
  semantics beyond words.
- `OpenAIEmbeddingsNamed` ("openai", in `openai_embeddings`): any OpenAI-compatible
  embeddings endpoint.

This module holds what they share: the base classes `NamedEmbeddings` and (for the shipped
models) `ShippedEmbeddings`, the reading of the shipped models' artifacts (their tokenizers
and windows), `MemoEmbeddings` (each distinct text embedded once) and `make_embeddings`,
which builds the kind the settings ask for. None is LangChain's `Embeddings`, whose import
costs a search ~0.2 s: langchain-chroma, which writes chunks, is given `for_langchain`'s.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from deep_research.core.errors import ConfigError, KnowledgeBaseError
from deep_research.kb.chunking import estimate_token_counts

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from tokenizers import Tokenizer

    from deep_research.kb.settings import KBSettings

ASSETS_DIR = Path(__file__).parent / "assets"

FloatMatrix = npt.NDArray[np.float32]
Done = Callable[[int], None]
"""Told how many of the texts given are embedded so far."""


class Embedder(Protocol):
    """What embeds texts: documents (passages) and queries, each text a vector."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


class NamedEmbeddings(ABC):
    """An ``Embedder`` with an identity to record with a collection."""

    @abstractmethod
    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    @abstractmethod
    def embed_query(self, text: str) -> list[float]: ...

    @property
    @abstractmethod
    def model_id(self) -> str:
        """E.g. `local:<model>@<sha256[:8]>`, `openai:text-embedding-3-small`, `hash:256`."""

    @property
    def max_input_tokens(self) -> int | None:
        """Tokens of one text the model reads (special tokens excluded); the rest is cut.
        None: no limit that chunks need to respect."""
        return None

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens in each text as this model counts them (an estimate when it has no
        local tokenizer)."""
        return estimate_token_counts(texts)

    progress_step = 64
    """Texts an ingest embeds at a time (``store.upsert``): how often progress is told."""


def normalize_rows(matrix: FloatMatrix) -> FloatMatrix:
    # The epsilon keeps an empty text's zero vector at zero instead of NaN.
    norms = np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-12
    normalized: FloatMatrix = (matrix / norms).astype(np.float32)
    return normalized


# --- the shipped models' artifacts (ONNX and static) ---------------------------------


@cache
def counting_tokenizer(path: Path) -> Tokenizer:
    """The model's tokenizer with no truncation and no padding: for measuring texts."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


class ShippedEmbeddings(NamedEmbeddings):
    """A model shipped in ``model_dir`` (ONNX or static): its own tokenizer counts tokens."""

    model_dir: Path

    @abstractmethod
    def encode(self, texts: Sequence[str]) -> FloatMatrix:
        """One row per text, in the order given."""

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        tokenizer = counting_tokenizer(self.model_dir / "tokenizer.json")
        encodings = tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        result: list[list[float]] = self.encode(texts).tolist()
        return result

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def max_length(model_dir: Path, default: int | None) -> int | None:
    """``max_length`` from the artifact's config.json (read without loading the model)."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise KnowledgeBaseError(
            f"embedding model not found at {model_dir} (expected config.json); "
            "reinstall the package or set DEEP_RESEARCH_EMBEDDING_PROVIDER=openai"
        ) from None
    value = config.get("max_length", default)
    return None if value is None else int(value)


# --- memo and factory -----------------------------------------------------------------


class MemoEmbeddings:
    """An embedder that embeds each distinct text once: the web branches of a run rank the
    same passages again (a second round of searching, one page found by two branches).
    Thread-safe (ranking runs in worker threads); keeps the ``max_items`` latest texts."""

    def __init__(self, inner: Embedder, max_items: int = 20_000) -> None:
        self.inner = inner
        self.max_items = max_items
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            fresh = self.inner.embed_documents(missing)
            with self._lock:
                self._vectors.update(zip(missing, fresh, strict=True))
                while len(self._vectors) > self.max_items:
                    self._vectors.popitem(last=False)
        with self._lock:
            found = {t: v for t in texts if (v := self._vectors.get(t)) is not None}
        lost = [t for t in dict.fromkeys(texts) if t not in found]  # evicted meanwhile
        if lost:
            found |= dict(zip(lost, self.inner.embed_documents(lost), strict=True))
        return [found[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def for_langchain(embedder: Embedder) -> Embeddings:
    """``embedder`` as LangChain's ``Embeddings``, for langchain-chroma's writes (imported
    with it, on the first write)."""
    from langchain_core.embeddings import Embeddings

    class LangChainEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embedder.embed_documents(texts)

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed_query(text)

    return LangChainEmbeddings()


def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
    # Each kind is imported where it is built: their modules import this one.
    if settings.embedding_provider == "local":
        from deep_research.kb.onnx_embeddings import OnnxEmbeddings

        return OnnxEmbeddings()
    if settings.embedding_provider == "local-fast":
        from deep_research.kb.static_embeddings import StaticEmbeddings

        return StaticEmbeddings()
    if settings.embedding_provider == "openai":
        from deep_research.kb.openai_embeddings import OpenAIEmbeddingsNamed

        if settings.embeddings_client is None:
            raise ConfigError(
                "embedding_provider=openai needs OPENAI_API_KEY or OPENAI_BASE_URL "
                "(or use DEEP_RESEARCH_EMBEDDING_PROVIDER=local)"
            )
        return OpenAIEmbeddingsNamed(settings.openai_embedding_model, settings.embeddings_client)
    raise ConfigError(f"unknown embedding_provider {settings.embedding_provider!r}")
