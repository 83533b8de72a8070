"""The writing phase: outline -> sections -> lead, saved as it goes, inside the run's time
and money, with every prompt bounded whatever the number of branches."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from deep_research.adapters.prices import PriceTable
from deep_research.app import preparation, reserves, saved
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.authoring import OutlineRequest, PlannedSection, WriteCosts, WritingLimits
from deep_research.core.errors import ProviderError
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import Citation, ResearchNode, SessionState
from deep_research.core.outline import repair
from deep_research.core.packing import key_points
from deep_research.core.ports import Meter, WriteJob
from deep_research.core.report import assemble
from deep_research.core.writing import SectionedWriter
from deep_research.persistence.sessions import SessionStore
from tests.fakes import FakeAuthor, FakeExecutor, FakeJudge, FakePlanner, Rig, plan, task, verdict


class NoMeter:
    def record(self, *args: object, **kwargs: object) -> None:
        pass

    def remaining_usd(self) -> float:
        return 1e9

    def remaining_tokens(self) -> int:
        return 10**9

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        return True

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        pass


def researched(count: int, facts: int = 3, detail: str = "") -> SessionState:
    """A session with ``count`` done nodes, each with ``facts`` cited findings (each with
    ``detail`` words around its figure)."""
    state = SessionState(session_id="a" * 12, question="What is known about X?")
    for i in range(1, count + 1):
        notes = []
        for j in range(1, facts + 1):
            ref = f"S{(i - 1) * facts + j}"
            state.sources[ref] = Citation(ref=ref, kind="web", url=f"https://n{i}.example/{j}")
            notes.append(
                f"Finding {j} of node {i} {detail}says the value is {1000 * i + j} [{ref}]."
            )
        state.nodes[f"n{i:02d}"] = ResearchNode(
            id=f"n{i:02d}", question=f"What about part {i}?", status="done", notes=" ".join(notes)
        )
    return state


async def write(
    state: SessionState,
    author: FakeAuthor,
    *,
    limits: WritingLimits | None = None,
    seconds: float = 60.0,
    money: float = 100.0,
    spare: tuple[float, int] = (100.0, 10**6),
) -> list[str]:
    """Write ``state``'s report; the snapshots saved along the way."""
    saves: list[str] = []

    async def save() -> None:
        saves.append(state.model_dump_json())

    loop = asyncio.get_running_loop()
    spare_usd, spare_tokens = spare
    job = WriteJob(
        state, NoMeter(), save, loop.time() + seconds, money, (), spare_usd, spare_tokens
    )
    await SectionedWriter(author, limits).write(job)
    return saves


# --- outline ---------------------------------------------------------------------------


async def test_without_a_plan_of_its_own_the_outline_groups_the_tree_within_its_sections() -> None:
    state = researched(48)
    state.nodes["n02"].parent_id = "n01"  # a follow-up joins the node it follows
    writing = await SectionedWriter(FakeAuthor(), WritingLimits(max_sections=8)).outline(
        state, NoMeter()
    )
    assert writing.outlined_by == "grouping"
    assert 4 <= len(writing.sections) <= 8
    ids = [i for s in writing.sections for i in s.node_ids]
    assert sorted(ids) == sorted(state.nodes), "every done node in exactly one section"
    assert next(s for s in writing.sections if "n01" in s.node_ids).node_ids[:2] == ["n01", "n02"]


def test_an_authors_outline_is_repaired_not_trusted() -> None:
    state = researched(5)
    done = list(state.nodes.values())
    planned = [
        PlannedSection("Costs", "What does it cost?", ("n01", "n02", "zz")),
        PlannedSection("  ", "No title", ("n03",)),
        PlannedSection("Again", "Duplicates", ("n01", "n03")),
        PlannedSection("Speed of part", "Part 4?", ("n04",)),
    ]
    sections = repair(planned, done, max_sections=2)
    assert [s.id for s in sections] == ["s1", "s2"]
    ids = [i for s in sections for i in s.node_ids]
    assert sorted(ids) == ["n01", "n02", "n03", "n04", "n05"], "unknown dropped, each once"
    assert repair([PlannedSection("T", "Q", ("zz",))], done, 4) == [], "nothing usable"


