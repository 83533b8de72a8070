"""The one place chat models are called (chains/llm.py), against the fake OpenAI server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import openai
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from deep_research.adapters.llm.judge import LLMJudge
from deep_research.adapters.llm.llm import CUT_OFF_NOTE, SLOW_NOTE, ChatModel
from deep_research.adapters.llm.params import reasoning_room
from deep_research.adapters.llm.server import ChatServer
from deep_research.core.errors import ProviderError, StructuredOutputError
from deep_research.core.models import Plan
from deep_research.core.ports import JudgeRequest
from tests.fake_openai import ChatReply, FakeOpenAI, Fault
from tests.fakes import RecordingMeter

PLAN = {"rationale": "r", "tasks": []}


def model(make: Callable[..., ChatOpenAI], cap: int = 1000) -> ChatModel:
    chat = make(model="gpt-6-sol", max_tokens=cap, reasoning_effort="low", max_retries=0)
    return ChatModel(chat, "gpt-6-sol", "planner", structured_retries=0)


def caps(fake: FakeOpenAI) -> list[int | None]:
    return [r.body.get("max_completion_tokens") for r in fake.requests]


async def test_a_structured_reply_cut_off_is_retried_once_with_twice_the_cap(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script(
        "Plan",
        [
            ChatReply(PLAN, finish_reason="length", prompt_tokens=50, completion_tokens=1000),
            ChatReply(PLAN, prompt_tokens=50, completion_tokens=1500),
        ],
    )
    meter = RecordingMeter()
    plan = await model(chat_openai).structured(Plan, [HumanMessage("plan")], meter)
    assert plan == Plan.model_validate(PLAN)
    assert caps(fake_openai) == [1000, 2000]
    # The cut-off reply's tokens are billed too.
    assert [(r[2].input_tokens, r[2].output_tokens) for r in meter.records] == [
        (50, 1000),
        (50, 1500),
    ]


async def test_a_reply_cut_off_twice_fails_naming_the_setting(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script("Plan", [ChatReply(PLAN, finish_reason="length")] * 2)
    meter = RecordingMeter()
    with pytest.raises(StructuredOutputError, match="DEEP_RESEARCH_MAX_TOKENS_PER_CALL"):
        await model(chat_openai).structured(Plan, [HumanMessage("plan")], meter)
    assert caps(fake_openai) == [1000, 2000], "bounded: one bigger try, not more"
    assert len(meter.records) == 2


async def test_a_structured_call_sends_a_strict_schema_and_bills_its_reply(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script("Plan", [ChatReply(PLAN, prompt_tokens=40, completion_tokens=9)])
    meter = RecordingMeter()
    plan = await model(chat_openai).structured(Plan, [HumanMessage("plan")], meter)
    assert plan == Plan.model_validate(PLAN)
    (request,) = fake_openai.requests
    schema = request.body["response_format"]["json_schema"]
    assert (schema["name"], schema["strict"]) == ("Plan", True)
    assert schema["schema"]["additionalProperties"] is False
    assert [(r[2].input_tokens, r[2].output_tokens) for r in meter.records] == [(40, 9)]


async def test_a_refused_structured_call_is_asked_again_then_fails_naming_the_refusal(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script("Plan", [ChatReply(PLAN, refusal="I cannot help with that.")] * 2)
    chat = ChatModel(model(chat_openai).chat, "gpt-6-sol", "planner", structured_retries=1)
    meter = RecordingMeter()
    with pytest.raises(StructuredOutputError, match="refused: I cannot help with that"):
        await chat.structured(Plan, [HumanMessage("plan")], meter)
    assert fake_openai.count("/v1/chat/completions") == 2
    assert len(meter.records) == 2, "a refusal is billed too"


async def test_a_reply_off_the_schema_is_asked_again(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script("Plan", [ChatReply({"rationale": "r"}), ChatReply(PLAN)])
    chat = ChatModel(model(chat_openai).chat, "gpt-6-sol", "planner", structured_retries=1)
    plan = await chat.structured(Plan, [HumanMessage("plan")], RecordingMeter())
    assert plan == Plan.model_validate(PLAN)
    assert fake_openai.count("/v1/chat/completions") == 2


async def test_a_strict_reply_that_does_not_validate_is_billed_and_shown_back(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    """A server that enforces the schema's shape but not every check of ours (a grammar
    without number bounds) sends a reply the schema refuses: it was generated, so billed,
    and the repair shows it to the model with what was wrong."""
    off = ChatReply({"rationale": "r"}, prompt_tokens=30, completion_tokens=5)
    fake_openai.script("Plan", [off, ChatReply(PLAN, prompt_tokens=40, completion_tokens=9)])
    chat = ChatModel(model(chat_openai).chat, "gpt-6-sol", "planner", structured_retries=1)
    meter = RecordingMeter()
    plan = await chat.structured(Plan, [HumanMessage("plan")], meter)
    assert plan == Plan.model_validate(PLAN)
    assert [(r[2].input_tokens, r[2].output_tokens) for r in meter.records] == [(30, 5), (40, 9)]
    first, second = (r.body for r in fake_openai.requests)
    assert first["response_format"] == second["response_format"], "still the strict schema"
    assert first["response_format"]["json_schema"]["strict"] is True
    echoed, repair = second["messages"][-2:]
    assert echoed["role"] == "assistant"
    assert '"rationale"' in echoed["content"], "the reply is shown back"
    assert "tasks" in repair["content"], "the repair names the missing field"


async def test_a_plain_text_reply_cut_off_is_flagged(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.script(None, [ChatReply("Half a rep", finish_reason="length")])
    text = await model(chat_openai).text([HumanMessage("write")], RecordingMeter())
    assert text == "Half a rep" + CUT_OFF_NOTE.format(setting="DEEP_RESEARCH_MAX_TOKENS_PER_CALL")


async def test_a_section_cut_off_below_the_ceiling_names_the_setting_that_sized_it(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    """A section is capped from its word count, far below the writer's ceiling: raising
    the ceiling's setting would not lengthen it; the section words would."""
    from deep_research.adapters.llm.writing import LLMAuthor
    from deep_research.core.authoring import SectionRequest
    from deep_research.core.models import SectionPlan

    fake_openai.script(None, [ChatReply("Raft elects a lea", finish_reason="length")] * 2)
    chat = chat_openai(model="gpt-6-sol", max_tokens=16_000, reasoning_effort="low", max_retries=0)
    writer = ChatModel(chat, "gpt-6-sol", "synthesizer", structured_retries=0)
    author = LLMAuthor(writer.capped(16_000, "DEEP_RESEARCH_SECTION_MAX_TOKENS"))
    request = SectionRequest(
        question="How do Raft and Paxos elect a leader?",
        section=SectionPlan(id="s1", title="Raft", question="How does Raft elect?", node_ids=[]),
        others=(),
        evidence=("Raft elects a leader by randomized timeouts [S1].",),
        related=(),
        max_words=200,
    )
    text = await author.section(request, RecordingMeter())
    assert fake_openai.requests[-1].body["max_completion_tokens"] < 16_000, "capped lower"
    assert text == "Raft elects a lea" + CUT_OFF_NOTE.format(
        setting="DEEP_RESEARCH_REPORT_SECTION_WORDS"
    )
    # The lead is sized by no setting: its note says the model ran on, naming none.
    lead = await writer.text([HumanMessage("lead")], RecordingMeter(), reply_tokens=400)
    assert "DEEP_RESEARCH" not in lead
    assert lead.endswith("far more than it was asked for: the model may be repeating itself.]_")


