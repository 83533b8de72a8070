"""A knowledge base written by another version of deep-research is never read as this one:
every command refuses it in one line that says how to make it again, and leaves it as it
was."""

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


def refusal(version: int, name: str = "default") -> str:
    return (
        f"knowledge base '{name}' was saved by another version of deep-research "
        f"(manifest {version}, this one reads {MANIFEST_VERSION}): remove it with "
        f"`deep-research kb rm {name}` and ingest its folders again"
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


@pytest.mark.parametrize("version", [MANIFEST_VERSION - 1, MANIFEST_VERSION + 1])
def test_kb_ingest_and_a_run_refuse_a_kb_of_another_version_and_keep_it(
    kb_home: Path, version: int
) -> None:
    assert kb("ingest", str(kb_home / "docs"))[0] == 0
    manifest = saved_as(kb_home, version)
    before = manifest.read_bytes()
    code, _, err = kb("ingest", str(kb_home / "docs"))
    assert code == 7, err
    assert refusal(version) in err
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    code, _, err = cli(env, "Turn the valve twice?")
    assert code == 7, err
    assert refusal(version) in err
    assert manifest.read_bytes() == before, "never rewritten"


def test_a_run_refuses_the_sample_kb_of_another_version_too(
    kb_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sample KB, the tool's own, is a KB like any other: refused, never remade."""
    monkeypatch.setenv("DEEP_RESEARCH_KB_PATH", str(kb_home / "docs"))
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""}
    code, _, err = cli(env, "Turn the valve twice?", "--kb", "sample")
    assert code == 0, err  # the first run ingests it
    manifest = saved_as(kb_home, MANIFEST_VERSION - 1, "sample")
    before = manifest.read_bytes()
    code, _, err = cli(env, "Turn the valve twice?", "--kb", "sample")
    assert code == 7, err
    assert refusal(MANIFEST_VERSION - 1, "sample") in err
    assert manifest.read_bytes() == before, "never rewritten"


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
