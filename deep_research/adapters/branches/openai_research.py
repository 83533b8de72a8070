"""The ``web`` branch: an OpenAI research job — a reasoning model with the ``web_search``
tool — run in the background on the Responses API and polled to the end.

Invariants (money first):
- The job id reaches the session on disk the moment the create reply arrives (the hook
  saves synchronously), before the SDK parses the reply and before any wait; a create that
  is already on the wire when the run is interrupted is let finish so its id is saved.
- A job is never submitted twice in one run (see ``openai_jobs``), and a resumed task
  re-attaches to its saved id; only a job the provider lost (404) is submitted anew.
- Ctrl-C and the run's time limit never cancel here: the ids stay in the session (the
  orchestrator cancels them after a time limit; ``resume`` re-attaches after Ctrl-C).
  Only this branch's own maximum wait cancels its job, and an id is forgotten only once
  the provider confirmed a terminal status or the cancel.
- Every wait is bounded: the whole job by ``max_wait_seconds``, each request by the SDK's
  timeout, a cancel by a few seconds. Polls back off up to ``max_backoff_seconds``.
- The worst-case cost and tokens are reserved before dispatch and released afterwards,
  whatever happens; the job's real usage is recorded from its final reply (unknown usage
  is flagged, not $0).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import TYPE_CHECKING, Protocol

import openai
from openai.types.responses import Response
from pydantic import BaseModel, ValidationError

from deep_research.adapters.branches.slots import JobSlots, SlotHold, slot_held
from deep_research.adapters.prices import PriceTable
from deep_research.adapters.web.job_prompt import build_user_message, load_instructions
from deep_research.adapters.web.openai_jobs import (
    PENDING,
    JobGone,
    JobSpec,
    KbTool,
    LostReply,
    ResponsesJobs,
    SummaryRefused,
    Transient,
)
from deep_research.adapters.web.output import (
    confidence,
    extract_report,
    service_tier,
    sources_used,
    usage_of,
)
from deep_research.core.budget import web_job_worst_case, web_job_worst_usage
from deep_research.core.errors import (
    BranchError,
    BudgetExhausted,
    JobCancelled,
    ProviderError,
)
from deep_research.core.models import Citation, Usage
from deep_research.core.ports import (
    CREATE_INTENT,
    BranchResult,
    BranchTask,
    JobEvent,
    Meter,
    PriceBook,
    RemoteJobHook,
)
from deep_research.core.scope import page_key

if TYPE_CHECKING:
    from deep_research.adapters.web.search.base import ResultStore

JOB_NAME = "deep_research"
CACHE_TOOL = "openai_web_research"


class ReportCompressor(Protocol):
    async def compress(self, question: str, report: str, meter: Meter) -> str:
        """Condense a long report into notes, keeping its ``[n]`` markers."""
        ...


class DeepResearchReport(BaseModel):
    """The result of one job, as cached: report text with ``[n]`` markers inserted, its
    citations within the run's web scope (the scope is part of the cache key)."""

    text: str
    citations: list[Citation]
    usage: Usage
    consulted: list[str] = []
    """Pages its searches used, in scope, that it does not cite."""
    dropped: list[str] = []
    """Pages it cited outside the scope, left out of ``citations`` and ``text``."""


