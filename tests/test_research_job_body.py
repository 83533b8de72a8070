"""The research job's request: the web scope where OpenAI's ``web_search`` takes it (allowed
domains, the user's location, always sent), every source a search used (``include``), the
flex tier and its refusal; and what the job's reply then gives the report: the pages
consulted and not cited, and no citation outside the scope."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, get_args

import openai
import pytest
from openai.types.responses import (
    Response,
    response_create_params,
    response_includable,
    web_search_preview_tool_param,
    web_search_tool_param,
)
from openai.types.responses.service_tier import ServiceTier

from deep_research.adapters.report_html import render_html
from deep_research.adapters.web.openai_jobs import SOURCES_INCLUDE, JobSpec
from deep_research.adapters.web.output import extract_report
from deep_research.core.coverage import dropped
from deep_research.core.models import ResearchNode
from deep_research.core.report import Report
from deep_research.core.scope import WebScope
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import Citation, FakeOpenAI, ResearchReport, ResearchRequest
from tests.fake_openai_payloads import StoredResponse, inline_link, response_object
from tests.world import ResearchWorld, plan_task

QUESTION = "Which vector databases compact deleted rows in the background?"
SCOPE = WebScope(
    domains=("example.com", "docs.example.org"),
    exclude_domains=("spam.example.com",),
    since=date(2025, 1, 1),
    location="Berlin, Brandenburg, DE",
)


def keys(typed_dict: Any) -> set[str]:
    return set(typed_dict.__annotations__)


# --- the request --------------------------------------------------------------------------


def test_the_body_sends_what_the_sdk_declares_of_the_scope_and_the_tier() -> None:
    body = JobSpec("gpt-5.5", scope=SCOPE, service_tier="flex").body("d", "u", with_summary=False)
    [tool] = body["tools"]
    assert tool == {
        "type": "web_search",
        "filters": {"allowed_domains": ["example.com", "docs.example.org"]},
        "user_location": {
            "type": "approximate",
            "city": "Berlin",
            "region": "Brandenburg",
            "country": "DE",
        },
    }
    assert body["include"] == ["web_search_call.action.sources"]
    assert body["service_tier"] == "flex"
    # Every name is one the installed SDK (3.57) declares for the Responses API.
    assert set(tool) <= keys(web_search_tool_param.WebSearchToolParam)
    assert set(tool["filters"]) <= keys(web_search_tool_param.Filters)
    assert set(tool["user_location"]) <= keys(web_search_tool_param.UserLocation)
    assert set(body) <= keys(response_create_params.ResponseCreateParamsBase)
    assert SOURCES_INCLUDE in get_args(response_includable.ResponseIncludable)
    assert "flex" in get_args(get_args(ServiceTier)[0])
    # OpenAI has no filter for excluded domains, nor for dates: neither is sent as one (the
    # user message asks for them in words: test_deep_research_branch).
    assert keys(web_search_tool_param.Filters) == {"allowed_domains"}
    assert "spam.example.com" not in json.dumps(body)
    assert "2025-01-01" not in json.dumps(body)


def test_no_place_known_is_an_approximate_location_with_no_fields() -> None:
    """Left out, OpenAI's ``user_location`` defaults to the United States."""
    body = JobSpec("gpt-5.5").body("d", "u", with_summary=False)
    assert body["tools"] == [{"type": "web_search", "user_location": {"type": "approximate"}}]
    assert "service_tier" not in body, "the default tier is not sent"


def test_the_legacy_tool_gets_only_what_it_takes() -> None:
    spec = JobSpec("o3-deep-research", scope=SCOPE)
    body = spec.body("d", "u", with_summary=False)
    assert "include" not in body, "the retired models' replies predate the sources include"
    [tool] = body["tools"]
    assert tool["type"] == "web_search_preview"
    assert set(tool) <= keys(web_search_preview_tool_param.WebSearchPreviewToolParam)
    assert tool["user_location"]["city"] == "Berlin"
    assert "filters" not in keys(web_search_preview_tool_param.WebSearchPreviewToolParam)


def test_another_scope_or_tier_is_another_job() -> None:
    plain = JobSpec("gpt-5.5")
    keys_ = {
        plain.cache_key(),
        JobSpec("gpt-5.5", scope=SCOPE).cache_key(),
        JobSpec("gpt-5.5", scope=SCOPE.model_copy(update={"location": "Lyon, FR"})).cache_key(),
        JobSpec("gpt-5.5", scope=WebScope(exclude_domains=("spam.example.com",))).cache_key(),
        JobSpec("gpt-5.5", service_tier="flex").cache_key(),
    }
    assert len(keys_) == 5
    assert JobSpec("gpt-5.5", scope=WebScope()).cache_key() == plain.cache_key()
    assert JobSpec("gpt-5.5", service_tier="flex").describe() == "gpt-5.5 (effort high, flex tier)"
    assert plain.describe() == "gpt-5.5 (effort high)"


