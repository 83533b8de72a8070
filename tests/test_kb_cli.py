"""`deep-research kb ...` through typer's CliRunner (stdout and stderr kept apart)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from deep_research.app.config import Settings
from deep_research.core.errors import KBMissing, UsageError
from deep_research.frontends.kb_cli import _ProgressBar, kb_app
from deep_research.kb import catalog
from deep_research.kb.catalog import open_kb
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.settings import KBSettings
from tests.hash_embeddings import HashEmbeddings


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """Settings from the environment, as the real CLI reads them; a tiny offline embedder."""
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("DEEP_RESEARCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DEEP_RESEARCH_CHROMA_HOST", raising=False)
    monkeypatch.delenv("DEEP_RESEARCH_KB_NAME", raising=False)

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
        return HashEmbeddings()

    monkeypatch.setattr(catalog, "make_embeddings", make_embeddings)
    kb = tmp_path / "kb"
    (kb / "ops").mkdir(parents=True)
    (kb / "ops" / "deploy.md").write_text(
        "---\ntags: [ops]\n---\n# Deploy\n\n## Rollback\n\nRun the rollback script twice.\n",
        encoding="utf-8",
    )
    (kb / "intro.md").write_text("# Intro\n\nWelcome to the handbook.\n", encoding="utf-8")
    (kb / "blob.md").write_bytes(b"\x00\x01")
    return CliRunner()


def test_ingest_json_prints_exactly_one_object(runner: CliRunner) -> None:
    result = runner.invoke(kb_app, ["ingest", "kb", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 2
    assert report["skipped"] == [{"path": "blob.md", "reason": "binary (contains NUL bytes)"}]
    assert report["total_chunks"] == 2

    again = json.loads(runner.invoke(kb_app, ["ingest", "kb", "--json"]).stdout)
    assert (again["added"], again["unchanged"], again["chunks"]) == (0, 2, 0)


def test_ingest_without_a_path_is_refused_and_fills_no_kb(runner: CliRunner) -> None:
    """`kb ingest` alone once filled `default` with the shipped sample docs of ./kb."""
    result = runner.invoke(kb_app, ["ingest"])
    assert result.exit_code == 2
    assert "Missing argument 'PATH'" in result.output
    assert json.loads(runner.invoke(kb_app, ["list", "--json"]).stdout) == []


def test_ingest_prints_a_summary_table(runner: CliRunner) -> None:
    result = runner.invoke(kb_app, ["ingest", "kb", "--kb", "team"])
    assert result.exit_code == 0, result.output
    assert "added" in result.stdout
    assert "skipped blob.md: binary" in result.stdout
    assert [kb["name"] for kb in json.loads(runner.invoke(kb_app, ["list", "--json"]).stdout)] == [
        "team"
    ]


def test_ingest_progress_shows_chunks_embedded_while_they_are_embedded(tmp_path: Path) -> None:
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(console=Console(file=io.StringIO()))
    view = _ProgressBar(bar)

    def chunk_row() -> tuple[float, float | None] | None:
        task = next((task for task in bar.tasks if task.id == view.chunks), None)
        return None if task is None else (task.completed, task.total)

    seen: list[tuple[float, float | None] | None] = []

    class Watched(HashEmbeddings):
        progress_step = 1

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            seen.append(chunk_row())  # what the user sees as this chunk starts embedding
            return super().embed_documents(texts)

    root = tmp_path / "notes"
    root.mkdir()
    for i in range(4):
        (root / f"n{i}.md").write_text(f"# Note {i}\n\nFigs {i}.\n", encoding="utf-8")
    settings = Settings(home=tmp_path / "home", chroma_host=None)
    store = open_kb(settings.kb, "p", embeddings=Watched(), create=True)
    ingest(store, root, progress=view)
    # Not frozen at "4/4 files": the chunk row counts up while the chunks embed.
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert chunk_row() == (4, 4)
    files = next(task for task in bar.tasks if task.id == view.files)
    assert (files.completed, files.total, files.description) == (4, 4, "files read")


def test_search_json_and_text(runner: CliRunner) -> None:
    runner.invoke(kb_app, ["ingest", "kb"])
    result = runner.invoke(kb_app, ["search", "rollback script", "-k", "1", "--json"])
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert len(hits) == 1
    hit = hits[0]
    assert hit["root"] == "kb"
    assert hit["source"] == "ops/deploy.md"
    assert hit["locator"] == "kb/ops/deploy.md#Deploy > Rollback:4-8"
    assert hit["heading"] == "Deploy > Rollback"
    assert hit["lines"] == [4, 8]
    assert "Run the rollback script twice." in hit["text"]
    assert isinstance(hit["score"], float)

    for mode in ("dense", "bm25"):
        args = ["search", "handbook", "--mode", mode, "--json", "--mmr"]
        assert json.loads(runner.invoke(kb_app, args).stdout)[0]["source"] == "intro.md"
    filtered = runner.invoke(kb_app, ["search", "handbook rollback", "--tag", "ops", "--json"])
    assert {h["source"] for h in json.loads(filtered.stdout)} == {"ops/deploy.md"}
    by_path = runner.invoke(kb_app, ["search", "handbook rollback", "--path", "ops/*", "--json"])
    assert {h["source"] for h in json.loads(by_path.stdout)} == {"ops/deploy.md"}

    text = runner.invoke(kb_app, ["search", "rollback"])
    assert "kb/ops/deploy.md#Deploy > Rollback" in text.stdout
    assert "lines 4-8" in text.stdout


def test_search_help_says_what_a_score_means(runner: CliRunner) -> None:
    shown = " ".join(runner.invoke(kb_app, ["search", "--help"]).stdout.split())
    assert "score is in [0, 1], higher is better, on one scale in every mode" in shown
    assert "a lone match is 1" in shown


def test_search_rejects_an_unknown_mode(runner: CliRunner) -> None:
    runner.invoke(kb_app, ["ingest", "kb"])
    result = runner.invoke(kb_app, ["search", "x", "--mode", "fuzzy"])
    assert result.exit_code == 2


def test_stats_list_and_rm(runner: CliRunner) -> None:
    runner.invoke(kb_app, ["ingest", "kb"])
    stats = json.loads(runner.invoke(kb_app, ["stats", "--json"]).stdout)
    assert stats["files"] == 2
    assert stats["chunks"] == 2
    assert stats["embedding_model"] == "hash:256"
    assert stats["size_bytes"] > 0
    folder = str(Path("kb").resolve())
    assert stats["roots"] == [{"name": "kb", "path": folder, "files": 2}]
    table = runner.invoke(kb_app, ["stats"]).stdout
    assert "embedding model" in table
    assert "root 'kb'" in table
    assert "(2 files)" in table
    listed = runner.invoke(kb_app, ["list"]).stdout.splitlines()
    assert listed == ["default  (default)", f"  kb  {folder}  (2 files)"]

    declined = runner.invoke(kb_app, ["rm"], input="n\n")
    assert declined.exit_code != 0
    assert json.loads(runner.invoke(kb_app, ["list", "--json"]).stdout) == [
        {"name": "default", "default": True, "roots": [{"name": "kb", "path": folder, "files": 2}]}
    ]

    assert runner.invoke(kb_app, ["rm", "default", "--yes"]).exit_code == 0
    assert json.loads(runner.invoke(kb_app, ["list", "--json"]).stdout) == []


def test_search_shows_front_matter_titles_and_tags(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "kb" / "ops" / "oncall.md").write_text(
        "---\ntitle: On-call handbook\ntags: [ops, pager]\n---\n# Paging\n\n"
        + "Escalate a page after fifteen minutes of silence. " * 12,
        encoding="utf-8",
    )
    runner.invoke(kb_app, ["ingest", "kb"])
    (hit,) = json.loads(
        runner.invoke(kb_app, ["search", "escalate page", "-k", "1", "--json"]).stdout
    )
    assert (hit["title"], hit["tags"]) == ("On-call handbook", ["ops", "pager"])
    text = runner.invoke(kb_app, ["search", "escalate page", "-k", "1"]).stdout
    assert "On-call handbook · #ops #pager" in text
    snippet = text.splitlines()[-1]
    assert snippet.endswith("…")
    assert snippet[:-1].split()[-1] in hit["text"].split()  # cut between words


def test_missing_kb_raises_the_typed_error(runner: CliRunner) -> None:
    for args in (["search", "x"], ["stats"], ["rm", "ghost", "--yes"]):
        result = runner.invoke(kb_app, args)
        assert isinstance(result.exception, KBMissing), args


def test_ingest_as_names_the_folder_and_two_folders_each_keep_their_intro(
    runner: CliRunner, tmp_path: Path
) -> None:
    other = tmp_path / "handbook"
    other.mkdir()
    (other / "intro.md").write_text("# Intro\n\nThe other handbook.\n", encoding="utf-8")
    first = json.loads(runner.invoke(kb_app, ["ingest", "kb", "--json"]).stdout)
    second = runner.invoke(kb_app, ["ingest", str(other), "--as", "team-notes", "--json"])
    assert second.exit_code == 0, second.output
    assert (first["root_name"], json.loads(second.stdout)["root_name"]) == ("kb", "team-notes")
    args = ["search", "handbook", "--mode", "bm25", "--json"]
    hits = json.loads(runner.invoke(kb_app, args).stdout)
    assert {(h["root"], h["source"]) for h in hits} == {
        ("kb", "intro.md"),
        ("team-notes", "intro.md"),
    }
    bad = runner.invoke(kb_app, ["ingest", str(other), "--as", "a/b"])
    assert bad.exit_code != 0
    assert isinstance(bad.exception, UsageError)
