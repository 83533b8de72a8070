"""Passages ranked in memory like the KB ranks chunks (BM25 + dense, fused)."""

from __future__ import annotations

from deep_research.kb.onnx_embeddings import OnnxEmbeddings
from deep_research.kb.rank import cosine_similarities, rank
from tests.hash_embeddings import HashEmbeddings

PASSAGES = [
    "Cookie settings: accept all cookies to continue browsing this site.",
    "Raft elects a leader with randomized election timeouts; a candidate needs a majority.",
    "Paxos has no distinguished leader in its basic form; Multi-Paxos adds a stable leader.",
    "Subscribe to our newsletter for weekly updates.",
]


def test_the_passages_that_answer_rank_first() -> None:
    ranked = rank("How does Raft elect a leader?", PASSAGES, OnnxEmbeddings())
    assert sorted(i for i, _ in ranked) == [0, 1, 2, 3], "every passage, once"
    assert ranked[0][0] == 1
    assert {i for i, _ in ranked[:2]} == {1, 2}
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


def test_no_passages_rank_nothing() -> None:
    assert rank("anything", [], OnnxEmbeddings()) == []


def test_passages_of_stopwords_and_symbols_alone_rank_by_meaning_only() -> None:
    # A page's pilcrows and rules leave BM25 no vocabulary at all; bm25s cannot index that.
    ranked = rank("How does Raft elect a leader?", ["¶", "- - -", "the and of"], OnnxEmbeddings())
    assert sorted(i for i, _ in ranked) == [0, 1, 2]


def test_a_zero_vector_has_cosine_zero_not_nan() -> None:
    # Hashing embeds a text without words as the zero vector.
    assert cosine_similarities("Raft", ["¶", "Raft"], HashEmbeddings()) == [0.0, 1.0]
    assert cosine_similarities("Raft", [], HashEmbeddings()) == []
