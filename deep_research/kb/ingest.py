"""Incremental ingestion of a markdown tree into a KBStore.

Crash-safety: files are committed in batches. Before a batch touches Chroma, the
manifest marks its files as pending (hash None) and lists every chunk id they may
own, old and new; after the batch is written, the manifest records the new hashes.
So an interrupted run never loses chunks that were already indexed, and the next run
re-does exactly the files whose entries are still pending (chunk ids are stable, so
re-writing them is idempotent). Files gone from disk are removed at the end of an
ingest of the same root. A bad file is skipped with a reason and never stops the run.
"""

from __future__ import annotations

import errno
import hashlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from deep_research.core.errors import UsageError
from deep_research.kb.chunking import Chunk, chunk_markdown
from deep_research.kb.manifest import FileEntry, Manifest
from deep_research.kb.store import KBStore

MARKDOWN_SUFFIXES = (".md", ".markdown")
BATCH_CHUNKS = 512
BATCH_FILES = 64

Progress = Callable[[int, int, str], None]
"""Called with (files done, files total, current path)."""


class SkippedFile(BaseModel):
    path: str
    reason: str


class IngestReport(BaseModel):
    kb: str
    root: str
    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    unchanged: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    skipped: list[SkippedFile] = Field(default_factory=list)
    chunks: int = Field(default=0, description="chunks written by this run")
    total_chunks: int = 0
    seconds: float = 0.0

    def summary(self) -> dict[str, object]:
        """Counts plus the skipped files: the shape ``kb ingest --json`` prints."""
        return {
            "kb": self.kb,
            "root": self.root,
            "added": len(self.added),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "removed": len(self.removed),
            "skipped": [s.model_dump() for s in self.skipped],
            "chunks": self.chunks,
            "total_chunks": self.total_chunks,
            "seconds": round(self.seconds, 3),
        }


# --- walking --------------------------------------------------------------------------


def _rel(path: str, root: Path) -> str:
    return Path(os.path.relpath(path, root)).as_posix()


