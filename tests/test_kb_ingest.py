"""Ingestion: incremental runs, bad files, crash recovery. Real Chroma in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from deep_research.app.config import Settings
from deep_research.kb import ingest as ingest_module
from deep_research.kb.catalog import open_kb
from deep_research.kb.chunking import Chunk
from deep_research.kb.embeddings import Done
from deep_research.kb.ingest import IngestProgress, ingest
from deep_research.kb.search import resolve_locator, search
from deep_research.kb.store import KBStore
from tests.hash_embeddings import HashEmbeddings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", chroma_host=None, chunk_tokens=64)


@pytest.fixture
def store(settings: Settings) -> KBStore:
    return open_kb(settings.kb, "t", embeddings=HashEmbeddings(), create=True)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("# Alpha\n\nApples grow on trees.\n", encoding="utf-8")
    (root / "sub" / "b.markdown").write_text("# Beta\n\nBananas are yellow.\n", encoding="utf-8")
    (root / "notes.txt").write_text("not markdown", encoding="utf-8")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "c.md").write_text("# Hidden\n", encoding="utf-8")
    return root


def sources(store: KBStore, query: str) -> set[str]:
    return {hit.source for hit in search(store, query, k=20, mode="bm25")}


def test_first_run_adds_then_unchanged_files_are_skipped(store: KBStore, docs: Path) -> None:
    first = ingest(store, docs)
    assert first.added == ["a.md", "sub/b.markdown"]
    assert first.chunks == first.total_chunks == 2
    assert first.skipped == []

    second = ingest(store, docs)
    assert second.added == second.updated == second.removed == []
    assert second.unchanged == ["a.md", "sub/b.markdown"]
    assert second.chunks == 0
    assert second.total_chunks == 2


def test_changed_file_replaces_its_chunks_and_removed_file_is_deleted(
    store: KBStore, docs: Path
) -> None:
    ingest(store, docs)
    long_body = "\n\n".join(f"Cherries paragraph {i} " + "word " * 30 for i in range(6))
    (docs / "a.md").write_text(f"# Alpha\n\n{long_body}\n", encoding="utf-8")
    (docs / "sub" / "b.markdown").unlink()

    report = ingest(store, docs)
    assert report.updated == ["a.md"]
    assert report.removed == ["sub/b.markdown"]
    assert sources(store, "apples") == set()
    assert sources(store, "bananas") == set()
    assert sources(store, "cherries") == {"a.md"}
    assert store.count() == report.total_chunks > 1

    (docs / "a.md").write_text("# Alpha\n\nShort again.\n", encoding="utf-8")
    report = ingest(store, docs)
    assert report.updated == ["a.md"]
    assert store.count() == 1  # the extra chunks of the long version are gone


def test_bad_files_are_skipped_with_reasons(settings: Settings, docs: Path) -> None:
    small = settings.with_overrides(max_file_bytes=200)
    store = open_kb(small.kb, "bad", embeddings=HashEmbeddings(), create=True)
    (docs / "binary.md").write_bytes(b"# Bin\x00\x01\x02")
    (docs / "latin1.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    (docs / "empty.md").write_text("  \n\n", encoding="utf-8")
    (docs / "meta-only.md").write_text("---\ntitle: x\n---\n", encoding="utf-8")
    (docs / "huge.md").write_text("# Huge\n" + "x" * 500, encoding="utf-8")
    os.symlink("loop2.md", docs / "loop1.md")
    os.symlink("loop1.md", docs / "loop2.md")
    os.symlink("missing.md", docs / "dangling.md")
    os.symlink("..", docs / "sub" / "parent")

    report = ingest(store, docs)
    reasons = {s.path: s.reason for s in report.skipped}
    assert reasons["binary.md"].startswith("binary")
    assert reasons["latin1.md"].startswith("not UTF-8")
    assert reasons["empty.md"] == "empty"
    assert reasons["meta-only.md"].startswith("empty")
    assert reasons["huge.md"].startswith("too large")
    assert reasons["loop1.md"] == reasons["loop2.md"] == "symlink loop"
    assert "dangling.md" in reasons
    assert reasons["sub/parent"].startswith("symlink loop")
    assert report.added == ["a.md", "sub/b.markdown"]
    assert store.count() == 2


def test_a_file_that_turns_bad_loses_its_old_chunks(store: KBStore, docs: Path) -> None:
    ingest(store, docs)
    (docs / "a.md").write_bytes(b"\xff\xfe garbage")
    report = ingest(store, docs)
    assert [s.path for s in report.skipped] == ["a.md"]
    assert report.removed == ["a.md"]
    assert sources(store, "apples") == set()


def test_progress_reports_every_file(store: KBStore, docs: Path) -> None:
    calls: list[IngestProgress] = []
    ingest(store, docs, progress=calls.append)
    read = [(p.files_done, p.files_total, p.current) for p in calls if p.chunks_done == 0]
    assert read == [(0, 2, ""), (1, 2, "a.md"), (2, 2, "sub/b.markdown")]
    last = IngestProgress(2, 2, chunks_done=2, chunks_total=2, current="sub/b.markdown")
    assert calls[-1] == last


class Watched(HashEmbeddings):
    """Embeds one text per call and logs each call next to the progress the ingest reports."""

    progress_step = 1

    def __init__(self, log: list[tuple[str, int]]) -> None:
        super().__init__()
        self.log = log
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        self.log.append(("embedded", self.embedded))
        return super().embed_documents(texts)


def test_progress_counts_chunks_while_they_are_embedded(settings: Settings, tmp_path: Path) -> None:
    root = tmp_path / "many"
    root.mkdir()
    for i in range(5):
        (root / f"f{i}.md").write_text(f"# File {i}\n\nCherries {i}.\n", encoding="utf-8")
    log: list[tuple[str, int]] = []
    store = open_kb(settings.kb, "w", embeddings=Watched(log), create=True)
    states: list[IngestProgress] = []

    def progress(state: IngestProgress) -> None:
        states.append(state)
        log.append(("told", state.chunks_done))

    ingest(store, root, progress=progress)
    embedding = [s for s in states if s.chunks_done]
    # Every file is read before the first chunk is embedded, so the total is known...
    assert all(s.files_done == s.files_total == 5 and s.chunks_total == 5 for s in embedding)
    # ... and the count moves as each chunk is embedded, not once they all are.
    assert [s.chunks_done for s in embedding] == [1, 2, 3, 4, 5]
    assert [entry for entry in log if entry[1]] == [
        pair for n in range(1, 6) for pair in (("embedded", n), ("told", n))
    ]


def test_past_the_held_chunks_files_are_written_as_they_are_read(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_module, "HELD_CHUNKS", 2)
    root = tmp_path / "many"
    root.mkdir()
    for i in range(5):
        (root / f"f{i}.md").write_text(f"# File {i}\n\nDates {i}.\n", encoding="utf-8")
    store = open_kb(settings.kb, "h", embeddings=HashEmbeddings(), create=True)
    states: list[IngestProgress] = []
    report = ingest(store, root, progress=states.append)
    assert len(report.added) == store.count() == 5
    first = next(s for s in states if s.chunks_done)
    assert (first.files_done, first.chunks_total) == (2, 2)  # memory stays bounded
    assert (states[-1].chunks_done, states[-1].chunks_total) == (5, 5)


def test_another_root_does_not_remove_the_first_roots_files(
    store: KBStore, docs: Path, tmp_path: Path
) -> None:
    ingest(store, docs)
    other = tmp_path / "other"
    other.mkdir()
    (other / "c.md").write_text("# Gamma\n\nGrapes.\n", encoding="utf-8")
    report = ingest(store, other)
    assert report.added == ["c.md"]
    assert report.removed == []
    assert store.count() == 3


class Crash(RuntimeError):
    pass


def test_a_crash_mid_ingest_loses_nothing_and_the_next_run_completes(
    store: KBStore, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_module, "BATCH_FILES", 1)
    for i in range(4):
        (docs / f"extra{i}.md").write_text(f"# Extra {i}\n\nElderberry {i}.\n", encoding="utf-8")
    real_upsert = store.upsert
    batches: list[int] = []

    def crashing_upsert(chunks: Sequence[Chunk], progress: Done | None = None) -> None:
        batches.append(len(chunks))
        if len(batches) == 3:
            raise Crash("power cut")
        real_upsert(chunks, progress)

    monkeypatch.setattr(store, "upsert", crashing_upsert)
    with pytest.raises(Crash):
        ingest(store, docs)
    committed = store.count()
    assert committed == 2  # two batches were written before the crash

    monkeypatch.setattr(store, "upsert", real_upsert)
    reopened = open_kb(store.settings, "t", embeddings=HashEmbeddings())
    report = ingest(reopened, docs)
    assert len(report.added) + len(report.updated) == 4  # the two committed are unchanged
    assert len(report.unchanged) == 2
    assert reopened.count() == 6
    assert sources(reopened, "elderberry") == {f"extra{i}.md" for i in range(4)}


def test_missing_root_is_a_usage_error(store: KBStore, tmp_path: Path) -> None:
    from deep_research.core.errors import UsageError

    with pytest.raises(UsageError):
        ingest(store, tmp_path / "nope")


# --- roots: a file is known by its folder's name and its path in it ---------------------


def two_roots(tmp_path: Path) -> tuple[Path, Path]:
    docs, notes = tmp_path / "docs", tmp_path / "notes"
    for root, word in ((docs, "Dahlias"), (notes, "Nasturtiums")):
        (root / "sub").mkdir(parents=True, exist_ok=True)
        (root / "README.md").write_text(f"# Readme\n\n{word} bloom in summer.\n", encoding="utf-8")
        (root / "sub" / f"{word.lower()}.md").write_text(f"# {word}\n\n{word} facts.\n")
    return docs, notes


def test_two_roots_with_the_same_relative_path_are_both_kept(
    store: KBStore, tmp_path: Path
) -> None:
    docs, notes = two_roots(tmp_path)
    assert ingest(store, docs).added == ["README.md", "sub/dahlias.md"]
    second = ingest(store, notes)
    assert second.added == ["README.md", "sub/nasturtiums.md"]
    assert second.removed == []
    assert store.count() == 4

    hits = search(store, "bloom summer", k=5, mode="bm25")
    assert {(h.root, h.source) for h in hits} == {("docs", "README.md"), ("notes", "README.md")}
    for hit in hits:
        assert hit.locator == f"{hit.root}/README.md#Readme:1-3"
        assert resolve_locator(store, hit.locator) == hit.text
    assert {resolve_locator(store, h.locator).split()[-4] for h in hits} == {
        "Dahlias",
        "Nasturtiums",
    }
    # A path filter matches in the root, or with the root's name in front.
    assert {h.root for h in search(store, "bloom", path_glob="notes/*", mode="bm25")} == {"notes"}
    assert len(search(store, "bloom", path_glob="README.md", mode="bm25")) == 2


def test_reingesting_a_root_is_incremental_and_removes_only_its_own_files(
    store: KBStore, tmp_path: Path
) -> None:
    docs, notes = two_roots(tmp_path)
    ingest(store, docs)
    ingest(store, notes)
    again = ingest(store, docs)
    assert again.unchanged == ["README.md", "sub/dahlias.md"]
    assert again.added == again.updated == again.removed == []
    assert again.chunks == 0

    (docs / "README.md").unlink()
    report = ingest(store, docs)
    assert report.removed == ["README.md"]
    assert {(h.root, h.source) for h in search(store, "bloom", k=5, mode="bm25")} == {
        ("notes", "README.md")
    }
    assert store.count() == 3
    # Ingesting the notes again finds everything of theirs still there.
    assert ingest(store, notes).unchanged == ["README.md", "sub/nasturtiums.md"]


def test_a_name_taken_by_another_folder_is_refused_until_given_another(
    store: KBStore, tmp_path: Path
) -> None:
    from deep_research.core.errors import UsageError

    first, second = tmp_path / "a" / "docs", tmp_path / "b" / "docs"
    for root in (first, second):
        root.mkdir(parents=True)
        (root / "x.md").write_text(f"# X\n\nFrom {root.parent.name}.\n", encoding="utf-8")
    ingest(store, first)
    with pytest.raises(UsageError, match=r"already has a root named 'docs'.*--as"):
        ingest(store, second)
    assert ingest(store, second, name="docs-b").added == ["x.md"]
    assert {h.root for h in search(store, "from", k=5, mode="bm25")} == {"docs", "docs-b"}
    with pytest.raises(UsageError, match="invalid root name"):
        ingest(store, second, name="a/b")


def test_a_moved_folder_keeps_its_name_and_its_unchanged_files(
    store: KBStore, docs: Path, tmp_path: Path
) -> None:
    ingest(store, docs)
    moved = tmp_path / "elsewhere" / "docs"
    moved.parent.mkdir()
    docs.rename(moved)
    report = ingest(store, moved)
    assert report.unchanged == ["a.md", "sub/b.markdown"]
    assert report.added == report.removed == []


def test_a_new_token_cap_chunks_unchanged_files_again(
    settings: Settings, docs: Path, tmp_path: Path
) -> None:
    long_text = "# Long\n\n" + "\n".join(f"Line {i} about figs and dates." for i in range(60))
    (docs / "long.md").write_text(long_text + "\n", encoding="utf-8")
    store = open_kb(settings.kb, "cap", embeddings=HashEmbeddings(), create=True)
    before = ingest(store, docs).total_chunks
    smaller = open_kb(
        settings.with_overrides(chunk_tokens=32).kb, "cap", embeddings=HashEmbeddings()
    )
    report = ingest(smaller, docs)
    assert report.updated == ["a.md", "long.md", "sub/b.markdown"]
    assert report.unchanged == []
    assert report.total_chunks > before
    assert ingest(smaller, docs).unchanged == ["a.md", "long.md", "sub/b.markdown"]


# --- a lost manifest ----------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["deleted", "garbage"])
def test_a_lost_manifest_is_rebuilt_from_the_chunks_and_gone_files_are_dropped(
    store: KBStore, tmp_path: Path, damage: str
) -> None:
    docs, notes = two_roots(tmp_path)
    ingest(store, docs)
    ingest(store, notes)
    manifest = store.directory / "manifest.json"
    if damage == "deleted":
        manifest.unlink()
    else:
        manifest.write_text('{"schema_version": 2, "roots": {"docs": [', encoding="utf-8")
    (docs / "sub" / "dahlias.md").unlink()

    report = ingest(store, docs)
    assert report.removed == ["sub/dahlias.md"]
    assert report.updated == ["README.md"]  # re-read: its hash was lost with the manifest
    assert search(store, "dahlias facts", k=5, mode="bm25")[0].source != "sub/dahlias.md"
    assert store.count() == 3
    # The other root's files are still searchable, and its next ingest settles them.
    assert len(search(store, "nasturtiums", k=5, mode="bm25")) == 2
    (notes / "sub" / "nasturtiums.md").unlink()
    assert ingest(store, notes).removed == ["sub/nasturtiums.md"]
    assert store.count() == 2
    assert store.stats().files == 2