@dataclass
class DeepResearchExecutor:
    client: InitVar[openai.AsyncOpenAI]
    _: KW_ONLY
    spec: JobSpec
    max_wait_seconds: float
    poll_seconds: float
    compressor: ReportCompressor
    cache: ResultStore | None
    prices: PriceBook = field(default_factory=PriceTable)
    max_backoff_seconds: float = 60.0
    kb_tool: KbTool | None = None
    """The user's KB offered to every job as an MCP tool (``DEEP_RESEARCH_KB_MCP_URL``)."""
    slots: JobSlots | None = None
    """The team's cap on jobs in flight (``DEEP_RESEARCH_TEAM_MAX_RESEARCH_JOBS``)."""
    summary_refused: bool = field(default=False, init=False)
    """Once refused, not asked again in this run."""
    jobs: ResponsesJobs = field(init=False)

    def __post_init__(self, client: openai.AsyncOpenAI) -> None:
        self.jobs = ResponsesJobs(client, retry_base_seconds=min(self.poll_seconds, 0.5))

    def worst_case_usd(self) -> float:
        """At the default tier, whatever tier the job is sent to: a reply may name another
        than the one asked for (it is booked at the one it names)."""
        return web_job_worst_case(
            self.prices,
            self.spec.model,
            max_tool_calls=self.spec.max_tool_calls,
            max_output_tokens=self.spec.max_output_tokens,
        )

    def worst_case_tokens(self) -> int:
        return web_job_worst_usage(
            max_tool_calls=self.spec.max_tool_calls, max_output_tokens=self.spec.max_output_tokens
        ).total_tokens

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        developer = load_instructions()
        user = build_user_message(task, self.spec.scope)
        kb = f"|kb={self.kb_tool.url}" if self.kb_tool else ""  # its answers differ
        key = f"{self.spec.cache_key()}{kb}\n{developer}\n\n{user}"
        report = await self._cached(key, meter)
        if report is None:
            worst, tokens = self.worst_case_usd(), self.worst_case_tokens()
            if not await meter.reserve(worst, tokens):
                if tokens > meter.remaining_tokens():
                    raise BudgetExhausted(
                        f"a web research job may use up to {tokens:,} tokens; "
                        f"{max(0, meter.remaining_tokens()):,} left",
                        "token_limit",
                    )
                raise BudgetExhausted(
                    f"a web research job needs up to ${worst:.2f}; "
                    f"${meter.remaining_usd():.2f} left"
                )
            try:
                create = JOB_NAME not in task.remote_jobs
                model = self.spec.describe()
                async with slot_held(
                    self.slots, task, model, self.poll_seconds, create=create
                ) as hold:
                    job = _Job(self, task, on_remote_job, hold)
                    response = await job.run(developer, user, meter)
                try:
                    report = self._finish(response, meter)
                except BranchError:
                    await on_remote_job(JOB_NAME, None)  # a terminal status: nothing to re-read
                    raise
            finally:
                meter.release(worst, tokens)
            if self.cache is not None:
                await self.cache.set(CACHE_TOOL, self.spec.model, key, report.model_dump_json())
            await on_remote_job(JOB_NAME, None)  # terminal and its result kept: forget the id
        notes = await self.compressor.compress(task.question, report.text, meter)
        return BranchResult(
            notes=notes,
            citations=tuple(report.citations),
            confidence=confidence(report.citations),
            researched_by=self.spec.describe(),
            consulted=tuple(report.consulted),
            dropped=tuple(report.dropped),
        )

    async def _cached(self, key: str, meter: Meter) -> DeepResearchReport | None:
        raw = await self.cache.get(CACHE_TOOL, self.spec.model, key) if self.cache else None
        if raw is None:
            return None
        try:
            report = DeepResearchReport.model_validate_json(raw)
        except ValidationError:
            return None  # damaged, or another version's: redo the work
        meter.record("deep_research", self.spec.model, report.usage, cached=True)
        return report

    def _finish(self, response: Response, meter: Meter) -> DeepResearchReport:
        usage = usage_of(response)
        meter.record(
            "deep_research",
            self.spec.model,
            usage,
            usage_unknown=getattr(response, "usage", None) is None,
            tier=service_tier(response),
        )
        status = response.status
        if status == "completed":
            return self._report(response, usage)
        if status == "failed":
            error = getattr(response.error, "message", None) or "no reason given"
            raise BranchError(f"the research job failed: {error}")
        if status == "incomplete":
            reason = getattr(response.incomplete_details, "reason", None) or "no reason given"
            if reason == "max_output_tokens":
                reason = (
                    f"it reached max_output_tokens={self.spec.max_output_tokens} "
                    "(raise DEEP_RESEARCH_WEB_MAX_OUTPUT_TOKENS)"
                )
            raise BranchError(f"the research job stopped incomplete: {reason}")
        if status == "cancelled":
            raise JobCancelled(
                "the research job was cancelled (deep-research sessions cancel, or at the "
                "provider); `resume --retry-cancelled` researches it again"
            )
        raise BranchError(f"the research job ended with unexpected status {status!r}")

    def _report(self, response: Response, usage: Usage) -> DeepResearchReport:
        """A completed job's report within the run's web scope: OpenAI filters only the
        allowed domains, so a citation of an excluded page is taken out here, with the
        sentence it alone supports (the claim check never reads it); the pages its searches
        used and it does not cite are kept apart."""
        scope = self.spec.scope
        text, citations, dropped = extract_report(response, scope)
        seen = {page_key(c.url or "") for c in citations}
        consulted = []
        for url in sources_used(response):
            if scope.allows(url) and page_key(url) not in seen:
                seen.add(page_key(url))
                consulted.append(url)
        return DeepResearchReport(
            text=text, citations=citations, usage=usage, consulted=consulted, dropped=dropped
        )


