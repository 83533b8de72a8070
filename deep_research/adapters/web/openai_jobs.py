"""Background research jobs on the Responses API: create, retrieve, cancel — and what each
failure means for money.

A create is the one request that costs money, so it is never retried blindly:
- it goes out with ``max_retries=0`` (the SDK would otherwise resend a POST whose reply was
  lost, starting a second paid job nobody tracks);
- only a create that certainly never reached the server (the TCP connection was refused)
  or that the server refused outright (429 rate limit) is sent again;
- any other lost reply (timeout, dropped connection, unreadable body) is a ``LostReply``:
  a job may be running, and it is not submitted again in this run;
- the job id is read from the raw reply before the SDK builds its ``Response`` (76 ms cold
  in a fresh process), so the caller can save it within milliseconds.

Reads are safe to repeat: every failure of a retrieve other than 404 (job gone) and a
refused key is ``Transient``, and the caller keeps polling until its maximum wait — a job
is never abandoned because its status could not be read.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import openai
from openai.types.responses import Response, ResponseIncludable
from pydantic import SecretStr

from deep_research.adapters.web.output import usage_of
from deep_research.adapters.web.retry_after import retry_after_seconds
from deep_research.core.errors import BranchError, ProviderError, SettingRefused
from deep_research.core.ports import CancelOutcome
from deep_research.core.scope import WebScope

PENDING = ("queued", "in_progress")
CONNECT_RETRIES = 2
RATE_LIMIT_RETRIES = 3
CANCEL_TIMEOUT_SECONDS = 10.0
_LEGACY_DEEP_RESEARCH = re.compile(r"(^|/)o\d[\w.-]*-deep-research(-\d{4}-\d{2}-\d{2})?$")


SOURCES_INCLUDE: ResponseIncludable = "web_search_call.action.sources"
"""Asks for every source a search used, not only the cited ones (``ActionSearch.sources``)."""


@dataclass(frozen=True)
class JobSpec:
    """What a web research job runs with; saved in the session's ``RunSpec``.

    The request (``body``), its field names checked 2026-11-26 against the openai SDK 3.57
    types in ``openai/types/responses/``: ``web_search_tool_param.py`` (``filters.
    allowed_domains``, subdomains included; ``user_location`` ``{type: "approximate", city,
    country, region, timezone}``, which, left out or null, "defaults to the United States":
    so it is always sent, with no fields when no place is known), ``response_includable.py``
    (``web_search_call.action.sources``), ``response_create_params.py`` and
    ``service_tier.py`` (``service_tier: "flex"``). The legacy ``web_search_preview`` tool
    (``web_search_preview_tool_param.py``) takes ``user_location`` but no ``filters``.

    Of the scope, OpenAI takes only the allowed domains and the location. It has no field
    for excluded domains (``Filters`` holds ``allowed_domains`` alone) nor for a date: the
    job's user message asks for both in words (``job_prompt.scope_limits``), and a
    citation of an excluded page is dropped when its result is read, with the sentence it
    alone supports, its searches still paid for.
    """

    model: str
    reasoning_effort: str = "high"
    max_tool_calls: int = 16
    max_output_tokens: int = 32_000
    reasoning_summary: str | None = None
    """``auto`` / ``concise`` / ``detailed``, or None (refused for unverified organisations)."""
    scope: WebScope = field(default_factory=WebScope)
    service_tier: Literal["default", "flex"] = "default"
    """flex: half the price, may wait longer (``DEEP_RESEARCH_WEB_TIER``); unverified with
    background ``web_search``; a refusal stops the run (``SettingRefused``). A job is
    reserved (and estimated) at the default tier's price, booked at the tier its reply
    names."""

    @property
    def legacy(self) -> bool:
        """The retired ``o3/o4-mini-deep-research`` models take ``web_search_preview`` and
        fixed reasoning; a provider may still serve them."""
        return bool(_LEGACY_DEEP_RESEARCH.search(self.model.lower()))

    def describe(self) -> str:
        said = [] if self.legacy else [f"effort {self.reasoning_effort}"]
        if self.service_tier == "flex":
            said.append("flex tier")
        return f"{self.model} ({', '.join(said)})" if said else self.model

    def cache_key(self) -> str:
        """Whatever changes the job's answer: another scope or tier is another job."""
        return (
            f"{self.model}|effort={self.reasoning_effort}|tools={self.max_tool_calls}"
            f"|out={self.max_output_tokens}|tier={self.service_tier}"
            f"|scope={self.scope.model_dump_json()}"
        )

    @property
    def include(self) -> list[ResponseIncludable]:
        """What the create and every retrieve of the job ask to include. A reply holds only
        what its own request asks for: a retrieve has its own ``include`` (openai SDK 3.57,
        ``types/responses/response_retrieve_params.py``, checked 2026-11-26), and what the
        create included is not carried to a later retrieve. The retired models' replies
        predate the sources include."""
        return [] if self.legacy else [SOURCES_INCLUDE]

    def web_search(self) -> dict[str, Any]:
        """The web search tool, with what of the scope it takes."""
        if self.legacy:
            return {"type": "web_search_preview", "user_location": self.scope.user_location()}
        tool: dict[str, Any] = {"type": "web_search"}
        if self.scope.domains:
            tool["filters"] = {"allowed_domains": list(self.scope.domains)}
        tool["user_location"] = self.scope.user_location()
        return tool

    def body(
        self, developer: str, user: str, *, with_summary: bool, kb_tool: KbTool | None = None
    ) -> dict[str, Any]:
        reasoning: dict[str, str] = {}
        if not self.legacy:
            reasoning["effort"] = self.reasoning_effort
        if with_summary and self.reasoning_summary:
            reasoning["summary"] = self.reasoning_summary
        body: dict[str, Any] = {
            "model": self.model,
            "input": [
                {"role": "developer", "content": developer},
                {"role": "user", "content": user},
            ],
            "background": True,
            "store": True,
            "tools": [self.web_search(), *([kb_tool.param()] if kb_tool else [])],
            "max_tool_calls": self.max_tool_calls,
            "max_output_tokens": self.max_output_tokens,
        }
        if self.include:
            body["include"] = self.include
        if self.service_tier == "flex":
            body["service_tier"] = "flex"
        if reasoning:
            body["reasoning"] = reasoning
        return body


