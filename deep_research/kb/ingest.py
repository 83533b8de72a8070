"""Incremental ingestion of a markdown tree into a KBStore.

Crash-safety: files are committed in batches. Before a batch touches Chroma, the
manifest marks its files as pending (hash None) and lists every chunk id they may
own, old and new; after the batch is written, the manifest records the new hashes.
So an interrupted run never loses chunks that were already indexed, and the next run
re-does exactly the files whose entries are still pending (chunk ids are stable, so
re-writing them is idempotent). Files gone from disk are removed at the end of an
ingest of the same root. A bad file is skipped with a reason and never stops the run.

Roots: a file is known by (root name, path under the root), so two folders can both hold
a ``README.md``. An ingest reads one root and only ever adds, updates or removes files of
that root. A file is unchanged when both its bytes and the chunker (model, token cap,
overlap, `CHUNKER_VERSION`) are the same as last time; otherwise it is chunked again.
Only files that resolve inside the root's folder are read (`walk.walk_markdown`): the chunks of
one that no longer does are removed like those of a file that is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, Field

from deep_research.core.errors import UsageError
from deep_research.kb.chunking import Chunk, chunk_markdown
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.manifest import FileEntry, Manifest, RootEntry, root_name, save_manifest
from deep_research.kb.markdown import FrontMatterRefused
from deep_research.kb.settings import KBSettings
from deep_research.kb.store import KBStore
from deep_research.kb.walk import (
    FileBytes,
    SkippedFile,
    decode_text,
    is_utf8,
    name_problem,
    read_file,
    shown,
    walk_markdown,
)

BATCH_CHUNKS = 512
BATCH_FILES = 64
HELD_CHUNKS = 10_000
"""Chunks held before the first is embedded: up to here every file is read first, so the
progress knows how many chunks there are to embed; past it, memory stays bounded."""


@dataclass(frozen=True)
class IngestProgress:
    """How far an ingest is: the files are read (and chunked) first, then the chunks of the
    new and changed ones are embedded and written, which is where the time goes."""

    files_done: int
    files_total: int
    chunks_done: int = 0
    """Chunks embedded so far by this run."""
    chunks_total: int = 0
    """Chunks of the new and changed files read so far: all of them once every file is
    read (unless there are more than `HELD_CHUNKS`)."""
    current: str = ""
    """The file read last."""


Progress = Callable[[IngestProgress], None]


class IngestReport(BaseModel):
    kb: str
    root: str
    root_name: str = Field(default="", description="what the KB calls the root")
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
        lists = ("added", "updated", "unchanged", "removed")
        counts = {name: len(getattr(self, name)) for name in lists}
        return {**self.model_dump(), **counts, "seconds": round(self.seconds, 3)}


class RootRemoved(BaseModel):
    """What ``kb rm --root`` dropped."""

    kb: str
    root: str
    path: str = Field(description="the folder it was last ingested from ('' if not recorded)")
    files: int
    chunks: int


# --- the run --------------------------------------------------------------------------

CHUNKER_VERSION = 2
"""Part of every file's chunking signature: bump it when chunking changes its output."""


@dataclass(frozen=True)
class ChunkSizing:
    max_tokens: int
    overlap_tokens: int
    signature: str
    """Recorded per file: a file chunked under another signature is chunked again."""


def chunk_sizing(settings: KBSettings, embeddings: NamedEmbeddings) -> ChunkSizing:
    """``chunk_tokens``, capped by what the embedding model reads of one text."""
    window = embeddings.max_input_tokens
    cap = settings.chunk_tokens if window is None else min(settings.chunk_tokens, window)
    overlap = settings.chunk_overlap_tokens
    signature = f"{CHUNKER_VERSION}:{embeddings.model_id}:{cap}:{overlap}"
    return ChunkSizing(cap, overlap, signature)


def check_root_name(name: str) -> str:
    if (
        not name
        or "/" in name
        or name in (".", "..")
        or name != name.strip()
        or name_problem(name) is not None
    ):
        raise UsageError(
            f"invalid root name {shown(name)!r}: use a folder-like name without '/' "
            "(give the folder one with --as NAME)"
        )
    return name


