"""The one place LangChain chat models are called: prompts, usage, retries, provider errors.

Structured outputs take the SDK's own path (``bind(response_format=Schema)``: a strict JSON
schema, the reply parsed into ``Schema``), so the reply message carries its usage whether it
parsed or was refused; it is one model call with no runnables around it (through the
``with_structured_output`` wrapper, a judge started before eight section writers was sent
after them, 14 ms in; now first, in 3 ms). A reply that does not parse, or a refusal, is
asked again a bounded number of times, then the step fails with ``StructuredOutputError``.
A text reply whose body is malformed or empty is retried the same number of times.
Transport retries (429 with retry-after, 5xx, timeouts) are the openai client's
``max_retries``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from string import Template
from typing import TypeVar

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from openai.types import CompletionUsage
from pydantic import BaseModel, ValidationError

from deep_research.core.errors import ProviderError, StructuredOutputError
from deep_research.core.models import Role, Usage
from deep_research.core.ports import Meter

T = TypeVar("T", bound=BaseModel)
_SEPARATOR = "=== user ==="
MAX_CAP_TOKENS = 128_000
CUT_OFF_NOTE = (
    "\n\n_[This reply was cut off at the token cap: raise DEEP_RESEARCH_MAX_TOKENS_PER_CALL.]_"
)


@dataclass(frozen=True)
class Prompt:
    system: Template
    user: Template

    def messages(self, **values: object) -> list[BaseMessage]:
        text = {k: str(v) for k, v in values.items()}
        return [
            SystemMessage(self.system.substitute(text)),
            HumanMessage(self.user.substitute(text)),
        ]


@cache
def load_prompt(name: str) -> Prompt:
    """``prompts/<name>.md``: the system text, a ``=== user ===`` line, the user text."""
    raw = resources.files("deep_research.prompts").joinpath(f"{name}.md").read_text("utf-8")
    system, _, user = raw.partition(_SEPARATOR)
    return Prompt(Template(system.strip()), Template(user.strip()))


@dataclass(frozen=True)
class ChatModel:
    """A chat model bound to a role: what it is called with and how its usage is billed."""

    chat: ChatOpenAI
    model: str
    role: Role
    structured_retries: int = 2

    def capped(self, max_tokens: int) -> ChatModel:
        """The same model with its replies capped at ``max_tokens`` (reasoning included)."""
        return replace(self, chat=self.chat.model_copy(update={"max_tokens": max_tokens}))

    async def text(self, messages: list[BaseMessage], meter: Meter) -> str:
        """A plain-text reply. A malformed or empty reply is asked again, as a structured
        one is, a bounded number of times; then the step fails with ``ProviderError``."""
        problem = "no reply"
        for _ in range(self.structured_retries + 1):
            try:
                reply = await self.chat.ainvoke(messages)
            except openai.OpenAIError as exc:
                raise provider_error(exc, self.model) from exc
            except ValueError as exc:  # json.JSONDecodeError included: the body did not parse
                problem = f"the provider sent a malformed reply ({exc})"
                continue
            meter.record(self.role, self.model, usage_of(reply))
            content = str(reply.text) if isinstance(reply, AIMessage) else str(reply.content)
            if not content.strip():
                problem = "the reply was empty"
                continue
            if reply.response_metadata.get("finish_reason") == "length":
                content += CUT_OFF_NOTE  # flagged where a reader will see it: in the report
            return content
        raise ProviderError(
            f"{self.model}: no usable reply after {self.structured_retries + 1} attempts: "
            f"{problem[:200]}"
        )

    async def structured(self, schema: type[T], messages: list[BaseMessage], meter: Meter) -> T:
        chat = self.chat
        problem = "no reply"
        enlarged = False
        attempts = 0
        while attempts <= self.structured_retries:
            attempts += 1
            try:
                # The SDK's own structured path: a strict JSON schema of ``schema``, the reply
                # parsed into it (``additional_kwargs["parsed"]``), usage on the message.
                reply = await chat.bind(response_format=schema).ainvoke(messages)
            except openai.LengthFinishReasonError as exc:
                # Cut off at the token cap (a reasoning model may spend it all thinking): the
                # tokens are billed, so record them, then try once with twice the room.
                meter.record(self.role, self.model, completion_usage(exc.completion.usage))
                cap = chat.max_tokens or 0
                if enlarged or not cap or cap >= MAX_CAP_TOKENS:
                    raise StructuredOutputError(
                        f"{self.model}: the {schema.__name__} reply was cut off at "
                        f"{cap:,} tokens; raise DEEP_RESEARCH_MAX_TOKENS_PER_CALL"
                    ) from None
                enlarged, attempts = True, attempts - 1  # a bigger cap is not a re-ask
                chat = chat.model_copy(update={"max_tokens": min(2 * cap, MAX_CAP_TOKENS)})
                continue
            except openai.OpenAIError as exc:
                raise provider_error(exc, self.model) from exc
            except (ValidationError, ValueError) as exc:
                # The SDK's own parse step raises instead of returning a parsing error (its
                # usage is lost with it); json.JSONDecodeError is a ValueError too.
                problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                continue
            meter.record(self.role, self.model, usage_of(reply))
            parsed = reply.additional_kwargs.get("parsed")
            if isinstance(parsed, schema):
                return parsed
            refusal = reply.additional_kwargs.get("refusal")
            problem = f"the model refused: {refusal}" if refusal else "no parsed reply"
        raise StructuredOutputError(
            f"{self.model} gave no valid {schema.__name__} after "
            f"{self.structured_retries + 1} attempts: {problem[:200]}"
        )


def usage_of(message: AIMessage) -> Usage:
    meta = message.usage_metadata
    if not meta:
        return Usage()
    details_in = meta.get("input_token_details") or {}
    details_out = meta.get("output_token_details") or {}
    return Usage(
        input_tokens=meta.get("input_tokens", 0),
        cached_input_tokens=details_in.get("cache_read", 0) or 0,
        output_tokens=meta.get("output_tokens", 0),
        reasoning_tokens=details_out.get("reasoning", 0) or 0,
    )


def completion_usage(usage: CompletionUsage | None) -> Usage:
    """Usage of a raw chat completion (what a ``LengthFinishReasonError`` carries)."""
    if usage is None:
        return Usage()
    cached = usage.prompt_tokens_details.cached_tokens if usage.prompt_tokens_details else 0
    reasoning = (
        usage.completion_tokens_details.reasoning_tokens if usage.completion_tokens_details else 0
    )
    return Usage(
        input_tokens=usage.prompt_tokens,
        cached_input_tokens=cached or 0,
        output_tokens=usage.completion_tokens,
        reasoning_tokens=reasoning or 0,
    )


_HINTS: list[tuple[type[openai.OpenAIError], str]] = [
    (openai.AuthenticationError, "authentication failed: check OPENAI_API_KEY"),
    (openai.PermissionDeniedError, "permission denied for this model or key"),
    (
        openai.NotFoundError,
        "model or endpoint not found: check the model names and OPENAI_BASE_URL",
    ),
    (openai.RateLimitError, "rate limited or out of quota (HTTP 429), even after retries"),
    (openai.APITimeoutError, "the provider timed out"),
    (openai.APIConnectionError, "cannot reach the provider: check OPENAI_BASE_URL and the network"),
    (openai.BadRequestError, "the provider rejected the request"),
    (openai.InternalServerError, "the provider failed (HTTP 5xx), even after retries"),
]


def provider_error(exc: openai.OpenAIError, model: str) -> ProviderError:
    """Map an openai exception to a one-line ``ProviderError`` (the one table of hints)."""
    for kind, hint in _HINTS:
        if isinstance(exc, kind):
            detail = getattr(exc, "message", "") or str(exc)
            return ProviderError(f"{model}: {hint} ({detail[:160]})")
    return ProviderError(f"{model}: {type(exc).__name__}: {str(exc)[:160]}")