# --- the flex tier ---------------------------------------------------------------------------


def test_a_flex_refusal_stops_the_run_in_one_line_naming_the_setting(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1"), plan_task("t2")]]).install(fake_openai)
    fake_openai.refuse_flex = True
    code, out, err = cli(env, QUESTION, "--web-tier", "flex")
    assert code == 3, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: the provider refused the flex service tier for gpt-5.5")
    assert "start the run again with DEEP_RESEARCH_WEB_TIER=default" in last
    assert "without --web-tier flex" in last
    assert "Unsupported service_tier: flex" in last
    assert err.count("flex service tier") == 1, "said once, not once per branch"
    assert not fake_openai.response_ids, "a refusal created nothing"
    [session] = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    state = session_state(env, session.name)
    assert state["status"] == "failed"
    assert "flex service tier" in state["stop_detail"]
    for node in state["nodes"].values():  # requeued, no intent left: nothing may be running
        assert (node["status"], node["remote_jobs"], node["job_intents"]) == ("pending", {}, {})
    # --json: the one object a script reads, with the settings' code.
    code, out, _ = cli(env, QUESTION, "--web-tier", "flex", "--json")
    error = json.loads(out)["error"]
    assert (code, error["code"], error["exit_code"]) == (3, "invalid_settings", 3)


def test_a_flex_run_sends_the_tier_and_saves_it(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    data = run_json(env | {"DEEP_RESEARCH_WEB_TIER": "flex"}, QUESTION)
    assert data["status"] == "complete"
    [create] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert create["service_tier"] == "flex"
    state = session_state(env, data["session_id"])
    assert state["run_spec"]["web_tier"] == "flex"
    assert state["nodes"]["t1"]["researched_by"] == "gpt-5.5 (effort high, flex tier)"


# --- the reply: sources consulted, citations out of scope -----------------------------------


async def test_the_fake_sends_search_sources_only_when_the_retrieve_asks(
    fake_openai: FakeOpenAI,
) -> None:
    """As the API: a reply holds what its own request includes; the create's ``include``
    is not carried to a later retrieve."""
    fake_openai.polls_to_complete = 0
    fake_openai.script_research(
        [
            ResearchReport.from_claims(
                [("Chroma compacts in the background.", "https://example.com/a", "A")],
                consulted=("https://example.com/b",),
            )
        ]
    )
    client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    created = await client.responses.create(
        model="gpt-5.5",
        input="q",
        background=True,
        tools=[{"type": "web_search"}],
        include=[SOURCES_INCLUDE],
    )
    found = []
    for include in ([], [SOURCES_INCLUDE]):
        done = await client.responses.retrieve(created.id, include=include or openai.omit)
        [search] = [i for i in done.output if i.type == "web_search_call"][:1]
        found.append([s.url for s in search.action.sources or []])  # type: ignore[union-attr]
    await client.close()
    assert found == [[], ["https://example.com/a", "https://example.com/b"]]
    gets = [r.query for r in fake_openai.requests if r.method == "GET"]
    assert gets == [{}, {"include[]": [SOURCES_INCLUDE]}], "the SDK's encoding of a list"


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "web_search", "exclude_domains": ["a.com"]}, "tools[0].exclude_domains"),
        (
            {"type": "web_search", "filters": {"blocked_domains": ["a.com"]}},
            "tools[0].filters.blocked_domains",
        ),
        (
            {"type": "web_search", "user_location": {"type": "approximate", "country": "Berlin"}},
            "tools[0].user_location.country",
        ),
    ],
)
async def test_the_fake_refuses_a_web_search_tool_the_api_would(
    fake_openai: FakeOpenAI, tool: dict[str, Any], param: str
) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        await client.responses.create(
            model="gpt-5.5",
            input="q",
            background=True,
            tools=[tool],  # type: ignore[list-item]
        )
    await client.close()
    assert refused.value.param == param
    assert not [r for r in fake_openai.requests if r.method == "GET"], "nothing was created"