def walk_markdown(root: Path) -> tuple[list[tuple[str, Path]], list[SkippedFile]]:
    """(relative path, path) of every markdown file under root, following symlinks once.

    Hidden entries (``.git``, ``.obsidian`` …) are ignored; symlink loops, broken links
    and unreadable directories are reported as skipped.
    """
    found: list[tuple[str, Path]] = []
    skipped: list[SkippedFile] = []
    visited = {os.path.realpath(root)}
    stack = [str(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            skipped.append(SkippedFile(path=_rel(directory, root), reason=_os_reason(exc)))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = _rel(entry.path, root)
            is_md = entry.name.lower().endswith(MARKDOWN_SUFFIXES)
            try:
                os.stat(entry.path)  # follows links: raises on loops and broken links
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    skipped.append(SkippedFile(path=rel, reason="symlink loop"))
                elif is_md:
                    skipped.append(SkippedFile(path=rel, reason=_os_reason(exc)))
                continue
            if entry.is_dir():
                real = os.path.realpath(entry.path)
                if real in visited:
                    skipped.append(SkippedFile(path=rel, reason="symlink loop (directory seen)"))
                    continue
                visited.add(real)
                stack.append(entry.path)
            elif is_md and entry.is_file():
                found.append((rel, Path(entry.path)))
    found.sort()
    return found, skipped


def _os_reason(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "broken symlink or vanished file"
    if isinstance(exc, PermissionError):
        return "unreadable: permission denied"
    return f"unreadable: {exc.strerror or exc}"


# --- reading --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Read:
    data: bytes
    digest: str


def _read(path: Path, max_bytes: int) -> _Read | str:
    """The file's bytes and hash, or the reason to skip it."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return f"too large ({size} bytes > max_file_bytes {max_bytes})"
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        return _os_reason(exc)
    if len(data) > max_bytes:
        return f"too large (> max_file_bytes {max_bytes})"
    return _Read(data, hashlib.sha256(data).hexdigest())


def _decode(data: bytes) -> str:
    """The text, or raise ValueError with the reason to skip the file."""
    if not data.strip():
        raise ValueError("empty")
    if b"\x00" in data:
        raise ValueError("binary (contains NUL bytes)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (invalid byte at offset {exc.start})") from None


# --- the run --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Pending:
    source: str
    digest: str
    chunks: list[Chunk]
    old_ids: tuple[str, ...]
    is_new: bool


class _Batch:
    def __init__(self, store: KBStore, manifest: Manifest, root: str, report: IngestReport):
        self.store, self.manifest, self.root, self.report = store, manifest, root, report
        self.items: list[_Pending] = []
        self.size = 0

    def add(self, item: _Pending) -> None:
        self.items.append(item)
        self.size += len(item.chunks)
        if self.size >= BATCH_CHUNKS or len(self.items) >= BATCH_FILES:
            self.flush()

    def flush(self) -> None:
        if not self.items:
            return
        files = self.manifest.files
        for item in self.items:
            ids = dict.fromkeys([*item.old_ids, *(c.id for c in item.chunks)])
            files[item.source] = FileEntry(root=self.root, hash=None, chunk_ids=list(ids))
        self.store.save_manifest(self.manifest)
        self.store.upsert([c for item in self.items for c in item.chunks])
        stale = [
            cid for item in self.items for cid in set(item.old_ids) - {c.id for c in item.chunks}
        ]
        self.store.delete(stale)
        for item in self.items:
            files[item.source] = FileEntry(
                root=self.root, hash=item.digest, chunk_ids=[c.id for c in item.chunks]
            )
            (self.report.added if item.is_new else self.report.updated).append(item.source)
            self.report.chunks += len(item.chunks)
        self.store.save_manifest(self.manifest)
        self.items, self.size = [], 0


def _drop(store: KBStore, manifest: Manifest, sources: list[str]) -> None:
    """Delete the chunks of files that are gone, then forget them."""
    if not sources:
        return
    store.delete([cid for s in sources for cid in manifest.files[s].chunk_ids])
    for source in sources:
        del manifest.files[source]
    store.save_manifest(manifest)


def ingest(store: KBStore, root: Path, *, progress: Progress | None = None) -> IngestReport:
    """Bring the KB in line with the markdown files under ``root``."""
    started = time.perf_counter()
    if not root.is_dir():
        raise UsageError(f"not a directory: {root}")
    root_key = str(root.resolve())
    settings = store.settings
    report = IngestReport(kb=store.name, root=str(root))
    with store.write_lock():
        manifest = store.load_manifest()
        files, report.skipped = walk_markdown(root)
        batch = _Batch(store, manifest, root_key, report)
        seen: set[str] = set()
        bad: list[str] = []
        moved = False  # unchanged files now claimed by this root
        total = len(files)
        if progress:
            progress(0, total, "")
        for done, (source, path) in enumerate(files, start=1):
            seen.add(source)
            entry = manifest.files.get(source)
            outcome = _read(path, settings.max_file_bytes)
            if isinstance(outcome, _Read) and entry and entry.hash == outcome.digest:
                report.unchanged.append(source)
                if entry.root != root_key:
                    entry.root, moved = root_key, True
            else:
                reason = outcome if isinstance(outcome, str) else None
                chunks: list[Chunk] = []
                if isinstance(outcome, _Read):
                    try:
                        text = _decode(outcome.data)
                        chunks = chunk_markdown(
                            text,
                            source,
                            max_tokens=settings.chunk_tokens,
                            overlap_tokens=settings.chunk_overlap_tokens,
                        )
                        reason = None if chunks else "empty (no content)"
                    except ValueError as exc:
                        reason = str(exc)
                if reason is not None or not isinstance(outcome, _Read):
                    report.skipped.append(SkippedFile(path=source, reason=str(reason)))
                    if entry is not None:
                        bad.append(source)  # its old chunks no longer describe the file
                else:
                    old = tuple(entry.chunk_ids) if entry else ()
                    batch.add(_Pending(source, outcome.digest, chunks, old, entry is None))
            if progress:
                progress(done, total, source)
        batch.flush()
        gone = [s for s, e in manifest.files.items() if e.root == root_key and s not in seen]
        report.removed = sorted(gone + bad)
        _drop(store, manifest, report.removed)
        if moved and not report.removed:
            store.save_manifest(manifest)
        if report.added or report.updated or report.removed:
            store.lexical()  # rebuild now, so the first search is fast
        report.total_chunks = store.count()
    report.added.sort()
    report.updated.sort()
    report.seconds = time.perf_counter() - started
    return report
