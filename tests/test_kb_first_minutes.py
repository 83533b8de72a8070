"""The knowledge base in a new user's first minutes: a typo in ``--kb`` is refused before
anything is spent; the first run with no model answers from the shipped sample docs in a KB
of their own (``sample``), never the user's ``default``; ``kb rm NAME --root`` drops one
folder of a KB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deep_research.app import preparation, saved
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.errors import KBMissing
from deep_research.kb import catalog
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.settings import KBSettings
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI
from tests.hash_embeddings import HashEmbeddings
from tests.world import ResearchWorld, plan_task

SAMPLE = {  # what the repository's kb/ stands for: the shipped docs
    "scheduling.md": "# Scheduling\n\nA research node starts as soon as its dependencies are "
    "done. Independent nodes run in parallel, up to max_parallel at once.\n",
    "budgets.md": "# Budgets\n\nEvery web job reserves its worst-case cost before it starts, "
    "and the reservation is released when the job's real usage is recorded.\n",
}
MINE = {  # the user's own notes
    "runbook.md": "# Runbook\n\nA research node that fails is retried once by the on-call "
    "engineer before it is escalated to the platform team.\n",
}
QUESTION = "When does a research node start?"
SAID_SAMPLE = (
    "answering from the sample docs in KB 'sample'; `deep-research kb ingest PATH` adds your own"
)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture
def home(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The fake server's settings, the sample docs in ./kb, the user's notes in ./mine, and a
    tiny offline embedder (every KB in these tests is opened in-process)."""

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
        return HashEmbeddings()

    monkeypatch.setattr(catalog, "make_embeddings", make_embeddings)
    write(tmp_path / "kb", SAMPLE)
    write(tmp_path / "mine", MINE)
    return env


def no_model(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("OPENAI_")}


def kbs(env: dict[str, str]) -> dict[str, list[str]]:
    """Each KB's root names, as `kb list --json` shows them."""
    code, out, err = cli(env, "kb", "list", "--json")
    assert code == 0, err
    return {kb["name"]: [root["name"] for root in kb["roots"]] for kb in json.loads(out)}


def only_line(err: str, text: str) -> str:
    [line] = [line for line in err.splitlines() if text in line]
    return line


@pytest.mark.parametrize("model", [True, False], ids=["model", "no-model"])
def test_a_typo_in_kb_is_refused_before_anything_is_spent(
    home: dict[str, str], fake_openai: FakeOpenAI, model: bool
) -> None:
    env = home if model else no_model(home)
    assert cli(env, "kb", "ingest", "mine", "--kb", "notes")[0] == 0
    code, out, err = cli(env, QUESTION, "--kb", "nosuch")
    assert code == 7, err
    assert out == ""
    line = only_line(err, "nosuch")
    assert "knowledge base 'nosuch' not found (existing: notes)" in line
    assert "deep-research kb ingest PATH --kb nosuch" in line
    assert fake_openai.requests == [], "no model was asked anything"
    assert kbs(env) == {"notes": ["mine"]}, "no KB was built, not even the sample's"
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists(), "nothing saved"
    # The same typo in `kb search`: the same exit code and the same line.
    code, _, search_err = cli(env, "kb", "search", "node", "--kb", "nosuch")
    assert code == 7
    assert only_line(search_err, "nosuch") == line


def test_the_first_run_answers_from_the_sample_docs_and_never_fills_default(
    home: dict[str, str],
) -> None:
    env = no_model(home)
    code, out, err = cli(env, QUESTION)
    assert code == 0, err
    assert err.count(SAID_SAMPLE) == 1
    assert "ingesting kb/ first" in err
    assert "scheduling.md#Scheduling" in out
    assert kbs(env) == {"sample": ["kb"]}, "the sample docs have a KB of their own"

    data = run_json(env, QUESTION)  # once ingested, the sample KB is reused, said again
    assert session_state(env, data["session_id"])["run_spec"]["kb_name"] == "sample"
    assert kbs(env) == {"sample": ["kb"]}

    assert cli(env, "kb", "ingest", "mine")[0] == 0  # the user's own default KB
    code, out, err = cli(env, "When is a research node retried?")
    assert code == 0, err
    assert "sample docs" not in err
    assert "ingesting" not in err
    assert "runbook.md#Runbook" in out
    assert "scheduling.md" not in out, "the sample docs are not in the user's KB"
    assert kbs(env) == {"default": ["mine"], "sample": ["kb"]}


