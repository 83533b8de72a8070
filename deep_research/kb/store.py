"""Named knowledge bases: a Chroma collection (via langchain-chroma) plus local files.

Layout of ``settings.kb_dir / <name>``::

    chroma/         the embedded PersistentClient (absent when a Chroma server is used)
    manifest.json   what was ingested: file -> (hash, chunk ids)      (see manifest.py)
    generation      a token that changes whenever the chunks change  (see manifest.py)
    bm25/           the lexical index, derived from the chunks (see lexical.py)

Invariants: a collection records the embedding model that filled it and is only
opened with that model; every write to Chroma is preceded by a generation change, so
a derived index can never be mistaken for current after the chunks moved on.
All methods are synchronous; async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import chromadb
from chromadb.api import ClientAPI
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError, NotFoundError
from langchain_chroma import Chroma

from deep_research.app.config import Settings
from deep_research.core.errors import KBMissing, KnowledgeBaseError, UsageError
from deep_research.kb.chunking import Chunk, MetaValue
from deep_research.kb.embeddings import NamedEmbeddings, make_embeddings
from deep_research.kb.lexical import LexicalDoc, LexicalIndex
from deep_research.kb.manifest import Manifest, load_manifest, read_generation, save_manifest

KB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
META_MODEL = "embedding_model"
META_NAME = "kb_name"
_PAGE = 2000


@dataclass(frozen=True)
class KBStats:
    name: str
    location: str
    files: int
    chunks: int
    embedding_model: str
    size_bytes: int


@dataclass(frozen=True)
class StoredChunk:
    id: str
    source: str
    heading: str
    start_line: int
    end_line: int
    text: str
    title: str
    tags: tuple[str, ...]
    ordinal: int


def _check_name(name: str) -> str:
    if not KB_NAME.match(name):
        raise UsageError(
            f"invalid KB name {name!r}: use letters, digits, '_', '.', '-' (max 63 chars)"
        )
    return name


def collection_name(name: str) -> str:
    # Chroma names must start and end alphanumeric and contain no "..".
    return re.sub(r"[^A-Za-z0-9_-]", "_", name) + "_kb"


@contextmanager
def _store_errors(action: str) -> Iterator[None]:
    try:
        yield
    except ChromaError as exc:
        raise KnowledgeBaseError(f"{action} failed: {exc}") from exc


def _client(settings: Settings, directory: Path, *, create: bool) -> ClientAPI:
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        try:
            return chromadb.HttpClient(
                host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
            )
        except (ValueError, ChromaError, OSError) as exc:
            raise KnowledgeBaseError(
                f"cannot reach Chroma at {settings.chroma_host}:{settings.chroma_port}: {exc}"
            ) from exc
    path = directory / "chroma"
    if not create and not path.is_dir():
        raise _not_found(directory.name)
    path.mkdir(parents=True, exist_ok=True)
    with _store_errors("opening the knowledge base"):
        return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def _chroma_metadata(chunk: Chunk) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "source": chunk.source,
        "heading": chunk.heading,
        "start_line": chunk.start_line,
        "end_line": chunk.end_line,
        "content_hash": chunk.content_hash,
        "title": chunk.title,
        "ordinal": chunk.ordinal,
    }
    if chunk.tags:  # Chroma rejects empty lists
        meta["tags"] = list(chunk.tags)
    for key, value in chunk.meta:
        meta[f"fm_{key}"] = value
    return meta


def _stored(chunk_id: str, text: str, meta: dict[str, MetaValue | list[str]]) -> StoredChunk:
    tags = meta.get("tags") or []
    return StoredChunk(
        id=chunk_id,
        source=str(meta["source"]),
        heading=str(meta.get("heading", "")),
        start_line=int(meta["start_line"]),  # type: ignore[arg-type]
        end_line=int(meta["end_line"]),  # type: ignore[arg-type]
        text=text,
        title=str(meta.get("title", "")),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
        ordinal=int(meta.get("ordinal", 0)),  # type: ignore[arg-type]
    )


class KBStore:
    """One named knowledge base. Safe to share between threads."""

    def __init__(
        self,
        settings: Settings,
        name: str,
        embeddings: NamedEmbeddings,
        client: ClientAPI,
        vectorstore: Chroma,
    ) -> None:
        self.settings = settings
        self.name = name
        self.embeddings = embeddings
        self.directory = settings.kb_dir / name
        self.client = client
        self.vectorstore = vectorstore
        self._lock = threading.RLock()
        self._write_lock = threading.Lock()
        self._lexical: LexicalIndex | None = None

    @property
    def collection(self) -> Any:
        return self.vectorstore._collection

    @property
    def location(self) -> str:
        if self.settings.chroma_host:
            return f"http://{self.settings.chroma_host}:{self.settings.chroma_port}"
        return str(self.directory / "chroma")

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """One writer at a time, across threads and processes."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._write_lock, open(self.directory / ".lock", "a+b") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise KnowledgeBaseError(
                    f"knowledge base {self.name!r} is being written by another process"
                ) from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # --- manifest and generation --------------------------------------------------------

    def load_manifest(self) -> Manifest:
        return load_manifest(self.directory, self.embeddings.model_id)

    def save_manifest(self, manifest: Manifest) -> None:
        save_manifest(self.directory, manifest)

    @property
    def generation(self) -> str:
        return read_generation(self.directory)

    # --- chunks -------------------------------------------------------------------------

    def upsert(self, chunks: Sequence[Chunk]) -> None:
        if not chunks:
            return
        vectors = self.embeddings.embed_documents([c.indexed_text for c in chunks])
        step = max(1, self.client.get_max_batch_size())
        with _store_errors("writing chunks"):
            for start in range(0, len(chunks), step):
                batch = chunks[start : start + step]
                self.collection.upsert(
                    ids=[c.id for c in batch],
                    embeddings=vectors[start : start + step],
                    documents=[c.text for c in batch],
                    metadatas=[_chroma_metadata(c) for c in batch],
                )

    def delete(self, ids: Sequence[str]) -> None:
        if not ids:
            return
        step = max(1, self.client.get_max_batch_size())
        with _store_errors("deleting chunks"):
            for start in range(0, len(ids), step):
                self.collection.delete(ids=list(ids[start : start + step]))

    def count(self) -> int:
        with _store_errors("counting chunks"):
            return int(self.collection.count())

    def get_chunks(self, ids: Sequence[str]) -> dict[str, StoredChunk]:
        if not ids:
            return {}
        with _store_errors("reading chunks"):
            got = self.collection.get(ids=list(ids), include=["documents", "metadatas"])
        return {
            cid: _stored(cid, doc or "", meta or {})
            for cid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }

    def find(self, where: dict[str, Any]) -> list[StoredChunk]:
        with _store_errors("reading chunks"):
            got = self.collection.get(where=where, include=["documents", "metadatas"])
        return [
            _stored(cid, doc or "", meta or {})
            for cid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        ]

    def vectors(self, ids: Sequence[str]) -> dict[str, list[float]]:
        if not ids:
            return {}
        with _store_errors("reading vectors"):
            got = self.collection.get(ids=list(ids), include=["embeddings"])
        return {cid: list(vec) for cid, vec in zip(got["ids"], got["embeddings"], strict=True)}

    def dense(
        self, vector: list[float], n: int, allowed_sources: set[str] | None = None
    ) -> list[tuple[str, float]]:
        """Up to ``n`` (chunk id, cosine similarity) pairs, best first."""
        if n < 1 or allowed_sources == set():
            return []
        where: dict[str, Any] | None = None
        if allowed_sources is not None:
            where = {"source": {"$in": sorted(allowed_sources)}}
        with _store_errors("searching"):
            got = self.collection.query(
                query_embeddings=[vector], n_results=n, where=where, include=["distances"]
            )
        return [
            (cid, 1.0 - float(d)) for cid, d in zip(got["ids"][0], got["distances"][0], strict=True)
        ]

    def iter_lexical_docs(self) -> Iterator[LexicalDoc]:
        offset = 0
        while True:
            with _store_errors("reading chunks"):
                got = self.collection.get(
                    include=["documents", "metadatas"], limit=_PAGE, offset=offset
                )
            for cid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
                chunk = _stored(cid, doc or "", meta or {})
                context = [p for p in (chunk.title, chunk.heading) if p]
                yield LexicalDoc(cid, chunk.source, chunk.tags, "\n".join([*context, chunk.text]))
            if len(got["ids"]) < _PAGE:
                return
            offset += _PAGE

    def lexical(self) -> LexicalIndex:
        """The BM25 index for the current generation: cached, loaded or rebuilt."""
        with self._lock:
            generation = self.generation
            if self._lexical is not None and self._lexical.generation == generation:
                return self._lexical
            directory = self.directory / "bm25"
            index = LexicalIndex.load(directory, generation)
            if index is None:
                index = LexicalIndex.build(generation, list(self.iter_lexical_docs()))
                index.save(directory)
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
            files=sum(1 for entry in manifest.files.values() if entry.hash),
            chunks=self.count(),
            embedding_model=self.embeddings.model_id,
            size_bytes=size,
        )