async def test_every_scope_the_options_take_is_a_body_the_fake_accepts(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.polls_to_complete = 0
    client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key="test", max_retries=0)
    for place in ("", "DE", "Berlin", "Berlin, DE", "Austin, Texas, US"):
        spec = JobSpec(model="gpt-5.5", scope=WebScope(domains=("arxiv.org",), location=place))
        body = spec.body("developer", "user", with_summary=False)
        created = await client.responses.create(**body)
        assert created.id
    await client.close()


def reply(report: ResearchReport) -> Response:
    stored = StoredResponse("resp_x", "gpt-5.5", {}, report, 0, False, "completed")
    stored.finish("completed")
    return Response.model_validate(response_object(stored))


def test_a_citation_out_of_scope_leaves_neither_marker_nor_link() -> None:
    """Its sentence stays when a page in scope supports it too."""
    docs, spam = "[docs](https://docs.example.org/c)", "[spam](https://spam.example.com/p)"
    response = reply(
        ResearchReport(
            text=f"Deletes are compacted by {docs}, and {spam} says otherwise.",
            citations=(
                Citation("https://docs.example.org/c", "Docs", docs),
                Citation("https://spam.example.com/p", "Spam", spam),
            ),
        )
    )
    text, citations, dropped = extract_report(response, SCOPE)
    assert text == "Deletes are compacted by docs[1], and spam says otherwise."
    assert [c.url for c in citations] == ["https://docs.example.org/c"]
    assert dropped == ["https://spam.example.com/p"]
    assert len(extract_report(response)[1]) == 2, "no scope: every citation kept"
    assert extract_report(response)[2] == []


SPAM = "https://spam.example.com/p"
DOCS = "https://docs.example.org/c"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # after the full stop, within a line
            f"Chroma compacts rows {inline_link(DOCS)}. Deletes are instant {inline_link(SPAM)}."
            " Milvus compacts too.",
            "Chroma compacts rows[1]. Milvus compacts too.",
        ),
        (  # a link after the sentence's full stop stands for that sentence
            f"Chroma compacts rows {inline_link(DOCS)}. Deletes are instant. {inline_link(SPAM)}",
            "Chroma compacts rows[1].",
        ),
        (  # ... also on a line of its own
            f"Chroma compacts rows {inline_link(DOCS)}.\nDeletes are instant. {inline_link(SPAM)}",
            "Chroma compacts rows[1].",
        ),
        (  # a list item that is only the claim goes, line and all
            f"- Chroma compacts rows {inline_link(DOCS)}.\n- Deletes are instant "
            f"{inline_link(SPAM)}.\n- Milvus compacts too.",
            "- Chroma compacts rows[1].\n- Milvus compacts too.",
        ),
        (  # at a line's start the bullet stays, with what follows the claim
            f"- Deletes are instant {inline_link(SPAM)}. Chroma compacts rows {inline_link(DOCS)}.",
            "- Chroma compacts rows[1].",
        ),
        (  # the same sentence cited twice out of scope is taken out once
            f"Deletes are instant {inline_link(SPAM)} {inline_link(SPAM + '2')}. "
            f"Chroma compacts rows {inline_link(DOCS)}.",
            "Chroma compacts rows[1].",
        ),
    ],
)
def test_a_claim_whose_only_source_is_out_of_scope_is_taken_out(text: str, expected: str) -> None:
    links = {DOCS: "Docs", SPAM: "Spam", SPAM + "2": "Spam 2"}
    found = tuple(Citation(url, title, inline_link(url)) for url, title in links.items())
    response = reply(
        ResearchReport(text=text, citations=tuple(c for c in found if c.quote in text))
    )
    marked, citations, dropped = extract_report(response, SCOPE)
    assert marked == expected
    assert "instant" not in marked
    assert [c.url for c in citations] == [DOCS]
    assert [c.claim for c in citations] == ["Chroma compacts rows."]
    assert dropped
    assert all(u.startswith("https://spam.example.com/") for u in dropped)


def scoped_report(request: ResearchRequest) -> ResearchReport:
    """A job citing one page in scope and one excluded, its searches having used more."""
    return ResearchReport.from_claims(
        [
            ("Chroma compacts deleted rows in the background.", "https://docs.example.org/c", "C"),
            ("A spam page claims deletes are instant.", "https://spam.example.com/p", "Spam"),
        ],
        consulted=(
            "https://example.com/consulted",
            "https://www.docs.example.org/c/?utm_source=openai",  # the cited page again
            "https://spam.example.com/other",  # excluded
            "https://elsewhere.org/page",  # outside the allowed domains
        ),
    )