def _bind_root(manifest: Manifest, kb: str, name: str, path: Path) -> tuple[RootEntry, bool]:
    """The manifest's entry for root ``name``, now at ``path``; True if the entry changed.

    A name already used by another folder that still exists is refused: its files would
    be removed as "gone". A folder that moved keeps its name (and its unchanged files).
    """
    entry = manifest.roots.get(name)
    changed = entry is None or entry.path != str(path)
    if entry is None:
        entry = manifest.roots[name] = RootEntry(path=str(path))
    elif entry.path != str(path) and entry.path and Path(entry.path).is_dir():
        raise UsageError(
            f"knowledge base {kb!r} already has a root named {name!r} ({entry.path}); "
            f"give this folder another name: deep-research kb ingest {path} --as NAME"
        )
    entry.path = str(path)
    return entry, changed


@dataclass(frozen=True)
class _Pending:
    source: str
    digest: str
    chunks: list[Chunk]
    old_ids: tuple[str, ...]
    is_new: bool


@dataclass
class _Batch:
    """The new and changed files read so far, written to the store by `flush`."""

    store: KBStore
    manifest: Manifest
    root: RootEntry
    signature: str
    report: IngestReport
    progress: Progress | None
    state: IngestProgress
    items: list[_Pending] = field(default_factory=list)
    size: int = 0

    def tell(self, state: IngestProgress) -> None:
        self.state = state
        if self.progress:
            self.progress(state)

    def add(self, item: _Pending) -> None:
        self.items.append(item)
        self.size += len(item.chunks)
        self.state = replace(self.state, chunks_total=self.state.chunks_total + len(item.chunks))

    def read(self, files_done: int, source: str) -> None:
        """One more file read (and added, if it changed)."""
        self.tell(replace(self.state, files_done=files_done, current=source))
        if self.size >= HELD_CHUNKS:
            self.flush()

    def flush(self) -> None:
        """Write the held files, a group of `BATCH_FILES` files or `BATCH_CHUNKS` chunks at
        a time (each group committed on its own: see the module doc)."""
        items, self.items, self.size = self.items, [], 0
        group: list[_Pending] = []
        size = 0
        for item in items:
            group.append(item)
            size += len(item.chunks)
            if size >= BATCH_CHUNKS or len(group) >= BATCH_FILES:
                self._write(group)
                group, size = [], 0
        if group:
            self._write(group)

    def _write(self, items: list[_Pending]) -> None:
        files = self.root.files
        for item in items:
            ids = dict.fromkeys([*item.old_ids, *(c.id for c in item.chunks)])
            files[item.source] = FileEntry(hash=None, chunk_ids=list(ids))
        save_manifest(self.store.directory, self.manifest)
        before = self.state.chunks_done

        def embedded(count: int) -> None:
            self.tell(replace(self.state, chunks_done=before + count))

        self.store.upsert([c for item in items for c in item.chunks], embedded)
        stale = [cid for item in items for cid in set(item.old_ids) - {c.id for c in item.chunks}]
        self.store.delete(stale)
        for item in items:
            files[item.source] = FileEntry(
                hash=item.digest, chunk_ids=[c.id for c in item.chunks], chunking=self.signature
            )
            (self.report.added if item.is_new else self.report.updated).append(item.source)
            self.report.chunks += len(item.chunks)
        save_manifest(self.store.directory, self.manifest)


def _drop(store: KBStore, manifest: Manifest, root: RootEntry, sources: list[str]) -> None:
    store.delete([cid for s in sources for cid in root.files[s].chunk_ids])
    for source in sources:
        del root.files[source]
    save_manifest(store.directory, manifest)


def find_root(manifest: Manifest, kb: str, root: str) -> str:
    """The name of the KB's root ``root`` names: a root's name, or the folder it was ingested
    from. UsageError naming the roots the KB has when it has none such."""
    if root in manifest.roots:
        return root
    folder = str(Path(root).expanduser().resolve())
    for name, entry in manifest.roots.items():
        if entry.path and entry.path == folder:
            return name
    have = ", ".join(
        f"{name} ({entry.path or 'folder not recorded'})"
        for name, entry in sorted(manifest.roots.items())
    )
    raise UsageError(
        f"knowledge base {kb!r} has no root {shown(root)!r} (its roots: {have or 'none'})"
    )


