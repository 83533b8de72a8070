"""The local bookkeeping of a KB: what was ingested (manifest.json) and a generation token.

Both are written atomically (temp file + fsync + ``os.replace``). The generation
changes before every write to the chunks, so anything derived from them (the BM25
index) can tell whether it is current.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from deep_research.core.errors import KnowledgeBaseError

MANIFEST_VERSION = 1
MANIFEST_FILE = "manifest.json"
GENERATION_FILE = "generation"


class FileEntry(BaseModel):
    root: str
    hash: str | None = Field(description="None while the file's chunks are being written")
    chunk_ids: list[str] = Field(default_factory=list)


class Manifest(BaseModel):
    schema_version: int = MANIFEST_VERSION
    embedding_model: str = ""
    files: dict[str, FileEntry] = Field(default_factory=dict)


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_manifest(directory: Path, model_id: str) -> Manifest:
    path = directory / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Manifest(embedding_model=model_id)
    except OSError as exc:
        raise KnowledgeBaseError(f"cannot read {path}: {exc}") from exc
    try:
        manifest = Manifest.model_validate_json(text)
    except ValidationError:
        # Bookkeeping only: an unreadable manifest costs a full re-ingest, nothing more.
        return Manifest(embedding_model=model_id)
    if manifest.schema_version != MANIFEST_VERSION:
        return Manifest(embedding_model=model_id)
    return manifest


def save_manifest(directory: Path, manifest: Manifest) -> None:
    """Bump the generation, then write the manifest."""
    bump_generation(directory)
    atomic_write(directory / MANIFEST_FILE, manifest.model_dump_json())


def read_generation(directory: Path) -> str:
    try:
        return (directory / GENERATION_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return "0"


def bump_generation(directory: Path) -> None:
    atomic_write(directory / GENERATION_FILE, uuid.uuid4().hex)