def _not_found(name: str) -> KBMissing:
    return KBMissing(
        f"knowledge base {name!r} not found; create it with: deep-research kb ingest --kb {name}"
    )


def _mismatch(name: str, stored: str, wanted: str) -> KnowledgeBaseError:
    return KnowledgeBaseError(
        f"knowledge base {name!r} was built with embedding model {stored!r}, not {wanted!r}; "
        f"re-ingest it: deep-research kb rm {name} --yes && deep-research kb ingest --kb {name}"
    )


def open_kb(
    settings: Settings,
    name: str | None = None,
    *,
    embeddings: NamedEmbeddings | None = None,
    create: bool = False,
) -> KBStore:
    """Open a named KB (``settings.kb_name`` by default); KnowledgeBaseError if missing."""
    name = _check_name(name or settings.kb_name)
    embeddings = embeddings or make_embeddings(settings)
    model_id = embeddings.model_id  # before creating anything: loading the model may fail
    directory = settings.kb_dir / name
    client = _client(settings, directory, create=create)
    cname = collection_name(name)
    try:
        existing = client.get_collection(cname, embedding_function=None)
    except NotFoundError:
        existing = None
    except (ChromaError, ValueError) as exc:
        raise KnowledgeBaseError(f"cannot open knowledge base {name!r}: {exc}") from exc
    if existing is None and not create:
        raise _not_found(name)
    if existing is not None:
        stored = (existing.metadata or {}).get(META_MODEL, "")
        if stored != model_id:
            raise _mismatch(name, str(stored), model_id)
    directory.mkdir(parents=True, exist_ok=True)
    with _store_errors("opening the knowledge base"):
        vectorstore = Chroma(
            collection_name=cname,
            embedding_function=embeddings,
            client=client,
            collection_metadata={META_MODEL: model_id, META_NAME: name},
            collection_configuration={"hnsw": {"space": "cosine"}},
        )
    return KBStore(settings, name, embeddings, client, vectorstore)


