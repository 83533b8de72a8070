"""The one place LangChain chat models are called: prompts, usage, retries, provider errors.

Structured outputs are negotiated with the server, per (server, model), and remembered:
a strict JSON schema as the SDK writes it (``strict_format``), sent as data so that the
SDK's own parse step does not run: every reply is read here (``replies.read_reply``) and
billed, one that does not validate included; where that shape is refused (llama-cpp-python
answers it with HTTP 500), a JSON object with the schema stated in the prompt; then plain
text, read by ``replies.json_object_in``. A reply that does not parse, or a refusal, is
repaired: asked again with the reply and what was wrong with it, a bounded number of times;
then the step fails with ``StructuredOutputError``.

Every request goes through ``server.ChatServer.send``: its caps, its retries (a timeout or
a 5xx once, never a third identical send), its concurrency limit and its slow-call notices.
The openai client itself never retries (``max_retries=0``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from string import Template
from typing import TypeVar

import openai
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from deep_research.adapters.llm.params import is_reasoning_model, reasoning_room
from deep_research.adapters.llm.provider_errors import provider_error
from deep_research.adapters.llm.replies import completion_usage, read_reply, usage_of
from deep_research.adapters.llm.server import (
    CHARS_PER_TOKEN,
    ChatServer,
    SentTwice,
    Shape,
    ShapeRefused,
    fingerprint,
)
from deep_research.core.errors import ProviderError, StructuredOutputError
from deep_research.core.models import Role, Usage
from deep_research.core.ports import Meter

T = TypeVar("T", bound=BaseModel)
_SEPARATOR = "=== user ==="
MAX_CAP_TOKENS = 128_000
CUT_OFF_NOTE = "\n\n_[This reply was cut off at the token cap: raise {setting}.]_"
SLOW_NOTE = (
    "\n\n_[This reply timed out, then was cut off at {cap:,} tokens, what the model writes "
    "here within {setting}.]_"
)
RAN_ON_NOTE = (
    "\n\n_[This reply was cut off at {cap:,} tokens, far more than it was asked for: the "
    "model may be repeating itself.]_"
)


# --- how long a reply runs: a call's cap is this plus its model's reasoning room. Generous
# (a cut-off reply is retried once with twice the room), but hundreds to a few thousand
# tokens, not the 16,000 a tiny model under a JSON grammar would write to the end of.
VERDICT_TOKENS = 800


def words_tokens(words: int) -> int:
    """A reply of ``words`` words, with its markdown and citation markers."""
    return int(words * 1.5) + 100


def plan_tokens(max_tasks: int) -> int:
    return 300 + 200 * max_tasks


def outline_tokens(max_sections: int) -> int:
    return 200 + 250 * max_sections


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
    """A chat model bound to a role: what it is called with and how its usage is billed.

    ``max_tokens`` is the ceiling of any reply (reasoning included) and ``cap_setting`` the
    setting that chose it; a call that knows how long its reply runs (``reply_tokens``) is
    capped nearer that, with room for the model's reasoning (``params.reasoning_room``)."""

    chat: ChatOpenAI
    model: str
    role: Role
    structured_retries: int = 2
    """Repair requests after a reply that does not parse (each different: it carries the
    reply and what was wrong with it)."""
    server: ChatServer = field(default_factory=ChatServer)
    max_tokens: int | None = None
    """None: the chat model's own ``max_tokens``, or ``MAX_CAP_TOKENS``."""
    cap_setting: str = "DEEP_RESEARCH_MAX_TOKENS_PER_CALL"

    def capped(self, max_tokens: int, setting: str | None = None) -> ChatModel:
        """The same model, its replies capped at ``max_tokens`` that ``setting`` chose."""
        return replace(self, max_tokens=max_tokens, cap_setting=setting or self.cap_setting)

    @property
    def ceiling(self) -> int:
        return self.max_tokens or self.chat.max_tokens or MAX_CAP_TOKENS

    def cap_for(self, reply_tokens: int | None) -> int:
        """The cap of a call whose reply runs to about ``reply_tokens`` (None: unknown)."""
        if reply_tokens is None:
            return self.ceiling
        room = reasoning_room(self.model, self.chat.reasoning_effort)
        return min(self.ceiling, reply_tokens + room)

    async def text(
        self,
        messages: list[BaseMessage],
        meter: Meter,
        *,
        reply_tokens: int | None = None,
        sized_by: str | None = None,
    ) -> str:
        """A plain-text reply. A malformed or empty reply is asked again once (the same
        request is never sent a third time); then the step fails with ``ProviderError``.
        A reply cut off at its cap says so, naming the setting that governs the cap: the
        model's ceiling (``cap_setting``), or ``sized_by``, the setting ``reply_tokens``
        was sized from (a section's words), when the call's own size capped it lower."""
        problem = "no reply"
        sent: Counter[str] = Counter()
        cap = self.cap_for(reply_tokens)
        for _ in range(2):
            try:
                reply, slowed = await self._invoke(
                    messages, meter, cap=cap, sent=sent, shape="text"
                )
            except ValueError as exc:  # json.JSONDecodeError included: the body did not parse
                problem = f"the provider sent a malformed reply ({exc})"
                continue
            content = str(reply.text) if isinstance(reply, AIMessage) else str(reply.content)
            if not content.strip():
                problem = "the reply was empty"
                continue
            if reply.response_metadata.get("finish_reason") == "length":
                # Flagged where a reader will see it: in the report.
                content += self._cut_off_note(cap, sized_by, slowed)
            return content
        raise ProviderError(f"{self.model}: no usable reply after 2 attempts: {problem[:200]}")

    async def structured(
        self,
        schema: type[T],
        messages: list[BaseMessage],
        meter: Meter,
        *,
        reply_tokens: int | None = None,
    ) -> T:
        """A reply parsed into ``schema``, in the most enforced shape the server takes
        (``server.SHAPES``). A refused shape moves to the next one at once (remembered)."""
        shape = await self.server.shape(self.model)
        while True:
            try:
                return await self._structured_as(shape, schema, messages, meter, reply_tokens)
            except ShapeRefused as exc:
                following = await self.server.refused(self.model, shape)
                if following is None:
                    raise StructuredOutputError(
                        f"{self.model}: the server refused every way of asking for a "
                        f"{schema.__name__} ({exc})"
                    ) from None
                if self.server.on_slow is not None:
                    self.server.on_slow(
                        f"{self.model}: the server refuses {shape} replies ({exc}); "
                        f"asking for {following} instead"
                    )
                shape = following

    async def _structured_as(
        self,
        shape: Shape,
        schema: type[T],
        messages: list[BaseMessage],
        meter: Meter,
        reply_tokens: int | None,
    ) -> T:
        name = schema.__name__
        base = messages if shape == "json_schema" else with_schema(messages, schema)
        asked = base
        sent: Counter[str] = Counter()
        cap = self.cap_for(reply_tokens)
        problem = "no reply"
        enlarged = False
        attempts = 0
        while attempts <= self.structured_retries:
            attempts += 1
            try:
                reply, slowed = await self._invoke(
                    asked, meter, cap=cap, sent=sent, shape=shape, schema=schema
                )
            except SentTwice:
                break  # the model gave the same wrong reply again: asking again would too
            except ValueError as exc:  # the body itself did not parse: no reply, no usage
                problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                asked = [*base, HumanMessage(REPAIR.substitute(name=name, problem=problem))]
                continue
            else:
                parsed, problem, content = read_reply(reply, schema)
                cut_off = reply.response_metadata.get("finish_reason") == "length"
            if parsed is not None:
                return parsed
            if cut_off and slowed is not None:  # a bigger cap would time out again
                raise StructuredOutputError(
                    f"{self.model}: the {name} reply timed out, then was cut off at {slowed:,} "
                    f"tokens, what it writes here within {self.server.timeout_setting}: raise "
                    "it, or serve a faster model"
                )
            if cut_off:
                # Cut off at the cap (a reasoning model may spend it all thinking): one more
                # try with twice the room.
                if enlarged or cap >= MAX_CAP_TOKENS:
                    raise StructuredOutputError(self._cut_off(name, cap))
                enlarged, attempts = True, attempts - 1  # a bigger cap is not a repair
                cap = min(2 * cap, MAX_CAP_TOKENS)
                continue
            echo = [AIMessage(content[:REPLY_ECHO_CHARS])] if content.strip() else []
            asked = [*base, *echo, HumanMessage(REPAIR.substitute(name=name, problem=problem))]
        raise StructuredOutputError(
            f"{self.model} gave no valid {name} after {sum(sent.values())} attempts: "
            f"{problem[:200]}"
        )

    async def _invoke(
        self,
        messages: list[BaseMessage],
        meter: Meter,
        *,
        cap: int,
        sent: Counter[str],
        shape: Shape,
        schema: type[BaseModel] | None = None,
    ) -> tuple[AIMessage, int | None]:
        """One request through the server's rules (``ChatServer.send``); its usage billed.
        Returns the reply and, when a timeout made its retry ask for less, that cap."""
        what = f"{self.role} ({schema.__name__})" if schema is not None else self.role
        await self.server.ready()
        chars = sum(len(str(m.content)) for m in messages)
        cap = self.server.fit(self.model, what, chars, cap)

        def timed_out(cap: int) -> None:
            # Nothing reported: bill what it may have generated (and its prompt as written
            # to the cache, where the model bills writes), so the budget binds.
            tokens = int(chars / CHARS_PER_TOKEN)
            usage = Usage(input_tokens=tokens, cache_write_tokens=tokens, output_tokens=cap)
            meter.record(self.role, self.model, usage, usage_unknown=True)

        request = fingerprint(shape, cap, [m.model_dump() for m in messages])
        caps: list[int] = []  # as sent: a timeout's retry may ask for less
        ask = self._request(messages, shape, schema, caps)

        async def send() -> tuple[object, float]:
            return await self.server.send(
                ask,
                model=self.model,
                what=what,
                sent=sent,
                fingerprint=request,
                cap=cap,
                on_timeout=timed_out,
                shape_sensitive=shape != "text",
            )

        usage: Usage | None = None
        try:
            reply, seconds = await self.server.once(
                fingerprint(self.model, self.role, what, request), send, again=sent[request] > 0
            )
        except openai.LengthFinishReasonError as exc:  # the SDK found a structured reply cut
            reply, seconds = AIMessage("", response_metadata={"finish_reason": "length"}), 0.0
            usage = completion_usage(exc.completion.usage)  # billed; its half-object unread
        except openai.OpenAIError as exc:
            raise provider_error(exc, self.model) from exc
        assert isinstance(reply, AIMessage)
        if not caps:
            return reply, None  # another caller of the run asked the same: it sent and paid
        usage = usage or usage_of(reply)
        meter.record(self.role, self.model, usage)
        self.server.speed.add(usage.output_tokens, seconds)
        return reply, (caps[-1] if caps[-1] < cap else None)

    def _request(
        self,
        messages: list[BaseMessage],
        shape: Shape,
        schema: type[BaseModel] | None,
        caps: list[int],
    ) -> Callable[[int], Awaitable[object]]:
        """The request of ``messages`` in ``shape``, sent with a reply cap (noted in ``caps``)."""
        chat, in_body = self.chat, not (self.server.on_openai or is_reasoning_model(self.model))
        if in_body and chat.max_tokens is not None:
            chat = chat.model_copy(update={"max_tokens": None})
        formats: dict[str, object] = {}
        if shape == "json_schema" and schema is not None:
            formats["response_format"] = strict_format(schema)
        elif shape == "json_object":
            formats["response_format"] = {"type": "json_object"}

        async def ask(cap: int) -> object:
            caps.append(cap)
            # LangChain renames max_tokens; the body's own name is the one every server
            # knows. Reasoning models refuse it (HTTP 400 naming max_tokens) wherever OpenAI
            # serves them, behind a gateway too.
            limit = (
                {"extra_body": {"max_tokens": cap}} if in_body else {"max_completion_tokens": cap}
            )
            return await chat.bind(**limit, **formats).ainvoke(messages)

        return ask

    def _cut_off_note(self, cap: int, sized_by: str | None, slowed: int | None) -> str:
        if slowed is not None:
            return SLOW_NOTE.format(cap=slowed, setting=self.server.timeout_setting)
        if cap >= self.ceiling:
            return CUT_OFF_NOTE.format(setting=self.cap_setting)
        if sized_by is not None:
            return CUT_OFF_NOTE.format(setting=sized_by)
        return RAN_ON_NOTE.format(cap=cap)

    def _cut_off(self, name: str, cap: int) -> str:
        if cap < self.ceiling:  # the call's own size bound it, not the setting
            return (
                f"{self.model}: the {name} reply ran past {cap:,} tokens, far more than such a "
                "reply needs (the model may be repeating itself): use a larger model, or a "
                "repeat penalty on the server"
            )
        return (
            f"{self.model}: the {name} reply was cut off at {cap:,} tokens; "
            f"raise {self.cap_setting}"
        )