def test_a_citation_outside_the_scope_is_dropped_and_the_consulted_pages_listed(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(plans=[[plan_task("t1")]]).install(fake_openai)
    fake_openai.research_handler = scoped_report
    flags = ("--domains", "example.com,docs.example.org", "--exclude-domains", "spam.example.com")
    data = run_json(env, QUESTION, *flags)
    assert data["status"] == "complete"
    state = session_state(env, data["session_id"])
    cited = [s["url"] for s in state["sources"].values()]
    assert cited == ["https://docs.example.org/c"], "the claim check never reads the excluded"
    node = state["nodes"]["t1"]
    assert node["dropped_citations"] == ["https://spam.example.com/p"]
    assert node["consulted"] == ["https://example.com/consulted"], "sent by the poll's include"
    assert "spam.example.com" not in node["notes"]
    # What the notes are written from: the job's report without the claim only the
    # excluded page supports.
    [compressed] = [
        json.dumps(r.body)
        for r in fake_openai.requests
        if r.path == "/v1/chat/completions" and "Chroma compacts deleted" in json.dumps(r.body)
    ]
    assert "deletes are instant" not in compressed
    polls = [r for r in fake_openai.requests if r.method == "GET" and "/responses/" in r.path]
    assert polls
    assert all(r.query == {"include[]": [SOURCES_INCLUDE]} for r in polls)
    [create] = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert "Never use or cite pages on: spam.example.com." in create["input"][1]["content"]
    report = Path(data["report_path"]).read_text()
    assert "spam.example.com/p" not in report  # (the footer names the scope)
    assert (
        "1 cited page outside the web scope was dropped (its searches were still paid for)"
        in report
    )
    sources = report.split("## Sources", 1)[1]
    consulted = (
        "_Consulted, not cited (1):_ [example.com/consulted](<https://example.com/consulted>)"
    )
    assert consulted in sources
    assert "elsewhere.org" not in report
    saved = Report.model_validate_json(Path(data["report_path"]).with_suffix(".json").read_text())
    assert saved.consulted == ["https://example.com/consulted"]


def test_the_limitations_count_each_dropped_page_once_whatever_scope_it_left() -> None:
    """Pages, not citations; an excluded domain or one outside ``--domains`` alike."""
    first = ResearchNode(
        id="t1",
        question="q",
        dropped_citations=["https://spam.example.com/p", "https://elsewhere.org/x"],
    )
    again = ResearchNode(
        id="t2",
        question="q",
        dropped_citations=["https://www.spam.example.com/p/?utm_source=openai"],
    )
    assert dropped([first, again]) == [
        "- **Out of scope:** 2 cited pages outside the web scope were dropped (their "
        "searches were still paid for)."
    ]
    assert dropped([again]) == [
        "- **Out of scope:** 1 cited page outside the web scope was dropped (its searches "
        "were still paid for)."
    ]
    assert dropped([ResearchNode(id="t3", question="q")]) == []


def test_the_html_report_lists_the_consulted_pages_collapsed() -> None:
    report = Report(
        title="q", status="s", consulted=["https://example.com/a", "javascript:alert(1)"]
    )
    page = render_html(report)
    assert "<details><summary>Consulted, not cited (2)</summary><ul>" in page
    assert '<a href="https://example.com/a">example.com/a</a>' in page
    assert 'href="javascript' not in page, "a link only to an http(s) address"
    assert report.markdown.index("## Sources") < report.markdown.index("Consulted, not cited")


@pytest.mark.parametrize(("created_with", "asked"), [(True, True), (True, False), (False, True)])
def test_the_fake_follows_the_include_of_the_request_it_answers(
    created_with: bool, asked: bool
) -> None:
    """Kept honest: a reply follows its own request, never the create's (nor the test's
    wish); as the API, which does not carry a create's ``include`` to a later retrieve."""
    body: dict[str, Any] = {"model": "gpt-5.5", "input": "q", "background": True}
    if created_with:
        body["include"] = [SOURCES_INCLUDE]
    stored = StoredResponse(
        id="resp_x",
        model="gpt-5.5",
        body=body,
        report=ResearchReport.from_claims([("A claim.", "https://example.com/a", "A")]),
        polls_left=0,
        held=False,
        final_status="completed",
    )
    stored.finish("completed")
    reply = response_object(stored, [SOURCES_INCLUDE] if asked else [])
    actions = [i["action"] for i in reply["output"] if "action" in i]
    searches = [a for a in actions if a["type"] == "search"]
    assert searches
    assert all(("sources" in a) == asked for a in searches)
