"""The ``web`` branch: OpenAI Deep Research through the Responses API, in the background.

Invariants:
- The response id is handed to ``on_remote_job`` the moment it exists, before any wait,
  so an interrupted session knows which remote job it owns.
- A job is never resubmitted while an id for it exists: a resumed task re-attaches by
  polling; only a job the provider lost (404) or cancelled is submitted anew.
- Every wait is bounded: the whole remote run by ``max_wait_seconds`` (then the job is
  cancelled), each poll by the SDK's request timeout, the cancel request by a few seconds.
- The worst-case cost is reserved before dispatch and released afterwards, whatever happens.
- A finished job is cleared (``on_remote_job(name, None)``) only after its result is
  extracted and cached; an abandoned one (timeout, Ctrl-C, lost contact) is cancelled first.
"""

from __future__ import annotations

import asyncio
import json
from importlib.resources import files
from typing import Any, Protocol

import openai
from openai.types.responses import Response
from pydantic import BaseModel, ValidationError

from deep_research.branches.web_output import confidence, extract_report, usage_of
from deep_research.budget import deep_research_worst_case
from deep_research.errors import BranchError, BudgetExhausted, ProviderError
from deep_research.models import Citation, Usage
from deep_research.ports import BranchResult, BranchTask, Finding, Meter, RemoteJobHook

JOB_NAME = "deep_research"
CACHE_TOOL = "openai_deep_research"
MAX_DEPENDENCY_CHARS = 10_000
"""Room for all dependencies' findings together, split evenly: the prompt never grows
with the number of nodes."""
MAX_QUESTION_CHARS = 2_000
CANCEL_TIMEOUT_SECONDS = 5.0
_PENDING = ("queued", "in_progress")


class ReportCompressor(Protocol):
    async def compress(self, question: str, report: str, meter: Meter) -> str:
        """Condense a long report into notes, keeping its ``[n]`` markers."""
        ...


class ReportCache(Protocol):
    """What we need of ``deep_research.cache.ResultCache``."""

    async def get(self, tool: str, model: str, query: str) -> str | None: ...

    async def set(self, tool: str, model: str, query: str, value: str) -> None: ...


class DeepResearchReport(BaseModel):
    """The raw result of one run, as cached: report text with ``[n]`` markers inserted."""

    text: str
    citations: list[Citation]
    usage: Usage


class DeepResearchExecutor:
    def __init__(
        self,
        client: openai.AsyncOpenAI,
        *,
        model: str,
        max_tool_calls: int,
        max_wait_seconds: float,
        poll_seconds: float,
        compressor: ReportCompressor,
        cache: ReportCache | None,
        max_backoff_seconds: float = 60.0,
    ) -> None:
        self._client = client
        self._model = model
        self._max_tool_calls = max_tool_calls
        self._max_wait = max_wait_seconds
        self._poll = poll_seconds
        self._max_backoff = max_backoff_seconds
        self._compressor = compressor
        self._cache = cache

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        developer = load_instructions()
        user = build_user_message(task)
        key = f"max_tool_calls={self._max_tool_calls}\n{developer}\n\n{user}"
        report = await self._cached(key, meter)
        if report is None:
            worst = deep_research_worst_case(self._model, self._max_tool_calls)
            if not await meter.reserve(worst):
                raise BudgetExhausted(
                    f"deep research needs up to ${worst:.2f}; ${meter.remaining_usd():.2f} left"
                )
            try:
                response = await self._remote(task, developer, user, on_remote_job)
                report = await self._finish(response, meter, on_remote_job)
            finally:
                meter.release(worst)
            if self._cache is not None:
                await self._cache.set(CACHE_TOOL, self._model, key, report.model_dump_json())
            await on_remote_job(JOB_NAME, None)
        notes = await self._compressor.compress(task.question, report.text, meter)
        return BranchResult(
            notes=notes, citations=tuple(report.citations), confidence=confidence(report.citations)
        )

    async def _cached(self, key: str, meter: Meter) -> DeepResearchReport | None:
        if self._cache is None:
            return None
        raw = await self._cache.get(CACHE_TOOL, self._model, key)
        if raw is None:
            return None
        try:
            report = DeepResearchReport.model_validate_json(raw)
        except ValidationError:
            return None  # an entry from an older format: redo the work
        meter.record("deep_research", self._model, report.usage, cached=True)
        return report

    async def _remote(
        self, task: BranchTask, developer: str, user: str, on_remote_job: RemoteJobHook
    ) -> Response:
        """Re-attach or submit, then poll to a terminal status; cancel the job if abandoned."""
        job_id = task.remote_jobs.get(JOB_NAME)
        try:
            async with asyncio.timeout(self._max_wait):
                response = await self._reattach(job_id) if job_id else None
                if response is None:
                    job_id = None
                    response = await self._call(
                        self._client.responses.create(
                            model=self._model,
                            input=[
                                {"role": "developer", "content": developer},
                                {"role": "user", "content": user},
                            ],
                            background=True,
                            store=True,
                            tools=[{"type": "web_search_preview"}],
                            max_tool_calls=self._max_tool_calls,
                            reasoning={"summary": "auto"},
                        )
                    )
                    job_id = response.id
                    await on_remote_job(JOB_NAME, job_id)
                delay = self._poll
                while response.status in _PENDING:
                    await asyncio.sleep(delay)
                    delay = min(delay * 1.5, self._max_backoff)
                    try:
                        response = await self._call(self._client.responses.retrieve(response.id))
                    except _Transient:
                        # The job runs on (and is paid for) whatever our connection does:
                        # keep polling until the maximum wait rather than abandon it.
                        continue
                return response
        except BaseException as exc:  # timeout, Ctrl-C, lost contact: don't leave it running
            if job_id is not None:
                await self._abandon(job_id, on_remote_job)
            if isinstance(exc, TimeoutError):
                raise BranchError(
                    f"deep research did not finish within {self._max_wait:g} s"
                ) from None
            raise

    async def _reattach(self, job_id: str) -> Response | None:
        """The stored job, or None if the provider lost or cancelled it (submit anew)."""
        try:
            response = await self._call(self._client.responses.retrieve(job_id))
        except _JobGone:
            return None
        return None if response.status == "cancelled" else response

    async def _call(self, request: Any) -> Response:
        try:
            response = await request
        except openai.APIError as exc:
            raise _branch_error(exc) from None
        except json.JSONDecodeError:  # the SDK does not wrap an unparsable 200 body
            raise BranchError("deep research: the provider sent an unreadable response") from None
        if not isinstance(response, Response) or not isinstance(getattr(response, "id", 0), str):
            raise BranchError("deep research: the provider sent a malformed response")
        if not response.id:
            raise BranchError("deep research: the provider sent a response without an id")
        return response

    async def _abandon(self, job_id: str, on_remote_job: RemoteJobHook) -> None:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT_SECONDS):
                # Shielded so a second cancellation (another Ctrl-C) cannot drop the request.
                await asyncio.shield(self._client.responses.cancel(job_id))
        except (openai.APIError, json.JSONDecodeError, TimeoutError):
            pass  # best effort: the job may have ended already; it is abandoned either way
        await on_remote_job(JOB_NAME, None)

    async def _finish(
        self, response: Response, meter: Meter, on_remote_job: RemoteJobHook
    ) -> DeepResearchReport:
        """Record what the run cost, then extract the report or explain the failure."""
        usage = usage_of(response)
        meter.record("deep_research", self._model, usage)
        try:
            return _report(response, usage)
        except BranchError:
            await on_remote_job(JOB_NAME, None)  # the job has ended: nothing to re-attach to
            raise