async def test_a_malformed_text_reply_is_asked_again(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.inject(Fault("malformed", path_prefix="/v1/chat/completions"))
    # The server answered the first ask too, but its body arrived cut: a second reply is used.
    fake_openai.script(
        None, [ChatReply("Lost"), ChatReply("A whole reply", prompt_tokens=7, completion_tokens=3)]
    )
    chat = chat_openai(model="gpt-6-sol", max_tokens=100, reasoning_effort="low", max_retries=0)
    meter = RecordingMeter()
    text = await ChatModel(chat, "gpt-6-sol", "synthesizer", structured_retries=1).text(
        [HumanMessage("write")], meter
    )
    assert text == "A whole reply"
    assert fake_openai.faults_pending() == 0
    assert fake_openai.count("/v1/chat/completions") == 2
    assert [(r[2].input_tokens, r[2].output_tokens) for r in meter.records] == [(7, 3)]


async def test_malformed_text_replies_fail_after_the_bounded_retries(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    fake_openai.inject(Fault("malformed", path_prefix="/v1/chat/completions", times=2))
    chat = chat_openai(model="gpt-6-sol", max_tokens=100, reasoning_effort="low", max_retries=0)
    with pytest.raises(ProviderError, match="malformed"):
        await ChatModel(chat, "gpt-6-sol", "synthesizer", structured_retries=1).text(
            [HumanMessage("write")], RecordingMeter()
        )
    assert fake_openai.count("/v1/chat/completions") == 2


async def test_the_writer_rewrites_a_claim_from_its_passages_within_its_cap(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    from deep_research.adapters.llm.writing import LLMAuthor
    from deep_research.core.authoring import REVISION_REPLY_TOKENS, RevisionRequest

    fake_openai.script(None, [ChatReply("The limit is 10 requests a second [2].")])
    chat = chat_openai(model="gpt-6-sol", max_tokens=4000, reasoning_effort="low", max_retries=0)
    author = LLMAuthor(ChatModel(chat, "gpt-6-sol", "synthesizer", structured_retries=0))
    request = RevisionRequest(
        question="How fast may a client call the API?",
        section="Limits",
        sentence="The limit is 12 requests a second [2].",
        passages=((2, "Clients may send at most 10 requests a second."),),
        problems=("[2] contradicted: differs in number 12",),
    )
    meter = RecordingMeter()
    assert await author.revise(request, meter) == "The limit is 10 requests a second [2]."
    sent = fake_openai.requests[-1]
    # The reply's own size, plus room for the reasoning a gpt-6 model at "low" does first.
    room = reasoning_room("gpt-6-sol", "low")
    assert sent.body.get("max_completion_tokens") == min(4000, REVISION_REPLY_TOKENS + room)
    prompt = str(sent.body["messages"])
    assert "You correct one sentence of a research report" in prompt
    for part in (request.sentence, request.problems[0], "[2] Clients may send at most 10"):
        assert part in prompt
    assert len(meter.records) == 1


async def test_the_writer_condenses_a_chunk_of_evidence_within_its_share(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    from deep_research.adapters.llm.writing import LLMAuthor
    from deep_research.core.authoring import CondenseRequest
    from deep_research.core.models import SectionPlan

    fake_openai.script(None, [ChatReply("- 1,200 sites in 2024 [S3]")])
    chat = chat_openai(model="gpt-6-sol", max_tokens=4000, reasoning_effort="low", max_retries=0)
    author = LLMAuthor(ChatModel(chat, "gpt-6-sol", "synthesizer", structured_retries=0))
    request = CondenseRequest(
        question="How widely is X used?",
        section=SectionPlan(id="s1", title="Adoption", question="Who uses X?", node_ids=["n1"]),
        evidence=("In 2024, X ran on 1,200 sites, the survey found [S3].",),
        max_tokens=250,
    )
    meter = RecordingMeter()
    assert await author.condense(request, meter) == "- 1,200 sites in 2024 [S3]"
    sent = fake_openai.requests[-1]
    room = reasoning_room("gpt-6-sol", "low")
    assert sent.body.get("max_completion_tokens") == 250 + room, "its share, and room to think"
    prompt = str(sent.body["messages"])
    assert "You condense part of the evidence" in prompt
    assert "- In 2024, X ran on 1,200 sites, the survey found [S3]." in prompt
    assert len(meter.records) == 1


async def test_the_judge_reads_the_notes_the_summary_does_not_hold_yet(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    verdict = {
        "is_complete": True,
        "recommend_more_iterations": False,
        "missing_aspects": [],
        "weak_evidence_areas": [],
        "overall_confidence": 0.8,
    }
    fake_openai.script("Verdict", [verdict, verdict])
    judge = LLMJudge(model(chat_openai))
    request = JudgeRequest("q?", "Folded fact [S1].", "## Part 1", "done: 2")
    await judge.judge(request, RecordingMeter())
    await judge.judge(replace(request, unmerged="### b?\nNewest fact [S2]."), RecordingMeter())
    first, second = (str(r.body["messages"]) for r in fake_openai.requests)
    assert "Folded fact [S1]" in first
    assert "not yet merged" not in first
    assert "Findings not yet merged into the summary:\\n### b?\\nNewest fact [S2]." in second


async def test_a_model_that_repeats_its_wrong_reply_is_not_asked_a_third_time(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    """However many repairs are allowed, a repair that would repeat a request already sent
    twice is not sent: the step ends as a structured-output failure (which a first plan
    survives), not as a provider failure."""
    fake_openai.script("Plan", ["this is not json"] * 10)
    chat = replace(model(chat_openai), structured_retries=6)
    with pytest.raises(StructuredOutputError, match="no valid Plan after 3 attempts"):
        await chat.structured(Plan, [HumanMessage("plan")], RecordingMeter())
    bodies = [str(r.body) for r in fake_openai.requests]
    assert len(bodies) == 3
    assert max(bodies.count(b) for b in bodies) == 2


async def test_the_same_request_asked_at_once_by_two_callers_is_sent_and_billed_once(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    """A small model's plan repeats a sub-question: in CI, llama.cpp was sent one branch's
    body 8 times. The run's chat models share one server: the second asker awaits the
    first's answer and pays nothing; a request that differs in anything is sent."""
    fake_openai.latency = 0.2  # both ask while the first is in flight
    fake_openai.script("Plan", [ChatReply(PLAN, prompt_tokens=40, completion_tokens=9)] * 3)
    chat, meter = model(chat_openai), RecordingMeter()
    asked = [HumanMessage("plan")]
    first, second = await asyncio.gather(
        chat.structured(Plan, asked, meter), chat.structured(Plan, asked, meter)
    )
    assert first == second == Plan.model_validate(PLAN)
    assert fake_openai.count("/v1/chat/completions") == 1
    assert len(meter.records) == 1, "billed once, by the caller that sent it"
    await chat.structured(Plan, asked, meter)  # asked again later: answered from the run
    assert fake_openai.count("/v1/chat/completions") == 1
    await replace(chat, role="judge").structured(Plan, asked, meter)
    await chat.structured(Plan, [HumanMessage("plan again")], meter)
    assert fake_openai.count("/v1/chat/completions") == 3


async def local_model(fake: FakeOpenAI, pools: list[openai.DefaultAsyncHttpxClient]) -> ChatModel:
    """smollm2 on a llama-server whose replies take longer than the client waits (0.5 s)."""
    fake.add_model("smollm2")
    pools.append(openai.DefaultAsyncHttpxClient())
    chat = ChatOpenAI(
        base_url=fake.base_url,
        api_key="none",
        model="smollm2",
        timeout=0.5,
        max_retries=0,
        http_async_client=pools[-1],
    )
    server = ChatServer(url=fake.base_url, on_openai=False, timeout_seconds=0.5)
    return ChatModel(chat, "smollm2", "synthesizer", structured_retries=0, server=server)


def sent_caps(fake: FakeOpenAI) -> list[int]:
    return [r.body["max_tokens"] for r in fake.requests if r.path == "/v1/chat/completions"]


async def test_off_openai_a_timed_out_call_asks_again_for_half_and_flags_the_cut() -> None:
    """A small local model writing to its cap cannot finish within the timeout: sent again
    unchanged it would time out again (CI's real model did, twice a call). Asked for half,
    it answers, cut off, and the reply says why."""
    pools: list[openai.DefaultAsyncHttpxClient] = []
    with FakeOpenAI(flavor="llama-server") as fake:
        writer = await local_model(fake, pools)
        fake.inject(Fault("slow", path_prefix="/v1/chat/completions", delay=1.5))
        fake.script(None, [ChatReply("Half a rep", finish_reason="length"), ChatReply("late")])
        meter = RecordingMeter()
        text = await writer.text([HumanMessage("write")], meter, reply_tokens=1_000)
        first, retry = sent_caps(fake)
        fake.inject(Fault("slow", path_prefix="/v1/chat/completions", delay=1.5))
        fake.script("Plan", [ChatReply("not json at all", finish_reason="length"), "late"])
        with pytest.raises(StructuredOutputError, match="DEEP_RESEARCH_REQUEST_TIMEOUT_SECONDS"):
            await writer.structured(Plan, [HumanMessage("plan")], meter, reply_tokens=1_000)
        planned = sent_caps(fake)[2:]
    for pool in pools:
        await pool.aclose()
    assert retry == first // 2
    assert text == "Half a rep" + SLOW_NOTE.format(
        cap=retry, setting="DEEP_RESEARCH_REQUEST_TIMEOUT_SECONDS"
    )
    assert meter.records[0][2].output_tokens == first, "the timed-out send billed its cap"
    assert planned == [planned[0], planned[0] // 2], "no bigger cap: it would time out again"
