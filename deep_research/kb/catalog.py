"""The named knowledge bases: where each one lives, and opening, listing and removing one.

A KB is a Chroma collection (on the embedded client under ``settings.kb_dir / <name> /
chroma``, or on a Chroma server) plus the files ``store.py`` keeps beside it. Its name
is checked here, once, before it touches a path or a collection. A collection records the
embedding model that filled it (``META_MODEL``) and is only opened with that model; on a
server the KB's own name is kept in the collection's metadata (``META_NAME``), since the
collection's name is a sanitised form of it.
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import chromadb
from chromadb.api import ClientAPI
from chromadb.config import Settings as ChromaSettings
from chromadb.errors import ChromaError, NotFoundError

from deep_research.core.errors import KBMissing, KnowledgeBaseError, UsageError
from deep_research.kb.embeddings import NamedEmbeddings, for_langchain, make_embeddings
from deep_research.kb.manifest import load_manifest
from deep_research.kb.settings import KBSettings
from deep_research.kb.store import (
    UNREACHABLE,
    KBRoot,
    KBStore,
    exclusive,
    roots_of,
    store_errors,
)

if TYPE_CHECKING:
    from langchain_chroma import Chroma

KB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
META_MODEL = "embedding_model"
META_NAME = "kb_name"


def kb_roots(settings: KBSettings, name: str) -> tuple[KBRoot, ...]:
    """The roots a KB's manifest records, read without opening the KB (nothing when the
    manifest is missing: the next open rebuilds it)."""
    manifest = load_manifest(settings.kb_dir / name)
    return roots_of(manifest) if manifest is not None else ()


def _check_name(name: str) -> str:
    if not KB_NAME.match(name):
        raise UsageError(
            f"invalid KB name {name!r}: use letters, digits, '_', '.', '-' (max 63 chars)"
        )
    return name


def collection_name(name: str) -> str:
    # Chroma names must start and end alphanumeric and contain no "..".
    return re.sub(r"[^A-Za-z0-9_-]", "_", name) + "_kb"


def _client(settings: KBSettings, directory: Path, *, create: bool) -> ClientAPI:
    chroma_settings = ChromaSettings(anonymized_telemetry=False)
    if settings.chroma_host:
        try:
            return chromadb.HttpClient(
                host=settings.chroma_host, port=settings.chroma_port, settings=chroma_settings
            )
        except (ChromaError, *UNREACHABLE) as exc:
            raise KnowledgeBaseError(
                f"cannot reach Chroma at {settings.chroma_host}:{settings.chroma_port}: {exc}"
            ) from exc
    path = directory / "chroma"
    if not create and not path.is_dir():
        raise missing_kb(settings, directory.name)
    path.mkdir(parents=True, exist_ok=True)
    with store_errors("opening the knowledge base"):
        return chromadb.PersistentClient(path=str(path), settings=chroma_settings)


def missing_kb(settings: KBSettings, name: str) -> KBMissing:
    """There is no KB ``name``: one line naming the KBs there are and how to create it
    (``kb ingest PATH``)."""
    try:
        names = list_kbs(settings)
    except KnowledgeBaseError:  # the server is gone: the line still says how to create it
        names = []
    existing = ", ".join(names) if names else "none yet"
    return KBMissing(
        f"knowledge base {name!r} not found (existing: {existing}); "
        f"create it with: deep-research kb ingest PATH --kb {name}"
    )


def open_kb(
    settings: KBSettings,
    name: str | None = None,
    *,
    embeddings: NamedEmbeddings | None = None,
    create: bool = False,
) -> KBStore:
    """Open a named KB (``settings.kb_name`` by default).

    KBMissing when it does not exist (and ``create`` is false); KnowledgeBaseError with
    the real cause for everything else (model mismatch, server unreachable, bad store).
    """
    name = _check_name(name or settings.kb_name)
    embeddings = embeddings or make_embeddings(settings)
    model_id = embeddings.model_id  # before creating anything: loading the model may fail
    directory = settings.kb_dir / name
    client = _client(settings, directory, create=create)
    cname = collection_name(name)
    try:
        collection = client.get_collection(cname, embedding_function=None)
    except NotFoundError:
        collection = None
    except (ChromaError, *UNREACHABLE) as exc:
        raise KnowledgeBaseError(f"cannot open knowledge base {name!r}: {exc}") from exc
    if collection is None and not create:
        raise missing_kb(settings, name)
    if collection is not None:
        stored = (collection.metadata or {}).get(META_MODEL, "")
        if stored != model_id:
            raise KnowledgeBaseError(
                f"knowledge base {name!r} was built with embedding model {str(stored)!r}, not "
                f"{model_id!r}; re-ingest it: deep-research kb rm {name} --yes, then "
                f"deep-research kb ingest PATH --kb {name} for each of its folders"
            )
        load_manifest(directory)  # KBOutdated: another version's, refused before any read
    directory.mkdir(parents=True, exist_ok=True)

    def vectorstore() -> Chroma:
        from langchain_chroma import Chroma

        with store_errors("opening the knowledge base"):
            return Chroma(
                collection_name=cname,
                embedding_function=for_langchain(embeddings),
                client=client,
                collection_metadata={META_MODEL: model_id, META_NAME: name},
                collection_configuration={"hnsw": {"space": "cosine"}},
            )

    if collection is None:
        vectorstore()  # creates the collection, with our metadata
        with store_errors("opening the knowledge base"):
            collection = client.get_collection(cname, embedding_function=None)
    return KBStore(settings, name, embeddings, client, vectorstore, collection)


def list_kbs(settings: KBSettings) -> list[str]:
    if settings.chroma_host:
        client = _client(settings, settings.kb_dir, create=False)
        with store_errors("listing knowledge bases"):
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


_REMOVE_GUARD = threading.Lock()


def remove_kb(settings: KBSettings, name: str) -> None:
    """Delete a KB: its collection and its local files, under its write lock (so never
    in the middle of an ingest). KBMissing if there is no such KB."""
    name = _check_name(name)
    directory = settings.kb_dir / name
    client: ClientAPI | None = None
    if settings.chroma_host:
        client = _client(settings, directory, create=False)
        try:
            client.get_collection(collection_name(name), embedding_function=None)
        except NotFoundError:
            if not directory.is_dir():
                raise missing_kb(settings, name) from None
        except (ChromaError, *UNREACHABLE) as exc:
            raise KnowledgeBaseError(f"cannot reach knowledge base {name!r}: {exc}") from exc
    elif not (directory / "chroma").is_dir():
        raise missing_kb(settings, name)
    with exclusive(directory, name, _REMOVE_GUARD):
        if client is not None:
            try:
                client.delete_collection(collection_name(name))
            except NotFoundError:
                pass  # only the local files were left
            except (ChromaError, *UNREACHABLE) as exc:
                raise KnowledgeBaseError(f"removing knowledge base {name!r} failed: {exc}") from exc
        else:
            _forget_persistent_client(directory / "chroma")
        shutil.rmtree(directory)  # the lock file too: we hold it until we return