def _report(response: Response, usage: Usage) -> DeepResearchReport:
    if response.status == "completed":
        text, citations = extract_report(response)
        return DeepResearchReport(text=text, citations=citations, usage=usage)
    if response.status == "failed":
        error = getattr(response.error, "message", None) or "no reason given"
        raise BranchError(f"deep research failed: {error}")
    if response.status == "incomplete":
        reason = getattr(response.incomplete_details, "reason", None) or "no reason given"
        raise BranchError(f"deep research stopped incomplete: {reason}")
    if response.status == "cancelled":
        raise BranchError("deep research was cancelled by the provider")
    raise BranchError(f"deep research ended with unexpected status {response.status!r}")


class _JobGone(BranchError):
    """The provider no longer knows the response id (HTTP 404)."""


class _Transient(BranchError):
    """A request that failed for a passing reason (connection, timeout, 429, 5xx)."""


def _branch_error(exc: openai.APIError) -> Exception:
    if isinstance(exc, openai.NotFoundError):
        return _JobGone(f"deep research job not found: {exc.message[:300]}")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ProviderError(f"OpenAI refused the credentials: {exc.message[:300]}")
    status = getattr(exc, "status_code", None)
    where = f"HTTP {status}" if status else type(exc).__name__
    transient = isinstance(exc, openai.APIConnectionError | openai.RateLimitError) or (
        isinstance(status, int) and status >= 500
    )
    kind = _Transient if transient else BranchError
    return kind(f"deep research request failed ({where}): {exc.message[:300]}")


def load_instructions() -> str:
    path = files("deep_research").joinpath("prompts/deep_research.md")
    return path.read_text(encoding="utf-8").strip()


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: max(0, limit - 14)].rstrip() + " …[truncated]"


def _render_finding(finding: Finding, limit: int) -> str:
    head = f"### {_clip(finding.question, 300)}\n"
    lines = [
        _clip(f"[{c.ref or i}] {c.title or c.locator} — {c.url or c.locator}", 200)
        for i, c in enumerate(finding.citations, 1)
    ]
    sources = _clip("\n".join(lines), limit // 3) if lines else "(none)"
    notes = _clip(finding.notes, max(0, limit - len(head) - len(sources) - 14))
    return _clip(f"{head}{notes}\nSources:\n{sources}", limit)


def build_user_message(task: BranchTask) -> str:
    parts = [
        f"Sub-question to research:\n{_clip(task.question, MAX_QUESTION_CHARS)}",
        "It is part of this larger question (context only):\n"
        + _clip(task.root_question, MAX_QUESTION_CHARS),
    ]
    if task.dependencies:
        share = MAX_DEPENDENCY_CHARS // len(task.dependencies)
        findings = "\n\n".join(_render_finding(f, share) for f in task.dependencies)
        parts.append(f"Findings of earlier research this builds on:\n\n{findings}")
    return "\n\n".join(parts)