@dataclass(frozen=True)
class KbTool:
    """The user's knowledge base offered to a research job: this tool's MCP server
    (``deep-research mcp --http``) at a public URL, its ``search`` and ``fetch`` tools,
    called without approval and with the API token as the bearer. The token is sent in the
    request body only: never saved in a session, the cache or a log."""

    url: str
    token: SecretStr

    def param(self) -> dict[str, Any]:
        return {
            "type": "mcp",
            "server_label": "knowledge_base",
            "server_description": "The user's own markdown knowledge base: search it, then "
            "fetch a result by its id for the full text.",
            "server_url": self.url,
            "allowed_tools": ["search", "fetch"],
            "require_approval": "never",
            "authorization": self.token.get_secret_value(),
        }


class JobGone(BranchError):
    """The provider no longer knows the response id (HTTP 404)."""


class Transient(BranchError):
    """A read that failed for a passing reason: keep trying until the maximum wait."""


class LostReply(BranchError):
    """A create whose reply never arrived: a job may be running; never resubmitted."""


class SummaryRefused(BranchError):
    """HTTP 400 on ``reasoning.summary`` (organisation not verified): nothing was created."""


@dataclass(frozen=True)
class Created:
    job_id: str
    parse: Callable[[], Response]
    """Builds the SDK's ``Response`` from the raw reply (after the id is saved)."""


class ResponsesJobs:
    """The three requests a research job needs, with their failures classified."""

    def __init__(self, client: openai.AsyncOpenAI, *, retry_base_seconds: float = 0.5) -> None:
        self._client = client
        self._create_client = client.with_options(max_retries=0)
        self._retry_base = retry_base_seconds

    async def create(self, body: dict[str, Any], *, where: str) -> Created:
        """Submit a job; ``where`` ("session S, node N") is named if its reply is lost."""
        model = str(body.get("model"))
        connect_failures = rate_limited = 0
        while True:
            try:
                raw = await self._create_client.responses.with_raw_response.create(**body)
            except openai.APIStatusError as exc:
                if _is_rate_limit(exc) and rate_limited < RATE_LIMIT_RETRIES:
                    rate_limited += 1  # refused before any work: nothing was created
                    await asyncio.sleep(_retry_after(exc, self._retry_base * 2**rate_limited))
                    continue
                flex = body.get("service_tier") == "flex"
                raise _create_error(exc, model, where, flex=flex) from None
            except openai.APIConnectionError as exc:
                never_sent = isinstance(exc.__cause__, httpx2.ConnectError) and not isinstance(
                    exc, openai.APITimeoutError
                )
                if never_sent and connect_failures < CONNECT_RETRIES:
                    connect_failures += 1
                    await asyncio.sleep(self._retry_base * 2**connect_failures)
                    continue
                if never_sent:
                    raise BranchError(
                        f"cannot reach the provider to start a research job ({exc})"
                    ) from None
                raise _lost(where, f"no reply: {type(exc).__name__}") from None
            job_id = _id_of(raw.http_response.content)
            if job_id is None:
                raise _lost(where, "the reply was unreadable")
            return Created(job_id, raw.parse)

    async def retrieve(
        self, job_id: str, *, include: Sequence[ResponseIncludable] = ()
    ) -> Response:
        """The job as it stands, with what ``include`` asks for (``JobSpec.include``: the
        create's ``include`` is not remembered by the provider)."""
        try:
            response = await self._client.responses.retrieve(
                job_id, include=list(include) if include else openai.omit
            )
        except openai.NotFoundError:
            raise JobGone(f"the provider no longer knows research job {job_id}") from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ProviderError(
                f"the provider refused the credentials: {exc.message[:200]}"
            ) from None
        except openai.APIError as exc:
            raise Transient(f"reading research job {job_id} failed: {_brief(exc)}") from None
        except ValueError:  # json.JSONDecodeError: the SDK does not wrap an unparsable body
            raise Transient(f"reading research job {job_id}: unreadable reply") from None
        if not isinstance(response, Response) or getattr(response, "id", None) != job_id:
            raise Transient(f"reading research job {job_id}: malformed reply")
        return response

    async def cancel(self, job_id: str) -> CancelOutcome:
        try:
            async with asyncio.timeout(CANCEL_TIMEOUT_SECONDS):
                # Shielded: a second Ctrl-C must not drop a cancel already on the wire.
                response = await asyncio.shield(self._client.responses.cancel(job_id))
        except openai.NotFoundError:
            return CancelOutcome("already_finished", detail="unknown to the provider")
        except (openai.APIError, ValueError, TimeoutError) as exc:
            return CancelOutcome("unreachable", detail=_brief(exc))
        status = getattr(response, "status", None)
        usage = usage_of(response) if getattr(response, "usage", None) is not None else None
        if status == "cancelled" or status in PENDING:  # pending: the cancel is under way
            return CancelOutcome("cancelled", usage)
        return CancelOutcome("already_finished", usage, detail=str(status))