def remove_root(store: KBStore, root: str) -> RootRemoved:
    """Drop one root from the KB: its files' chunks, then its entry; every other root is left
    as it is. ``root`` is its name or its folder (``find_root``). Chunks go first, so a crash
    leaves the root listed, and removing it again finishes the job."""
    with store.write_lock():
        manifest = store.load_manifest()
        name = find_root(manifest, store.name, root)
        entry = manifest.roots[name]
        files = sum(1 for f in entry.files.values() if f.hash)
        chunks = sum(len(f.chunk_ids) for f in entry.files.values())
        _drop(store, manifest, entry, list(entry.files))
        del manifest.roots[name]
        save_manifest(store.directory, manifest)
        store.lexical()  # rebuild now, so the next search is fast
        return RootRemoved(kb=store.name, root=name, path=entry.path, files=files, chunks=chunks)


def ingest(
    store: KBStore, root: Path, *, name: str | None = None, progress: Progress | None = None
) -> IngestReport:
    """Bring the KB in line with the markdown files under ``root``, known in the KB as
    ``name`` (default: the folder's name). Files of other roots are never touched."""
    started = time.perf_counter()
    if not root.is_dir():
        raise UsageError(f"not a directory: {root}")
    path = root.resolve()
    if not is_utf8(str(path)):  # the manifest records it
        raise UsageError(f"the folder's path is not valid UTF-8: {shown(str(path))}; rename it")
    name = check_root_name(name or root_name(path))
    sizing = chunk_sizing(store.settings, store.embeddings)
    report = IngestReport(kb=store.name, root=str(root), root_name=name)
    with store.write_lock():
        manifest = store.load_manifest()
        known, rebound = _bind_root(manifest, store.name, name, path)
        files, report.skipped = walk_markdown(root)
        state = IngestProgress(files_done=0, files_total=len(files))
        batch = _Batch(store, manifest, known, sizing.signature, report, progress, state)
        seen: set[str] = set()
        bad: list[str] = []
        batch.read(0, "")
        for done, (source, file) in enumerate(files, start=1):
            seen.add(source)
            entry = known.files.get(source)
            outcome = read_file(file, store.settings.max_file_bytes)
            if (
                isinstance(outcome, FileBytes)
                and entry
                and entry.hash == outcome.digest
                and entry.chunking == sizing.signature
            ):
                report.unchanged.append(source)
            else:
                chunks = _chunks(outcome, source, name, sizing, store)
                if isinstance(chunks, str):
                    report.skipped.append(SkippedFile(path=source, reason=chunks))
                    if entry is not None:
                        bad.append(source)  # its old chunks no longer describe the file
                else:
                    assert isinstance(outcome, FileBytes)
                    old = tuple(entry.chunk_ids) if entry else ()
                    batch.add(_Pending(source, outcome.digest, chunks, old, entry is None))
            batch.read(done, source)
        batch.flush()
        gone = [source for source in known.files if source not in seen]
        report.removed = sorted(gone + bad)
        if report.removed:
            _drop(store, manifest, known, report.removed)
        elif rebound:
            save_manifest(store.directory, manifest)
        if report.added or report.updated or report.removed:
            store.lexical()  # rebuild now, so the first search is fast
        report.total_chunks = store.count()
    report.added.sort()
    report.updated.sort()
    report.seconds = time.perf_counter() - started
    return report


def _chunks(
    outcome: FileBytes | str, source: str, root: str, sizing: ChunkSizing, store: KBStore
) -> list[Chunk] | str:
    """The file's chunks, or the reason to skip it."""
    if isinstance(outcome, str):
        return outcome
    try:
        text = decode_text(outcome.data)
    except ValueError as exc:
        return str(exc)
    try:
        chunks = chunk_markdown(
            text,
            source,
            max_tokens=sizing.max_tokens,
            overlap_tokens=sizing.overlap_tokens,
            count_tokens=store.embeddings.count_tokens,
            root=root,
        )
    except FrontMatterRefused as exc:
        return str(exc)
    return chunks or "empty (no content)"
