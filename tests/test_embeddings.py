"""The embedders: the shipped models work offline, and each kind has a stable identity."""

from __future__ import annotations

import hashlib
import json
import math
import socket
from pathlib import Path

import pytest
from pydantic import SecretStr

from deep_research.app.config import Settings
from deep_research.core.errors import ConfigError, KnowledgeBaseError
from deep_research.kb.embeddings import make_embeddings
from deep_research.kb.onnx_embeddings import OnnxEmbeddings
from deep_research.kb.openai_embeddings import OpenAIEmbeddingsNamed
from deep_research.kb.static_embeddings import StaticEmbeddings
from tests.hash_embeddings import HashEmbeddings


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


@pytest.fixture(scope="module")
def onnx() -> OnnxEmbeddings:
    """The default model, loaded once, with every socket connection refused while it loads."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedder tried to use the network")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", refuse)
        embedder = OnnxEmbeddings()
        embedder.embed_query("load the model")
    return embedder


def test_onnx_model_is_shipped_and_identified(onnx: OnnxEmbeddings) -> None:
    weights = onnx.model_dir / "model.onnx"
    sha8 = hashlib.sha256(weights.read_bytes()).hexdigest()[:8]
    assert onnx.model_id == f"local:minilm-l6-int8@{sha8}"
    assert onnx.dimensions == 384


def test_onnx_vectors_are_normalized_and_deterministic(onnx: OnnxEmbeddings) -> None:
    texts = ["Chroma stores vectors on disk.", "BM25 ranks by term frequency."]
    first = onnx.embed_documents(texts)
    assert first == OnnxEmbeddings().embed_documents(texts)
    assert [len(v) for v in first] == [384, 384]
    assert all(abs(_norm(v) - 1.0) < 1e-4 for v in first)
    # One text per run by default: a vector does not depend on its batch-mates.
    assert onnx.embed_query(texts[1]) == first[1]


def test_onnx_related_texts_are_closer(onnx: OnnxEmbeddings) -> None:
    query = onnx.embed_query("vitamin D deficiency and bone fractures")
    related, unrelated = onnx.embed_documents(
        [
            "Low serum vitamin D raises the risk of hip fracture in older adults.",
            "The compiler emits a warning when a variable is never used.",
        ]
    )
    assert _cos(query, related) > _cos(query, unrelated) + 0.3


def test_onnx_handles_empty_long_and_unicode_text(onnx: OnnxEmbeddings) -> None:
    vectors = onnx.embed_documents(["", "   ", "word " * 5000, "naïve café résumé"])
    assert all(math.isfinite(x) for v in vectors for x in v)
    assert all(abs(_norm(v) - 1.0) < 1e-4 for v in vectors)
    assert onnx.embed_documents([]) == []


def test_onnx_keeps_input_order_across_length_sorted_batches(onnx: OnnxEmbeddings) -> None:
    texts = [
        "Metformin lowers blood glucose in type 2 diabetes. " * 6,
        "Tumour suppressor p53",
        "Antibiotic resistance spreads between bacteria by plasmids and horizontal transfer.",
        "Sleep",
        "Measles vaccination coverage fell during the pandemic in several countries. " * 3,
    ]
    batched = OnnxEmbeddings(batch_size=2).embed_documents(texts)
    for i, text in enumerate(texts):
        alone = onnx.embed_query(text)
        similarities = [_cos(alone, row) for row in batched]
        # Batch-mates shift int8 activation scales a little, so "the same" is not bit-exact.
        assert similarities[i] > 0.95
        assert max(range(len(texts)), key=similarities.__getitem__) == i


FIXTURES = Path(__file__).parent / "embedding_fixtures"


def test_onnx_vectors_are_the_ones_already_stored(onnx: OnnxEmbeddings) -> None:
    """Chroma keeps the vectors of every KB ingested so far: running the model another way
    (threads, session options) must give the same ones, or every KB needs re-embedding."""
    recorded = json.loads((FIXTURES / "minilm-int8.json").read_text(encoding="utf-8"))
    assert onnx.model_id == recorded["model_id"]
    vectors = onnx.embed_documents(recorded["texts"])
    for got, want in zip(vectors, recorded["vectors"], strict=True):
        if int8_dot_products_are_exact():
            # With VNNI, int8 GEMMs are exact; only float kernels differ between such CPUs,
            # by far less than this.
            assert max(abs(a - b) for a, b in zip(got, want, strict=True)) < 1e-4
        else:
            # AVX2 alone (seen on an AMD EPYC, 2026-11-26) multiplies u8 x s8 pairs with a
            # saturating add (vpmaddubsw): the same model, vectors a cosine of ~0.991 from
            # the recorded ones. Still the same model: another one is far below this.
            assert cosine(got, want) > 0.98


def int8_dot_products_are_exact() -> bool:
    """True on a CPU with VNNI instructions (where the fixture's vectors were recorded)."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return True
    return "avx512_vnni" in flags or "avx_vnni" in flags


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (sum(x * x for x in a) ** 0.5 * sum(y * y for y in b) ** 0.5)


def test_onnx_parallel_runs_give_the_same_vectors(onnx: OnnxEmbeddings) -> None:
    texts = [f"Sentence {i} about {'long ' * (i % 7)}vaccines and trials." for i in range(12)]
    parallel = OnnxEmbeddings(workers=3).encode(texts)
    alone = OnnxEmbeddings(workers=1).encode(texts)
    assert parallel.tolist() == alone.tolist()
    assert parallel[5].tolist() == onnx.embed_query(texts[5])


def test_missing_onnx_model_is_a_kb_error(tmp_path: Path) -> None:
    with pytest.raises(KnowledgeBaseError, match="embedding model not found"):
        _ = OnnxEmbeddings(tmp_path).model_id


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
    local = make_embeddings(Settings(home=tmp_path, embedding_provider="local").kb)
    assert isinstance(local, OnnxEmbeddings)
    assert isinstance(make_embeddings(Settings(home=tmp_path).kb), OnnxEmbeddings)
    fast = make_embeddings(Settings(home=tmp_path, embedding_provider="local-fast").kb)
    assert isinstance(fast, StaticEmbeddings)
    remote = make_embeddings(
        Settings(
            home=tmp_path,
            embedding_provider="openai",
            openai_api_key=SecretStr("sk-test"),
            openai_embedding_model="text-embedding-3-small",
        ).kb
    )
    assert isinstance(remote, OpenAIEmbeddingsNamed)
    assert remote.model_id == "openai:text-embedding-3-small"


def test_openai_embeddings_need_a_key_or_a_server(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, embedding_provider="openai", openai_api_key=None)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        make_embeddings(settings.kb)
    local_server = settings.with_overrides(openai_base_url="http://127.0.0.1:9/v1")
    assert isinstance(make_embeddings(local_server.kb), OpenAIEmbeddingsNamed)


def test_memo_embeddings_embed_each_distinct_text_once() -> None:
    from deep_research.kb.embeddings import MemoEmbeddings
    from tests.hash_embeddings import HashEmbeddings

    calls: list[list[str]] = []

    class Counting(HashEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            calls.append(list(texts))
            return super().embed_documents(texts)

    inner = Counting()
    memo = MemoEmbeddings(inner, max_items=3)
    first = memo.embed_documents(["a b", "c d", "a b"])
    assert calls == [["a b", "c d"]]
    assert first == inner.embed_documents(["a b", "c d", "a b"])
    calls.clear()
    assert memo.embed_documents(["c d", "e f"]) == HashEmbeddings().embed_documents(["c d", "e f"])
    assert calls == [["e f"]], "only the new text"
    memo.embed_documents(["g h"])  # over max_items: the oldest ("a b") is forgotten
    calls.clear()
    memo.embed_documents(["a b"])
    assert calls == [["a b"]]
