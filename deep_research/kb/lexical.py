"""BM25 over the stored chunks (bm25s + the PyStemmer English stemmer), plus a small
catalog (chunk -> file, file -> tags) that the search filters use.

The index is derived data: it is built from the store's chunks, saved next to the
store tagged with the store's generation, and rebuilt when that generation moves on.
A missing, stale or unreadable index is never an error, only a rebuild.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np
import numpy.typing as npt
import Stemmer

SCHEMA_VERSION = 1
CATALOG_FILE = "catalog.json"
STOPWORDS = "en"
BM25_K1 = 1.5
BM25_B = 0.75
_WILDCARDS = frozenset("*?[")


def _tokenize(texts: list[str], *, return_ids: bool) -> object:
    # A stemmer per call: PyStemmer objects are not safe to share between threads.
    stemmer = Stemmer.Stemmer("english")
    return bm25s.tokenize(
        texts,
        stopwords=STOPWORDS,
        stemmer=stemmer.stemWords,
        return_ids=return_ids,
        show_progress=False,
    )


def matches_path(source: str, pattern: str) -> bool:
    """A glob over the KB-relative path; a plain path also matches everything under it."""
    if _WILDCARDS & set(pattern):
        return fnmatch.fnmatchcase(source, pattern)
    prefix = pattern.strip("/")
    return source == prefix or source.startswith(prefix + "/")


@dataclass(frozen=True)
class LexicalDoc:
    id: str
    source: str
    tags: tuple[str, ...]
    text: str
    """Title, heading path and chunk text: what BM25 scores."""


class LexicalIndex:
    def __init__(
        self,
        generation: str,
        ids: list[str],
        sources: list[str],
        chunk_source: npt.NDArray[np.int32],
        source_tags: list[tuple[str, ...]],
        retriever: bm25s.BM25 | None,
    ) -> None:
        self.generation = generation
        self.ids = ids
        self.sources = sources
        self.chunk_source = chunk_source
        self.source_tags = source_tags
        self.retriever = retriever

    @classmethod
    def build(cls, generation: str, docs: Sequence[LexicalDoc]) -> LexicalIndex:
        source_index: dict[str, int] = {}
        source_tags: list[tuple[str, ...]] = []
        for doc in docs:
            if doc.source not in source_index:
                source_index[doc.source] = len(source_index)
                source_tags.append(doc.tags)
        chunk_source = np.array([source_index[d.source] for d in docs], dtype=np.int32)
        retriever: bm25s.BM25 | None = None
        if docs:
            retriever = bm25s.BM25(k1=BM25_K1, b=BM25_B)
            retriever.index(_tokenize([d.text for d in docs], return_ids=True), show_progress=False)
        return cls(
            generation,
            [d.id for d in docs],
            list(source_index),
            chunk_source,
            source_tags,
            retriever,
        )

    # --- persistence ------------------------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write to a fresh directory, then swap it in: a reader never sees half an index."""
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = directory.with_name(f"{directory.name}.tmp-{uuid.uuid4().hex}")
        staging.mkdir()
        try:
            if self.retriever is not None:
                self.retriever.save(str(staging), show_progress=False)
            catalog = {
                "schema_version": SCHEMA_VERSION,
                "generation": self.generation,
                "ids": self.ids,
                "sources": self.sources,
                "chunk_source": self.chunk_source.tolist(),
                "source_tags": [list(tags) for tags in self.source_tags],
            }
            (staging / CATALOG_FILE).write_text(json.dumps(catalog), encoding="utf-8")
            retired = directory.with_name(f"{directory.name}.old-{uuid.uuid4().hex}")
            if directory.exists():
                os.replace(directory, retired)
            os.replace(staging, directory)
            shutil.rmtree(retired, ignore_errors=True)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path, generation: str) -> LexicalIndex | None:
        """The saved index if it matches ``generation``; None means "rebuild"."""
        try:
            catalog = json.loads((directory / CATALOG_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if catalog.get("schema_version") != SCHEMA_VERSION:
            return None
        if catalog.get("generation") != generation:
            return None
        retriever: bm25s.BM25 | None = None
        if catalog["ids"]:
            try:
                retriever = bm25s.BM25.load(str(directory), show_progress=False)
            except (OSError, ValueError):
                return None
        return cls(
            generation,
            list(catalog["ids"]),
            list(catalog["sources"]),
            np.array(catalog["chunk_source"], dtype=np.int32),
            [tuple(tags) for tags in catalog["source_tags"]],
            retriever,
        )

    # --- queries ----------------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.ids)

    def sources_matching(
        self, path_glob: str | None, tags: Iterable[str] | None
    ) -> set[str] | None:
        """Files passing the filters (all given tags required); None when unfiltered."""
        wanted = {tag.strip().lstrip("#").lower() for tag in tags or () if tag.strip()}
        if not path_glob and not wanted:
            return None
        return {
            source
            for source, file_tags in zip(self.sources, self.source_tags, strict=True)
            if (not path_glob or matches_path(source, path_glob)) and wanted <= set(file_tags)
        }

    def search(
        self, query: str, n: int, allowed_sources: set[str] | None = None
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
        if allowed_sources is not None:
            allowed = [i for i, s in enumerate(self.sources) if s in allowed_sources]
            scores = np.where(np.isin(self.chunk_source, allowed), scores, 0.0)
        n = min(n, len(scores))
        top = np.argpartition(-scores, n - 1)[:n] if n < len(scores) else np.arange(len(scores))
        ranked = sorted(top.tolist(), key=lambda i: (-scores[i], i))
        return [(self.ids[i], float(scores[i])) for i in ranked if scores[i] > 0.0]
