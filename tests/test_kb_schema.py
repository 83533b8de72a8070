"""A knowledge base written by another version of deep-research is never read as this one:
an older one is rebuilt from its folders by a run or an ingest when every folder is still
there; otherwise (and by any read) it is refused in one line that says how to rebuild it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deep_research.kb import catalog
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.manifest import MANIFEST_VERSION
from deep_research.kb.settings import KBSettings
from tests.clirun import cli
from tests.hash_embeddings import HashEmbeddings


def kb(*args: str) -> tuple[int, str, str]:
    """``deep-research kb …`` in-process, its errors mapped as the CLI maps them."""
    return cli({}, "kb", *args)


@pytest.fixture
def kb_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(tmp_path / "home"))
    for name in ("DEEP_RESEARCH_CHROMA_HOST", "DEEP_RESEARCH_KB_NAME", "DEEP_RESEARCH_KB_PATH"):
        monkeypatch.delenv(name, raising=False)

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
        return HashEmbeddings()

    monkeypatch.setattr(catalog, "make_embeddings", make_embeddings)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nTurn the valve twice.\n", encoding="utf-8")
    return tmp_path


def saved_as(kb_home: Path, version: int, kb_name: str = "default") -> Path:
    """Marks KB ``kb_name`` as saved by a deep-research writing manifest ``version``."""
    manifest = kb_home / "home" / "kb" / kb_name / "manifest.json"
    data = json.loads(manifest.read_text())
    assert data["schema_version"] == MANIFEST_VERSION, "every save writes the version"
    manifest.write_text(json.dumps({**data, "schema_version": version}), encoding="utf-8")
    return manifest


def refusal(version: int) -> str:
    return (
        f"knowledge base 'default' was saved by another version of deep-research "
        f"(manifest {version}, this one reads {MANIFEST_VERSION}): remove it with "
        "`deep-research kb rm default` and ingest its folders again"
    )


@pytest.mark.parametrize("version", [MANIFEST_VERSION - 1, MANIFEST_VERSION + 1])
def test_a_kb_of_another_version_is_never_read_as_this_one(kb_home: Path, version: int) -> None:
    docs = str(kb_home / "docs")
    assert kb("ingest", docs)[0] == 0
    assert kb("search", "valve", "--json")[0] == 0
    manifest = saved_as(kb_home, version)
    before = manifest.read_bytes()
    for command in (("search", "valve"), ("stats",)):
        code, _, err = kb(*command)
        assert code == 7, (command, err)
        assert refusal(version) in err
        assert len(err.strip().splitlines()) == 1, err
    assert manifest.read_bytes() == before, "never rewritten by a read"

    assert kb("rm", "default", "--yes")[0] == 0
    assert kb("ingest", docs)[0] == 0
    code, out, err = kb("search", "valve", "--json")
    assert code == 0, err
    assert json.loads(out)[0]["root"] == "docs"


def test_kb_ingest_rebuilds_an_older_kb_from_every_folder_it_holds(kb_home: Path) -> None:
    notes = kb_home / "notes"
    notes.mkdir()
    (notes / "pump.md").write_text("# Pump\n\nPrime the pump with water.\n", encoding="utf-8")
    assert kb("ingest", str(kb_home / "docs"))[0] == 0
    assert kb("ingest", str(notes), "--as", "field-notes")[0] == 0
    saved_as(kb_home, MANIFEST_VERSION - 1)

    code, _, err = kb("ingest", str(notes), "--as", "field-notes")
    assert code == 0, err
    assert "was saved by an older deep-research" in err
    assert "rebuilding it from" in err
    for query, root in (("valve", "docs"), ("prime pump", "field-notes")):
        code, out, err = kb("search", query, "--json")
        assert code == 0, err
        assert json.loads(out)[0]["root"] == root, "each folder back under its own name"


def test_an_older_kb_with_a_folder_gone_is_refused_and_kept(kb_home: Path) -> None:
    gone = kb_home / "gone"
    gone.mkdir()
    (gone / "old.md").write_text("# Old\n\nOnly here.\n", encoding="utf-8")
    assert kb("ingest", str(kb_home / "docs"))[0] == 0
    assert kb("ingest", str(gone))[0] == 0
    (gone / "old.md").unlink()
    gone.rmdir()
    manifest = saved_as(kb_home, MANIFEST_VERSION - 1)
    before = manifest.read_bytes()

    code, _, err = kb("ingest", str(kb_home / "docs"))
    assert code == 7, err
    assert refusal(MANIFEST_VERSION - 1) in err
    assert manifest.read_bytes() == before, "a rebuild would lose a folder's chunks: none"


def test_a_newer_kb_is_never_rebuilt(kb_home: Path) -> None:
    assert kb("ingest", str(kb_home / "docs"))[0] == 0
    manifest = saved_as(kb_home, MANIFEST_VERSION + 1)
    before = manifest.read_bytes()
    code, _, err = kb("ingest", str(kb_home / "docs"))
    assert code == 7, err
    assert refusal(MANIFEST_VERSION + 1) in err
    assert manifest.read_bytes() == before


def test_a_run_rebuilds_an_older_default_kb_before_researching(kb_home: Path) -> None:
    assert kb("ingest", str(kb_home / "docs"))[0] == 0
    saved_as(kb_home, MANIFEST_VERSION - 1)
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    code, out, err = cli(env, "Turn the valve twice?")
    assert code == 0, err
    assert "rebuilding it from" in err
    assert "guide.md" in out, "answered from the rebuilt KB"
    manifest = json.loads((kb_home / "home" / "kb" / "default" / "manifest.json").read_text())
    assert manifest["schema_version"] == MANIFEST_VERSION


def test_kb_list_lists_every_kb_and_says_which_cannot_be_read(kb_home: Path) -> None:
    docs = str(kb_home / "docs")
    assert kb("ingest", docs)[0] == 0
    assert kb("ingest", docs, "--kb", "other")[0] == 0
    manifest = kb_home / "home" / "kb" / "other" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "schema_version": MANIFEST_VERSION + 1}))

    code, out, err = kb("list", "--json")
    assert code == 0, err
    listed = {row["name"]: row for row in json.loads(out)}
    assert listed["default"]["roots"][0]["name"] == "docs"
    assert "error" not in listed["default"]
    assert listed["other"]["roots"] == []
    assert "kb rm other" in listed["other"]["error"]

    code, out, err = kb("list")
    assert code == 0, err
    assert "docs" in out
    assert "other" in out
    assert "cannot be read: knowledge base 'other' was saved by another version" in out


def test_an_older_kb_a_rebuild_could_not_finish_is_kept_as_it_was(kb_home: Path) -> None:
    """A root name this version refuses is found before anything is removed."""
    assert kb("ingest", str(kb_home / "docs"))[0] == 0
    manifest = saved_as(kb_home, MANIFEST_VERSION - 1)
    data = json.loads(manifest.read_text())
    data["roots"] = {"bad name/..": data["roots"]["docs"]}
    manifest.write_text(json.dumps(data), encoding="utf-8")
    before = manifest.read_bytes()
    code, _, err = kb("ingest", str(kb_home / "docs"))
    assert code != 0, err
    assert manifest.read_bytes() == before, "nothing removed"