REPLY_ECHO_CHARS = 4_000
"""How much of a reply that did not parse is shown back to the model with the repair."""
REPAIR = Template(
    "Your reply was not a valid $name: $problem. Reply again with only the JSON object, "
    "every required field filled."
)
SCHEMA_INSTRUCTION = (
    "\n\nReply with one JSON object and nothing else. It must validate against this JSON "
    "schema:\n```json\n{schema}\n```"
)


def strict_format(schema: type[BaseModel]) -> dict[str, object]:
    """The ``response_format`` of a strict JSON schema, exactly as the SDK writes it for
    ``schema`` (``openai.pydantic_function_tool``'s strict schema), but as data: given the
    class, the SDK would parse the reply itself and raise on one that does not validate,
    the reply and its usage lost with the exception."""
    function = openai.pydantic_function_tool(schema)["function"]
    return {
        "type": "json_schema",
        "json_schema": {"schema": function["parameters"], "name": schema.__name__, "strict": True},
    }


def with_schema(messages: list[BaseMessage], schema: type[BaseModel]) -> list[BaseMessage]:
    """``messages`` with the schema stated in the system message (the server enforces none)."""
    stated = SCHEMA_INSTRUCTION.format(
        schema=json.dumps(schema.model_json_schema(), separators=(",", ":"))
    )
    first, *rest = messages
    if isinstance(first, SystemMessage):
        return [SystemMessage(f"{first.content}{stated}"), *rest]
    return [SystemMessage(stated.strip()), *messages]