async def test_the_outline_catalog_stays_bounded_with_many_branches() -> None:
    seen: list[OutlineRequest] = []

    class Recording(FakeAuthor):
        async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]:
            seen.append(request)
            return []

    for count in (12, 48, 200):
        await SectionedWriter(Recording(), WritingLimits(catalog_tokens=2500)).outline(
            researched(count), NoMeter()
        )
    sizes = [sum(estimate_tokens(e.question + e.gist) + 4 for e in r.catalog) for r in seen]
    assert max(sizes) <= 2500 + 4 * len(seen[-1].catalog)
    grouped = seen[-1].catalog
    assert len(grouped) < 200, "past its budget, nodes share a catalog line"
    assert sorted(i for e in grouped for i in e.node_ids) == sorted(researched(200).nodes)


# --- sections --------------------------------------------------------------------------


async def test_each_section_sees_its_own_evidence_the_best_of_the_rest_and_the_outline() -> None:
    state = researched(12)
    author = FakeAuthor()
    saves = await write(state, author, limits=WritingLimits(max_sections=4))
    assert state.writing is not None
    assert [s.status for s in state.writing.sections] == ["written"] * 4
    for request in author.sections:
        own = set(request.section.node_ids)
        assert len(request.evidence) == 3 * len(own), "all of its own units"
        assert all(f"node {int(i[1:])} " in " ".join(request.evidence) for i in own)
        assert not set(request.evidence) & set(request.related)
        assert len(request.others) == 3, "it sees the other sections, not itself"
    assert len(saves) >= 1 + 4 + 1, "saved after the outline, each section and the lead"
    report = assemble(state).markdown
    for ref, source in state.sources.items():
        assert source.url in report, f"{ref}: every finding's source reaches the report"


async def test_no_section_prompt_grows_with_the_number_of_branches() -> None:
    largest = []
    for count in (12, 48, 96):
        author = FakeAuthor()
        await write(researched(count), author, limits=WritingLimits(own_evidence_tokens=400))
        largest.append(
            max(sum(estimate_tokens(t) for t in r.evidence + r.related) for r in author.sections)
        )
    assert max(largest) <= 400 + WritingLimits().related_evidence_tokens


async def test_a_failed_section_quotes_its_evidence_and_says_so() -> None:
    state = researched(4)
    await write(state, FakeAuthor(fail_titles=("What about part 1",)))
    assert state.writing is not None
    failed = state.writing.sections[0]
    assert failed.status == "quoted"
    assert failed.note.startswith("writing it failed (the model failed)")
    assert failed.text.startswith("- Finding 1 of node 1")
    report = assemble(state).markdown
    assert "Not written (writing it failed (the model failed)): its best evidence" in report
    assert [s.status for s in state.writing.sections[1:]] == ["written"] * 3


async def test_at_the_time_limit_unwritten_sections_are_quoted_at_once_and_resume_writes_them() -> (
    None
):
    state = researched(8)
    slow = FakeAuthor(section_seconds=5.0)
    await asyncio.wait_for(write(state, slow, seconds=0.05), timeout=2)
    assert state.writing is not None
    assert {s.status for s in state.writing.sections} == {"quoted"}
    assert all("time limit" in s.note for s in state.writing.sections)
    assert state.writing.lead_status == "quoted"
    assert "[S1]" in state.writing.sections[0].text, "its evidence, with its markers"

    author = FakeAuthor()
    await write(state, author)
    assert {s.status for s in state.writing.sections} == {"written"}
    assert len(author.sections) == len(state.writing.sections), "only the quoted ones"
    again = FakeAuthor()
    await write(state, again)
    assert again.sections == [], "a written report is not written again"


async def test_with_little_money_left_the_outline_has_fewer_sections() -> None:
    costs = WriteCosts(outline=0.01, section=0.10, lead=0.01, condense=0.0)
    limits = WritingLimits(max_sections=8, costs=costs)
    state = researched(16)
    author = FakeAuthor()
    await write(state, author, limits=limits, money=0.25)
    assert state.writing is not None
    assert len(state.writing.sections) == 2
    assert len(author.sections) == 2
    assert sorted(i for s in state.writing.sections for i in s.node_ids) == sorted(state.nodes)


# --- condensing ------------------------------------------------------------------------

DETAIL = "(measured across several independent sites, with careful controls, over months) "


def facts(state: SessionState) -> set[str]:
    """Every figure of ``state``'s notes with its marker, as a section would cite it."""
    return {
        f"{value} [{ref}]"
        for node in state.nodes.values()
        for value, ref in re.findall(r"value is (\d+) \[(S\d+)\]", node.notes)
    }


