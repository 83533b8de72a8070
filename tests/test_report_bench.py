"""The facts-mode fake behind bench/report.py is honest: its copier keeps the facts of its
prompt in order with their own markers, stops within its limits, and never invents a fact;
its research jobs cite each fact to its own page; the bench counts only what the body
states with the right citation."""

from __future__ import annotations

from openai.types.responses import Response

from bench.facts import Fact, FactsWorld, Limits, copy_facts, facts_in, stated_limits
from bench.report import retention, sections
from deep_research.adapters.llm.llm import load_prompt
from deep_research.adapters.web.output import extract_report
from deep_research.core.models import Citation
from deep_research.core.report import Report, ReportNote
from tests.fake_openai import ChatRequest
from tests.fake_openai_payloads import StoredResponse, response_object

PROMPT = (
    "Current summary:\nThe value of FACT-02-1 is 10104 [S3]. Background without facts.\n\n"
    "New findings:\n### What is known about aspect 01?\n"
    "- FACT-01-2 stands at 10201 [S7][S8] in the first survey.\n"
    "- Measured directly, FACT-01-1 has the value 10298 [S9].\n"
)
UNLIMITED = Limits()


def test_the_copier_keeps_every_fact_in_prompt_order_with_its_markers() -> None:
    out = copy_facts(PROMPT, UNLIMITED)
    assert out == (
        "The value of FACT-02-1 is 10104 [S3]. The value of FACT-01-2 is 10201 [S7][S8]. "
        "The value of FACT-01-1 is 10298 [S9]."
    )
    assert facts_in(out) == facts_in(PROMPT)


def test_a_fact_is_read_to_its_own_number_never_past_another_tag() -> None:
    assert facts_in("FACT-01-1 and FACT-01-2 is 10201 [3].") == [
        Fact("FACT-01-2", "10201", ("[3]",))
    ]
    # A fact stated twice is copied once, as first stated.
    assert facts_in("FACT-01-1 is 12345 [1]. Again: FACT-01-1 is 12345 [2].") == [
        Fact("FACT-01-1", "12345", ("[1]",))
    ]


def test_the_copier_keeps_a_facts_marker_form() -> None:
    local = copy_facts("FACT-03-1 has the value 10007 [3][12].", UNLIMITED)
    assert local == "The value of FACT-03-1 is 10007 [3][12]."
    session = copy_facts("FACT-03-1 has the value 10007 [S41].", UNLIMITED)
    assert session == "The value of FACT-03-1 is 10007 [S41]."
    # An escaped bracket is literal text, not a citation: the fact is kept uncited.
    literal = copy_facts(r"FACT-03-1 has the value 10007 \[3\].", UNLIMITED)
    assert literal == "The value of FACT-03-1 is 10007."


def test_the_copier_stops_before_its_token_cap() -> None:
    full = copy_facts(PROMPT, UNLIMITED)
    first_two = "The value of FACT-02-1 is 10104 [S3]. The value of FACT-01-2 is 10201 [S7][S8]."
    cap = (len(first_two) + 3) // 4  # tokens: the third sentence does not fit
    capped = copy_facts(PROMPT, stated_limits("", cap))
    assert capped == first_two
    assert len(capped) <= cap * 4
    assert full.startswith(capped)
    # Counted with what goes before it (a heading).
    assert copy_facts(PROMPT, Limits(chars=len("## A\n\n") + 10), "## A\n\n") == (
        "## A\n\nNo facts were given."
    )


def test_the_copier_stops_at_a_limit_its_instructions_state() -> None:
    system = "Write terse notes.\n- At most 16 words, as bullets."
    assert stated_limits(system, 16_000) == Limits(chars=64_000, words=16)
    out = copy_facts(PROMPT, stated_limits(system, 16_000))
    assert len(out.split()) <= 16
    assert [f.tag for f in facts_in(out)] == ["FACT-02-1", "FACT-01-2"]


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
    assert facts_in(copy_facts("No facts at all, only 2024 and [S3].", UNLIMITED)) == []
    for cap in (5, 20, 40, None):
        out = copy_facts(PROMPT, stated_limits("", cap))
        stated = set(facts_in(PROMPT))
        assert set(facts_in(out)) <= stated


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
    section = chat(world, "You write one section of a research report", PROMPT)
    assert section == copy_facts(PROMPT, UNLIMITED)
    lead = chat(world, "You write the opening of a research report", PROMPT)
    assert lead == copy_facts(PROMPT, UNLIMITED)
    assert world.calls == {"planner": 2, "judge": 1, "outline": 1, "section": 1, "lead": 1}


def test_a_research_job_cites_each_fact_to_its_own_page() -> None:
    world = FactsWorld(branches=7, facts_per_job=3)
    report = world.report(7)
    stored = StoredResponse("resp_x", "o3-deep-research", {}, report, 0, False, "completed")
    stored.finish("completed")
    text, citations = extract_report(Response.model_validate(response_object(stored)))
    stated = facts_in(text)
    assert [f.tag for f in stated] == ["FACT-07-1", "FACT-07-2", "FACT-07-3"]
    for fact in stated:
        gathered = world.gathered[fact.tag]
        assert fact.value == gathered.value
        (marker,) = fact.markers
        assert citations[int(marker.strip("[]")) - 1].url == gathered.url
    assert len({g.url for g in world.gathered.values()}) == 3
    assert len({g.value for g in world.gathered.values()}) == 3


def test_retention_counts_only_the_body_citing_the_facts_own_page() -> None:
    world = FactsWorld(branches=1, facts_per_job=4)
    world.report(1)
    g = world.gathered
    pages = [Citation(kind="web", url=g[f"FACT-01-{j}"].url) for j in (1, 2, 3)]
    lead = (
        f"The value of FACT-01-1 is {g['FACT-01-1'].value} [1]. "  # kept
        f"The value of FACT-01-2 is {g['FACT-01-2'].value} [1]. "  # another fact's page
        f"The value of FACT-01-3 is 99999 [3]."  # a wrong number
    )
    report = Report(
        title="q",
        status="",
        lead=lead,
        limitations=[f"- FACT-01-4 is {g['FACT-01-4'].value} [1]."],  # not the body
        sources=pages,
        notes=[
            ReportNote(
                node_id="t01",
                question="q",
                meta="",
                body=f"FACT-01-4 is {g['FACT-01-4'].value} [1].",
            )
        ],
    )
    assert retention(report, g) == 0.25
    assert sections(report.body) == 1
