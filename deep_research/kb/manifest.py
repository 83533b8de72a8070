"""The local bookkeeping of a KB: what was ingested (manifest.json) and a generation token.

A KB holds files from one or more roots (folders), each under a name (by default the
folder's own name): ``roots[name].files[relative path]``. So ``docs/README.md`` and
``notes/README.md`` are two documents, and a re-ingest of one root never touches the
files of another.

Both files are written atomically (temp file + fsync + ``os.replace``). The generation
changes before and after every write to the chunks, so anything derived from them (the
BM25 index) can tell whether it is current.

The manifest's ``schema_version`` is the KB's format: a KB written with another one is
never read as this one (``KBOutdated``, one line that says how to make it again).

A root is a folder and everything that resolves inside it: a file is read (and its chunks
served) only while its path under the root, symlinks followed, stays inside the root's
folder (`RootEntry.holds`).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path, PurePath

from pydantic import BaseModel, Field, ValidationError

from deep_research.core.errors import KnowledgeBaseError

MANIFEST_VERSION = 3
MANIFEST_FILE = "manifest.json"
GENERATION_FILE = "generation"


class FileEntry(BaseModel):
    hash: str | None = Field(description="None while the file's chunks are being written")
    chunk_ids: list[str] = Field(default_factory=list)
    chunking: str = Field(default="", description="the chunker that made chunk_ids")


class RootEntry(BaseModel):
    path: str = Field(default="", description="the folder last ingested under this name")
    files: dict[str, FileEntry] = Field(default_factory=dict)

    def holds(self, source: str) -> bool:
        """Whether file ``source`` still resolves inside this root's folder: a symlink in it
        may point elsewhere since it was read. True when the folder is not known (a
        manifest rebuilt from the chunks), or gone (its chunks stay until it is ingested)."""
        if not self.path:
            return True
        folder = os.path.realpath(self.path)
        return inside(os.path.realpath(os.path.join(self.path, source)), folder)


class Manifest(BaseModel):
    schema_version: int = MANIFEST_VERSION
    embedding_model: str = ""
    roots: dict[str, RootEntry] = Field(default_factory=dict)

    @property
    def file_count(self) -> int:
        """Files whose chunks are complete."""
        return sum(1 for root in self.roots.values() for entry in root.files.values() if entry.hash)


class KBOutdated(KnowledgeBaseError):
    """The KB was saved by another version of deep-research (its ``version``)."""

    def __init__(self, name: str, version: int) -> None:
        super().__init__(
            f"knowledge base {name!r} was saved by another version of deep-research "
            f"(manifest {version}, this one reads {MANIFEST_VERSION}): remove it with "
            f"`deep-research kb rm {name}` and ingest its folders again"
        )
        self.name, self.version = name, version


def inside(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or under it (both resolved)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def root_name(path: PurePath) -> str:
    """The default name of a root: its folder's name ("root" for ``/``)."""
    return path.name or "root"


def atomic_write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_manifest(directory: Path) -> Manifest | None:
    """The manifest; None when it is missing or unreadable (the caller reconciles).
    ``KBOutdated`` when another version of deep-research wrote it."""
    path = directory / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KnowledgeBaseError(f"cannot read {path}: {exc}") from exc
    try:
        loaded = json.loads(text)
    except ValueError:
        return None  # torn or hand-edited: rebuilt from the chunks
    version = loaded.get("schema_version") if isinstance(loaded, dict) else None
    if isinstance(loaded, dict) and type(version) is int and version != MANIFEST_VERSION:
        raise KBOutdated(directory.name, version)
    try:
        return Manifest.model_validate(loaded) if version == MANIFEST_VERSION else None
    except ValidationError:
        return None  # hand-edited: rebuilt from the chunks


def save_manifest(directory: Path, manifest: Manifest) -> None:
    bump_generation(directory)
    atomic_write(directory / MANIFEST_FILE, manifest.model_dump_json())


def read_generation(directory: Path) -> str:
    try:
        return (directory / GENERATION_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return "0"


def bump_generation(directory: Path) -> None:
    atomic_write(directory / GENERATION_FILE, uuid.uuid4().hex)
