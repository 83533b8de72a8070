"""Ingestion: incremental runs, bad files, crash recovery. Real Chroma in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from deep_research.app.config import Settings
from deep_research.kb import ingest as ingest_module
from deep_research.kb.chunking import Chunk
from deep_research.kb.embeddings import HashEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.search import search
from deep_research.kb.store import KBStore, open_kb


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", chroma_host=None, chunk_tokens=64)


@pytest.fixture
def store(settings: Settings) -> KBStore:
    return open_kb(settings, "t", embeddings=HashEmbeddings(), create=True)


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
    store = open_kb(small, "bad", embeddings=HashEmbeddings(), create=True)
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
    calls: list[tuple[int, int, str]] = []
    ingest(store, docs, progress=lambda done, total, path: calls.append((done, total, path)))
    assert calls == [(0, 2, ""), (1, 2, "a.md"), (2, 2, "sub/b.markdown")]


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

    def crashing_upsert(chunks: Sequence[Chunk]) -> None:
        batches.append(len(chunks))
        if len(batches) == 3:
            raise Crash("power cut")
        real_upsert(chunks)

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