def overflowing() -> SessionState:
    """Two nodes, the first with more evidence than a 500-token section budget."""
    state = researched(2, facts=20, detail=DETAIL)
    state.nodes["n02"].notes = " ".join(state.nodes["n02"].notes.split(". ")[:3]) + "."
    return state


async def test_a_section_with_more_evidence_than_its_budget_keeps_every_fact() -> None:
    state = overflowing()
    limits = WritingLimits(max_sections=2, own_evidence_tokens=500)
    author = FakeAuthor()
    await write(state, author, limits=limits)
    assert state.writing is not None
    assert estimate_tokens(state.nodes["n01"].notes) > limits.own_evidence_tokens
    body = "\n".join(s.text for s in state.writing.sections)
    assert len(facts(state)) == 23
    assert {f for f in facts(state) if f not in body} == set(), "every figure, its marker"
    assert all(s.status == "written" for s in state.writing.sections)
    assert len(author.condensed) == 1 <= limits.condense_calls
    for request in author.condensed:  # the condensing call reads one bounded chunk
        assert sum(estimate_tokens(e) + 1 for e in request.evidence) <= 500
    for request in author.sections:  # and the section reads within its budget
        assert sum(estimate_tokens(e) for e in request.evidence) <= 500


async def test_without_condensing_calls_left_a_section_reads_its_fair_share() -> None:
    """The phase makes at most ``condense_calls``: a section past them (or whose condensing
    failed) is written from its fair share, the rest staying in the notes."""
    state = researched(2, facts=20, detail=DETAIL)  # two sections overflow, one call
    author = FakeAuthor()
    await write(state, author, limits=WritingLimits(max_sections=2, own_evidence_tokens=500))
    assert state.writing is not None
    assert len(author.condensed) == 1
    for section in state.writing.sections:
        assert section.status == "written"
    body = "\n".join(s.text for s in state.writing.sections)
    assert 20 < len({f for f in facts(state) if f in body}) < 40, "one section whole"

    failing = FakeAuthor(fail_condense=True)
    state = overflowing()
    await write(state, failing, limits=WritingLimits(max_sections=2, own_evidence_tokens=500))
    assert state.writing is not None
    assert failing.condensed
    assert all(s.status == "written" for s in state.writing.sections), "written, not quoted"
    for request in failing.sections:
        assert sum(estimate_tokens(e) + 1 for e in request.evidence) <= 500


async def test_condensing_spends_only_what_research_left_over() -> None:
    """Never kept back from research: the reserve is the outline, the sections and the lead;
    condensing calls are made only as far as the spare money and tokens go."""
    limits = WritingLimits(max_sections=8)
    costs = WriteCosts(outline=0.01, section=0.10, lead=0.01, condense=0.05)
    assert costs.reserve(8) == pytest.approx(0.02 + 8 * 0.10)
    plain = WritingLimits(max_sections=8, own_evidence_tokens=0)
    assert limits.reserve_tokens(4000) - plain.reserve_tokens(4000) == 8 * 1500

    priced = WritingLimits(max_sections=4, own_evidence_tokens=500, costs=costs)
    one_call = priced.condense_tokens
    for spare, calls in (
        ((100.0, 0), 0),  # no tokens left over
        ((0.04, 10**6), 0),  # less money left over than one call
        ((100.0, one_call), 1),
        ((0.10, 10**6), 2),
        ((100.0, 10**6), 2),  # at most max_sections // 2
    ):
        state = researched(4, facts=20, detail=DETAIL)  # every section overflows
        author = FakeAuthor()
        await write(state, author, limits=priced, spare=spare)
        assert len(author.condensed) == calls, spare
        assert state.writing is not None
        assert all(s.status == "written" for s in state.writing.sections)


def test_key_points_are_first_sentences_that_cite() -> None:
    text = (
        "First it is 3 [S1]. More detail [S2].\n\nNo citation here.\n\n"
        "- A bullet point holds 4 [S3]. And more.\n- Another one [S4].\n\n"
        "Last one [S5]. Tail."
    )
    assert key_points(text) == [
        "First it is 3 [S1].",
        "A bullet point holds 4 [S3].",
        "Another one [S4].",
        "Last one [S5].",
    ]


# --- the run ---------------------------------------------------------------------------


