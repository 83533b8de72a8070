"""A `--kb-only` run loads what it uses (bench/startup.py times it: ``kb_run_ratio``): the claim
check's page reader, and with it trafilatura, only on a first page read, which a run that
cites only its knowledge base never makes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from deep_research.adapters.web import shared
from deep_research.adapters.web.reader import PageSkipped
from deep_research.app.checking import FirstReadReader
from deep_research.app.config import Settings
from tests.clirun import cli
from tests.fake_openai import FakeOpenAI
from tests.fake_web import FakeWeb
from tests.world import ResearchWorld, plan_task

REPO = Path(__file__).resolve().parents[1]
QUESTION = "How are costs capped?"
NOTE = """# Budgets

Before a Deep Research job is dispatched its worst-case cost is reserved against the
budget. Work the budget cannot cover never starts, and the report says what is missing.
"""
PAGE_READING = ("trafilatura", "htmldate", "courlan", "justext")
PROBE = """
import json, sys
sys.argv = ["deep-research", *json.loads(sys.argv[1])]
from deep_research.__main__ import main
try:
    main()
except SystemExit as exit:
    sys.stderr.write(f"\\nEXIT {exit.code}\\n")
loaded = sorted({m.split(".")[0] for m in sys.modules})
sys.stderr.write("\\nLOADED " + json.dumps(loaded) + "\\n")
"""


def test_a_kb_only_run_loads_no_page_reader(
    env: dict[str, str], fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "budgets.md").write_text(NOTE)
    code, _, err = cli(env, "kb", "ingest", "kb")
    assert code == 0, err
    ResearchWorld(plans=[[plan_task("k1", source="internal", question=QUESTION)]]).install(
        fake_openai
    )
    child = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEP_"))}
    child |= {k: v for k, v in env.items() if k != "DEEP_RESEARCH_CHECK_FETCH"}  # reads on
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps([QUESTION, "--kb-only"])],
        env=child | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert "\nEXIT 0\n" in done.stderr, done.stderr[-2000:]
    loaded = set(json.loads(done.stderr.rsplit("LOADED ", 1)[1]))
    assert {"chromadb", "langchain_openai", "onnxruntime"} <= loaded, "the run ran"
    assert sorted(loaded & set(PAGE_READING)) == []


@pytest.fixture
def site() -> Iterator[FakeWeb]:
    with FakeWeb() as web:
        yield web
    if web.errors:
        pytest.fail("FakeWeb saw errors:\n" + "\n".join(web.errors))


async def test_the_first_read_joins_the_shared_reader_within_the_runs_scope(
    site: FakeWeb, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path, fetch_allow=site.netloc, exclude_domains="example.org")
    reader = FirstReadReader(settings)
    await reader.aclose()  # closing one that never read is a no-op
    held = len(shared.READERS)
    try:
        page = await reader.read(site.url("/page/3.html"))
        assert len(shared.READERS) == held + 1, "it reads through the process's shared reader"
        with pytest.raises(PageSkipped, match=r"not example\.org"):
            await reader.read("https://example.org/page/3.html")
    finally:
        await reader.aclose()
    assert page.text
    assert len(shared.READERS) == held, "and lets go of it when the run ends"
    assert [h.path for h in site.hits if h.path != "/robots.txt"] == ["/page/3.html"]