def test_the_sample_kb_can_be_named_and_is_built_from_the_sample_docs(
    home: dict[str, str],
) -> None:
    env = no_model(home)
    assert cli(env, "kb", "ingest", "mine")[0] == 0
    code, out, err = cli(env, QUESTION, "--kb", "sample")
    assert code == 0, err
    assert SAID_SAMPLE in err
    assert "scheduling.md#Scheduling" in out
    assert kbs(env) == {"default": ["mine"], "sample": ["kb"]}


def test_with_a_model_and_no_kb_the_run_builds_none(
    home: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("w1")]]).install(fake_openai)
    code, _, err = cli(home, QUESTION)
    assert code == 0, err
    assert "kb: off — no knowledge base 'default'" in err
    assert "sample" not in err
    assert kbs(home) == {}, "a run with a model ingests nothing"


def test_kb_rm_root_drops_one_folder_and_keeps_the_rest(home: dict[str, str]) -> None:
    env = no_model(home)
    assert cli(env, "kb", "ingest", "kb")[0] == 0
    assert cli(env, "kb", "ingest", "mine", "--as", "notes")[0] == 0
    assert kbs(env) == {"default": ["kb", "notes"]}

    code, _, err = cli(env, "kb", "rm", "default", "--root", "nope", "--yes")
    assert code == 2
    line = only_line(err, "nope")
    assert "knowledge base 'default' has no root 'nope'" in line
    assert f"its roots: kb ({Path('kb').resolve()}), notes ({Path('mine').resolve()})" in line
    code, _, err = cli(env, "kb", "rm", "nosuch", "--root", "kb", "--yes")
    assert code == 7
    assert "knowledge base 'nosuch' not found (existing: default)" in err

    code, _, err = cli(env, "kb", "rm", "--root", "kb")  # asked; no answer: nothing dropped
    assert code != 0
    assert kbs(env) == {"default": ["kb", "notes"]}

    code, _, err = cli(env, "kb", "rm", "default", "--root", "kb/", "--yes")  # by its folder
    assert code == 0, err
    assert "dropped root 'kb' (2 files, 2 chunks) from knowledge base 'default'" in err
    assert kbs(env) == {"default": ["notes"]}
    code, out, _ = cli(env, "kb", "search", "research node", "--json")
    assert code == 0
    assert {hit["root"] for hit in json.loads(out)} == {"notes"}, "only the other folder's"
    code, out, _ = cli(env, "kb", "stats", "--json")
    assert json.loads(out)["chunks"] == 1

    assert cli(env, "kb", "ingest", "kb")[0] == 0  # the folder can come back
    assert kbs(env) == {"default": ["kb", "notes"]}
    assert cli(env, "kb", "rm", "--yes")[0] == 0, "without --root: the whole KB, as before"
    assert kbs(env) == {}


def test_the_servers_runs_are_prepared_the_same_way(offline: Settings) -> None:
    """The MCP and HTTP servers start runs from ``RunOptions`` through ``prepare``, as the CLI
    does: a KB named there that does not exist is refused before anything is saved, and a run
    with no model and no KB of the user's reads the sample docs' KB."""
    with pytest.raises(KBMissing, match=r"'nosuch' not found \(existing: none yet\)"):
        preparation.prepare(offline, QUESTION, RunOptions(kb_name="nosuch"))
    assert saved.list_sessions(offline) == []
    assert catalog.list_kbs(offline.kb) == []
    assert preparation.prepare(offline, QUESTION, RunOptions()).settings.kb_name == "sample"


def test_help_and_doctor_point_at_your_own_notes_never_at_the_sample(
    home: dict[str, str], tmp_path: Path
) -> None:
    """Neither shows `kb ingest kb/`, which filled `default` with the sample docs."""
    from deep_research.app.doctor import check_knowledge_bases

    code, out, _ = cli(home, "--help")
    assert code == 0
    assert "deep-research kb ingest ~/notes   (your own markdown notes)" in out
    settings = Settings(home=tmp_path / "home", _env_file=None)  # type: ignore[call-arg]
    [check], _ = check_knowledge_bases(settings)
    assert check.fix == "deep-research kb ingest PATH"
    assert check.detail == (
        "none of your notes yet (a run with no model answers from the sample docs, in KB 'sample')"
    )
    assert kbs(home) == {}, "doctor created no KB"