async def test_the_judge_reads_the_outline_and_the_report_is_written_after_it() -> None:
    rig = Rig(
        planner=FakePlanner([plan(task("a"), task("b"), task("c"))]),
        executor=FakeExecutor(),
        judge=FakeJudge([verdict(True)]),
    )
    state = SessionState(session_id="b" * 12, question="What about it?")
    orch = rig.orchestrator(state)
    await orch.run()
    (request,) = rig.judge.requests
    assert request.outline.startswith("## ")
    assert "Draws on: " in request.outline
    assert state.writing is not None
    assert rig.author.leads, "the lead was written from the sections' key points"
    assert orch.report is not None
    assert orch.report.lead
    assert rig.saver.last().writing == state.writing, "the phase is saved"


async def test_a_provider_error_in_the_outline_falls_back_to_grouping() -> None:
    class Failing(FakeAuthor):
        async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]:
            raise ProviderError("down")

    writing = await SectionedWriter(Failing()).outline(researched(3), NoMeter())
    assert writing.outlined_by == "grouping"
    assert [s.node_ids for s in writing.sections] == [["n01"], ["n02"], ["n03"]]


# --- money -----------------------------------------------------------------------------


def test_the_report_reserve_fits_a_server_run_with_one_web_job() -> None:
    """At the defaults the reserve stays under $0.80, so a $5 run (serve's and mcp's cap)
    still admits one $4.00 research job."""
    settings = Settings(_env_file=None, openai_api_key="sk-test")  # type: ignore[call-arg]
    prepared = preparation.prepare(settings, "What is X?", RunOptions(max_cost_usd=5.0))
    estimate = preparation.estimate(prepared)
    assert estimate.final_reserve_usd <= 0.80
    assert estimate.per_job_usd == pytest.approx(4.0, abs=0.01)
    assert estimate.jobs_admitted == 1
    full = reserves.final_reserve_usd(settings, reserves.price_book(settings), 1000.0)
    assert full == estimate.final_reserve_usd, "at $5 the full reserve is kept"
    small = reserves.final_reserve_usd(settings, reserves.price_book(settings), 0.2)
    one = reserves.writing_limits(settings, reserves.price_book(settings), max_cost_usd=0.2)
    assert one.max_sections == 1, "a small budget writes a smaller report"
    assert small == pytest.approx(one.costs.reserve(1, revisions=False), abs=1e-4), (
        "a small budget keeps less: the revisions go first"
    )
    assert reserves.final_reserve_tokens(settings) == reserves.writing_limits(
        settings, PriceTable()
    ).reserve_tokens(settings.section_max_tokens)


# --- report.json of another version, or damaged ---------------------------------------------


def test_a_report_json_of_another_version_is_rebuilt_from_its_session(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    state = store.create("What is X?", status="complete")
    state.sources["S1"] = Citation(ref="S1", kind="web", url="https://x.example/1")
    state.nodes["a"] = ResearchNode(id="a", question="A?", status="done", notes="X is 1 [S1].")
    store.save(state)
    session = tmp_path / state.session_id
    current = assemble(store.load(state.session_id))
    (session / "report.md").write_text("# old report\n")
    data = json.loads(current.model_dump_json())
    data["title"] = "Saved title"
    (session / "report.json").write_text(json.dumps(data))
    loaded = saved.read_report_data(store, state.session_id)
    assert not isinstance(loaded, str)
    assert loaded.title == "Saved title", "the current version's file is read as saved"
    for other in (
        {**data, "schema_version": 2},
        {k: v for k, v in data.items() if k != "schema_version"},
    ):
        (session / "report.json").write_text(json.dumps(other))
        rebuilt = saved.read_report_data(store, state.session_id)
        assert not isinstance(rebuilt, str)
        assert rebuilt.title == current.title != "Saved title"
        assert rebuilt.sources[0].url == "https://x.example/1"
    (session / "state.json").write_text("{ damaged")
    assert saved.read_report_data(store, state.session_id) == "# old report\n"


async def test_a_section_cannot_add_a_heading_at_the_reports_own_levels() -> None:
    class Heading(FakeAuthor):
        async def section(self, request: object, meter: Meter) -> str:
            return "# Title\n\nIt holds [S1].\n\n## Sources\n\n1. [x](https://phish.example)"

    state = researched(1)
    await write(state, Heading())
    report = assemble(state).markdown
    assert report.count("\n## Sources") == 1
    assert "\n**Sources**\n" in report, "the section's heading is a bold line in it"
    assert "**Title**" in report
