"""Knowledge bases written before roots and token-exact sizes keep working.

`write_old_kb` lays a KB out exactly as the previous version did: chunk ids and locators
without a root, the bare chunk text as the stored document, no ``root``/``doc``/
``text_start`` metadata, and a version-1 manifest keyed by relative path.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deep_research.app.config import Settings
from deep_research.core.errors import KnowledgeBaseError
from deep_research.frontends.kb_cli import kb_app
from deep_research.kb import catalog
from deep_research.kb.catalog import open_kb
from deep_research.kb.chunking import Chunk, chunk_markdown
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.search import resolve_locator, search
from deep_research.kb.settings import KBSettings
from deep_research.kb.store import KBStore
from tests.hash_embeddings import HashEmbeddings

GUIDE = "# Guide\n\n" + "\n".join(
    f"Step {i}: turn the valve {i} degrees and log pressure {i * 3}." for i in range(40)
)
FILES = {
    "guide.md": GUIDE + "\n",
    "sub/faq.md": "# FAQ\n\n## Why\n\nBecause the valve sticks in winter.\n",
    # One long line: a whole line in an old chunk, cut into pieces under a 48-token cap.
    "long.md": "# Long\n\n  " + " ".join(f"valve{i}" for i in range(150)) + " \n",
}


def write_old_kb(settings: Settings, name: str, root: Path) -> list[Chunk]:
    """Chunks and manifest as the version before roots wrote them."""
    store = open_kb(settings.kb, name, embeddings=HashEmbeddings(), create=True)
    embeddings = HashEmbeddings()
    files: dict[str, object] = {}
    written: list[Chunk] = []
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        chunks = chunk_markdown(path.read_text(), rel, max_tokens=400, overlap_tokens=40)
        store.collection.upsert(
            ids=[c.id for c in chunks],
            embeddings=embeddings.embed_documents([c.indexed_text for c in chunks]),
            documents=[c.text for c in chunks],
            metadatas=[
                {
                    "source": c.source,
                    "heading": c.heading,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                    "content_hash": c.content_hash,
                    "title": c.title,
                    "ordinal": c.ordinal,
                }
                for c in chunks
            ],
        )
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        ids = [c.id for c in chunks]
        files[rel] = {"root": str(root.resolve()), "hash": digest, "chunk_ids": ids}
        written += chunks
    manifest = {"schema_version": 1, "embedding_model": "hash:256", "files": files}
    (store.directory / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return written


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", chroma_host=None, chunk_tokens=48)


@pytest.fixture
def old(settings: Settings, docs: Path) -> list[Chunk]:
    return write_old_kb(settings, "main", docs)


def reopen(settings: Settings) -> KBStore:
    return open_kb(settings.kb, "main", embeddings=HashEmbeddings())


def test_an_old_kb_is_searchable_and_its_locators_resolve(
    settings: Settings, old: list[Chunk]
) -> None:
    store = reopen(settings)
    hit = search(store, "valve sticks winter", k=1)[0]
    assert (hit.root, hit.source, hit.heading) == ("", "sub/faq.md", "FAQ > Why")
    assert hit.locator == "sub/faq.md#FAQ > Why:1-5"  # as the old version cited it
    for chunk in old:
        assert resolve_locator(store, chunk.locator) == chunk.text
    assert store.stats().legacy_chunks == len(old)


def test_reingesting_upgrades_every_chunk_and_old_locators_keep_resolving(
    settings: Settings, docs: Path, old: list[Chunk]
) -> None:
    store = reopen(settings)
    report = ingest(store, docs)
    # Same bytes, but chunked by an older chunker: every file is chunked again.
    assert report.updated == ["guide.md", "long.md", "sub/faq.md"]
    assert report.unchanged == report.added == report.removed == []
    stats = store.stats()
    assert stats.legacy_chunks == 0
    assert stats.files == 3
    assert stats.chunks == report.total_chunks > len(old)  # a 48-token cap: more chunks

    hits = search(store, "valve", k=50, mode="bm25")
    assert {h.root for h in hits} == {"docs"}
    assert all(h.locator.startswith("docs/") for h in hits)
    # The old guide chunk spans lines that are now in several chunks: it still resolves,
    # to exactly the text it cited, and so does every other old locator.
    guide = next(c for c in old if c.source == "guide.md")
    assert not any(h.locator.endswith(f":{guide.start_line}-{guide.end_line}") for h in hits)
    for chunk in old:
        assert resolve_locator(store, chunk.locator) == chunk.text
    # That includes long.md's: its long line is now only in pieces, joined back by column.
    assert len([c for c in store.find({"source": "long.md"}) if c.piece]) > 3
    assert ingest(store, docs).unchanged == ["guide.md", "long.md", "sub/faq.md"]


def test_an_old_locator_is_ambiguous_once_two_roots_hold_that_path(
    settings: Settings, docs: Path, old: list[Chunk], tmp_path: Path
) -> None:
    store = reopen(settings)
    ingest(store, docs)
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "sub" / "faq.md").write_text(FILES["sub/faq.md"], encoding="utf-8")
    ingest(store, notes)
    faq = next(c for c in old if c.source == "sub/faq.md")
    with pytest.raises(KnowledgeBaseError, match=r"ambiguous.*docs/sub/faq.md, notes/sub/faq.md"):
        resolve_locator(store, faq.locator)
    for root in ("docs", "notes"):
        assert resolve_locator(store, f"{root}/{faq.locator}") == faq.text
    # The guide exists in one root only: its old locators still resolve.
    assert all(resolve_locator(store, c.locator) == c.text for c in old if c is not faq)


def test_a_newer_manifest_is_refused_not_overwritten(settings: Settings, docs: Path) -> None:
    store = open_kb(settings.kb, "main", embeddings=HashEmbeddings(), create=True)
    ingest(store, docs)
    manifest = store.directory / "manifest.json"
    manifest.write_text('{"schema_version": 99, "whatever": {}}', encoding="utf-8")
    with pytest.raises(KnowledgeBaseError, match="newer deep-research"):
        ingest(store, docs)
    assert json.loads(manifest.read_text())["schema_version"] == 99


def test_kb_search_says_in_one_line_that_an_old_kb_needs_a_reingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, docs: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DEEP_RESEARCH_CHROMA_HOST", raising=False)
    monkeypatch.delenv("DEEP_RESEARCH_KB_NAME", raising=False)

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
        return HashEmbeddings()

    monkeypatch.setattr(catalog, "make_embeddings", make_embeddings)
    write_old_kb(Settings(home=tmp_path / "home", chroma_host=None), "default", docs)
    runner = CliRunner()

    result = runner.invoke(kb_app, ["search", "valve", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["root"] == ""
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1
    assert "re-run `deep-research kb ingest" in notes[0]
    assert "cut short for the embedding model" in notes[0]

    assert runner.invoke(kb_app, ["ingest", str(docs)]).exit_code == 0
    upgraded = runner.invoke(kb_app, ["search", "valve", "--json"])
    assert upgraded.stderr.strip() == ""
    assert json.loads(upgraded.stdout)[0]["root"] == "docs"
