"""One knowledge base: its chunks in a Chroma collection, plus local files (opening,
listing and removing KBs by name is ``catalog.py``'s).

Layout of ``settings.kb_dir / <name>``::

    chroma/         the embedded PersistentClient (absent when a Chroma server is used)
    manifest.json   what was ingested: root -> file -> (hash, chunk ids)  (see manifest.py)
    generation      a token that changes whenever the chunks change      (see manifest.py)
    bm25.npz        the lexical index, derived from the chunks           (see lexical.py)
    .lock           held by the one process that writes (ingest, rm)

Chunks are written through langchain-chroma's public API (``add_texts``, ``delete``), a
slice of the embedder's ``progress_step`` chunks at a time, so an ingest can say how many
are embedded; reads (search, locators, the BM25 rebuild) go to the chromadb collection
directly; what a chunk is stored as is ``stored.py``'s.

Invariants: a chunk's text is served (`get_chunks`, `find`: every search, fetch, locator
and citation reads through them) only while its file resolves inside its root's folder
(`RootEntry.holds`), so a symlink pointed out of the folder after an ingest exposes
nothing before the next ingest drops its chunks. Every write to Chroma is
preceded and followed by a generation change, so a derived index can never be mistaken
for current after the chunks moved on. All methods are synchronous; async callers use
``asyncio.to_thread``.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from chromadb.api import ClientAPI
from chromadb.errors import ChromaError

from deep_research.core.errors import KnowledgeBaseError
from deep_research.kb.chunking import Chunk
from deep_research.kb.embeddings import Done, NamedEmbeddings
from deep_research.kb.lexical import LexicalDoc, LexicalIndex
from deep_research.kb.manifest import (
    MANIFEST_FILE,
    FileEntry,
    Manifest,
    RootEntry,
    bump_generation,
    load_manifest,
    read_generation,
)
from deep_research.kb.settings import KBSettings
from deep_research.kb.stored import chroma_metadata, rows, stored_chunk

if TYPE_CHECKING:
    from langchain_chroma import Chroma

LEXICAL_FILE = "bm25.npz"
_PAGE = 2000
# What a Chroma server that went away raises from a call (chromadb talks httpx).
UNREACHABLE = (ValueError, OSError, httpx.HTTPError)


@dataclass(frozen=True)
class KBRoot:
    """A folder ingested into a KB: its name in citations, where it was last read from."""

    name: str
    path: str
    files: int


@dataclass(frozen=True)
class KBStats:
    name: str
    location: str
    files: int
    chunks: int
    embedding_model: str
    size_bytes: int
    roots: tuple[KBRoot, ...] = ()


def roots_of(manifest: Manifest) -> tuple[KBRoot, ...]:
    return tuple(
        KBRoot(name, entry.path, sum(1 for f in entry.files.values() if f.hash))
        for name, entry in sorted(manifest.roots.items())
    )


@contextmanager
def store_errors(action: str) -> Iterator[None]:
    try:
        yield
    except ChromaError as exc:
        if "disk is full" in str(exc):
            raise KnowledgeBaseError(f"{action} failed: the disk is full") from exc
        if "readonly database" in str(exc):
            raise KnowledgeBaseError(
                f"{action} failed: its files are read-only, and Chroma opens its database for "
                "writing even to search; make the data directory writable (DEEP_RESEARCH_HOME "
                "chooses it)"
            ) from exc
        raise KnowledgeBaseError(f"{action} failed: {exc}") from exc
    except UNREACHABLE as exc:
        raise KnowledgeBaseError(f"{action} failed: {exc or type(exc).__name__}") from exc


@contextmanager
def exclusive(directory: Path, name: str, guard: threading.Lock) -> Iterator[None]:
    """One writer per KB, across threads and processes (flock on ``<dir>/.lock``)."""
    directory.mkdir(parents=True, exist_ok=True)
    with guard, open(directory / ".lock", "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise KnowledgeBaseError(
                f"knowledge base {name!r} is being written by another process"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class KBStore:
    """One named knowledge base. Safe to share between threads."""

    def __init__(
        self,
        settings: KBSettings,
        name: str,
        embeddings: NamedEmbeddings,
        client: ClientAPI,
        vectorstore: Callable[[], Chroma],
        collection: Any,
    ) -> None:
        self.settings = settings
        self.name = name
        self.embeddings = embeddings
        self.directory = settings.kb_dir / name
        self.client = client
        self._make_vectorstore = vectorstore
        self._vectorstore: Chroma | None = None
        self.collection = collection
        """Reads: the chromadb collection itself."""
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._lexical: LexicalIndex | None = None
        self._roots: tuple[tuple[int, int, int], Manifest | None] | None = None

    @property
    def vectorstore(self) -> Chroma:
        """Writes: langchain-chroma's public API (loaded on the first write: it takes half a
        second to import, and searching never needs it)."""
        with self._lock:
            if self._vectorstore is None:
                self._vectorstore = self._make_vectorstore()
            return self._vectorstore

    @property
    def location(self) -> str:
        if self.settings.chroma_host:
            return f"http://{self.settings.chroma_host}:{self.settings.chroma_port}"
        return str(self.directory / "chroma")

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        with exclusive(self.directory, self.name, self._write_lock):
            yield

    # --- manifest and generation --------------------------------------------------------

    def load_manifest(self) -> Manifest:
        """The manifest; a lost or unreadable one is rebuilt from the chunks' metadata.

        The rebuilt entries have no hash, so the next ingest of each root re-reads its
        files and deletes the chunks of files that are gone: no chunk stays searchable
        for ever just because the bookkeeping was lost.
        """
        manifest = load_manifest(self.directory)
        if manifest is not None:
            return manifest
        rebuilt = Manifest(embedding_model=self.embeddings.model_id)
        for got in self._pages(["metadatas"]):
            for cid, meta in zip(got["ids"], got["metadatas"], strict=True):
                root = str((meta or {})["root"])
                source = str((meta or {}).get("source", ""))
                files = rebuilt.roots.setdefault(root, RootEntry()).files
                files.setdefault(source, FileEntry(hash=None)).chunk_ids.append(cid)
        return rebuilt

    @property
    def generation(self) -> str:
        return read_generation(self.directory)

    # --- chunks -------------------------------------------------------------------------

    def _pages(self, include: list[str]) -> Iterator[Any]:
        """Every chunk, ``_PAGE`` at a time: what the collection's ``get`` returns."""
        offset = 0
        while True:
            with store_errors("reading chunks"):
                got = self.collection.get(include=include, limit=_PAGE, offset=offset)
            yield got
            if len(got["ids"]) < _PAGE:
                return
            offset += _PAGE

    def _step(self) -> int:
        return max(1, self.client.get_max_batch_size())

    @contextmanager
    def _changing(self, action: str) -> Iterator[None]:
        """A write to the chunks, bracketed by generation changes (see the module doc)."""
        bump_generation(self.directory)
        try:
            with store_errors(action):
                yield
        finally:
            bump_generation(self.directory)

    def upsert(self, chunks: Sequence[Chunk], progress: Done | None = None) -> None:
        """Embed and write the chunks a slice at a time (the embedder's ``progress_step``,
        large enough to keep every core busy), telling ``progress`` how many are done."""
        if not chunks:
            return
        step = max(1, min(self._step(), self.embeddings.progress_step))
        with self._changing("writing chunks"):
            for start in range(0, len(chunks), step):
                batch = chunks[start : start + step]
                self.vectorstore.add_texts(
                    texts=[c.indexed_text for c in batch],
                    metadatas=[chroma_metadata(c) for c in batch],
                    ids=[c.id for c in batch],
                )
                if progress:
                    progress(start + len(batch))

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        step = self._step()
        with self._changing("deleting chunks"):
            for start in range(0, len(ids), step):
                self.vectorstore.delete(ids=list(ids[start : start + step]))

    def count(self) -> int:
        with store_errors("counting chunks"):
            return int(self.collection.count())

    def get_chunks(self, ids: Sequence[str]) -> dict[str, Chunk]:
        if not ids:
            return {}
        with store_errors("reading chunks"):
            got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {c.id: c for c in self._served(stored_chunk(*row) for row in rows(got))}

    def find(self, where: dict[str, Any]) -> list[Chunk]:
        with store_errors("reading chunks"):
            got = self.collection.get(where=where, include=["documents", "metadatas"])
        return self._served(stored_chunk(*row) for row in rows(got))

    def _served(self, chunks: Iterable[Chunk]) -> list[Chunk]:
        """The chunks whose files still resolve inside their roots (one check per file)."""
        chunks = list(chunks)
        manifest = self._manifest_for_reads() if chunks else None
        if manifest is None:
            return chunks
        verdicts: dict[tuple[str, str], bool] = {}
        for chunk in chunks:
            if chunk.document not in verdicts:
                root = manifest.roots.get(chunk.root)
                verdicts[chunk.document] = root is None or root.holds(chunk.source)
        return [chunk for chunk in chunks if verdicts[chunk.document]]

    def _manifest_for_reads(self) -> Manifest | None:
        """The manifest as it is on disk (None: missing or unreadable, so the roots' folders
        are unknown), parsed again only when the file was replaced."""
        try:
            info = os.stat(self.directory / MANIFEST_FILE)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise KnowledgeBaseError(f"cannot read the manifest of {self.name!r}: {exc}") from exc
        key = (info.st_ino, info.st_mtime_ns, info.st_size)
        with self._lock:
            if self._roots is None or self._roots[0] != key:
                self._roots = (key, load_manifest(self.directory))
            return self._roots[1]

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        with store_errors("reading vectors"):
            got = self.collection.get(ids=list(ids), include=["embeddings"])
        return {cid: list(vec) for cid, vec in zip(got["ids"], got["embeddings"], strict=True)}

    def dense(
        self, vector: list[float], n: int, allowed_ids: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``n`` (chunk id, cosine similarity) pairs, best first; only among
        ``allowed_ids`` when given."""
        if n < 1 or (allowed_ids is not None and not allowed_ids):
            return []
        with store_errors("searching"):
            got = self.collection.query(
                query_embeddings=[vector],
                n_results=n,
                ids=None if allowed_ids is None else list(allowed_ids),
                include=["distances"],
            )
        return [
            (cid, 1.0 - float(d)) for cid, d in zip(got["ids"][0], got["distances"][0], strict=True)
        ]

    def iter_lexical_docs(self) -> Iterator[LexicalDoc]:
        for got in self._pages(["documents", "metadatas"]):
            for cid, doc, meta in rows(got):
                chunk = stored_chunk(cid, doc, meta)
                yield LexicalDoc(cid, chunk.root, chunk.source, chunk.tags, doc)

    def lexical(self) -> LexicalIndex:
        """The BM25 index for the current generation: cached, loaded or rebuilt."""
        with self._lock:
            generation = self.generation
            if self._lexical is not None and self._lexical.generation == generation:
                return self._lexical
            path = self.directory / LEXICAL_FILE
            index = LexicalIndex.load(path, generation)
            if index is None:
                index = LexicalIndex.build(generation, list(self.iter_lexical_docs()))
                if self.generation == generation:  # else a writer moved on: don't publish
                    index.save(path)
            self._lexical = index
            return index

    # --- reporting ----------------------------------------------------------------------

    def stats(self) -> KBStats:
        manifest = self.load_manifest()
        size = 0
        for dirpath, _dirs, files in os.walk(self.directory):
            for file in files:
                try:
                    size += os.lstat(os.path.join(dirpath, file)).st_size
                except OSError:
                    continue  # removed while we walked
        return KBStats(
            name=self.name,
            location=self.location,
            files=manifest.file_count,
            chunks=self.count(),
            embedding_model=self.embeddings.model_id,
            size_bytes=size,
            roots=roots_of(manifest),
        )
