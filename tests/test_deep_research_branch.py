"""The `web` branch executor against the loopback fake OpenAI server (real SDK, real HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import Response

from deep_research.adapters.branches.openai_research import JOB_NAME, DeepResearchExecutor
from deep_research.adapters.web.job_prompt import MAX_DEPENDENCY_CHARS, build_user_message
from deep_research.adapters.web.openai_jobs import SOURCES_INCLUDE, JobSpec
from deep_research.adapters.web.output import extract_report
from deep_research.adapters.web.search.base import ResultStore
from deep_research.core.errors import BranchError, BudgetExhausted, JobCancelled, ProviderError
from deep_research.core.models import Citation, Usage
from deep_research.core.ports import CREATE_INTENT, BranchTask, Finding, JobEvent, Meter
from deep_research.core.scope import WebScope
from deep_research.persistence.cache import ResultCache
from tests.fake_openai import Citation as FakeCitation
from tests.fake_openai import FakeOpenAI, Fault, ResearchReport
from tests.fakes import RecordingMeter

MODEL = "gpt-5.5"
SPEC = JobSpec(MODEL, reasoning_effort="high", max_tool_calls=5, max_output_tokens=20_000)
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
    session_id="abc123abc123",
)


@dataclass
class FakeCompressor:
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def compress(self, question: str, report: str, meter: Meter) -> str:
        self.calls.append((question, report))
        return f"NOTES: {report}"


@dataclass
class Hook:
    """Records (job, id, GETs the server had seen at that moment) and, apart, the creates
    the server had been sent at each intent; signals once an id exists."""

    fake: FakeOpenAI
    calls: list[tuple[str, str | None, int]] = field(default_factory=list)
    intents: list[int] = field(default_factory=list)
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, job: str, response_id: str | None) -> None:
        if response_id == CREATE_INTENT:
            self.intents.append(self.fake.count("/v1/responses", "POST"))
            self.calls.append((job, response_id, -1))
            return
        self.calls.append((job, response_id, self.fake.count("/v1/responses/", "GET")))
        if response_id:
            self.started.set()

    @property
    def ids(self) -> list[str | None]:
        """What the session was told of the job, its intents aside."""
        return [c[1] for c in self.calls if c[1] != CREATE_INTENT]

    @property
    def intent_kept(self) -> bool:
        """The last word on the job was an intent: on disk, a create with no id."""
        return bool(self.calls) and self.calls[-1][1] == CREATE_INTENT


@pytest.fixture
async def client(fake_openai: FakeOpenAI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=fake_openai.base_url, api_key=SECRET, max_retries=2
    ) as c:
        yield c


def executor(
    client: openai.AsyncOpenAI,
    cache: ResultStore | None = None,
    spec: JobSpec = SPEC,
    **kw: Any,
) -> tuple[DeepResearchExecutor, FakeCompressor]:
    compressor = FakeCompressor()
    options: dict[str, Any] = {"max_wait_seconds": 10.0, "poll_seconds": 0.01} | kw
    ex = DeepResearchExecutor(
        client,
        spec=spec,
        compressor=compressor,
        cache=cache,
        max_backoff_seconds=0.05,
        **options,
    )
    return ex, compressor


def with_events(task: BranchTask, events: list[JobEvent]) -> BranchTask:
    return replace(task, on_event=events.append)


async def test_full_run(fake_openai: FakeOpenAI, client: openai.AsyncOpenAI) -> None:
    fake_openai.script_research([REPORT])
    ex, compressor = executor(client)
    meter, hook, events = RecordingMeter(), Hook(fake_openai), []

    result = await ex.run(with_events(TASK, events), meter, hook)

    (rid,) = fake_openai.response_ids
    marked = (
        "Chroma scales to 10M vectors.[1] Qdrant supports quantization.[2] Chroma is embedded.[3]"
    )
    assert result.notes == f"NOTES: {marked}"
    assert compressor.calls == [(TASK.question, marked)]
    # Two claims citing one page stay two citations.
    assert [(c.url, c.claim) for c in result.citations] == [
        ("https://docs.trychroma.com/scale", "Chroma scales to 10M vectors."),
        ("https://qdrant.tech/q", "Qdrant supports quantization."),
        ("https://docs.trychroma.com/scale", "Chroma is embedded."),
    ]
    assert all(c.quote == "" for c in result.citations), "the API returns no source text"
    assert result.confidence == pytest.approx(0.7)  # two distinct sites
    assert result.researched_by == "gpt-5.5 (effort high)"
    usage = Usage(
        input_tokens=1000,
        cached_input_tokens=200,
        output_tokens=500,
        reasoning_tokens=300,
        web_search_calls=3,
    )
    assert meter.records == [("deep_research", MODEL, usage, False)]
    assert meter.reserved == 0
    # The intent is saved before the create is sent, the id before the first poll, and
    # both are cleared once the result is in hand.
    assert hook.intents == [0]
    assert hook.calls[:2] == [(JOB_NAME, CREATE_INTENT, -1), (JOB_NAME, rid, 0)]
    assert hook.ids == [rid, None]
    (create,) = [r for r in fake_openai.requests if r.path == "/v1/responses"]
    body = create.body
    assert body["model"] == MODEL
    assert body["background"] is True
    assert body["store"] is True
    # No place known: an approximate location with no fields, never OpenAI's US default.
    assert body["tools"] == [{"type": "web_search", "user_location": {"type": "approximate"}}]
    assert body["include"] == ["web_search_call.action.sources"]
    assert "service_tier" not in body
    assert body["max_tool_calls"] == 5
    assert body["max_output_tokens"] == 20_000
    assert body["reasoning"] == {"effort": "high"}, "no reasoning.summary unless asked for"
    developer, user = body["input"]
    assert developer["role"] == "developer"
    assert "professional researcher" in developer["content"]
    assert user["role"] == "user"
    for expected in (TASK.question, TASK.root_question, "pgvector is a Postgres extension"):
        assert expected in user["content"]
    assert "https://github.com/pgvector/pgvector" in user["content"]
    # The live view sees the job queued, in progress with a growing poll count, then done.
    assert {e.job_id for e in events} == {rid}
    assert events[0].status == "queued"
    assert events[-1].status == "completed"
    assert [e.polls for e in events] == sorted(e.polls for e in events)
    assert all(e.model == "gpt-5.5 (effort high)" for e in events)


SCOPED = ResearchReport.from_claims(
    [
        ("Chroma compacts deleted rows in the background.", "https://docs.example.org/c", "C"),
        ("A spam page claims deletes are instant.", "https://spam.example.com/p", "Spam"),
    ],
    consulted=("https://docs.example.org/consulted", "https://spam.example.com/other"),
)


async def test_a_scoped_job_is_told_what_its_tool_cannot_be_and_polled_for_its_sources(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.script_research([SCOPED])
    scope = WebScope(exclude_domains=("spam.example.com", "b.org"), since=date(2025, 1, 1))
    ex, compressor = executor(client, spec=replace(SPEC, scope=scope))

    result = await ex.run(TASK, RecordingMeter(), Hook(fake_openai))

    (create,) = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    user = create["input"][1]["content"]
    assert "Use only pages published on or after 2025-01-01." in user
    assert "Never use or cite pages on: spam.example.com, b.org." in user
    polls = [r for r in fake_openai.requests if r.method == "GET"]
    assert polls, "a background job is polled to its end"
    assert all(r.query == {"include[]": [SOURCES_INCLUDE]} for r in polls)
    # What only a poll's own include brings: the pages its searches used.
    assert result.consulted == ("https://docs.example.org/consulted",)
    # The excluded page's claim is gone from what the notes are written from, not only its url.
    [(_, report)] = compressor.calls
    assert report == "Chroma compacts deleted rows in the background[1]."
    assert "instant" not in result.notes
    assert [c.url for c in result.citations] == ["https://docs.example.org/c"]
    assert result.dropped == ("https://spam.example.com/p",)


async def test_a_reattach_asks_for_the_sources_and_a_legacy_job_for_nothing(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.script_research([SCOPED, SCOPED])
    saved = await client.responses.create(model=MODEL, input="earlier run", background=True)
    ex, _ = executor(client)
    result = await ex.run(
        replace(TASK, remote_jobs={JOB_NAME: saved.id}), RecordingMeter(), Hook(fake_openai)
    )
    assert "https://docs.example.org/consulted" in result.consulted
    fake_openai.add_model("o3-deep-research")  # a provider that still serves it
    legacy, _ = executor(client, spec=replace(SPEC, model="o3-deep-research"))
    await legacy.run(TASK, RecordingMeter(), Hook(fake_openai))
    gets = [r for r in fake_openai.requests if r.method == "GET"]
    reattached = [r.query for r in gets if r.path.endswith(saved.id)]
    polled = [r.query for r in gets if not r.path.endswith(saved.id)]
    assert reattached
    assert all(q == {"include[]": [SOURCES_INCLUDE]} for q in reattached)
    assert polled, "the legacy job was polled"
    assert all(q == {} for q in polled), "the retired models' replies predate the include"


def test_no_scope_adds_nothing_to_the_request() -> None:
    plain = build_user_message(TASK)
    assert build_user_message(TASK, WebScope()) == plain
    assert build_user_message(TASK, WebScope(domains=("a.com",), location="Lyon, FR")) == plain
    assert "published on or after" not in plain


def test_legacy_deep_research_models_take_web_search_preview() -> None:
    body = JobSpec("o3-deep-research-2025-06-26").body("dev", "user", with_summary=False)
    nowhere = {"type": "approximate"}
    assert body["tools"] == [{"type": "web_search_preview", "user_location": nowhere}]
    assert "reasoning" not in body
    assert JobSpec("gpt-5.5").body("d", "u", with_summary=False)["tools"] == [
        {"type": "web_search", "user_location": nowhere}
    ]


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
    first = await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    requests = len(fake_openai.requests)

    meter, hook = RecordingMeter(budget=0.0), Hook(fake_openai)  # no budget needed for a hit
    again = await ex.run(TASK, meter, hook)

    assert len(fake_openai.requests) == requests
    assert again == first
    assert [(r[2].web_search_calls, r[3]) for r in meter.records] == [(3, True)]
    assert hook.calls == []
    (written,) = cache.written
    assert "Chroma scales to 10M vectors.[1]" in written
    assert SECRET not in written
    # Another effort is another job: not served from this entry.
    other, _ = executor(client, cache, spec=replace(SPEC, reasoning_effort="xhigh"))
    fake_openai.script_research([REPORT])
    await other.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert fake_openai.count("/v1/responses", "POST") == 2
    cache.inner.close()


async def test_budget_refused_sends_nothing(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ex, _ = executor(client)
    meter, hook = RecordingMeter(budget=0.4), Hook(fake_openai)
    with pytest.raises(BudgetExhausted, match=r"needs up to \$\d+\.\d\d; \$0\.40 left"):
        await ex.run(TASK, meter, hook)
    assert fake_openai.requests == []
    assert hook.calls == []
    assert meter.records == []


async def test_a_job_that_could_overshoot_the_token_limit_sends_nothing(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ex, _ = executor(client)
    meter, hook = RecordingMeter(token_budget=100_000), Hook(fake_openai)
    with pytest.raises(BudgetExhausted, match=r"up to [\d,]+ tokens; 100,000 left") as refused:
        await ex.run(TASK, meter, hook)
    assert refused.value.reason == "token_limit"
    assert fake_openai.requests == []
    assert (meter.reserved, meter.reserved_tokens) == (0.0, 0)


async def test_reattach_polls_the_saved_job(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.script_research([REPORT])
    saved = await client.responses.create(model=MODEL, input="earlier run", background=True)
    ex, _ = executor(client)
    hook = Hook(fake_openai)

    result = await ex.run(replace(TASK, remote_jobs={JOB_NAME: saved.id}), RecordingMeter(), hook)

    assert fake_openai.count("/v1/responses", "POST") == 1  # only the earlier run's create
    assert len(result.citations) == 3
    assert hook.ids == [None]


async def test_reattach_survives_an_outage_and_never_resubmits(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    saved = await client.responses.create(model=MODEL, input="earlier run", background=True)
    # Three polls' worth of 500s (each defeats the SDK's two retries), then a 429 run.
    fake_openai.inject(
        Fault("server_error", path_prefix="/v1/responses/resp_", times=9),
        Fault("rate_limit", path_prefix="/v1/responses/resp_", times=3, retry_after=0),
    )
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    result = await ex.run(replace(TASK, remote_jobs={JOB_NAME: saved.id}), RecordingMeter(), hook)
    assert result.notes
    assert fake_openai.count("/v1/responses", "POST") == 1
    assert fake_openai.cancels[saved.id] == 0
    assert hook.ids == [None]


async def test_reattach_to_a_lost_job_submits_anew(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    await ex.run(replace(TASK, remote_jobs={JOB_NAME: "resp_unknown"}), RecordingMeter(), hook)
    (new,) = fake_openai.response_ids
    assert hook.ids == [None, new, None]


async def test_a_cancelled_job_cancels_the_node_and_is_not_resubmitted(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    old = (await client.responses.create(model=MODEL, input="old", background=True)).id
    await client.responses.cancel(old)
    ex, _ = executor(client)
    meter, hook = RecordingMeter(), Hook(fake_openai)
    with pytest.raises(JobCancelled, match="retry-cancelled"):
        await ex.run(replace(TASK, remote_jobs={JOB_NAME: old}), meter, hook)
    assert fake_openai.response_ids == [old]
    assert hook.ids == [None]
    assert len(meter.records) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [("failed", "upstream exploded"), ("incomplete", "DEEP_RESEARCH_WEB_MAX_OUTPUT_TOKENS")],
)
async def test_failed_job_is_a_branch_error(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI, status: Any, message: str
) -> None:
    fake_openai.script_research(
        [ResearchReport(text="partial", status=status, error_message="upstream exploded")]
    )
    ex, _ = executor(client)
    meter, hook = RecordingMeter(), Hook(fake_openai)
    with pytest.raises(BranchError, match=message):
        await ex.run(TASK, meter, hook)
    assert hook.ids == [fake_openai.response_ids[0], None]  # a terminal status: forgotten
    assert len(meter.records) == 1
    assert meter.reserved == 0


async def test_max_wait_cancels_the_job_and_records_its_usage(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    ex, _ = executor(client, max_wait_seconds=0.3)
    meter, hook = RecordingMeter(), Hook(fake_openai)
    with pytest.raises(BranchError, match=r"did not finish within 0.3 s.*it was cancelled"):
        await ex.run(TASK, meter, hook)
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 1
    assert fake_openai.response_status(rid) == "cancelled"
    assert hook.ids == [rid, None]
    assert [r[0] for r in meter.records] == ["deep_research"]
    assert meter.records[0][2].output_tokens > 0, "the usage the cancelled reply reported"
    assert meter.unknown == 0
    assert meter.reserved == 0


async def test_a_cancelled_job_without_usage_is_flagged_not_zero(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    fake_openai.script_research([replace(REPORT, usage_on_cancel=False)])
    ex, _ = executor(client, max_wait_seconds=0.3)
    meter = RecordingMeter()
    with pytest.raises(BranchError, match="it was cancelled"):
        await ex.run(TASK, meter, Hook(fake_openai))
    assert meter.unknown == 1, "the footer will say this spend is unknown"


async def test_max_wait_keeps_the_id_when_the_cancel_fails(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    fake_openai.inject(Fault("drop", path_prefix="/v1/responses/resp_", times=1000))
    ex, _ = executor(client, max_wait_seconds=0.3)
    hook = Hook(fake_openai)
    with pytest.raises(BranchError, match="cancel failed; resume re-attaches"):
        await ex.run(TASK, RecordingMeter(), hook)
    (rid,) = fake_openai.response_ids
    assert hook.ids == [rid], "an unconfirmed cancel never forgets the id"


async def test_cancelling_the_run_leaves_the_job_running_and_its_id_saved(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.hold_responses = True
    ex, _ = executor(client)
    meter, hook = RecordingMeter(), Hook(fake_openai)
    run = asyncio.create_task(ex.run(TASK, meter, hook))
    async with asyncio.timeout(5):  # the job id must be reported while the job runs
        await hook.started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 0, "Ctrl-C pauses; resume re-attaches"
    assert hook.ids == [rid]
    assert meter.reserved == 0


async def test_an_interrupt_during_the_create_still_saves_the_id(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("slow", path_prefix="/v1/responses", delay=0.3))
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    run = asyncio.create_task(ex.run(TASK, RecordingMeter(), hook))
    await asyncio.to_thread(fake_openai.wait_for, lambda: fake_openai.count("/v1/responses") > 0)
    run.cancel()  # the create is on the wire: the job will exist
    with pytest.raises(asyncio.CancelledError):
        await run
    (rid,) = fake_openai.response_ids
    assert hook.ids == [rid]


async def test_a_lost_create_reply_fails_the_node_and_is_never_resent(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("drop_after", path_prefix="/v1/responses"))
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    with pytest.raises(BranchError, match=r"session abc123abc123, node t2.*a job may be running"):
        await ex.run(TASK, RecordingMeter(), hook)
    assert fake_openai.count("/v1/responses", "POST") == 1  # the SDK did not retry it
    assert len(fake_openai.response_ids) == 1  # the job the lost reply started
    assert hook.ids == []
    assert hook.intent_kept, "a resume must know a job may be running without its id"


async def test_a_server_error_on_the_create_may_have_created_the_job(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    """A 5xx may come after the job exists (a proxy's 502, a timeout behind it): the intent
    stays, so a resume never pays for it again unless asked."""
    fake_openai.inject(Fault("server_error", path_prefix="/v1/responses"))
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    with pytest.raises(BranchError, match=r"got HTTP 500; a job may be running"):
        await ex.run(TASK, RecordingMeter(), hook)
    assert fake_openai.count("/v1/responses", "POST") == 1
    assert hook.intent_kept


async def test_an_unreadable_create_reply_is_a_lost_reply(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("malformed", path_prefix="/v1/responses"))
    ex, _ = executor(client)
    with pytest.raises(BranchError, match="unreadable; a job may be running"):
        await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert fake_openai.count("/v1/responses", "POST") == 1


async def test_a_rate_limited_create_is_retried_it_created_nothing(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("rate_limit", path_prefix="/v1/responses", times=2))
    ex, _ = executor(client)
    result = await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert result.notes
    assert fake_openai.count("/v1/responses", "POST") == 3
    assert len(fake_openai.response_ids) == 1


async def test_out_of_quota_is_not_retried(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("insufficient_quota", path_prefix="/v1/responses"))
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    with pytest.raises(ProviderError, match="out of quota"):
        await ex.run(TASK, RecordingMeter(), hook)
    assert fake_openai.count("/v1/responses", "POST") == 1
    # Refused before any work: nothing runs at the provider, so no intent is left.
    assert (hook.intents, hook.ids, hook.intent_kept) == ([0], [None], False)


async def test_a_shut_down_model_is_named_not_a_missing_job(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ex, _ = executor(client, spec=JobSpec("o4-mini-deep-research"))
    with pytest.raises(ProviderError, match="model o4-mini-deep-research not found") as info:
        await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert "job not found" not in str(info.value)
    assert "DEEP_RESEARCH_WEB_MODEL" in str(info.value)


async def test_a_refused_reasoning_summary_is_dropped_once_and_said(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    ex, _ = executor(client, spec=replace(SPEC, reasoning_summary="auto"))
    events: list[JobEvent] = []
    result = await ex.run(with_events(TASK, events), RecordingMeter(), Hook(fake_openai))
    assert result.notes
    first, second = [r.body for r in fake_openai.requests if r.path == "/v1/responses"]
    assert first["reasoning"] == {"effort": "high", "summary": "auto"}
    assert second["reasoning"] == {"effort": "high"}
    assert len(fake_openai.response_ids) == 1, "the refused create created nothing"
    assert any("reasoning summaries were refused" in e.note for e in events)
    # Not asked again in this run.
    fake_openai.script_research([REPORT])
    await ex.run(replace(TASK, question="another?"), RecordingMeter(), Hook(fake_openai))
    third = [r.body for r in fake_openai.requests if r.path == "/v1/responses"][-1]
    assert third["reasoning"] == {"effort": "high"}


async def test_a_verified_organisation_gets_its_summaries(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.org_verified = True
    ex, _ = executor(client, spec=replace(SPEC, reasoning_summary="auto"))
    await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert fake_openai.count("/v1/responses", "POST") == 1


async def test_cannot_reach_the_provider_is_a_branch_error() -> None:
    async with openai.AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x") as c:
        ex, _ = executor(c)
        with pytest.raises(BranchError, match="cannot reach the provider"):
            await ex.run(TASK, RecordingMeter(), lambda _n, _i: asyncio.sleep(0))


async def test_rate_limited_polls_are_survived(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("rate_limit", path_prefix="/v1/responses/", times=2))
    ex, _ = executor(client)
    result = await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert result.citations
    assert sum(r.fault == "rate_limit" for r in fake_openai.requests) == 2


async def test_polls_outlast_a_provider_outage_longer_than_the_sdk_retries(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    # max_retries=2: five 500s in a row defeat the SDK's retries on one poll, twice over.
    fake_openai.inject(Fault("server_error", path_prefix="/v1/responses/resp_", times=5))
    ex, _ = executor(client)
    result = await ex.run(TASK, RecordingMeter(), Hook(fake_openai))
    assert result.citations
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 0, "a paid job is not abandoned over an outage"


async def test_an_unreadable_poll_is_polled_again_never_cancelled(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.inject(Fault("malformed", path_prefix="/v1/responses/resp_", times=2))
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    result = await ex.run(TASK, RecordingMeter(), hook)
    assert result.notes
    (rid,) = fake_openai.response_ids
    assert fake_openai.cancels[rid] == 0
    assert hook.ids == [rid, None]


async def test_empty_report_is_a_branch_error(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    fake_openai.script_research([ResearchReport(text="   ")])
    ex, _ = executor(client)
    hook = Hook(fake_openai)
    with pytest.raises(BranchError, match="no report text"):
        await ex.run(TASK, RecordingMeter(), hook)
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
    marked, citations, _ = extract_report(response([{"type": "reasoning"}, message]))
    assert marked == "Alpha beta.[1][2] Gamma."
    assert [(c.url, c.claim) for c in citations] == [
        ("https://a.io", "Alpha beta."),
        ("https://b.io", "Alpha beta."),
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


class Slots:
    """The team's research-job slots, as ``persistence.slots`` holds them: ``limit`` of
    them; ``held`` counts the ones taken."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0
        self.most = 0

    def try_take(self) -> int | None:
        if self.held == self.limit:
            return None
        self.held += 1
        self.most = max(self.most, self.held)
        return self.held - 1

    def give_back(self, _slot: int) -> None:
        self.held -= 1


async def test_a_new_job_waits_for_a_team_slot_and_a_reattached_one_never_does(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    slots = Slots(1)
    fake_openai.script_research([REPORT, REPORT])
    saved = await client.responses.create(model=MODEL, input="earlier run", background=True)
    ex, _ = executor(client, slots=slots)
    events: list[JobEvent] = []
    hook = Hook(fake_openai)
    assert slots.try_take() == 0  # another worker's job holds the only slot

    reattached = await ex.run(
        replace(TASK, remote_jobs={JOB_NAME: saved.id}), RecordingMeter(), hook
    )
    assert reattached.notes, "read at once: it runs at the provider anyway"
    assert slots.held == 1, "it took no slot (none was free), and gave none back"

    said = asyncio.Event()

    def event(job: JobEvent) -> None:
        events.append(job)
        said.set()

    new = asyncio.create_task(ex.run(replace(TASK, on_event=event), RecordingMeter(), hook))
    await asyncio.wait_for(said.wait(), 10)
    assert [(e.status, e.job_id) for e in events] == [("waiting", "")]
    assert "the team's 1 are in use" in events[0].note
    assert fake_openai.count("/v1/responses", "POST") == 1, "created nothing while waiting"
    slots.give_back(0)  # that other job has ended
    assert (await new).notes
    assert fake_openai.count("/v1/responses", "POST") == 2
    assert (slots.held, slots.most) == (0, 1), "taken for the job, given back after it"


async def test_a_reattached_job_found_gone_waits_for_a_slot_before_its_new_create(
    fake_openai: FakeOpenAI, client: openai.AsyncOpenAI
) -> None:
    slots = Slots(1)
    fake_openai.script_research([REPORT])
    ex, _ = executor(client, slots=slots)
    assert slots.try_take() == 0  # another worker's job holds the only slot
    said = asyncio.Event()
    events: list[JobEvent] = []

    def event(job: JobEvent) -> None:
        events.append(job)
        said.set()

    gone = replace(TASK, remote_jobs={JOB_NAME: "resp_unknown"}, on_event=event)
    run = asyncio.create_task(ex.run(gone, RecordingMeter(), Hook(fake_openai)))
    await asyncio.wait_for(said.wait(), 10)
    assert events[0].status == "waiting"
    assert fake_openai.count("/v1/responses", "POST") == 0, "no new create without a slot"
    slots.give_back(0)
    assert (await run).notes
    assert fake_openai.count("/v1/responses", "POST") == 1
    assert (slots.held, slots.most) == (0, 1)
