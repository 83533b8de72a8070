"""Nothing outside what the user gave: a KB ingest reads only files that resolve inside its
folder, serves no chunk whose file now resolves outside it, and no one small file (YAML
aliases, a name that is not UTF-8 or holds a newline) aborts or stalls the run."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deep_research.app import knowledge
from deep_research.app.config import Settings
from deep_research.app.knowledge import kb_fetch
from deep_research.core.errors import KnowledgeBaseError, UsageError
from deep_research.frontends.kb_cli import kb_app
from deep_research.kb import catalog, walk
from deep_research.kb.catalog import open_kb
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.markdown import split_front_matter
from deep_research.kb.search import resolve_locator, search
from deep_research.kb.settings import KBSettings
from deep_research.kb.store import KBStore
from tests.hash_embeddings import HashEmbeddings

SECRET = "# Secret\n\nThe launch code is zebra-orchid.\n"


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DEEP_RESEARCH_CHROMA_HOST", raising=False)
    monkeypatch.delenv("DEEP_RESEARCH_KB_NAME", raising=False)

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
        return HashEmbeddings()

    monkeypatch.setattr(catalog, "make_embeddings", make_embeddings)
    return Settings(home=tmp_path / "home", chroma_host=None, _env_file=None)  # type: ignore[call-arg]


@pytest.fixture
def store(settings: Settings) -> KBStore:
    return open_kb(settings.kb, create=True)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.md").write_text("# Alpha\n\nApples grow on trees.\n", encoding="utf-8")
    (root / "sub" / "b.md").write_text("# Beta\n\nBananas are yellow.\n", encoding="utf-8")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir()
    (folder / "secret.md").write_text(SECRET, encoding="utf-8")
    return folder


def served(store: KBStore, query: str = "launch code zebra orchid") -> set[str]:
    return {hit.source for hit in search(store, query, k=10, mode="bm25")}


# --- reading: links out of the folder are not followed ------------------------------------


def test_a_link_out_of_the_folder_is_skipped_with_the_way_to_add_its_target(
    store: KBStore, docs: Path, outside: Path
) -> None:
    os.symlink(outside / "secret.md", docs / "secret.md")
    os.symlink(outside, docs / "private")
    os.symlink("/etc/passwd", docs / "passwd.md")

    report = ingest(store, docs)
    reasons = {s.path: s.reason for s in report.skipped}
    assert set(reasons) == {"secret.md", "private", "passwd.md"}
    assert reasons["secret.md"].startswith(f"links outside the folder, to {outside}/secret.md")
    assert f"deep-research kb ingest {outside} --as NAME" in reasons["secret.md"]
    assert f"deep-research kb ingest {outside} --as NAME" in reasons["private"]
    assert "deep-research kb ingest /etc --as NAME" in reasons["passwd.md"]
    assert report.added == ["a.md", "sub/b.md"]
    assert served(store) == set()
    assert served(store, "root daemon bash") == set()

    # The advice works: the target, as a root of its own, is indexed under its own name.
    ingest(store, outside, name="private")
    assert served(store) == {"secret.md"}


def test_links_that_stay_inside_the_folder_are_followed(store: KBStore, docs: Path) -> None:
    os.symlink("a.md", docs / "alias.md")
    os.symlink("sub", docs / "linked")  # a folder link inside the root
    os.symlink("../a.md", docs / "sub" / "up.md")
    report = ingest(store, docs)
    assert report.added == ["a.md", "alias.md", "sub/b.md", "sub/up.md"]
    # The folder is walked once, under its own path; the link says where it went.
    assert [(s.path, s.reason) for s in report.skipped] == [("linked", "the same folder as sub")]


def test_a_folder_reached_only_through_a_link_inside_the_root_is_walked(
    store: KBStore, tmp_path: Path
) -> None:
    root = tmp_path / "vault"
    (root / ".store" / "notes").mkdir(parents=True)  # hidden, so only the link reaches it
    (root / ".store" / "notes" / "n.md").write_text("# N\n\nNectarines.\n", encoding="utf-8")
    os.symlink(".store/notes", root / "notes")
    report = ingest(store, root)
    assert report.added == ["notes/n.md"]
    assert report.skipped == []


def test_a_symlinked_root_folder_is_its_target(store: KBStore, docs: Path, tmp_path: Path) -> None:
    link = tmp_path / "docs-link"
    os.symlink(docs, link)
    report = ingest(store, link)
    assert report.added == ["a.md", "sub/b.md"]
    assert report.skipped == []


# --- serving: chunks of a file that now resolves outside are never returned -------------------


def test_chunks_of_a_file_now_linked_outside_are_never_served_and_the_next_ingest_drops_them(
    settings: Settings, store: KBStore, docs: Path, outside: Path
) -> None:
    # What an earlier version left behind: chunks read through a file that now resolves
    # outside the root (here, the file was swapped for a link after it was ingested).
    (docs / "secret.md").write_text(SECRET, encoding="utf-8")
    ingest(store, docs)
    hit = search(store, "launch code zebra orchid", k=1, mode="bm25")[0]
    assert hit.source == "secret.md"
    (docs / "secret.md").unlink()
    os.symlink(outside / "secret.md", docs / "secret.md")

    # Every read path: search (CLI, /kb/search, MCP kb_search/search, the KB branch),
    # chunk ids (MCP kb_fetch/fetch, verify_claim) and locators (citations).
    assert served(store) == set()
    assert "secret.md" not in {h.source for h in knowledge.kb_search(settings, "launch code")}
    with pytest.raises(KnowledgeBaseError, match="no chunk"):
        kb_fetch(settings, hit.chunk_id)
    with pytest.raises(KnowledgeBaseError, match="is not in knowledge base"):
        resolve_locator(store, hit.locator)
    # A refused chunk gives its place in the top k to the next one.
    assert sorted(h.source for h in search(store, "launch apples bananas", k=2, mode="bm25")) == [
        "a.md",
        "sub/b.md",
    ]

    report = ingest(store, docs)
    assert report.removed == ["secret.md"]
    assert [s.path for s in report.skipped] == ["secret.md"]
    assert store.count() == 2
    assert "secret.md" not in store.load_manifest().roots["docs"].files


def test_chunks_of_a_file_inside_its_root_are_still_served_when_the_folder_is_gone(
    store: KBStore, docs: Path
) -> None:
    ingest(store, docs)
    hit = search(store, "apples", k=1, mode="bm25")[0]
    docs.rename(docs.with_name("moved"))
    assert resolve_locator(store, hit.locator) == "# Alpha\n\nApples grow on trees."
    assert {h.source for h in search(store, "apples bananas", k=5, mode="bm25")} == {
        "a.md",
        "sub/b.md",
    }


# --- one small file never aborts or stalls the run -------------------------------------------

SELF_ALIAS = "---\ntitle: &a [*a]\n---\n# Loop\n\nBody.\n"
BOMB = (
    "---\n"
    + "\n".join(
        [
            'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
            *(
                f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            ),
        ]
    )
    + "\n---\n# Bomb\n\nBody.\n"
)
DEEP = "---\nx: " + "[" * 3000 + "]" * 3000 + "\n---\n# Deep\n\nBody.\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (SELF_ALIAS, "YAML front matter uses an alias (*a)"),
        (BOMB, "YAML front matter uses an alias (*a)"),
        (DEEP, "YAML front matter nests deeper than"),
    ],
    ids=["self-alias", "billion-laughs", "deep"],
)
def test_front_matter_that_would_blow_up_is_refused_and_the_file_skipped(
    store: KBStore, docs: Path, text: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(reason)):  # FrontMatterRefused
        split_front_matter(text)
    (docs / "x.md").write_text(text, encoding="utf-8")
    report = ingest(store, docs)
    assert [s.path for s in report.skipped] == ["x.md"]
    assert report.skipped[0].reason.startswith(reason)
    assert report.added == ["a.md", "sub/b.md"]


def test_front_matter_with_an_impossible_date_or_number_stays_in_the_body(
    store: KBStore, docs: Path
) -> None:
    for text in ("---\ndate: 2024-13-45\n---\nbody\n", "---\nn: !!int 0x\n---\nbody\n"):
        front = split_front_matter(text)
        assert (front.meta, front.body) == ({}, text)
    (docs / "x.md").write_text("---\ndate: 2024-02-30 10:00:00\n---\n# X\n\nXylophones.\n")
    assert ingest(store, docs).added == ["a.md", "sub/b.md", "x.md"]


def test_anchors_without_aliases_are_plain_values() -> None:
    assert split_front_matter("---\ntitle: &t Guide\n---\nbody\n").meta == {"title": "Guide"}


def test_a_file_name_that_is_not_utf8_or_holds_a_newline_is_skipped(
    store: KBStore, docs: Path
) -> None:
    with open(os.path.join(os.fsencode(docs), b"caf\xe9.md"), "wb") as handle:
        handle.write(b"# Cafe\n\nCoffee.\n")
    os.mkdir(os.path.join(os.fsencode(docs), b"d\xffir"))
    with open(os.path.join(os.fsencode(docs), b"d\xffir", b"in.md"), "wb") as handle:
        handle.write(b"# In\n\nInside.\n")
    (docs / "new\nline.md").write_text("# NL\n\nNewline.\n", encoding="utf-8")

    report = ingest(store, docs)
    assert {s.path: s.reason for s in report.skipped} == {
        "caf\\xe9.md": "name is not valid UTF-8",
        "d\\xffir": "name is not valid UTF-8",
        "new\\nline.md": "name holds a line break or control character",
    }
    assert report.added == ["a.md", "sub/b.md"]
    json.dumps(report.summary(), ensure_ascii=False).encode("utf-8")  # printable as it is
    # Every locator the KB serves resolves back to its text.
    for hit in search(store, "apples bananas coffee newline inside", k=10, mode="bm25"):
        assert resolve_locator(store, hit.locator) == hit.text


def test_a_file_name_with_a_newline_indexed_before_is_dropped(
    store: KBStore, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (docs / "new\nline.md").write_text("# NL\n\nNewline.\n", encoding="utf-8")
    with monkeypatch.context() as earlier:  # an earlier version read any name
        earlier.setattr(walk, "name_problem", lambda name: None)
        assert ingest(store, docs).added == ["a.md", "new\nline.md", "sub/b.md"]
    report = ingest(store, docs)
    assert report.removed == ["new\nline.md"]
    assert served(store, "newline") == set()


def test_a_root_name_that_cannot_be_cited_is_refused(store: KBStore, docs: Path) -> None:
    with pytest.raises(UsageError, match="invalid root name"):
        ingest(store, docs, name="two\nlines")


def test_kb_ingest_json_reports_skipped_names_escaped(
    settings: Settings, docs: Path, outside: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with open(os.path.join(os.fsencode(docs), b"caf\xe9.md"), "wb") as handle:
        handle.write(b"# Cafe\n\nCoffee.\n")
    os.symlink(outside / "secret.md", docs / "secret.md")
    result = CliRunner().invoke(kb_app, ["ingest", str(docs), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 2
    assert [s["path"] for s in report["skipped"]] == ["caf\\xe9.md", "secret.md"]
