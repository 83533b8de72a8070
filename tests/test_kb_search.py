"""Retrieval: hybrid fusion, filters, MMR, locators."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from deep_research.app.config import Settings
from deep_research.core.errors import KnowledgeBaseError, UsageError
from deep_research.kb.catalog import open_kb
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.search import fuse, resolve_locator, search
from deep_research.kb.store import KBStore
from tests.hash_embeddings import HashEmbeddings

SYNONYMS = {"automobile": "car", "vehicle": "car", "motorcar": "car"}


class ConceptEmbeddings(NamedEmbeddings):
    """Hash embeddings that also know a few synonyms: a stand-in for a semantic model."""

    def __init__(self) -> None:
        self.inner = HashEmbeddings()

    @property
    def model_id(self) -> str:
        return "test:concepts"

    def _normalize(self, text: str) -> str:
        words = re.findall(r"\w+", text.lower())
        return " ".join(SYNONYMS.get(word, word) for word in words)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.inner.embed_documents([self._normalize(t) for t in texts])

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(self._normalize(text))


@pytest.fixture
def store(tmp_path: Path) -> KBStore:
    root = tmp_path / "docs"
    (root / "guides").mkdir(parents=True)
    files = {
        "parts.md": "# Parts\n\nPart number QX-7731 is the flux regulator.\n",
        "guides/vehicles.md": "---\ntags: [transport]\n---\n# Vehicles\n\n"
        "An automobile needs regular maintenance.\n",
        "guides/cooking.md": "---\ntags: [food, kitchen]\n---\n# Cooking\n\n"
        "Bake bread at high heat for a crisp crust.\n",
        "preamble.md": "Text before any heading about gardens.\n\n# Later\n\nMore on gardens.\n",
    }
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    settings = Settings(home=tmp_path / "home", chroma_host=None)
    kb = open_kb(settings.kb, "s", embeddings=ConceptEmbeddings(), create=True)
    ingest(kb, root)
    return kb


def test_hybrid_surfaces_both_a_lexical_only_and_a_semantic_only_match(store: KBStore) -> None:
    query = "car QX-7731"
    lexical = [h.source for h in search(store, query, k=2, mode="bm25")]
    assert lexical == ["parts.md"]  # BM25 cannot know an automobile is a car
    assert [h.source for h in search(store, "car", k=1, mode="dense")] == ["guides/vehicles.md"]
    hybrid = [h.source for h in search(store, query, k=2)]
    assert set(hybrid) == {"parts.md", "guides/vehicles.md"}


def test_scores_are_ordered_and_hits_carry_their_text(store: KBStore) -> None:
    hits = search(store, "bread crust", k=3)
    assert hits[0].source == "guides/cooking.md"
    assert hits[0].heading == "Cooking"
    assert "crisp crust" in hits[0].text
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_filters_by_path_glob_and_tags(store: KBStore) -> None:
    def found(path_glob: str | None = None, tags: list[str] | None = None) -> set[str]:
        hits = search(store, "regulator bread automobile", k=10, path_glob=path_glob, tags=tags)
        return {h.source for h in hits}

    assert found(path_glob="guides/*") == {"guides/vehicles.md", "guides/cooking.md"}
    assert found(path_glob="guides") == {"guides/vehicles.md", "guides/cooking.md"}
    assert found(path_glob="docs/guides") == {"guides/vehicles.md", "guides/cooking.md"}
    assert found(path_glob="*.md", tags=["Food"]) == {"guides/cooking.md"}
    assert found(tags=["food", "kitchen"]) == {"guides/cooking.md"}
    assert found(tags=["food", "transport"]) == set()
    assert found(path_glob="nowhere/*") == set()
    for mode in ("dense", "bm25"):
        assert {h.source for h in search(store, "automobile bread", mode=mode, tags=["food"])} <= {
            "guides/cooking.md"
        }


def test_locators_resolve_back_to_the_exact_text(store: KBStore) -> None:
    hits = search(store, "gardens regulator automobile bread", k=10)
    assert len(hits) == 5
    for hit in hits:
        assert resolve_locator(store, hit.locator) == hit.text
    preamble = next(h for h in hits if h.source == "preamble.md" and not h.heading)
    assert preamble.locator == "docs/preamble.md:1-1"  # the root folder's name comes first
    vehicles = next(h for h in hits if h.source == "guides/vehicles.md")
    assert vehicles.locator == "docs/guides/vehicles.md#Vehicles:4-6"  # front matter counted
    # A locator names its root: without it, it names no file.
    with pytest.raises(KnowledgeBaseError, match="is not in knowledge base"):
        resolve_locator(store, "guides/vehicles.md#Vehicles:4-6")


def test_unknown_and_malformed_locators(store: KBStore) -> None:
    for locator in ("docs/parts.md#Parts:90-99", "notes/parts.md#Parts:3-3", "parts.md#No:3-3"):
        with pytest.raises(KnowledgeBaseError, match="is not in knowledge base"):
            resolve_locator(store, locator)
    with pytest.raises(UsageError):
        resolve_locator(store, "no range here")


def test_mmr_prefers_diverse_results(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    same = "Solar panels convert sunlight into electricity for homes."
    (root / "one.md").write_text(f"# One\n\n{same}\n", encoding="utf-8")
    (root / "two.md").write_text(f"# One\n\n{same}\n", encoding="utf-8")
    (root / "three.md").write_text(
        "# Three\n\nSolar power storage in batteries.\n", encoding="utf-8"
    )
    settings = Settings(home=tmp_path / "home", chroma_host=None)
    kb = open_kb(settings.kb, "m", embeddings=HashEmbeddings(), create=True)
    ingest(kb, root)
    plain = {h.source for h in search(kb, "solar panels sunlight", k=2, mode="dense")}
    assert plain == {"one.md", "two.md"}
    diverse = {h.source for h in search(kb, "solar panels sunlight", k=2, mode="dense", mmr=True)}
    assert "three.md" in diverse


def test_bad_queries_and_empty_kb(store: KBStore, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        search(store, "   ")
    with pytest.raises(UsageError):
        search(store, "x", k=0)
    empty = open_kb(store.settings, "empty", embeddings=ConceptEmbeddings(), create=True)
    assert search(empty, "anything") == []
    assert search(store, "zzzunknownword", mode="bm25") == []


def test_fusion_weighs_scaled_scores() -> None:
    dense = [("a", 0.9), ("b", 0.5)]
    lexical = [("b", 12.0), ("c", 3.0)]
    weighted = fuse([(dense, 1.0), (lexical, 0.0)])
    assert [cid for cid, _ in weighted] == ["a", "b"]
    assert fuse([(dense, 0.5), (lexical, 0.5)]) == [("a", 0.5), ("b", 0.5), ("c", 0.0)]


def test_scores_are_on_one_scale_in_every_mode(store: KBStore) -> None:
    for mode in ("hybrid", "dense", "bm25"):
        hits = search(store, "bread crust automobile regulator", k=4, mode=mode)
        assert hits, mode
        assert all(0.0 <= h.score <= 1.0 for h in hits), (mode, [h.score for h in hits])
    # Each ranker's best is 1.0: bm25 no longer reports raw BM25, dense no longer cosine.
    assert search(store, "bread crust", k=1, mode="bm25")[0].score == 1.0
    assert search(store, "bread crust", k=1, mode="dense")[0].score == 1.0
    # A lone candidate (one file passes the filter) is the best there is, not 0.0.
    (only,) = search(store, "bread crust", tags=["food"])
    assert only.score == 1.0
    (only_dense,) = search(store, "bread crust", mode="dense", tags=["food"])
    assert only_dense.score == 1.0
