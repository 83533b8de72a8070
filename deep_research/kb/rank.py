"""Rank passages held in memory against a query, the way the knowledge base ranks chunks.

BM25 (the KB's own tokenizer, stemmer and parameters) and dense cosine similarity (the
embedder given), fused exactly as ``kb.search`` fuses them (``fuse``). Nothing is stored: a
web branch ranks the passages of the pages it read without a Chroma collection per branch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from deep_research.kb.embeddings import Embedder
from deep_research.kb.lexical import LexicalDoc, LexicalIndex
from deep_research.kb.search import BM25_WEIGHT, DENSE_WEIGHT, fuse


class KnownVectors:
    """Vectors made before, and the query's: ranking with it embeds nothing. A text with no
    vector gets a zero one (cosine 0: it is ranked by its words alone)."""

    def __init__(self, vectors: Mapping[str, list[float]], query: list[float]) -> None:
        self.vectors, self.query, self.zero = vectors, query, [0.0] * len(query)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors.get(text, self.zero) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.query


def cosine_similarities(query: str, passages: Sequence[str], embedder: Embedder) -> list[float]:
    """The cosine similarity of each passage to ``query`` under ``embedder`` (passages
    embedded as documents, the query as a query); a zero vector's similarity is 0."""
    if not passages:
        return []
    vectors = np.asarray(embedder.embed_documents(list(passages)), dtype=float)
    target = np.asarray(embedder.embed_query(query), dtype=float)
    norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(target) or 1.0)
    cosine = (vectors @ target) / np.where(norms == 0, 1.0, norms)
    return [float(score) for score in cosine]


def rank(query: str, passages: Sequence[str], embedder: Embedder) -> list[tuple[int, float]]:
    """(index into ``passages``, fused score) for every passage, best first."""
    if not passages:
        return []
    ids = [str(i) for i in range(len(passages))]
    docs = [
        LexicalDoc(id=i, root="", source=i, tags=(), text=p)
        for i, p in zip(ids, passages, strict=True)
    ]
    lexical = LexicalIndex.build("", docs).search(query, len(docs))
    dense = list(zip(ids, cosine_similarities(query, passages, embedder), strict=True))
    fused = fuse([(dense, DENSE_WEIGHT), (lexical, BM25_WEIGHT)])
    return [(int(cid), score) for cid, score in fused]
