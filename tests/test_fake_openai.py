"""The fake OpenAI server against the real `openai` SDK and `langchain-openai`.

Clients come from the `openai_client` / `chat_openai` fixtures, one per test, closed at
teardown (why: tests/conftest.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import (
    Response,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_function_web_search import (
    ActionFind,
    ActionOpenPage,
    ActionSearch,
)
from openai.types.responses.response_output_text import AnnotationURLCitation
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import BaseModel, Field

from tests.fake_openai import (
    DEFAULT_MODELS,
    ChatReply,
    ChatRequest,
    Citation,
    FakeOpenAI,
    Fault,
    Flavor,
    ResearchReport,
    ResearchRequest,
)

ROOT = Path(__file__).resolve().parents[1]
CHAT, EMBED, RESEARCH = "gpt-6-luna", "text-embedding-3-small", "gpt-5.5"
USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]


def json_schema_format(name: str) -> ResponseFormatJSONSchema:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": {}}}


class Plan(BaseModel):
    steps: list[str] = Field(description="Ordered research steps.")


MakeClient = Callable[..., openai.AsyncOpenAI]


# --- chat completions ---------------------------------------------------------------------


async def test_langchain_structured_output_round_trip(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    reply = ChatReply(
        {"steps": ["search", "compare"]},
        prompt_tokens=120,
        completion_tokens=30,
        cached_tokens=20,
        reasoning_tokens=5,
    )
    fake_openai.script("Plan", [reply])
    llm = chat_openai()  # its own HTTP pool: see tests/conftest.py
    out = await llm.with_structured_output(Plan, include_raw=True).ainvoke("plan it")

    assert out["parsed"] == Plan(steps=["search", "compare"])
    usage = out["raw"].usage_metadata
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (120, 30, 150)
    assert usage["input_token_details"]["cache_read"] == 20
    assert usage["output_token_details"]["reasoning"] == 5
    # What langchain-openai 1.7 sends: Chat Completions (not the Responses API) with a
    # strict json_schema response format named after the pydantic class.
    (sent,) = fake_openai.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["x-stainless-helper-method"] == "chat.completions.parse"
    fmt = sent.body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Plan"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    fake_openai.assert_scripts_consumed()


async def test_chat_handler_script_and_default(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    seen: list[ChatRequest] = []

    def handler(req: ChatRequest) -> str | None:
        seen.append(req)
        return "routed" if "route me" in req.text else None

    fake_openai.chat_handler = handler
    fake_openai.script("Judge", [{"complete": False}, {"complete": True}])
    c = openai_client()

    routed = await c.chat.completions.create(
        model="gpt-6-luna",
        messages=[{"role": "user", "content": "route me"}],
        max_completion_tokens=7,
    )
    judged = [
        await c.chat.completions.create(
            model="gpt-6-sol", messages=USER, response_format=json_schema_format("Judge")
        )
        for _ in range(2)
    ]
    plain = await c.chat.completions.create(model="gpt-5.4-mini", messages=USER)

    assert routed.choices[0].message.content == "routed"
    assert routed.model == "gpt-6-luna"
    assert [json.loads(r.choices[0].message.content or "") for r in judged] == [
        {"complete": False},
        {"complete": True},
    ]
    assert plain.choices[0].message.content == "This is a fake reply."
    assert [(r.model, r.schema_name, r.max_tokens) for r in seen[:2]] == [
        ("gpt-6-luna", None, 7),
        ("gpt-6-sol", "Judge", None),
    ]


async def test_unscripted_schema_is_a_loud_error(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    with pytest.raises(openai.BadRequestError, match="no chat reply scripted for 'Nobody'"):
        await openai_client().chat.completions.create(
            model=CHAT,
            messages=USER,
            response_format=json_schema_format("Nobody"),
        )
    assert len(fake_openai.errors) == 1
    fake_openai.errors.clear()  # expected here; the fixture fails tests on leftovers


# --- deep research (Responses API) --------------------------------------------------------

REPORT = ResearchReport(
    text="Qdrant filters fast ([qdrant.tech](https://qdrant.tech/a)). pgvector is simple.",
    citations=(
        Citation("https://qdrant.tech/a", "Qdrant docs", "([qdrant.tech](https://qdrant.tech/a))"),
        Citation("https://pg.example/b", "pgvector", "pgvector is simple."),
    ),
    searches=("qdrant filtering", "pgvector ivfflat", "chroma scale"),
    reasoning=("Compare three stores.",),
    input_tokens=1000,
    cached_tokens=100,
    output_tokens=400,
    reasoning_tokens=300,
)


def cited_spans(response: Response) -> list[tuple[str, str]]:
    """(url, cited text) for each url_citation of the final message, as a client reads them."""
    message = response.output[-1]
    assert isinstance(message, ResponseOutputMessage)
    (text,) = message.content
    assert isinstance(text, ResponseOutputText)
    return [
        (a.url, text.text[a.start_index : a.end_index])
        for a in text.annotations
        if isinstance(a, AnnotationURLCitation)
    ]


async def create_research(c: openai.AsyncOpenAI, prompt: str = "Compare stores") -> str:
    resp = await c.responses.create(
        model=RESEARCH,
        input=prompt,
        background=True,
        store=True,
        max_tool_calls=10,
        tools=[{"type": "web_search_preview"}],
    )
    assert resp.status == "queued"
    assert resp.id.startswith("resp_")
    return resp.id


async def test_deep_research_background_poll_to_completed(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    requests: list[ResearchRequest] = []

    def handler(req: ResearchRequest) -> ResearchReport:
        requests.append(req)
        return REPORT

    fake_openai.research_handler = handler
    c = openai_client()
    rid = await create_research(c)

    first = await c.responses.retrieve(rid)
    done = await c.responses.retrieve(rid)

    assert (first.status, done.status) == ("in_progress", "completed")
    assert done.output_text == REPORT.text
    kinds = [item.type for item in done.output]
    assert kinds == ["reasoning"] + ["web_search_call"] * 3 + ["message"]
    reasoning = done.output[0]
    assert isinstance(reasoning, ResponseReasoningItem)
    assert [s.text for s in reasoning.summary] == ["Compare three stores."]
    searches = [i for i in done.output if isinstance(i, ResponseFunctionWebSearch)]
    queries = [s.action.query for s in searches if s.action.type == "search"]
    assert queries == list(REPORT.searches)
    assert cited_spans(done) == [(c.url, c.quote) for c in REPORT.citations]
    assert done.usage is not None
    assert done.usage.input_tokens_details.cached_tokens == 100
    assert done.usage.output_tokens_details.reasoning_tokens == 300
    assert done.usage.total_tokens == 1400
    assert requests[0].input_text == "Compare stores"
    assert requests[0].raw["tools"] == [{"type": "web_search_preview"}]
    assert fake_openai.research_inputs == {"Compare stores": 1}
    assert fake_openai.retrieves[rid] == 2


async def test_held_response_completes_on_release_for_a_new_client(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.hold_responses = True
    fake_openai.script_research([REPORT, ResearchReport("x", status="failed")])
    rid = await create_research(openai_client())
    failing = await create_research(openai_client(), "second")

    for _ in range(3):
        assert (await openai_client().responses.retrieve(rid)).status == "in_progress"
    fake_openai.complete(rid)
    fake_openai.complete(failing)
    resumed = openai_client()  # a restarted process re-attaches by id

    assert (await resumed.responses.retrieve(rid)).output_text == REPORT.text
    failed = await resumed.responses.retrieve(failing)
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.output_text == ""


async def test_cancel(fake_openai: FakeOpenAI, openai_client: MakeClient) -> None:
    fake_openai.hold_responses = True
    c = openai_client()
    rid = await create_research(c)

    cancelled = await c.responses.cancel(rid)

    assert cancelled.status == "cancelled"
    assert (await c.responses.retrieve(rid)).status == "cancelled"
    assert fake_openai.cancels[rid] == 1
    with pytest.raises(openai.NotFoundError):
        await c.responses.retrieve("resp_unknown")


def test_state_survives_a_killed_subprocess_client(fake_openai: FakeOpenAI) -> None:
    fake_openai.hold_responses = True
    child_code = (
        "import openai, sys, threading\n"
        "c = openai.OpenAI(base_url=sys.argv[1], api_key='test')\n"
        "c.responses.create(model='gpt-5.5', input='killed run', background=True,\n"
        "                   tools=[{'type': 'web_search_preview'}])\n"
        "threading.Event().wait()  # hang until killed\n"
    )
    child = subprocess.Popen([sys.executable, "-c", child_code, fake_openai.base_url], cwd=ROOT)
    try:
        fake_openai.wait_for(lambda: bool(fake_openai.response_ids), timeout=30)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    (rid,) = fake_openai.response_ids
    fake_openai.complete(rid)

    resumed = openai.OpenAI(base_url=fake_openai.base_url, api_key="test")
    assert resumed.responses.retrieve(rid).status == "completed"
    assert fake_openai.research_inputs == {"killed run": 1}


async def test_default_report_foreground_and_incomplete(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.script_research([ResearchReport("partial", status="incomplete")])
    c = openai_client()
    incomplete_id = await create_research(c)
    fake_openai.complete(incomplete_id)
    incomplete = await c.responses.retrieve(incomplete_id)
    # Nothing scripted any more: a default report with valid citations, answered at once.
    done = await c.responses.create(model=RESEARCH, input="Why is the sky blue?")

    assert (incomplete.status, incomplete.output_text) == ("incomplete", "")
    assert incomplete.incomplete_details is not None
    assert done.status == "completed"
    assert "Why is the sky blue?" in done.output_text
    assert cited_spans(done) == [
        ("https://example.com/a", "Finding one about Why is the sky blue?."),
        ("https://example.org/b", "Finding two, from a second source."),
    ]
    again = await c.responses.retrieve(done.id)
    assert [i.id for i in again.output] == [i.id for i in done.output]
    with pytest.raises(ValueError, match="does not occur"):
        ResearchReport("text", citations=(Citation("https://x", "x", "missing"),))


# --- embeddings ---------------------------------------------------------------------------


async def test_embeddings_are_deterministic_unit_vectors(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    c = openai_client()
    texts = ["vector stores", "vector stores", "bananas are yellow"]
    out = await c.embeddings.create(model="text-embedding-3-small", input=texts)
    small = await c.embeddings.create(model=EMBED, input="vector stores", dimensions=16)

    vectors = [d.embedding for d in out.data]
    assert len(vectors[0]) == fake_openai.embedding_dimensions
    assert vectors[0] == vectors[1] != vectors[2]
    assert all(math.isclose(sum(v * v for v in vec), 1.0, rel_tol=1e-6) for vec in vectors)
    assert len(small.data[0].embedding) == 16
    assert out.usage.total_tokens > 0
    b64 = await c.embeddings.create(model=EMBED, input=texts[:1], encoding_format="base64")
    assert isinstance(b64.data[0].embedding, str)


# --- faults -------------------------------------------------------------------------------


async def test_rate_limit_then_success_is_retried(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.inject(Fault("rate_limit", "/v1/chat/completions", retry_after=0.01))
    c = openai_client(max_retries=2)

    reply = await c.chat.completions.create(model=CHAT, messages=USER)

    assert reply.choices[0].message.content == "This is a fake reply."
    first, second = fake_openai.requests
    assert (first.fault, second.fault) == ("rate_limit", None)
    assert second.headers["x-stainless-retry-count"] == "1"
    assert fake_openai.faults_pending() == 0


async def test_rate_limit_without_retries_surfaces(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.inject(Fault("rate_limit", "/v1/responses"))
    with pytest.raises(openai.RateLimitError) as info:
        await openai_client(max_retries=0).responses.retrieve("resp_x")
    assert info.value.response.headers["retry-after-ms"] == "10"


async def test_server_error_is_retried(fake_openai: FakeOpenAI, openai_client: MakeClient) -> None:
    fake_openai.inject(Fault("server_error", "/v1/embeddings", times=2))
    out = await openai_client(max_retries=2).embeddings.create(model=EMBED, input="x")
    assert len(out.data) == 1
    assert [r.fault for r in fake_openai.requests] == ["server_error", "server_error", None]


async def test_dropped_connection_surfaces(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.inject(Fault("drop", "/v1/embeddings"))
    with pytest.raises(openai.APIConnectionError):
        await openai_client(max_retries=0).embeddings.create(model=EMBED, input="x")
    assert fake_openai.count("/v1/embeddings") == 1


async def test_drop_after_create_shows_a_duplicate_submission(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # The server did the work but the answer was lost: the SDK's retry submits again.
    fake_openai.inject(Fault("drop_after", "/v1/responses"))
    await create_research(openai_client(max_retries=1), "expensive")
    assert fake_openai.research_inputs["expensive"] == 2


async def test_malformed_json_surfaces_as_decode_error(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # Not an openai.APIError: the SDK lets json.JSONDecodeError through, unretried.
    fake_openai.inject(Fault("malformed", "/v1/chat/completions"))
    with pytest.raises(json.JSONDecodeError):
        await openai_client(max_retries=2).chat.completions.create(model=CHAT, messages=USER)
    assert fake_openai.count("/v1/chat/completions") == 1


async def test_slow_response_hits_the_client_timeout(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.inject(Fault("slow", "/v1/chat", delay=5.0))
    c = openai_client(max_retries=0, timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        await c.chat.completions.create(model=CHAT, messages=USER)


async def test_a_reply_is_made_within_the_latency_not_after_it(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # A served model's latency includes its own work: the fake's reply is made while the
    # client waits (so concurrent calls each take `latency`, not latency plus the fake's
    # turns at the GIL), and the client still gets it only once `latency` has passed.
    made = asyncio.Event()
    loop = asyncio.get_running_loop()

    def handler(req: ChatRequest) -> str:
        loop.call_soon_threadsafe(made.set)
        return "made early"

    fake_openai.chat_handler = handler
    fake_openai.latency = 30.0
    call = asyncio.create_task(
        openai_client(max_retries=0).chat.completions.create(model=CHAT, messages=USER)
    )
    await asyncio.wait_for(made.wait(), 10)
    assert not call.done()  # made, and still held back for the rest of the latency
    fake_openai.latency = 0.0
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


# --- recording and lifecycle --------------------------------------------------------------


async def test_authorization_is_never_recorded(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    secret = "sk-do-not-store-me"
    c = openai_client(api_key=secret)
    await c.chat.completions.create(model=CHAT, messages=USER)
    (recorded,) = fake_openai.requests
    assert recorded.authorized
    assert secret not in repr(fake_openai.requests)


async def test_blocking_handler_and_wait_for(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    release = asyncio.Event()
    loop = asyncio.get_running_loop()

    def handler(req: ChatRequest) -> str:
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=10)
        return "released"

    fake_openai.chat_handler = handler
    call = asyncio.create_task(openai_client().chat.completions.create(model=CHAT, messages=USER))
    await asyncio.to_thread(fake_openai.wait_for, lambda: fake_openai.count("/v1/chat") == 1)
    assert not call.done()
    release.set()
    assert (await call).choices[0].message.content == "released"


async def test_stop_cuts_open_connections() -> None:
    with FakeOpenAI() as fake:
        c = openai.AsyncOpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
        await c.chat.completions.create(model=CHAT, messages=USER)  # opens a keep-alive
    async with c:
        with pytest.raises(openai.APIConnectionError):
            await c.chat.completions.create(model=CHAT, messages=USER)


# --- what the real API refuses ------------------------------------------------------------


def error_body(exc: openai.APIStatusError) -> dict[str, object]:
    body = exc.body
    assert isinstance(body, dict)
    return body


async def test_models_the_server_does_not_serve_are_404_model_not_found(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    c = openai_client(max_retries=0)
    with pytest.raises(openai.NotFoundError) as shut_down:
        await c.responses.create(model="o4-mini-deep-research", input="x", background=True)
    with pytest.raises(
        openai.NotFoundError, match=re.escape("`gpt-5.5-2026-01-01` does not exist")
    ):
        await c.chat.completions.create(model="gpt-5.5-2026-01-01", messages=USER)
    with pytest.raises(openai.NotFoundError, match=re.escape("`llama3.1`")):
        await c.embeddings.create(model="llama3.1", input="x")

    assert shut_down.value.code == "model_not_found"
    assert error_body(shut_down.value)["type"] == "invalid_request_error"
    assert fake_openai.response_ids == [], "a refused create creates nothing"
    fake_openai.add_model("llama3.1")
    await c.embeddings.create(model="llama3.1", input="x")
    snapshot = await c.chat.completions.create(model="gpt-5.5-2026-04-23", messages=USER)
    assert snapshot.model == "gpt-5.5-2026-04-23"
    assert fake_openai.errors == [], "refusals are API answers, not fake errors"


async def test_a_shutdown_date_takes_effect_after_it_passes(openai_client: MakeClient) -> None:
    async def answers(today: date, model: str) -> bool:
        with FakeOpenAI(today=today) as fake:
            async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="t") as c:
                try:
                    await c.chat.completions.create(model=model, messages=USER)
                except openai.NotFoundError:
                    return False
                return True

    assert await answers(date(2026, 12, 10), "gpt-5")
    assert not await answers(date(2026, 12, 11), "gpt-5")
    assert await answers(date(2026, 12, 11), "gpt-4.1-mini")
    assert DEFAULT_MODELS["gpt-4.1-mini"] == "2027-01-14"


async def test_model_lookup_and_listing(fake_openai: FakeOpenAI, openai_client: MakeClient) -> None:
    c = openai_client(max_retries=0)
    near = await c.models.retrieve("gpt-5")
    current = await c.models.retrieve("gpt-6-sol")
    with pytest.raises(openai.NotFoundError) as gone:
        await c.models.retrieve("o3-deep-research")  # shut down: the key cannot use it
    listed = [m.id async for m in c.models.list()]

    assert (near.shutdown_date, near.owned_by) == ("2026-12-11", "openai")
    assert current.shutdown_date is None
    assert gone.value.code == "model_not_found"
    assert "gpt-6-sol" in listed
    assert "gpt-5" in listed
    assert "o3-deep-research" not in listed
    assert fake_openai.count("/v1/models", "GET") == 4


async def test_servers_without_a_models_api(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # vLLM, llama.cpp: no GET /v1/models/{id}; some gateways have no list either.
    fake_openai.retrieve_endpoint = False
    fake_openai.add_model("llama3.1")
    c = openai_client(max_retries=0)
    with pytest.raises(openai.NotFoundError, match="no route") as no_route:
        await c.models.retrieve("llama3.1")
    assert no_route.value.code is None
    assert "llama3.1" in [m.id async for m in c.models.list()]
    fake_openai.list_endpoint = False
    with pytest.raises(openai.NotFoundError):
        await c.models.list()


async def test_reasoning_models_refuse_temperature_unless_effort_none(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    c = openai_client(max_retries=0)

    refused = ("unsupported_parameter", "temperature")

    async def chat(model: str, **params: object) -> tuple[str | None, str | None] | None:
        """The refusal's (code, param), or None when the call went through."""
        try:
            await c.chat.completions.create(model=model, messages=USER, **params)  # type: ignore[call-overload]
        except openai.BadRequestError as exc:
            assert "'temperature' is not supported with this model" in exc.message  # noqa: PT017
            return exc.code, exc.param
        return None

    async def responses(model: str, **params: object) -> tuple[str | None, str | None] | None:
        try:
            await c.responses.create(model=model, input="x", **params)  # type: ignore[call-overload]
        except openai.BadRequestError as exc:
            return exc.code, exc.param
        return None

    assert await chat("gpt-6-sol", temperature=0.2) == refused
    assert await chat("gpt-5", temperature=0.2, reasoning_effort="minimal") == refused  # 5.0
    assert await chat("o3", temperature=1) == refused
    assert await chat("gpt-6-sol", temperature=0.2, reasoning_effort="none") is None
    assert await chat("gpt-5.4-mini", temperature=0.2, reasoning_effort="none") is None
    assert await chat("gpt-4.1-mini", temperature=0.2) is None
    assert await chat("gpt-6-sol", reasoning_effort="high") is None
    assert await responses("gpt-5.5", temperature=0.2, reasoning={"effort": "high"}) == refused
    assert await responses("gpt-6.1-terra", temperature=0.2, reasoning={"effort": "none"}) is None
    fake_openai.add_model("openai/gpt-6-sol")  # a gateway's name: the same rules
    assert await chat("openai/gpt-6-sol", temperature=0.2) == refused
    assert fake_openai.response_ids != []
    assert fake_openai.errors == []


