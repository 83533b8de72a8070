"""New kinds of research plug in by registering, with no other file touched: a toy web
engine researches a run end to end; a toy source is offered to the planner, routed to,
and merged under ``mixed`` with the knowledge base."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deep_research.app import engines, lifecycle, preparation, setting_types, sources
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.models import Citation
from deep_research.core.ports import BranchResult, BranchTask, Meter, RemoteJobHook
from deep_research.kb import catalog
from deep_research.kb.catalog import open_kb
from deep_research.kb.embeddings import NamedEmbeddings
from deep_research.kb.ingest import ingest
from deep_research.kb.settings import KBSettings
from tests.fake_openai import ChatRequest, FakeOpenAI
from tests.hash_embeddings import HashEmbeddings
from tests.world import ResearchWorld, plan_task


class ToyExecutor:
    """Answers every sub-question with one cited page of its own."""

    def __init__(self, site: str) -> None:
        self.site = site
        self.questions: list[str] = []

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        self.questions.append(task.question)
        page = Citation(
            kind="web",
            url=f"https://{self.site}/{task.node_id}",
            title=f"{self.site} on {task.node_id}",
            quote=f"{self.site} knows the answer to: {task.question}",
        )
        return BranchResult(f"{self.site} has a page on it [1].", (page,), 0.8, self.site)


@pytest.fixture
def toy_engine() -> Iterator[ToyExecutor]:
    toy = ToyExecutor("toy.example")
    engines.register(
        engines.WebEngineKind(
            name="toy",
            needs_model=False,
            build=lambda run: engines.BuiltWeb(toy),
            worst_case=lambda settings, prices, chat, spec: engines.WorstCase(
                0.0, "toy pages, free", "toy branch"
            ),
            describe=lambda settings, spec: "the toy engine",
        )
    )
    yield toy
    engines.unregister("toy")


async def test_a_registered_web_engine_researches_a_run_end_to_end(
    offline: Settings, toy_engine: ToyExecutor
) -> None:
    options = RunOptions(web_engine="toy", web_only=True)
    prepared = preparation.prepare(offline, "What does the toy site say?", options)
    assert (prepared.engine, prepared.policy, prepared.extractive) == ("toy", "web_only", True)
    estimate = preparation.estimate(prepared)
    assert (estimate.web_model, estimate.web_unit) == ("toy pages, free", "toy branch")
    said: list[str] = []
    with lifecycle.start(prepared, said.append) as run:
        state = await lifecycle.execute(run, lambda _event: None)
    assert toy_engine.questions, "the toy researched the run's web branches"
    assert state.run_spec.web_engine == "toy"
    report = run.report_markdown
    assert report is not None
    assert "https://toy.example/" in report
    assert "_Web research: the toy engine._" in report

    with pytest.raises(Exception, match=r"should be one of auto, [^\n]*\btoy\b"):
        preparation.prepare(offline, "q?", RunOptions(web_engine="toy2"))


def test_the_settings_accept_the_registered_engines_without_loading_the_registry(
    toy_engine: ToyExecutor,
) -> None:
    """The settings check a name against ``ENGINE_NAMES`` (plain data: the registry imports
    the settings), which registering keeps equal to the registry's names. Membership only:
    what else is registered is not this test's business."""
    assert list(engines.ENGINES) == setting_types.ENGINE_NAMES
    assert "toy" in setting_types.ENGINE_NAMES
    assert setting_types.known_engine("toy") == "toy"
    engines.unregister("toy")
    assert list(engines.ENGINES) == setting_types.ENGINE_NAMES
    assert "toy" not in setting_types.ENGINE_NAMES
    with pytest.raises(ValueError, match="should be one of auto, ") as refused:
        setting_types.known_engine("toy")
    assert "toy" not in str(refused.value)


@pytest.fixture
def arxiv() -> Iterator[ToyExecutor]:
    toy = ToyExecutor("arxiv.example")
    sources.register(
        sources.SourceKind(
            name="arxiv",
            description="preprints of physics and computer science papers",
            title="arXiv preprints",
            build=lambda run: toy,
        )
    )
    yield toy
    sources.unregister("arxiv")


@pytest.fixture
def with_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI) -> Settings:
    """A model (the fake server) and a knowledge base of two notes, small hash vectors."""

    def make_embeddings(settings: KBSettings) -> NamedEmbeddings:
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


async def test_a_registered_source_is_planned_routed_and_merged_with_the_kb(
    with_kb: Settings, arxiv: ToyExecutor, fake_openai: FakeOpenAI
) -> None:
    world = ResearchWorld(
        plans=[
            [
                plan_task("t1", source="arxiv", question="What do preprints say?"),
                plan_task("t2", source="mixed", question="What did we and others decide?"),
            ]
        ]
    )
    world.install(fake_openai)
    prepared = preparation.prepare(with_kb, "Which vector store?", RunOptions())
    with lifecycle.start(prepared, lambda _line: None) as run:
        state = await lifecycle.execute(run, lambda _event: None)

    chats = [
        ChatRequest.from_body(r.body)
        for r in fake_openai.requests
        if r.path == "/v1/chat/completions"
    ]
    [plan] = [r for r in chats if r.schema_name == "Plan"]
    assert plan.schema is not None
    hint = plan.schema["$defs"]["PlannedTask"]["properties"]["source_hint"]
    assert hint["enum"] == ["web", "internal", "arxiv", "mixed"]
    assert "'arxiv': preprints of physics and computer science papers" in hint["description"]
    assert "'arxiv': preprints of physics" in plan.text, "the prompt lists it too"

    assert arxiv.questions == ["What do preprints say?", "What did we and others decide?"]
    t1, t2 = state.nodes["t1"], state.nodes["t2"]
    assert t1.notes.startswith("arxiv.example has a page on it")
    assert "**From the knowledge base**" in t2.notes
    assert "**From the arXiv preprints**" in t2.notes
    assert any(c.kind == "kb" for c in t2.citations)
    assert any((c.url or "").startswith("https://arxiv.example/") for c in t2.citations)


def test_a_registered_sources_worst_case_is_counted_in_the_estimate(with_kb: Settings) -> None:
    """A node may go to any source the planner is offered: the estimate counts each node at
    the dearest of them, a registered source's worst case included (a run that cannot use
    it, --kb-only, does not)."""
    settings = with_kb.with_overrides(max_cost_usd=100_000.0)  # the worst case not capped
    before = preparation.estimate(preparation.prepare(settings, "q?", RunOptions()))
    sources.register(
        sources.SourceKind(
            name="costly",
            description="a paid index",
            title="paid index",
            build=lambda run: ToyExecutor("paid.example"),
            worst_case_usd=lambda settings, chat_call: 50.0,
        )
    )
    try:
        after = preparation.estimate(preparation.prepare(settings, "q?", RunOptions()))
        kb_only_run = preparation.prepare(settings, "q?", RunOptions(kb_only=True))
        kb_only = preparation.estimate(kb_only_run)
    finally:
        sources.unregister("costly")
    nodes = after.max_nodes
    assert before.source_branch_usd < 1.0 < 50.0 == after.source_branch_usd
    assert after.run_worst_usd == pytest.approx(
        before.run_worst_usd + nodes * (50.0 - before.per_job_usd)
    )
    assert kb_only.source_branch_usd == 0.0
