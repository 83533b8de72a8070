"""The `web` branch executor against the loopback fake OpenAI server (real SDK, real HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from deep_research.branches.deep_research import (
    JOB_NAME,
    MAX_DEPENDENCY_CHARS,
    DeepResearchExecutor,
    ReportCache,
    build_user_message,
)
from deep_research.branches.web_output import extract_report
from deep_research.cache import ResultCache
from deep_research.errors import BranchError, BudgetExhausted
from deep_research.models import Citation, Role, Usage
from deep_research.ports import BranchTask, Finding, Meter
from tests.fake_openai import Citation as FakeCitation
from tests.fake_openai import FakeOpenAI, Fault, ResearchReport

MODEL = "o4-mini-deep-research"
SECRET = "sk-test-secret-0123456789"
TEXT = "Chroma scales to 10M vectors. Qdrant supports quantization. Chroma is embedded."
REPORT = ResearchReport(
    text=TEXT,
    citations=(
        FakeCitation(
            "https://docs.trychroma.com/scale", "Chroma scale", "Chroma scales to 10M vectors."
        ),
        FakeCitation(
            "https://qdrant.tech/q", "Qdrant quantization", "Qdrant supports quantization."
        ),
        FakeCitation("https://docs.trychroma.com/scale", "Chroma scale", "Chroma is embedded."),
    ),
    searches=("chroma scale", "qdrant quantization", "chroma embedded"),
    input_tokens=1000,
    cached_tokens=200,
    output_tokens=500,
    reasoning_tokens=300,
)
TASK = BranchTask(
    node_id="t2",
    question="How do Chroma and Qdrant scale?",
    root_question="Compare Chroma, pgvector and Qdrant for a 10M-chunk KB",
    source_hint="web",
    dependencies=(
        Finding(
            "t1",
            "What is pgvector?",
            "pgvector is a Postgres extension [1].",
            (Citation(kind="web", url="https://github.com/pgvector/pgvector", title="pgvector"),),
        ),
    ),
)


@dataclass
class FakeMeter:
    budget: float = 100.0
    reserved: float = 0.0
    records: list[tuple[Role, str, Usage, bool]] = field(default_factory=list)

    def record(self, role: Role, model: str, usage: Usage, *, cached: bool = False) -> None:
        self.records.append((role, model, usage, cached))

    def remaining_usd(self) -> float:
        return self.budget - self.reserved

    async def reserve(self, amount_usd: float) -> bool:
        if amount_usd > self.remaining_usd():
            return False
        self.reserved += amount_usd
        return True

    def release(self, amount_usd: float) -> None:
        self.reserved -= amount_usd


@dataclass
class FakeCompressor:
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def compress(self, question: str, report: str, meter: Meter) -> str:
        self.calls.append((question, report))
        return f"NOTES: {report}"


@dataclass
class Hook:
    """Records (job, id, GETs the server had seen at that moment); signals once an id exists."""

    fake: FakeOpenAI
    calls: list[tuple[str, str | None, int]] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, job: str, response_id: str | None) -> None:
        self.calls.append((job, response_id, self.fake.count("/v1/responses/", "GET")))
        if response_id:
            self.started.set()

    @property
    def ids(self) -> list[str | None]:
        return [c[1] for c in self.calls]


@pytest.fixture
async def client(fake_openai: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=fake_openai.base_url, api_key=SECRET, max_retries=2
    ) as c:
        yield c


def executor(
    client: openai.AsyncOpenAI, cache: ReportCache | None = None, **kw: Any
) -> tuple[DeepResearchExecutor, FakeCompressor]:
    compressor = FakeCompressor()
    options: dict[str, Any] = {"max_wait_seconds": 10.0, "poll_seconds": 0.01} | kw
    ex = DeepResearchExecutor(
        client,
        model=MODEL,
        max_tool_calls=5,
        compressor=compressor,
        cache=cache,
        max_backoff_seconds=0.05,
        **options,
    )
    return ex, compressor


async def test_full_run(fake_openai: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake_openai.script_research([REPORT])
    ex, compressor = executor(client)
    meter, hook = FakeMeter(), Hook(fake_openai)

    result = await ex.run(TASK, meter, hook)

    (rid,) = fake_openai.response_ids
    marked = (
        "Chroma scales to 10M vectors.[1] Qdrant supports quantization.[2] Chroma is embedded.[1]"
    )
    assert result.notes == f"NOTES: {marked}"
    assert compressor.calls == [(TASK.question, marked)]
    assert [(c.url, c.title, c.snippet) for c in result.citations] == [
        ("https://docs.trychroma.com/scale", "Chroma scale", "Chroma scales to 10M vectors."),
        ("https://qdrant.tech/q", "Qdrant quantization", "Qdrant supports quantization."),
    ]
    assert all(c.kind == "web" and c.locator == c.url for c in result.citations)
    assert result.confidence == pytest.approx(0.7)  # two distinct sites
    usage = Usage(
        input_tokens=1000,
        cached_input_tokens=200,
        output_tokens=500,
        reasoning_tokens=300,
        web_search_calls=3,
    )
    assert meter.records == [("deep_research", MODEL, usage, False)]
    assert meter.reserved == 0
    # The id is saved before the first poll, and cleared once the result is in hand.
    assert hook.calls[0] == (JOB_NAME, rid, 0)
    assert hook.ids == [rid, None]
    (create,) = [r for r in fake_openai.requests if r.path == "/v1/responses"]
    body = create.body
    assert body["background"] is True
    assert body["store"] is True
    assert body["tools"] == [{"type": "web_search_preview"}]
    assert body["max_tool_calls"] == 5
    assert body["reasoning"] == {"summary": "auto"}
    developer, user = body["input"]
    assert developer["role"] == "developer"
    assert "professional researcher" in developer["content"]
    assert user["role"] == "user"
    for expected in (TASK.question, TASK.root_question, "pgvector is a Postgres extension"):
        assert expected in user["content"]
    assert "https://github.com/pgvector/pgvector" in user["content"]


def test_dependency_findings_stay_within_the_cap() -> None:
    deps = tuple(
        Finding(
            f"t{i}", f"question {i}", "x" * 5000, (Citation(kind="web", url=f"https://s{i}.io"),)
        )
        for i in range(40)
    )
    task = BranchTask("n", "q?", "root?", "web", dependencies=deps)
    message = build_user_message(task)
    assert len(message) < MAX_DEPENDENCY_CHARS + 1000
    assert all(f"question {i}" in message for i in range(40))


@dataclass
class SpyCache:
    """The real ResultCache, recording what is written to it."""

    inner: ResultCache
    written: list[str] = field(default_factory=list)

    async def get(self, tool: str, model: str, query: str) -> str | None:
        return await self.inner.get(tool, model, query)

    async def set(self, tool: str, model: str, query: str, value: str) -> None:
        self.written.append(value)
        await self.inner.set(tool, model, query, value)


async def test_cache_hit_makes_no_call_and_costs_nothing(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    cache = SpyCache(ResultCache(tmp_path / "cache"))
    fake_openai.script_research([REPORT])
    ex, _ = executor(client, cache)
    first = await ex.run(TASK, FakeMeter(), Hook(fake_openai))
    requests = len(fake_openai.requests)

    meter, hook = FakeMeter(budget=0.0), Hook(fake_openai)  # no budget needed for a hit
    again = await ex.run(TASK, meter, hook)

    assert len(fake_openai.requests) == requests
    assert again == first
    assert [(r[2].web_search_calls, r[3]) for r in meter.records] == [(3, True)]
    assert hook.calls == []
    (written,) = cache.written
    assert "Chroma scales to 10M vectors.[1]" in written
    assert SECRET not in written
    cache.inner.close()


async def test_budget_refused_sends_nothing(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ex, _ = executor(client)
    meter, hook = FakeMeter(budget=0.4), Hook(fake_openai)
    with pytest.raises(BudgetExhausted, match=r"needs up to \$\d+\.\d\d; \$0\.40 left"):
        await ex.run(TASK, meter, hook)
    assert fake_openai.requests == []
    assert hook.calls == []
    assert meter.records == []


async def test_reattach_polls_the_saved_job(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.script_research([REPORT])
    saved = await client.responses.create(model=MODEL, input="earlier run", background=True)
    ex, _ = executor(client)
    hook = Hook(fake_openai)

    result = await ex.run(
        BranchTask(**{**TASK.__dict__, "remote_jobs": {JOB_NAME: saved.id}}), FakeMeter(), hook
    )

    assert fake_openai.count("/v1/responses", "POST") == 1  # only the earlier run's create
    assert len(result.citations) == 2
    assert hook.ids == [None]


@pytest.mark.parametrize("how", ["gone", "cancelled"])
async def test_reattach_to_a_lost_job_submits_anew(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI, how: str
) -> None:
    old = "resp_unknown"
    if how == "cancelled":
        old = (await client.responses.create(model=MODEL, input="old", background=True)).id
        await client.responses.cancel(old)
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    await ex.run(BranchTask(**{**TASK.__dict__, "remote_jobs": {JOB_NAME: old}}), FakeMeter(), hook)
    new = [i for i in fake_openai.response_ids if i != old]
    assert len(new) == 1
    assert hook.ids == [new[0], None]


@pytest.mark.parametrize(
    ("status", "message"), [("failed", "upstream exploded"), ("incomplete", "max_output_tokens")]
)
async def test_failed_job_is_a_branch_error(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI, status: Any, message: str
) -> None:
    fake_openai.script_research(
        [ResearchReport(text="partial", status=status, error_message="upstream exploded")]
    )
    ex, _ = executor(client)
    meter, hook = FakeMeter(), Hook(fake_openai)
    with pytest.raises(BranchError, match=message):
        await ex.run(TASK, meter, hook)
    assert hook.ids == [fake_openai.response_ids[0], None]
    assert len(meter.records) == 1
    assert meter.reserved == 0


async def test_max_wait_cancels_the_job(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    ex, _ = executor(client, max_wait_seconds=0.3)
    meter, hook = FakeMeter(), Hook(fake_openai)
    with pytest.raises(BranchError, match=r"did not finish within 0.3 s"):
        await ex.run(TASK, meter, hook)
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 1
    assert fake_openai.response_status(rid) == "cancelled"
    assert hook.ids == [rid, None]
    assert meter.reserved == 0


async def test_cancelling_the_run_cancels_the_job(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    ex, _ = executor(client)
    meter, hook = FakeMeter(), Hook(fake_openai)
    run = asyncio.create_task(ex.run(TASK, meter, hook))
    async with asyncio.timeout(5):  # the job id must be reported while the job runs
        await hook.started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 1
    assert hook.ids == [rid, None]
    assert meter.reserved == 0


async def test_rate_limited_polls_are_survived(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("rate_limit", path_prefix="/v1/responses/", times=2))
    ex, _ = executor(client)
    result = await ex.run(TASK, FakeMeter(), Hook(fake_openai))
    assert result.citations
    assert sum(r.fault == "rate_limit" for r in fake_openai.requests) == 2


async def test_polls_outlast_a_provider_outage_longer_than_the_sdk_retries(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    # max_retries=2: five 500s in a row defeat the SDK's retries on one poll, twice over.
    fake_openai.inject(Fault("server_error", path_prefix="/v1/responses/resp_", times=5))
    ex, _ = executor(client)
    result = await ex.run(TASK, FakeMeter(), Hook(fake_openai))
    assert result.citations
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 0, "a paid job is not abandoned over an outage"


async def test_unreadable_poll_fails_the_branch_and_cancels(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    fake_openai.inject(Fault("malformed", path_prefix="/v1/responses/resp_"))
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    with pytest.raises(BranchError, match="unreadable") as info:
        await ex.run(TASK, FakeMeter(), hook)
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 1
    assert hook.ids == [rid, None]
    assert SECRET not in str(info.value)


async def test_empty_report_is_a_branch_error(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.script_research([ResearchReport(text="   ")])
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    with pytest.raises(BranchError, match="no report text"):
        await ex.run(TASK, FakeMeter(), hook)
    assert hook.ids == [fake_openai.response_ids[0], None]


def response(output: Any) -> Response:
    fields: dict[str, Any] = {"id": "resp_1", "status": "completed", "output": output}
    return Response.model_construct(**fields)  # lenient, like the SDK's own parsing


def test_malformed_annotations_are_skipped_and_shared_ends_keep_order() -> None:
    text = "Alpha beta. Gamma."
    annotations = [
        {
            "type": "url_citation",
            "url": "https://a.io",
            "title": "A",
            "start_index": 0,
            "end_index": 11,
        },
        {
            "type": "url_citation",
            "url": "https://b.io",
            "title": "B",
            "start_index": 6,
            "end_index": 11,
        },
        {
            "type": "url_citation",
            "url": "https://c.io",
            "title": "C",
            "start_index": 5,
            "end_index": 99,
        },
        {"type": "url_citation", "url": None, "start_index": 0, "end_index": 1},
        {"type": "file_citation", "file_id": "f", "index": 0},
        7,
    ]
    message = {
        "type": "message",
        "content": [{"type": "output_text", "text": text, "annotations": annotations}],
    }
    marked, citations = extract_report(response([{"type": "reasoning"}, message]))
    assert marked == "Alpha beta.[1][2] Gamma."
    assert [(c.url, c.snippet) for c in citations] == [
        ("https://a.io", "Alpha beta."),
        ("https://b.io", "beta."),
    ]


@pytest.mark.parametrize(
    "output",
    [
        [{"type": "web_search_call"}],
        "garbage",
        [1, None, {"type": "message"}],
        [{"type": "message", "content": [{"type": "output_text", "text": None}]}],
    ],
)
def test_garbage_output_is_a_branch_error(output: Any) -> None:
    with pytest.raises(BranchError, match="no report text"):
        extract_report(response(output))
