"""BM25 over the stored chunks (bm25s + the PyStemmer English stemmer), plus a small
catalog (chunk -> document, document -> tags) that the search filters use.

The index is derived data: it is built from the store's chunks, saved next to the store
tagged with the store's generation, and rebuilt when that generation moves on. It is one
file, written to a temporary name, fsynced and renamed over the old one, so a reader in
another process sees the old index or the new one, never half of each. A missing, stale
or unreadable index is never an error, only a rebuild.

A document is ``(root, source)``: the name of the folder it was ingested from and its
path in that folder.
"""

from __future__ import annotations

import fnmatch
import io
import json
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import numpy.typing as npt

from deep_research.kb.chunking import document_key
from deep_research.kb.manifest import atomic_write
from deep_research.kb.words import english_stemmer

SCHEMA_VERSION = 2
STOPWORDS = "en"
BM25_K1 = 1.5
BM25_B = 0.75
_WILDCARDS = frozenset("*?[")
_SCORE_ARRAYS = ("data", "indices", "indptr")
_BM25_PARAMS = ("k1", "b", "delta", "method", "idf_method", "dtype", "int_dtype", "backend")

Document = tuple[str, str]
"""(root, source)."""


def _tokenize(texts: list[str], *, return_ids: bool) -> object:
    return bm25s.tokenize(
        texts,
        stopwords=STOPWORDS,
        stemmer=english_stemmer().stemWords,
        return_ids=return_ids,
        show_progress=False,
    )


def matches_path(source: str, pattern: str) -> bool:
    """A glob over a path; a plain path also matches everything under it."""
    if _WILDCARDS & set(pattern):
        return fnmatch.fnmatchcase(source, pattern)
    prefix = pattern.strip("/")
    return source == prefix or source.startswith(prefix + "/")


def matches_document(document: Document, pattern: str) -> bool:
    """The pattern applies to the path in its root (``guides/*``) or with the root's name
    in front (``notes/guides/*``)."""
    root, source = document
    if matches_path(source, pattern):
        return True
    return bool(root) and matches_path(document_key(root, source), pattern)


@dataclass(frozen=True)
class LexicalDoc:
    id: str
    root: str
    source: str
    tags: tuple[str, ...]
    text: str
    """Title, heading path and chunk text: what BM25 scores."""