def list_kbs(settings: Settings) -> list[str]:
    """Names of the knowledge bases (on the Chroma server when one is configured)."""
    if settings.chroma_host:
        client = _client(settings, settings.kb_dir, create=False)
        with _store_errors("listing knowledge bases"):
            collections = client.list_collections()
        return sorted(
            str(c.metadata[META_NAME]) for c in collections if (c.metadata or {}).get(META_NAME)
        )
    if not settings.kb_dir.is_dir():
        return []
    return sorted(
        p.name
        for p in settings.kb_dir.iterdir()
        if (p / "chroma").is_dir() and KB_NAME.match(p.name)
    )


def _forget_persistent_client(path: Path) -> None:
    # chromadb caches one System per path for the whole process; a cached System over a
    # deleted directory fails later with "readonly database" when the KB is re-created.
    from chromadb.api.shared_system_client import SharedSystemClient

    system = SharedSystemClient._identifier_to_system.pop(str(path), None)
    SharedSystemClient._identifier_to_refcount.pop(str(path), None)
    if system is not None:
        system.stop()


def remove_kb(settings: Settings, name: str) -> None:
    """Delete a KB: its collection and its local files. KnowledgeBaseError if missing."""
    name = _check_name(name)
    directory = settings.kb_dir / name
    if settings.chroma_host:
        client = _client(settings, directory, create=False)
        try:
            client.delete_collection(collection_name(name))
        except NotFoundError:
            if not directory.exists():
                raise KnowledgeBaseError(f"knowledge base {name!r} not found") from None
        except ChromaError as exc:
            raise KnowledgeBaseError(f"removing knowledge base {name!r} failed: {exc}") from exc
    elif not (directory / "chroma").is_dir():
        raise KnowledgeBaseError(f"knowledge base {name!r} not found")
    else:
        _forget_persistent_client(directory / "chroma")
    if directory.exists():
        shutil.rmtree(directory)