class _Job:
    """One node's remote job: submit or re-attach, then poll to a terminal status."""

    def __init__(
        self,
        executor: DeepResearchExecutor,
        task: BranchTask,
        on_remote_job: RemoteJobHook,
        hold: SlotHold,
    ) -> None:
        self._ex = executor
        self._hold = hold
        self._jobs = executor.jobs
        self._task = task
        self._save = on_remote_job
        self._started = time.monotonic()
        self._status = "queued"  # as last seen at the provider
        self.job_id: str | None = task.remote_jobs.get(JOB_NAME)

    async def run(self, developer: str, user: str, meter: Meter) -> Response:
        ex = self._ex
        try:
            async with asyncio.timeout(ex.max_wait_seconds) as limit:
                response = await self._reattach() if self.job_id else None
                if response is None:
                    # A re-attached job found gone holds no slot yet: one is waited for
                    # before its new create, and that wait is not the job's.
                    deadline = limit.when()
                    limit.reschedule(None)
                    waited = await self._hold.take(wait=True)
                    limit.reschedule(None if deadline is None else deadline + waited)
                    response = await self._submit(developer, user)
                return await self._poll(response)
        except TimeoutError:
            kept = await self._give_up(meter)
            raise BranchError(
                f"the research job did not finish within {ex.max_wait_seconds:g} s "
                "(DEEP_RESEARCH_WEB_MAX_WAIT_SECONDS); "
                + ("it was cancelled" if not kept else "its cancel failed; resume re-attaches")
            ) from None

    def _emit(self, status: str | None, polls: int, note: str = "") -> None:
        """Tell the live view; ``status`` None: unchanged (a read failed, see ``note``)."""
        self._status = status or self._status
        if self._task.on_event is not None and self.job_id is not None:
            self._task.on_event(
                JobEvent(
                    node_id=self._task.node_id,
                    job_id=self.job_id,
                    model=self._ex.spec.describe(),
                    status=self._status,
                    polls=polls,
                    elapsed_seconds=time.monotonic() - self._started,
                    note=note,
                )
            )

    async def _backoff(self, delay: float) -> float:
        await asyncio.sleep(delay)
        return min(delay * 1.5, self._ex.max_backoff_seconds)

    async def _read(self, polls: int) -> Response | None:
        """The job as the provider has it; None when the read failed (said in the live view).
        A job the provider lost is forgotten, and ``JobGone`` raised."""
        assert self.job_id is not None
        try:
            return await self._jobs.retrieve(self.job_id, include=self._ex.spec.include)
        except Transient as exc:
            self._emit(None, polls, str(exc))
            return None
        except JobGone:
            await self._save(JOB_NAME, None)
            raise

    async def _reattach(self) -> Response | None:
        """The saved job, or None if the provider lost it (then it is submitted anew)."""
        delay = self._ex.poll_seconds
        try:
            while (response := await self._read(0)) is None:
                delay = await self._backoff(delay)
            return response
        except JobGone:
            self.job_id = None
            return None

    async def _submit(self, developer: str, user: str) -> Response:
        ex, task = self._ex, self._task
        where = f"session {task.session_id or '?'}, node {task.node_id}"
        body = ex.spec.body(
            developer, user, with_summary=not ex.summary_refused, kb_tool=ex.kb_tool
        )
        create = asyncio.ensure_future(self._create_and_save(body, where))
        try:
            return await asyncio.shield(create)
        except asyncio.CancelledError:
            # Interrupted while the create is on the wire: the job may already exist. Let
            # the request finish (bounded by the SDK's timeout) so its id is saved.
            with contextlib.suppress(Exception):
                await asyncio.wait([create])
                create.exception()  # read, or asyncio logs it as never retrieved
            raise

    async def _create_and_save(self, body: dict[str, object], where: str) -> Response:
        # The intent is on disk before the create leaves: a process killed before its id
        # is saved leaves a job a resume must not submit again (``job_intents``).
        await self._save(JOB_NAME, CREATE_INTENT)
        refused = False
        try:
            try:
                created = await self._jobs.create(body, where=where)
            except SummaryRefused:
                refused = self._ex.summary_refused = True
                reasoning = dict(body.get("reasoning") or {})  # type: ignore[call-overload]
                reasoning.pop("summary", None)
                body = {**body, "reasoning": reasoning}
                created = await self._jobs.create(body, where=where)  # a refusal created nothing
        except LostReply:
            raise  # a job may exist: the intent stays
        except (BranchError, ProviderError):
            await self._save(JOB_NAME, None)  # refused or never sent: nothing was created
            raise
        self.job_id = created.job_id
        await self._save(JOB_NAME, created.job_id)  # on disk when this returns
        if refused:
            note = "reasoning summaries were refused (organisation not verified)"
            self._emit("queued", 0, f"{note}: submitted without them")
        return created.parse()

    async def _poll(self, response: Response) -> Response:
        delay, polls = self._ex.poll_seconds, 0
        while response.status in PENDING:
            self._emit(str(response.status), polls)
            delay = await self._backoff(delay)
            # A failed read is not the job's end: it runs on (and is paid for) whatever our
            # connection does, so polling goes on until the maximum wait.
            if (read := await self._read(polls)) is not None:
                response, polls = read, polls + 1
        self._emit(str(response.status), polls)
        return response

    async def _give_up(self, meter: Meter) -> bool:
        """Cancel at the maximum wait; True when the id had to be kept (cancel unconfirmed)."""
        if self.job_id is None:
            return False
        outcome = await self._jobs.cancel(self.job_id)
        if outcome.status == "unreachable":
            return True
        meter.record(
            "deep_research",
            self._ex.spec.model,
            outcome.usage or Usage(),
            usage_unknown=outcome.usage is None,
            tier=self._ex.spec.service_tier,  # the tier it was sent to: a cancel names none
        )
        await self._save(JOB_NAME, None)
        return False
