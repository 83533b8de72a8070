"""A source is one seam: a module with a ``Source`` and an entry point, nothing else touched.
The sources here are installed as a third-party package's would be (a ``.dist-info`` with
an ``entry_points.txt`` on ``sys.path``); ``resolve`` says aloud which a run leaves out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from deep_research.app import lifecycle, preparation, sources
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.errors import ConfigError
from deep_research.kb import catalog
from deep_research.kb.catalog import open_kb
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.settings import KBSettings
from tests import echo_source
from tests.clirun import cli
from tests.fake_openai import ChatRequest, FakeOpenAI
from tests.world import ResearchWorld, plan_task

Install = Callable[..., None]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Install]:
    """``install(name="module:attribute", ...)``: a package declaring those entry points of
    ``deep_research.sources``, on ``sys.path`` for this test only."""
    site = tmp_path / "site"

    def installer(**points: str) -> None:
        info = site / "echo_plugin-1.0.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-plugin\nVersion: 1.0\n")
        lines = "".join(f"{name} = {target}\n" for name, target in points.items())
        (info / "entry_points.txt").write_text(f"[{sources.ENTRY_POINTS}]\n{lines}")
        monkeypatch.syspath_prepend(str(site))
        sources._catalog.cache_clear()

    echo_source.ASKED.clear()
    sources._catalog.cache_clear()
    yield installer
    sources._catalog.cache_clear()


@pytest.fixture
def with_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI) -> Settings:
    """A model (the fake server) and a knowledge base of one note, small hash vectors."""

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
        from tests.hash_embeddings import HashEmbeddings

        return HashEmbeddings()

    monkeypatch.setattr(catalog, "make_embeddings", make_embeddings)
    monkeypatch.chdir(tmp_path)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "decisions.md").write_text("# Decisions\n\nWe chose Chroma for vectors.\n")
    settings = Settings(
        home=tmp_path / "home",
        openai_base_url=fake_openai.base_url,
        openai_api_key="sk-test",  # type: ignore[arg-type]
        web_engine="openai",
        _env_file=None,  # type: ignore[call-arg]
    )
    ingest(open_kb(settings.kb, create=True), notes)
    return settings


def test_the_built_in_sources_are_found_as_a_plugins_are() -> None:
    found = sources.available()
    assert [found[n].serves for n in ("kb", "openai", "search")] == ["internal", "web", "web"]
    assert sources.web_names()[:2] == ["openai", "search"]


async def test_a_plugin_source_is_planned_routed_and_merged_with_the_kb(
    with_kb: Settings, install: Install, fake_openai: FakeOpenAI
) -> None:
    install(echo="tests.echo_source:ECHO")
    world = ResearchWorld(
        plans=[
            [
                plan_task("t1", source="echo", question="What do the echoes say?"),
                plan_task("t2", source="mixed", question="What did we and others decide?"),
            ]
        ]
    )
    world.install(fake_openai)
    prepared = preparation.prepare(with_kb, "Which vector store?", RunOptions())
    said: list[str] = []
    with lifecycle.start(prepared, said.append) as run:
        state = await lifecycle.execute(run, lambda _event: None)

    chats = [
        ChatRequest.from_body(r.body)
        for r in fake_openai.requests
        if r.path == "/v1/chat/completions"
    ]
    [plan] = [r for r in chats if r.schema_name == "Plan"]
    assert plan.schema is not None
    hint = plan.schema["$defs"]["PlannedTask"]["properties"]["source_hint"]
    assert hint["enum"] == ["web", "internal", "echo", "mixed"]
    assert "'echo': pages that repeat the question back" in hint["description"]
    assert "'echo': pages that repeat" in plan.text, "the prompt lists it too"

    assert echo_source.ASKED["echo.example"] == [
        "What do the echoes say?",
        "What did we and others decide?",
    ]
    t1, t2 = state.nodes["t1"], state.nodes["t2"]
    assert t1.notes.startswith("echo.example has a page on it")
    kb_part, echo_part = (
        t2.notes.index("**From the knowledge base**"),
        t2.notes.index("**From the echo pages**"),
    )
    assert kb_part < echo_part, "the knowledge base first, as every mixed node"
    assert any(c.kind == "kb" for c in t2.citations)
    assert any((c.url or "").startswith("https://echo.example/") for c in t2.citations)
    assert state.run_spec.web_engine == "openai"


def test_resolve_says_which_sources_it_leaves_out_and_why(
    offline: Settings, install: Install
) -> None:
    install(echo="tests.echo_source:ECHO")
    no_model = sources.resolve(offline, "auto", kb=True, web=None)
    assert [s.name for s in no_model.used] == ["kb"]
    assert no_model.said() == [
        "echo: off — no model configured",
        "web: off — no model configured (--web-engine search quotes pages without one)",
    ]
    assert no_model.hints == ("internal",)

    model = offline.with_overrides(openai_api_key="sk-x")
    kb_only = sources.resolve(model, "kb_only", kb=True, web=None)
    assert kb_only.said() == ["echo: off — --kb-only", "web: off — --kb-only"]
    no_kb = sources.resolve(model, "auto", kb=False, web="openai")
    assert [s.name for s in no_kb.used] == ["openai", "echo"]
    assert no_kb.said() == [
        "kb: off — no knowledge base 'default' (add one with `deep-research kb ingest DIR`)"
    ]
    assert no_kb.hints == ("web", "echo", "mixed")

    with pytest.raises(ConfigError, match="web research needs a model"):
        sources.resolve(offline, "web_only", kb=True, web="openai")


def test_a_run_says_which_sources_it_leaves_out(
    offline: Settings, install: Install, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.hash_embeddings import HashEmbeddings

    monkeypatch.setattr(catalog, "make_embeddings", lambda settings: HashEmbeddings())
    install(echo="tests.echo_source:ECHO")
    env = {"DEEP_RESEARCH_HOME": str(offline.home), "DEEP_RESEARCH_KB_PATH": str(offline.kb_path)}
    code, _, err = cli(env, "When does a research node start?")
    assert code == 0, err
    assert "echo: off — no model configured" in err
    assert echo_source.ASKED == {}, "never built"


async def test_a_plugin_web_source_researches_a_run_end_to_end(
    offline: Settings, install: Install
) -> None:
    install(toy="tests.echo_source:TOY_WEB")
    options = RunOptions(web_engine="toy", web_only=True)
    prepared = preparation.prepare(offline, "What does the toy site say?", options)
    assert (prepared.engine, prepared.policy, prepared.extractive) == ("toy", "web_only", True)
    estimate = preparation.estimate(prepared)
    assert (estimate.web_model, estimate.web_unit) == ("toy pages, free", "toy branch")
    with lifecycle.start(prepared, lambda _line: None) as run:
        state = await lifecycle.execute(run, lambda _event: None)
    assert echo_source.ASKED["toy.example"], "the toy researched the run's web branches"
    assert state.run_spec.web_engine == "toy"
    report = run.report_markdown
    assert report is not None
    assert "https://toy.example/" in report
    assert "_Web research: the toy engine._" in report

    with pytest.raises(Exception, match=r"should be one of auto, openai, search, toy"):
        preparation.prepare(offline, "q?", RunOptions(web_engine="toy2"))


def test_a_plugin_that_fails_to_load_is_left_out_and_said(
    offline: Settings, install: Install, caplog: pytest.LogCaptureFixture
) -> None:
    install(broken="tests.no_such_module:SOURCE", echo="tests.echo_source:ECHO")
    assert "echo" in sources.available()
    assert "broken" not in sources.available()
    why = "tests.no_such_module:SOURCE could not be loaded (ModuleNotFoundError: No module"
    assert f"source broken left out: {why}" in caplog.text
    said = sources.resolve(offline, "auto", kb=True, web=None).said()
    assert any(line.startswith(f"broken: off — {why}") for line in said), said


def test_a_sources_worst_case_is_counted_in_the_estimate(
    with_kb: Settings, install: Install
) -> None:
    """A node may go to any source the planner is offered: the estimate counts each node at
    the dearest of them, a plugin's worst case included (a run that cannot use it,
    --kb-only, does not)."""
    settings = with_kb.with_overrides(max_cost_usd=100_000.0)  # the worst case not capped
    before = preparation.estimate(preparation.prepare(settings, "q?", RunOptions()))
    install(costly="tests.echo_source:COSTLY")
    after = preparation.estimate(preparation.prepare(settings, "q?", RunOptions()))
    kb_only_run = preparation.prepare(settings, "q?", RunOptions(kb_only=True))
    kb_only = preparation.estimate(kb_only_run)
    nodes = after.max_nodes
    assert before.source_branch_usd < 1.0 < 50.0 == after.source_branch_usd
    assert after.run_worst_usd == pytest.approx(
        before.run_worst_usd + nodes * (50.0 - before.per_job_usd)
    )
    assert kb_only.source_branch_usd == 0.0
