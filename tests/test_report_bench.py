"""The facts-mode fake behind bench/report.py is honest: its copier keeps the facts of its
prompt in order with their own markers, stops within its limits, and never invents a fact;
its writers plant each fact's fabrication (``bench/planted.py``) as they write it, the same
wherever it is written; its research jobs cite each fact to its own page; the bench counts
only what the body states with the right citation, and matches each claim to its fact."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from openai.types.responses import Response

from bench.facts import REWORDED, STATED, FactsWorld, Limits, stated_limits
from bench.planted import KINDS, Fact, pairs
from bench.report import (
    KEYS,
    CountedJudge,
    Run,
    contradiction_figures,
    kind_of,
    retention,
    sections,
)
from deep_research.adapters.claims import ToJudge, claims_text
from deep_research.adapters.llm.llm import load_prompt
from deep_research.adapters.web.output import extract_report
from deep_research.core.corroboration import Contradiction, Side
from deep_research.core.ledger import Claim, ClaimLedger, SourceCheck
from deep_research.core.models import Citation
from deep_research.core.report import Report, ReportNote
from tests.fake_openai import ChatRequest
from tests.fake_openai_payloads import StoredResponse, response_object

UNLIMITED = Limits()
WORLD = FactsWorld(branches=6, facts_per_job=2)
"""12 facts: 5 fabricated, one of each kind; 2 of the 7 true ones reworded."""


def of_kind(kind: str) -> Fact:
    return next(f for f in WORLD.facts if f.kind == kind)


def stated(fact: Fact, markers: str) -> str:
    return f"{fact.stated.rstrip('.')} {markers}."


def prompt(*facts: tuple[Fact, str]) -> str:
    first, *rest = facts
    return (
        f"Current summary:\n{stated(*first)} Background without facts.\n\n"
        "New findings:\n### What is known about aspect 01?\n"
        + "".join(f"- {stated(*f)}\n" for f in rest)
    )


TRUE = [f for f in WORLD.facts if f.kind == "true"]
PROMPT = prompt((TRUE[0], "[S3]"), (TRUE[1], "[S7][S8]"), (TRUE[2], "[S9]"))


def test_the_world_plants_every_kind_once_and_rewords_some_true_facts() -> None:
    kinds = [f.kind for f in WORLD.facts]
    assert sorted(k for k in kinds if k in KINDS) == sorted(KINDS)
    assert kinds.count("reworded") == 2
    assert len({f.name for f in WORLD.facts}) == 12


def test_the_copier_keeps_every_fact_in_prompt_order_with_its_markers() -> None:
    out = WORLD.copy_facts(PROMPT, UNLIMITED)
    assert out == " ".join(
        (stated(TRUE[0], "[S3]"), stated(TRUE[1], "[S7][S8]"), stated(TRUE[2], "[S9]"))
    )
    assert WORLD.facts_in(out) == WORLD.facts_in(PROMPT)


def test_a_fact_is_read_once_and_only_whole() -> None:
    fact = TRUE[0]
    twice = f"{stated(fact, '[1]')} Again: {stated(fact, '[2]')}"
    (once,) = WORLD.facts_in(twice)
    assert (once.fact, once.form, once.markers) == (fact, STATED, ("[1]",))
    # Cut short, or run on into words of its own, it is not that fact.
    assert WORLD.facts_in(fact.stated[:-10] + " [1].") == []
    assert WORLD.facts_in(fact.stated.rstrip(".") + ", and more [1].") == []


def test_the_copier_keeps_a_facts_marker_form() -> None:
    fact = TRUE[0]
    assert WORLD.copy_facts(stated(fact, "[3][12]"), UNLIMITED) == stated(fact, "[3][12]")
    assert WORLD.copy_facts(stated(fact, "[S41]"), UNLIMITED) == stated(fact, "[S41]")
    # An escaped bracket is literal text, not a citation: the fact is kept uncited.
    literal = WORLD.copy_facts(fact.stated.rstrip(".") + r" \[3\].", UNLIMITED)
    assert literal == fact.stated


def test_the_copier_stops_before_its_token_cap() -> None:
    full = WORLD.copy_facts(PROMPT, UNLIMITED)
    first_two = stated(TRUE[0], "[S3]") + " " + stated(TRUE[1], "[S7][S8]")
    cap = (len(first_two) + 3) // 4  # tokens: the third sentence does not fit
    capped = WORLD.copy_facts(PROMPT, stated_limits("", cap))
    assert capped == first_two
    assert len(capped) <= cap * 4
    assert full.startswith(capped)
    # Counted with what goes before it (a heading).
    assert WORLD.copy_facts(PROMPT, Limits(chars=len("## A\n\n") + 10), "## A\n\n") == (
        "## A\n\nNo facts were given."
    )


def test_the_copier_stops_at_a_limit_its_instructions_state() -> None:
    first_two = stated(TRUE[0], "[S3]") + " " + stated(TRUE[1], "[S7][S8]")
    limit = len(first_two.split()) + 3  # the third sentence does not fit
    system = f"Write terse notes.\n- At most {limit} words, as bullets."
    assert stated_limits(system, 16_000) == Limits(chars=64_000, words=limit)
    out = WORLD.copy_facts(PROMPT, stated_limits(system, 16_000))
    assert len(out.split()) <= limit
    assert [s.fact for s in WORLD.facts_in(out)] == TRUE[:2]


def test_the_limits_of_the_real_prompts_are_read() -> None:
    summarize = load_prompt("summarize").messages(
        cap_tokens=2000, cap_words=1500, question="q", summary="s", findings="f"
    )
    assert stated_limits(str(summarize[0].content), 16_000) == Limits(chars=8000, words=1500)
    compress = load_prompt("compress").messages(max_words=700, question="q", report="r")
    assert stated_limits(str(compress[0].content), 16_000) == Limits(chars=64_000, words=700)
    section = load_prompt("section").messages(
        max_words=900,
        question="q",
        title="t",
        section_question="q",
        points="",
        others="",
        evidence="",
        related="",
    )
    assert stated_limits(str(section[0].content), 4000) == Limits(chars=16_000, words=900)
    lead = load_prompt("lead").messages(max_words=350, question="q", sections="", gaps="")
    assert stated_limits(str(lead[0].content), 4000) == Limits(chars=16_000, words=350)


def test_the_copier_never_invents_a_fact() -> None:
    assert WORLD.facts_in(WORLD.copy_facts("No facts at all, only 2024 and [S3].", UNLIMITED)) == []
    for cap in (5, 20, 40, None):
        out = WORLD.copy_facts(PROMPT, stated_limits("", cap))
        assert {s.fact.index for s in WORLD.facts_in(out)} <= {f.index for f in TRUE[:3]}


def test_a_writer_plants_each_facts_alteration_and_copies_a_written_one() -> None:
    facts = [of_kind(k) for k in (*KINDS, "reworded", "true")]
    markers = [f"[S{i}]" for i in range(1, len(facts) + 1)]
    source = prompt(*zip(facts, markers, strict=True))
    out = WORLD.copy_facts(source, UNLIMITED, plant=True)
    written = {s.fact.kind: s for s in WORLD.facts_in(out)}
    for kind in ("number", "negation", "entity", "added_clause", "reworded", "true"):
        fact = of_kind(kind)
        assert written[kind].words == fact.written.rstrip(".")
        assert written[kind].form == {"reworded": REWORDED, "true": STATED}.get(kind, kind)
    moved = written["moved_citation"]
    assert (moved.words, moved.form) == (of_kind("moved_citation").stated.rstrip("."), STATED)
    assert moved.markers == ("[S5]",)  # the next fact's, not its own [S4]
    assert written["number"].markers == ("[S1]",)
    # Read again (the lead reads the sections): what was written is copied as it stands.
    again = WORLD.copy_facts(out, UNLIMITED, plant=True)
    assert [s.words for s in WORLD.facts_in(again)][:3] == [s.words for s in written.values()][:3]
    # Alone in its prompt, a moved citation has nowhere to go: it keeps its own.
    alone = WORLD.copy_facts(stated(of_kind("moved_citation"), "[S4]"), UNLIMITED, plant=True)
    assert alone == stated(of_kind("moved_citation"), "[S4]")


def test_the_repair_restates_what_the_passages_state() -> None:
    fact = of_kind("number")
    request = load_prompt("revise").messages(
        question="q",
        section="s",
        sentence=f"{fact.written.rstrip('.')} [3].",
        problems="- [3] contradicted",
        passages=f"[3] Operators can change it. {fact.stated} The project is small.",
    )
    body = {
        "model": "gpt-6-luna",
        "messages": [
            {"role": role, "content": str(m.content)}
            for role, m in zip(("system", "user"), request, strict=True)
        ],
    }
    assert WORLD.chat(ChatRequest.from_body(body)) == stated(fact, "[3]")


def chat(world: FactsWorld, system: str, user: str, schema: str | None = None) -> object:
    body: dict[str, object] = {
        "model": "gpt-6-luna",
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "max_completion_tokens": 16_000,
    }
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": schema}}
    return world.chat(ChatRequest.from_body(body))


def test_the_world_answers_each_role() -> None:
    world = FactsWorld(branches=3, facts_per_job=2)
    plan = chat(world, "You are the planner.", "nothing known", "Plan")
    assert isinstance(plan, dict)
    assert [t["id"] for t in plan["tasks"]] == ["t01", "t02", "t03"]
    replan = chat(world, "You are the planner.", "nothing known", "Plan")
    assert isinstance(replan, dict)
    assert replan["tasks"] == []
    verdict = chat(world, "You are a strict research evaluator.", PROMPT, "Verdict")
    assert isinstance(verdict, dict)
    assert verdict["is_complete"] is True
    outline = chat(world, "Plan at most 2 sections.", "Catalog:\n- t01: a?\n- t02: b?", "Outline")
    assert isinstance(outline, dict)
    assert [s["node_ids"] for s in outline["sections"]] == [["t01", "t02"]]
    judged = chat(world, "You check claims.", "1. a claim", "Judgements")
    assert judged == {"judgements": []}  # it abstains: the text verifier decides
    source = stated(world.facts[0], "[S1]")
    section = chat(world, "You write one section of a research report", source)
    assert section == world.copy_facts(source, UNLIMITED, plant=True)
    lead = chat(world, "You write the opening of a research report", source)
    assert lead == section
    summary = chat(world, "You keep a rolling summary", source)
    assert summary == source
    assert world.calls == {
        "planner": 2,
        "judge": 1,
        "outline": 1,
        "claim_judge": 1,
        "section": 1,
        "lead": 1,
        "summarizer": 1,
    }


def test_a_research_job_cites_each_fact_to_its_own_page() -> None:
    world = FactsWorld(branches=7, facts_per_job=3)
    report = world.report(7)
    stored = StoredResponse("resp_x", "o3-deep-research", {}, report, 0, False, "completed")
    stored.finish("completed")
    text, citations, _ = extract_report(Response.model_validate(response_object(stored)))
    found = world.facts_in(text)
    assert [s.fact.index for s in found] == [18, 19, 20]
    for one in found:
        assert one.form == STATED
        (marker,) = one.markers
        assert citations[int(marker.strip("[]")) - 1].url == world.gathered[one.fact.index]
        assert world.gathered[one.fact.index] == world.page_url(one.fact.index)
    assert len(set(world.gathered.values())) == 3


def test_retention_counts_only_the_body_citing_the_facts_own_page() -> None:
    world = FactsWorld(branches=6, facts_per_job=2)
    for branch in range(1, 7):
        world.report(branch)
    f = world.facts
    pages = [Citation(kind="web", url=world.page_url(i)) for i in range(12)]
    moved = next(x for x in f if x.kind == "moved_citation")
    true = [x for x in f if x.kind in ("true", "reworded") and x is not moved]
    altered = next(x for x in f if x.kind == "number")
    lead = (
        f"{stated(true[0], f'[{true[0].index + 1}]')} "  # kept
        f"{stated(true[1], f'[{true[0].index + 1}]')} "  # another fact's page
        f"{altered.written.rstrip('.')} [{altered.index + 1}]. "  # kept: as the writer wrote it
        f"{stated(moved, f'[{true[0].index + 1}]')} "  # kept: planted as a moved citation
        f"{true[2].stated}"  # uncited
    )
    report = Report(
        title="q",
        status="",
        lead=lead,
        limitations=[f"- {stated(true[3], f'[{true[3].index + 1}]')}"],  # not the body
        sources=pages,
        notes=[
            ReportNote(node_id="t01", question="q", meta=""),
        ],
    )
    assert retention(report, world) == 3 / 12
    assert sections(report.body) == 1


def test_a_claim_is_matched_to_its_fact_by_its_words_and_page() -> None:
    moved, number = of_kind("moved_citation"), of_kind("number")
    true = next(f for f in WORLD.facts if f.kind == "true")

    def claim(text: str, url: str, revised_from: str = "") -> Claim:
        source = SourceCheck(ref=1, url=url)
        return Claim(
            id="C1",
            text=text,
            section="s",
            refs=[1],
            verdict="supported",
            sources=[source],
            revised_from=revised_from,
        )

    page = WORLD.page_url
    assert kind_of(claim(stated(true, "[1]"), page(true.index)), WORLD) == "true"
    assert kind_of(claim(stated(true, "[1]"), page(moved.index)), WORLD) == "miscited"
    assert kind_of(claim(stated(moved, "[1]"), page(true.index)), WORLD) == "moved_citation"
    assert kind_of(claim(stated(moved, "[1]"), page(moved.index)), WORLD) == "true"
    written = f"{number.written.rstrip('.')} [1]."
    assert kind_of(claim(written, page(number.index)), WORLD) == "number"
    rewritten = claim(stated(number, "[1]"), page(number.index), revised_from=written)
    assert kind_of(rewritten, WORLD) == "number"  # as first written
    assert kind_of(claim("Nothing here [1].", page(0)), WORLD) == "other"


PAIRED = FactsWorld(branches=6, facts_per_job=2, contradictions=True)
"""The same facts, and the 20 pairs of ``bench.planted.pairs`` stated by its research jobs."""


def test_the_pairs_are_those_of_the_claims_bench_stated_by_two_jobs_each() -> None:
    from bench.claims import contradiction_pairs

    assert [f.stated for f in PAIRED.facts] == [f.stated for f in WORLD.facts]
    assert sum(p.planted for p in PAIRED.pairs) == 10
    assert sum(not p.planted for p in PAIRED.pairs) == 10
    names = {f.name for f in PAIRED.facts}
    for pair in PAIRED.pairs:
        first, second = (PAIRED.sides[s.rstrip(".")] for s in pair.sides)
        assert first.branch != second.branch
        assert not {w for s in pair.sides for w in s.split()} & names
    units, planted, lookalikes = contradiction_pairs()
    assert (len(units), len(planted), lookalikes) == (40, 10, 10)
    assert [u.sources[0].text for u in units][:2] == list(pairs(11)[0].sides)
    assert (WORLD.pairs, WORLD.sides) == ([], {})


def test_a_research_job_cites_each_side_of_a_pair_to_its_own_page() -> None:
    world = FactsWorld(branches=6, facts_per_job=2, contradictions=True)
    stored = StoredResponse(
        "resp_x", "o3-deep-research", {}, world.report(1), 0, False, "completed"
    )
    stored.finish("completed")
    text, citations, _ = extract_report(Response.model_validate(response_object(stored)))
    said = world.said_in(text)
    assert {side.words for side, _, _ in said} == {
        s.words for s in world.sides.values() if s.branch == 1
    }
    assert len(said) >= 6
    for side, (marker,), _ in said:
        assert citations[int(marker.strip("[]")) - 1].url == world.side_url(
            side.pair.index, side.side
        )
    assert len(world.gathered) == 2  # the pairs are not among the facts gathered


def test_the_compressor_keeps_the_pairs_and_the_writers_leave_them_out() -> None:
    side = next(iter(PAIRED.sides.values()))
    fact = TRUE[0]
    source = f"- {stated(fact, '[S1]')}\n- {side.words} [S2].\n- {stated(TRUE[1], '[S3]')}\n"
    notes = chat(PAIRED, "You compress a long web research report", source)
    assert notes == f"{stated(fact, '[S1]')} {side.words} [S2]. {stated(TRUE[1], '[S3]')}"
    assert PAIRED.said_in(str(notes))[0][:2] == (side, ("[S2]",))
    for system in ("You write one section of a research report", "You keep a rolling summary"):
        out = chat(PAIRED, system, source)
        assert PAIRED.said_in(str(out)) == []
        assert [s.fact for s in PAIRED.facts_in(str(out))] == [fact, TRUE[1]]


def test_a_pair_counts_as_found_only_when_its_two_sides_are_reported() -> None:
    world = FactsWorld(branches=6, facts_per_job=2, contradictions=True)
    planted = [p for p in world.pairs if p.planted]
    lookalike = next(p for p in world.pairs if not p.planted)

    def found(first: str, second: str) -> Contradiction:
        return Contradiction(
            kind="number",
            conflict="1 vs 2",
            first=Side(unit_id="t01.1", finding=f"{first.rstrip('.')} [S1].", refs=("S1",)),
            second=Side(unit_id="t02.1", finding=f"{second.rstrip('.')} [S2].", refs=("S2",)),
        )

    ledger = ClaimLedger(
        session_id="x",
        contradictions=[
            found(*planted[0].sides),
            found(*reversed(planted[1].sides)),
            found(planted[2].sides[0], planted[3].sides[1]),  # two pairs: neither
            found(*lookalike.sides),
            found(TRUE[0].stated, TRUE[1].stated),
        ],
    )
    run = cast(Run, SimpleNamespace(world=world, ledger=ledger))
    assert contradiction_figures(run) == {
        "contradictions": 5,
        "contradictions_found": 0.2,
        "false_contradictions": 0.1,
        "other_contradictions": 2,
    }


def test_the_bench_counts_the_claims_its_judge_was_asked_about() -> None:
    """``judged`` (in the JSON line): claims the judge's prompts list, not calls."""
    world = FactsWorld(branches=3, facts_per_job=2, judge="yes")
    counted = CountedJudge(world.chat)
    asked = [ToJudge("Raft elects a leader in 150 ms.", ("Raft elects a leader.",))]
    asked.append(ToJudge("Paxos needs a quorum.", ("Claim 9: not a claim.",), "Why?"))
    body: dict[str, object] = {
        "model": "gpt-6-luna",
        "response_format": {"type": "json_schema", "json_schema": {"name": "Judgements"}},
    }
    for claims in (asked, asked[:1]):
        body["messages"] = [{"role": "user", "content": claims_text(claims)}]
        assert counted(ChatRequest.from_body(body)) is not None
    assert counted.asked == 3
    del body["response_format"]  # a writer's call listing the same text: not the judge's
    counted(ChatRequest.from_body(body))
    assert counted.asked == 3
    assert "judged" in KEYS