def _id_of(content: bytes) -> str | None:
    try:
        data = json.loads(content)
    except ValueError:
        return None
    job_id = data.get("id") if isinstance(data, dict) else None
    return job_id if isinstance(job_id, str) and job_id else None


def _lost(where: str, why: str) -> LostReply:
    return LostReply(
        f"{where}: the request that starts a research job got {why}; a job may be running "
        "(and billing) at the provider. It is not submitted again in this run; check the "
        "provider's dashboard before resuming"
    )


def _is_rate_limit(exc: openai.APIStatusError) -> bool:
    return exc.status_code == 429 and _code(exc) != "insufficient_quota"


def _code(exc: openai.APIStatusError) -> str | None:
    return exc.code or exc.type  # insufficient_quota comes as both type and code


def _retry_after(exc: openai.APIStatusError, default: float) -> float:
    seconds = retry_after_seconds(exc.response.headers.get("retry-after"))
    return default if seconds is None else min(60.0, seconds)


def _create_error(
    exc: openai.APIStatusError, model: str, where: str, *, flex: bool = False
) -> Exception:
    if flex and _refuses_flex(exc):
        said = " ".join(exc.message.removeprefix(f"Error code: {exc.status_code} - ").split())
        return SettingRefused(
            f"the provider refused the flex service tier for {model} (HTTP {exc.status_code}: "
            f"{said[:200]}): start the run again with DEEP_RESEARCH_WEB_TIER=default (or "
            "without --web-tier flex)"
        )
    if exc.status_code == 404:
        trusted = (
            " (Astra models are open only to organisations in OpenAI's trusted-access "
            "programme: --web-model gpt-5.5 is open to all)"
            if "astra" in model.lower()
            else ""
        )
        return ProviderError(
            f"model {model} not found or not available to this key (HTTP 404): "
            f"set DEEP_RESEARCH_WEB_MODEL to a current model{trusted}"
        )
    if exc.status_code == 400 and exc.param == "reasoning.summary":
        return SummaryRefused(f"reasoning summaries refused: {exc.message[:200]}")
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        return ProviderError(f"the provider refused the credentials: {exc.message[:200]}")
    if exc.status_code == 429:
        return ProviderError(
            f"out of quota (HTTP 429 insufficient_quota): {exc.message[:200]}"
            if _code(exc) == "insufficient_quota"
            else f"rate limited (HTTP 429) even after {RATE_LIMIT_RETRIES} retries"
        )
    if exc.status_code >= 500 or exc.status_code == 408:
        # A server's or a proxy's failure may come after the job was created.
        return _lost(where, f"HTTP {exc.status_code}")
    return BranchError(f"the provider refused the research job: {_brief(exc)}")


def _refuses_flex(exc: openai.APIStatusError) -> bool:
    """A 400 on ``service_tier``, or one whose message names flex: how OpenAI refuses a
    tier a model or mode does not offer (whether it offers flex with background web search
    could not be checked, 2026-11-26)."""
    said = f"{exc.param or ''} {exc.message}".lower()
    return exc.status_code == 400 and ("service_tier" in said or "flex" in said)


def _brief(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    where = f"HTTP {status}" if status else type(exc).__name__
    message = getattr(exc, "message", None) or str(exc)
    return f"{where}: {' '.join(message.split())[:200]}"