@dataclass
class LexicalIndex:
    generation: str
    ids: list[str]
    documents: list[Document]
    chunk_document: npt.NDArray[np.int32]
    """The index into ``documents`` of each chunk's document."""
    document_tags: list[tuple[str, ...]]
    retriever: bm25s.BM25 | None

    @classmethod
    def build(cls, generation: str, docs: Sequence[LexicalDoc]) -> LexicalIndex:
        index_of: dict[Document, int] = {}
        document_tags: list[tuple[str, ...]] = []
        for doc in docs:
            if (doc.root, doc.source) not in index_of:
                index_of[(doc.root, doc.source)] = len(index_of)
                document_tags.append(doc.tags)
        chunk_document = np.array([index_of[(d.root, d.source)] for d in docs], dtype=np.int32)
        retriever: bm25s.BM25 | None = None
        tokenized = _tokenize([d.text for d in docs], return_ids=True) if docs else None
        # Texts of stopwords and symbols alone ("¶", "- - -") leave no vocabulary, which
        # bm25s cannot index: then nothing matches lexically.
        if isinstance(tokenized, bm25s.tokenization.Tokenized) and tokenized.vocab:
            retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B)
            retriever.index(tokenized, show_progress=False)
        ids = [d.id for d in docs]
        return cls(generation, ids, list(index_of), chunk_document, document_tags, retriever)

    # --- persistence ------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """One file, replaced atomically: a reader never sees half an index."""
        header: dict[str, object] = {
            "schema_version": SCHEMA_VERSION,
            "generation": self.generation,
            "ids": self.ids,
            "documents": [list(document) for document in self.documents],
            "document_tags": [list(tags) for tags in self.document_tags],
        }
        arrays: dict[str, npt.NDArray[np.generic]] = {"chunk_document": self.chunk_document}
        if self.retriever is not None:
            scores = self.retriever.scores
            header["vocab"] = self.retriever.vocab_dict
            header["params"] = {name: getattr(self.retriever, name) for name in _BM25_PARAMS}
            header["num_docs"] = int(scores["num_docs"])
            arrays |= {name: scores[name] for name in _SCORE_ARRAYS}
            if self.retriever.nonoccurrence_array is not None:  # BM25L and BM25+ only
                arrays["nonoccurrence"] = self.retriever.nonoccurrence_array
        arrays["header"] = np.frombuffer(json.dumps(header).encode("utf-8"), dtype=np.uint8)
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)
        atomic_write(path, buffer.getvalue())

    @classmethod
    def load(cls, path: Path, generation: str) -> LexicalIndex | None:
        """The saved index if it matches ``generation``; None means "rebuild"."""
        try:
            with np.load(path, allow_pickle=False) as saved:
                header = json.loads(saved["header"].tobytes().decode("utf-8"))
                if header.get("schema_version") != SCHEMA_VERSION:
                    return None
                if header.get("generation") != generation:
                    return None
                arrays = {name: saved[name] for name in saved.files if name != "header"}
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            return None
        retriever: bm25s.BM25 | None = None
        if "vocab" in header:
            # What bm25s.BM25.load does with its own files.
            retriever = bm25s.BM25(**header["params"])
            retriever.vocab_dict = header["vocab"]
            retriever.unique_token_ids_set = set(retriever.vocab_dict.values())
            retriever.scores = {name: arrays[name] for name in _SCORE_ARRAYS}
            retriever.scores["num_docs"] = header["num_docs"]
            retriever.nonoccurrence_array = arrays.get("nonoccurrence")
        return cls(
            generation,
            list(header["ids"]),
            [(str(root), str(source)) for root, source in header["documents"]],
            arrays["chunk_document"].astype(np.int32),
            [tuple(tags) for tags in header["document_tags"]],
            retriever,
        )

    # --- queries ----------------------------------------------------------------------

    def documents_matching(
        self, path_glob: str | None, tags: Iterable[str] | None
    ) -> set[Document] | None:
        """Documents passing the filters (all given tags required); None when unfiltered."""
        wanted = {tag.strip().lstrip("#").lower() for tag in tags or () if tag.strip()}
        if not path_glob and not wanted:
            return None
        return {
            document
            for document, document_tags in zip(self.documents, self.document_tags, strict=True)
            if (not path_glob or matches_document(document, path_glob))
            and wanted <= set(document_tags)
        }

    def chunk_ids(self, documents: set[Document]) -> list[str]:
        mask = self._mask(documents)
        return [cid for cid, keep in zip(self.ids, mask.tolist(), strict=True) if keep]

    def _mask(self, documents: set[Document]) -> npt.NDArray[np.bool_]:
        allowed = [i for i, document in enumerate(self.documents) if document in documents]
        return np.isin(self.chunk_document, allowed)

    def search(
        self, query: str, n: int, allowed: set[Document] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``n`` (chunk id, BM25 score) pairs, best first; only positive scores."""
        if self.retriever is None or n < 1:
            return []
        tokenized = _tokenize([query], return_ids=False)
        assert isinstance(tokenized, list)
        token_ids = self.retriever.get_tokens_ids(tokenized[0])
        if not token_ids:
            return []
        scores: npt.NDArray[np.float64] = np.asarray(
            self.retriever.get_scores_from_ids(token_ids), dtype=np.float64
        )
        if allowed is not None:
            scores = np.where(self._mask(allowed), scores, 0.0)
        n = min(n, len(scores))
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        ranked = sorted(top.tolist(), key=lambda i: (-scores[i], i))
        return [(self.ids[i], float(scores[i])) for i in ranked if scores[i] > 0.0]