async def test_efforts_and_caps_a_model_does_not_take_are_refused_naming_the_param(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # OpenAI's rules as of 2026-11-26 (fake_openai_payloads.EFFORTS_TAKEN), sent directly:
    # the fake must refuse them, or a run's tests could not catch the code sending them.
    c = openai_client(max_retries=0)

    async def chat(model: str, **params: object) -> tuple[str | None, str | None] | None:
        try:
            await c.chat.completions.create(model=model, messages=USER, **params)  # type: ignore[call-overload]
        except openai.BadRequestError as exc:
            return exc.code, exc.param
        return None

    async def responses(model: str, effort: str, **params: object) -> str | None:
        try:
            await c.responses.create(model=model, input="x", reasoning={"effort": effort}, **params)  # type: ignore[call-overload, arg-type]
        except openai.BadRequestError as exc:
            return exc.param
        return None

    effort = ("unsupported_value", "reasoning_effort")
    # No GPT-6 takes minimal; astra, 6.1-sol and 6.2 take no none either.
    for model in ("gpt-6-sol", "gpt-6-luna", "gpt-6.1-terra", "gpt-6-astra", "gpt-6.2-sol"):
        assert await chat(model, reasoning_effort="minimal") == effort, model
    for model in ("gpt-6-astra", "gpt-6.1-sol", "gpt-6.2-astra", "gpt-6.2-sol"):
        assert await chat(model, reasoning_effort="none") == effort, model
        assert await responses(model, "none") == "reasoning.effort", model
        assert await chat(model, reasoning_effort="max") is None, model
    assert await chat("gpt-6-sol", reasoning_effort="none") is None
    assert await chat("gpt-6.1-terra", reasoning_effort="none", temperature=0.2) is None
    assert await chat("gpt-5.5", reasoning_effort="max") == effort, "max came with 5.6"
    assert await chat("gpt-5.6-luna", reasoning_effort="max") is None
    assert await chat("gpt-5-mini", reasoning_effort="minimal") is None
    # temperature only at effort none, on any reasoning model and either API.
    temperature = ("unsupported_parameter", "temperature")
    assert await chat("gpt-6-astra", reasoning_effort="low", temperature=0.2) == temperature
    assert await chat("gpt-6-luna", reasoning_effort="low", temperature=0.2) == temperature
    assert await responses("gpt-6-sol", "low", temperature=0.2) == "temperature"
    assert await responses("gpt-6-sol", "none", temperature=0.2) is None
    # GPT-6 (every reasoning model) takes a chat completion's cap as max_completion_tokens.
    assert await chat("gpt-6-luna", max_tokens=7) == ("unsupported_parameter", "max_tokens")
    assert await chat("gpt-6-luna", max_completion_tokens=7) is None
    assert await chat("gpt-4.1-mini", max_tokens=7) is None
    with pytest.raises(openai.BadRequestError) as refused:
        await c.chat.completions.create(model="gpt-6-astra", messages=USER, reasoning_effort="none")
    assert refused.value.message == (
        "Error code: 400 - Unsupported value: 'none' is not supported with the 'gpt-6-astra' "
        "model. Supported values are: 'low', 'medium', 'high', 'xhigh', and 'max'."
    )
    assert refused.value.type == "invalid_request_error"
    # Only the released GPT-6 ids are served.
    with pytest.raises(openai.NotFoundError):
        await c.chat.completions.create(model="gpt-6-terra", messages=USER)
    assert len(fake_openai.response_ids) == 1, "only the accepted job was created"
    assert fake_openai.errors == []


async def test_langchain_sends_temperature_to_gpt6_but_drops_it_for_gpt5(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    # langchain-openai 1.7 knows gpt-5.x refuses temperature and drops it (unless effort
    # is none); it does not know GPT-6, so a temperature reaches the API and is refused.
    with pytest.raises(openai.BadRequestError, match="'temperature' is not supported"):
        await chat_openai(model="gpt-6-sol", temperature=0.2, max_retries=0).ainvoke("hi")
    await chat_openai(model="gpt-5.5", temperature=0.2).ainvoke("hi")
    await chat_openai(model="gpt-6-sol", temperature=0.2, reasoning_effort="none").ainvoke("hi")
    await chat_openai(model="gpt-6-sol").ainvoke("hi")
    sent = [
        (r.body.get("temperature"), r.body.get("reasoning_effort")) for r in fake_openai.requests
    ]
    assert sent == [(0.2, None), (None, None), (0.2, "none"), (None, None)]


async def test_reasoning_summaries_need_a_verified_organisation(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    c = openai_client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        await c.responses.create(
            model=RESEARCH,
            input="refused",
            background=True,
            reasoning={"effort": "high", "summary": "auto"},
        )
    assert (refused.value.param, refused.value.code) == ("reasoning.summary", "unsupported_value")
    assert "Your organization must be verified" in refused.value.message
    assert (fake_openai.response_ids, fake_openai.research_inputs) == ([], {})

    fake_openai.org_verified = True
    resp = await c.responses.create(
        model=RESEARCH, input="verified", reasoning={"effort": "high", "summary": "auto"}
    )
    assert resp.status == "completed"
    assert fake_openai.errors == []


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"server_url": "https://kb.example.org/mcp", "require_approval": "never"}, "server_label"),
        ({"server_label": "kb", "require_approval": "never"}, "tools[0]"),
        ({"server_label": "kb", "server_url": "https://kb.example.org/mcp"}, "require_approval"),
    ],
)
async def test_a_background_job_refuses_an_mcp_tool_it_could_not_use(
    fake_openai: FakeOpenAI, openai_client: MakeClient, tool: dict[str, str], param: str
) -> None:
    c = openai_client(max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        await c.responses.create(
            model=RESEARCH,
            input="with the KB",
            background=True,
            tools=[{"type": "mcp", **tool}],  # type: ignore[list-item]
        )
    assert str(refused.value.param).endswith(param)
    assert fake_openai.response_ids == []


# --- what real research replies look like -------------------------------------------------


async def test_web_search_actions_and_billed_tool_usage(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    report = ResearchReport(
        "Done.",
        searches=("chroma scale", ("qdrant filter", "qdrant payload index")),
        opens=("https://qdrant.tech/a",),
        finds=(("https://qdrant.tech/a", "payload"),),
    )
    fake_openai.script_research([report, replace(report, tool_usage=False)])
    c = openai_client()
    done = await c.responses.create(model=RESEARCH, input="q")
    bare = await c.responses.create(model=RESEARCH, input="q")

    actions = [i.action for i in done.output if isinstance(i, ResponseFunctionWebSearch)]
    assert [a.type for a in actions] == ["search", "search", "open_page", "find_in_page"]
    first, second, opened, found = actions
    assert isinstance(second, ActionSearch)
    assert (second.query, second.queries) == (
        "qdrant filter",
        ["qdrant filter", "qdrant payload index"],
    )
    assert isinstance(first, ActionSearch)
    assert first.sources is None, "no include asked for web_search_call.action.sources"
    assert isinstance(opened, ActionOpenPage)
    assert opened.url == "https://qdrant.tech/a"
    assert isinstance(found, ActionFind)
    assert (found.url, found.pattern) == ("https://qdrant.tech/a", "payload")
    # Billed per query; opening a page or finding in it is free.
    assert done.tool_usage is not None
    assert done.tool_usage.web_search.num_requests == 3
    assert bare.tool_usage is None


async def test_inline_link_citations_cover_the_link(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    report = ResearchReport.from_claims(
        [
            ("Chroma scales to 10M vectors.", "https://docs.trychroma.com/scale", "Scale"),
            ("Qdrant filters during search", "https://www.qdrant.tech/f", "Filtering"),
            ("Chroma is embedded.", "https://docs.trychroma.com/scale", "Scale"),
        ]
    )
    fake_openai.script_research([report])
    done = await openai_client().responses.create(model=RESEARCH, input="q")

    assert done.output_text.startswith(
        "Chroma scales to 10M vectors ([trychroma.com](https://docs.trychroma.com/scale)). "
        "Qdrant filters during search ([qdrant.tech](https://www.qdrant.tech/f))."
    )
    spans = cited_spans(done)
    assert [text for _, text in spans] == [
        "([trychroma.com](https://docs.trychroma.com/scale))",
        "([qdrant.tech](https://www.qdrant.tech/f))",
        "([trychroma.com](https://docs.trychroma.com/scale))",
    ]
    starts = [c.span(report.text)[0] for c in report.citations]
    assert starts[0] < starts[1] < starts[2], "a repeated link keeps its own span"


async def test_max_output_tokens_cuts_a_report_to_incomplete_with_usage(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.script_research([REPORT, REPORT])
    c = openai_client()
    capped = await c.responses.create(model=RESEARCH, input="q", max_output_tokens=300)
    roomy = await c.responses.create(model=RESEARCH, input="q", max_output_tokens=400)

    assert capped.status == "incomplete"
    assert capped.incomplete_details is not None
    assert capped.incomplete_details.reason == "max_output_tokens"
    assert capped.usage is not None
    assert capped.usage.output_tokens == 300
    assert roomy.status == "completed"


async def test_usage_on_failed_and_cancelled_responses(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.hold_responses = True
    fake_openai.script_research(
        [
            replace(REPORT, status="failed"),
            REPORT,
            replace(REPORT, usage_on_cancel=False),
        ]
    )
    c = openai_client()
    failing, cancelled, bare = [await create_research(c, f"q{i}") for i in range(3)]
    fake_openai.complete(failing)
    failed = await c.responses.retrieve(failing)
    half = await c.responses.cancel(cancelled)
    nothing = await c.responses.cancel(bare)

    assert failed.usage is not None
    assert failed.usage.total_tokens == 1400
    assert half.usage is not None
    assert (half.usage.input_tokens, half.usage.output_tokens) == (1000, 200)
    assert half.tool_usage is not None
    assert half.tool_usage.web_search.num_requests == 1  # 3 searches, half done
    assert nothing.usage is None


async def test_create_reply_times_are_recorded(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    before = time.time()
    rid = await create_research(openai_client())
    # Stamped once the reply is flushed, so possibly just after the client has read it.
    await asyncio.to_thread(fake_openai.wait_for, lambda: rid in fake_openai.create_replied_at)
    assert before <= fake_openai.create_replied_at[rid] <= time.time()


# --- quota, auth and length ---------------------------------------------------------------


async def test_rate_limit_without_retry_after(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.inject(Fault("rate_limit", "/v1/chat", retry_after=0))
    with pytest.raises(openai.RateLimitError) as info:
        await openai_client(max_retries=0).chat.completions.create(model=CHAT, messages=USER)
    assert "retry-after" not in info.value.response.headers
    assert info.value.code == "rate_limit_exceeded"


async def test_insufficient_quota_is_a_429_the_sdk_still_retries(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    # The SDK retries every 429 (no retry-after: ~0.5 s backoff, doubling), out of quota
    # included: only the caller can tell it apart, by `code == "insufficient_quota"`.
    fake_openai.inject(Fault("insufficient_quota", "/v1/responses", times=2))
    with pytest.raises(openai.RateLimitError) as info:
        await openai_client(max_retries=1).responses.create(model=RESEARCH, input="x")
    assert (info.value.code, info.value.type) == ("insufficient_quota", "insufficient_quota")
    assert "retry-after" not in info.value.response.headers
    assert error_body(info.value)["message"] == (
        "You exceeded your current quota, please check your plan and billing details."
    )
    assert fake_openai.count("/v1/responses", "POST") == 2, "one try, one SDK retry"
    assert fake_openai.response_ids == []


async def test_unauthorized(fake_openai: FakeOpenAI, openai_client: MakeClient) -> None:
    fake_openai.inject(Fault("unauthorized", "/v1/models"))
    with pytest.raises(openai.AuthenticationError) as info:
        await openai_client().models.retrieve(CHAT)
    assert info.value.code == "invalid_api_key"
    assert fake_openai.count("/v1/models") == 1, "the SDK does not retry a 401"


async def test_a_structured_output_cut_off_by_length_raises_with_its_usage(
    fake_openai: FakeOpenAI, chat_openai: Callable[..., ChatOpenAI]
) -> None:
    cut = ChatReply('{"steps": ["sea', completion_tokens=50, finish_reason="length")
    fake_openai.script("Plan", [cut])
    llm = chat_openai(max_tokens=50).with_structured_output(
        Plan, method="json_schema", include_raw=True
    )
    with pytest.raises(openai.LengthFinishReasonError) as info:
        await llm.ainvoke("plan it")
    usage = info.value.completion.usage
    assert usage is not None
    assert usage.completion_tokens == 50


# --- local servers: llama-cpp-python and llama-server -------------------------------------

LOCAL = "smollm2"


@contextlib.asynccontextmanager
async def local_server(
    flavor: Flavor, **kwargs: Any
) -> AsyncIterator[tuple[FakeOpenAI, openai.AsyncOpenAI]]:
    """A fake local server serving LOCAL, and a client that sees a 500 once (no retries)."""
    with FakeOpenAI(flavor=flavor, **kwargs) as fake:
        fake.add_model(LOCAL)
        async with openai.AsyncOpenAI(base_url=fake.base_url, api_key="x", max_retries=0) as c:
            yield fake, c
    assert fake.errors == [], "refusals are the server's answers, not fake errors"


def schema_prompt(schema: dict[str, Any]) -> str:
    """What our client appends to the system message when the server cannot take a schema."""
    return (
        "You plan research.\n\nReply with one JSON object and nothing else. It must validate "
        f"against this JSON schema:\n```json\n{json.dumps(schema)}\n```"
    )


def recorder(fake: FakeOpenAI) -> list[ChatRequest]:
    """The requests that reached generation (a refused one never does)."""
    seen: list[ChatRequest] = []

    def handler(req: ChatRequest) -> None:
        seen.append(req)

    fake.chat_handler = handler
    return seen


async def test_llama_cpp_python_refuses_json_schema_as_its_server_does() -> None:
    async with local_server("llama-cpp-python") as (fake, c):
        seen = recorder(fake)
        with pytest.raises(openai.InternalServerError) as refused:
            await c.chat.completions.create(
                model=LOCAL, messages=USER, response_format=json_schema_format("Plan")
            )

    # FastAPI's RequestValidationError, wrapped by llama_cpp/server/errors.py as a 500.
    body = error_body(refused.value)
    assert (body["type"], body["param"], body["code"]) == ("internal_server_error", None, None)
    message = str(body["message"])
    assert message.startswith(
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        "'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'"
    )
    assert message.endswith(", in create_chat_completion\n    POST /v1/chat/completions")
    assert "x-should-retry" not in refused.value.response.headers  # the SDK would retry it
    assert seen == [], "nothing generated"
    assert fake.count("/v1/chat/completions") == 1, "but recorded"


async def test_llama_cpp_python_json_object_finds_the_schema_in_the_prompt() -> None:
    schema = Plan.model_json_schema()
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": schema_prompt({"title": "Old", "type": "object"})},
        {"role": "system", "content": schema_prompt(schema)},
        # The last ```json block, but no schema (no "title"): the Plan schema stands.
        {"role": "user", "content": 'Plan it. For example:\n```json\n{"steps": ["x"]}\n```'},
    ]
    async with local_server("llama-cpp-python") as (fake, c):
        fake.script("Plan", [{"steps": ["search", "compare"]}] * 2)
        seen = recorder(fake)
        as_object = await c.chat.completions.create(
            model=LOCAL,
            messages=messages,
            response_format={"type": "json_object"},
            max_completion_tokens=50,  # not a field of its request model: dropped
        )
        as_text = await c.chat.completions.create(
            model=LOCAL, messages=messages, max_tokens=20, max_completion_tokens=50
        )

    for reply in (as_object, as_text):
        assert json.loads(reply.choices[0].message.content or "") == {
            "steps": ["search", "compare"]
        }
    assert [(r.schema_name, r.schema == schema) for r in seen] == [("Plan", True)] * 2
    assert [(r.max_tokens, r.cap_param) for r in seen] == [(None, None), (20, "max_tokens")]


async def test_llama_cpp_python_lists_models_but_has_no_model_route() -> None:
    async with local_server("llama-cpp-python") as (_, c):
        with pytest.raises(openai.NotFoundError) as no_route:
            await c.models.retrieve(LOCAL)
        listed = [m async for m in c.models.list()]

    assert no_route.value.body == {"detail": "Not Found"}  # FastAPI's own 404
    assert [(m.id, m.owned_by) for m in listed] == [(LOCAL, "me")]


async def test_the_default_flavour_reads_a_text_requests_schema_too(
    fake_openai: FakeOpenAI, openai_client: MakeClient
) -> None:
    fake_openai.script("Plan", [{"steps": ["a"]}])
    seen = recorder(fake_openai)
    system = schema_prompt(Plan.model_json_schema())
    reply = await openai_client().chat.completions.create(
        model="gpt-4.1-mini",  # not a reasoning model: it takes max_tokens too
        messages=[{"role": "system", "content": system}, *USER],
        max_tokens=20,
        max_completion_tokens=50,
    )
    assert json.loads(reply.choices[0].message.content or "") == {"steps": ["a"]}
    assert [(r.schema_name, r.max_tokens, r.cap_param) for r in seen] == [
        ("Plan", 50, "max_completion_tokens")
    ]


async def test_llama_server_props_models_and_caps() -> None:
    async with local_server("llama-server", slots=3, context_tokens=4096) as (fake, c):
        root = fake.base_url.removesuffix("/v1")
        props = (await c.get(f"{root}/props", cast_to=httpx.Response)).json()
        (model,) = [m async for m in c.models.list()]
        with pytest.raises(openai.NotFoundError) as no_route:
            await c.models.retrieve(LOCAL)
        seen = recorder(fake)
        fake.script("Plan", [{"steps": ["a"]}] * 3)
        for cap in ({"n_predict": 7, "max_tokens": 9}, {"max_completion_tokens": 8}, {}):
            await c.chat.completions.create(
                model=LOCAL,
                messages=USER,
                response_format=json_schema_format("Plan"),  # a grammar: accepted
                extra_body=cap,
            )

    assert (props["total_slots"], props["default_generation_settings"]["n_ctx"]) == (3, 4096)
    assert props["model_alias"] == LOCAL
    assert (model.id, model.owned_by) == (LOCAL, "llamacpp")
    meta = model.model_dump()["meta"]
    assert (meta["n_ctx"], meta["n_ctx_train"]) == (4096, 131_072)
    assert error_body(no_route.value) == {
        "code": 404,
        "message": "File Not Found",
        "type": "not_found_error",
    }
    assert [(r.schema_name, r.max_tokens, r.cap_param) for r in seen] == [
        ("Plan", 7, "n_predict"),
        ("Plan", 8, "max_completion_tokens"),
        ("Plan", None, None),
    ]


async def test_llama_server_refuses_a_prompt_that_fills_its_context() -> None:
    async with local_server("llama-server", context_tokens=1000) as (fake, c):
        seen = recorder(fake)
        long: list[ChatCompletionMessageParam] = [{"role": "user", "content": "word " * 1000}]
        with pytest.raises(openai.BadRequestError) as refused:
            await c.chat.completions.create(model=LOCAL, messages=long)
        fits = await c.chat.completions.create(model=LOCAL, messages=USER)

    body = error_body(refused.value)
    assert (body["type"], body["code"], body["n_ctx"]) == ("exceed_context_size_error", 400, 1000)
    assert body["n_prompt_tokens"] == 1250
    assert body["message"] == (
        "request (1250 tokens) exceeds the available context size (1000 tokens), try increasing it"
    )
    assert len(seen) == 1, "the refused prompt was never generated"
    assert fits.choices[0].message.content == "This is a fake reply."


@pytest.mark.parametrize(
    ("flavor", "at_once"), [("llama-server", 2), ("llama-cpp-python", 1), ("openai", 6)]
)
async def test_requests_beyond_the_slots_wait_for_one(flavor: Flavor, at_once: int) -> None:
    gate = threading.Event()

    def held(req: ChatRequest) -> str:
        assert gate.wait(10)
        return "done"

    async with local_server(flavor, slots=2) as (fake, c):
        fake.chat_handler = held
        fake.latency = 0.05
        calls = [
            asyncio.create_task(c.chat.completions.create(model=LOCAL, messages=USER))
            for _ in range(6)
        ]
        # All six reach the server; only `at_once` are being generated, the rest wait.
        await asyncio.to_thread(fake.wait_for, lambda: fake.peak_requests == 6)
        assert fake.peak_concurrency == at_once
        released = time.monotonic()
        gate.set()
        replies = await asyncio.gather(*calls)
        elapsed = time.monotonic() - released

    assert [r.choices[0].message.content for r in replies] == ["done"] * 6
    assert fake.peak_concurrency == at_once
    # The first wave's latency passed while held; each later wave holds its slot for it.
    assert elapsed >= (math.ceil(6 / at_once) - 1) * fake.latency
