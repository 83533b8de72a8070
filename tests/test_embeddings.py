"""The embedders: the shipped static model works offline, and each kind has a stable identity."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pydantic import SecretStr

from deep_research.config import Settings
from deep_research.errors import ConfigError, KnowledgeBaseError
from deep_research.kb.embeddings import (
    HashEmbeddings,
    OpenAIEmbeddingsNamed,
    StaticEmbeddings,
    make_embeddings,
)


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


@pytest.fixture(scope="module")
def static() -> StaticEmbeddings:
    return StaticEmbeddings()


def test_static_model_is_shipped_and_identified(static: StaticEmbeddings) -> None:
    assert static.model_id.startswith("local:minilm-l6-static-256@")
    assert len(static.model_id.rsplit("@", 1)[1]) == 8
    assert static.dimensions == 256


def test_static_vectors_are_normalized_and_deterministic(static: StaticEmbeddings) -> None:
    texts = ["Chroma stores vectors on disk.", "BM25 ranks by term frequency."]
    first = static.embed_documents(texts)
    assert first == StaticEmbeddings().embed_documents(texts)
    assert [len(v) for v in first] == [256, 256]
    assert all(abs(_norm(v) - 1.0) < 1e-4 for v in first)
    assert static.embed_query(texts[0]) == first[0]


def test_static_related_texts_are_closer(static: StaticEmbeddings) -> None:
    query = static.embed_query("vitamin D deficiency and bone fractures")
    related, unrelated = static.embed_documents(
        [
            "Low serum vitamin D raises the risk of hip fracture in older adults.",
            "The compiler emits a warning when a variable is never used.",
        ]
    )
    assert _cos(query, related) > _cos(query, unrelated) + 0.1


def test_static_handles_empty_long_and_unicode_text(static: StaticEmbeddings) -> None:
    empty, long, accented = static.embed_documents(["", "word " * 5000, "naïve café résumé"])
    assert _norm(empty) == 0.0
    assert abs(_norm(long) - 1.0) < 1e-4
    assert abs(_norm(accented) - 1.0) < 1e-4
    assert static.embed_documents([]) == []


def test_missing_static_model_is_a_kb_error(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeBaseError, match="embedding model not found"):
        _ = StaticEmbeddings(tmp_path).model_id


def test_hash_embeddings_are_deterministic_and_word_based() -> None:
    emb = HashEmbeddings(64)
    assert emb.model_id == "hash:64"
    a, b, c = emb.embed_documents(["Alpha beta", "alpha BETA", "gamma delta"])
    assert a == b
    assert abs(_norm(a) - 1.0) < 1e-6
    assert _cos(a, c) < 0.99
    assert emb.embed_query("Alpha beta") == a
    # A fixed expectation: stored vectors must not change between processes or releases.
    assert HashEmbeddings(8).embed_query("x") == [0.0] * 7 + [-1.0]


def test_make_embeddings_picks_by_provider(tmp_path: Path) -> None:
    local = make_embeddings(Settings(home=tmp_path, embedding_provider="local"))
    assert isinstance(local, StaticEmbeddings)
    remote = make_embeddings(
        Settings(
            home=tmp_path,
            embedding_provider="openai",
            openai_api_key=SecretStr("sk-test"),
            openai_embedding_model="text-embedding-3-small",
        )
    )
    assert isinstance(remote, OpenAIEmbeddingsNamed)
    assert remote.model_id == "openai:text-embedding-3-small"


def test_openai_embeddings_need_a_key_or_a_server(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, embedding_provider="openai", openai_api_key=None)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_embeddings(settings)
    local_server = settings.with_overrides(openai_base_url="http://127.0.0.1:9/v1")
    assert isinstance(make_embeddings(local_server), OpenAIEmbeddingsNamed)
