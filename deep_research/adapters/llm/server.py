"""What a run's chat models share about the server they call, and how a request is sent.

One ``ChatServer`` per run (or per ``check``, per ``doctor``): every ``ChatModel`` built for
it sends through ``ChatServer.send``, which owns these rules:

- **At most ``max_concurrent`` calls in flight** (a local server serves a few slots at once;
  a call queued there would spend its own timeout waiting). The wait for a slot is not
  counted against the request's timeout.
- **A request the run asked already is answered once.** Another caller sending the same
  request (model, what it asks for, messages, shape and cap: a small model's plan repeats a
  sub-question, its report a sentence) shares the answer (or the error it ended in), in
  flight or done, and pays nothing; a caller asking again itself (a retry of its own)
  sends.
- **No request is sent more than twice unchanged.** A timeout is retried once (the live
  view told so), off OpenAI asking for half the reply (a local model slower than its cap
  asks for, often a small one repeating itself, then gives a reply cut off, flagged as
  such, not a second timeout); a second timeout is one error naming the model's measured
  speed (or, before any reply, ``deep-research doctor``, which measures it) and the setting
  to raise. A 5xx or a
  dropped connection is retried once. A refusal of the request's *shape* (a 4xx, or a 5xx
  whose body names ``response_format``: llama-cpp-python answers a JSON schema with HTTP
  500) is not retried at all: it is a capability answer (``ShapeRefused``), and the caller
  asks in the next shape. Nor is a 5xx whose body names another request parameter, or
  quotes a validation error ("Input should be ..."): the same request would be refused
  again. Only a 429 that says when to come back (``retry-after``) is waited out and sent
  again, up to ``DEEP_RESEARCH_MAX_RETRIES`` times: the server asked for it.
- **A timed-out call is billed** its cap (the server reported nothing; it may have generated
  all of it), so the token budget binds a model that keeps timing out.
- **A prompt that cannot fit the model's context** (``context_tokens``, from the server or a
  setting) is refused before it is sent, naming the context; a cap that does not fit beside
  the prompt is lowered to what does.
- **Speed is measured** from every reply (output tokens per second of wall time), so a
  timeout can say how fast the model writes here.
- **A slow call is announced** (``on_slow``) every ``SLOW_NOTICE_SECONDS`` while it runs, so
  the live view shows which call is waiting and for how long.

What structured-output shape a (server, model) accepts is remembered in the model cache
(``shapes``), so a refusal is met once a day, not once a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, TypeVar, cast

import openai

from deep_research.adapters.llm.lifecycle import LookupCache
from deep_research.adapters.web.retry_after import retry_after_seconds
from deep_research.core.errors import ProviderError

Shape = Literal["json_schema", "json_object", "text"]
SHAPES: tuple[Shape, ...] = ("json_schema", "json_object", "text")
"""Structured-output shapes, most to least enforced by the server."""

SLOW_NOTICE_SECONDS = 20.0
SHAPE_TTL_SECONDS = 24 * 3600
MAX_RATE_LIMIT_WAIT = 60.0
CHARS_PER_TOKEN = 3.0
"""Prompt size estimate without a tokenizer: English runs ~4 characters a token; 3 errs on
the side of a prompt that fits."""
MIN_REPLY_TOKENS = 256

T = TypeVar("T")
R = TypeVar("R")


class ShapeRefused(Exception):
    """The server refused the request's shape (its ``response_format``): ask in another."""


class SentTwice(ProviderError):
    """This request was already sent twice, unchanged: it is not sent a third time."""


@dataclass
class Speed:
    """Output tokens per second of wall time, over every reply so far (queueing excluded)."""

    tokens: int = 0
    seconds: float = 0.0

    def add(self, tokens: int, seconds: float) -> None:
        if tokens > 0 and seconds > 0:
            self.tokens += tokens
            self.seconds += seconds

    @property
    def per_second(self) -> float | None:
        return self.tokens / self.seconds if self.seconds > 0 else None


@dataclass
class ChatServer:
    """One server as a run's chat models see it (the module docstring gives its rules)."""

    url: str = ""
    on_openai: bool = True
    """OpenAI's own API: a reply cap goes in ``max_completion_tokens``. Elsewhere in
    ``max_tokens``, the one name every OpenAI-compatible server honours (llama-cpp-python
    ignores the other)."""
    context_tokens: int | None = None
    """The model's context window, where the server or a setting says."""
    max_concurrent: int | None = None
    """Calls in flight at once; None: no limit of ours."""
    timeout_setting: str = "DEEP_RESEARCH_REQUEST_TIMEOUT_SECONDS"
    timeout_seconds: float | None = None
    rate_limit_retries: int = 4
    shapes: LookupCache | None = None
    discover: Callable[[], Awaitable[tuple[int | None, int | None]]] | None = None
    """Asks the server its (slots, context tokens) before the first call; either fills only
    a limit no setting gave (``probe.read_limits``)."""
    on_slow: Callable[[str], None] | None = None
    speed: Speed = field(default_factory=Speed)
    _known: dict[str, Shape] = field(default_factory=dict)
    _answers: dict[str, asyncio.Future[object]] = field(default_factory=dict)
    _gate: asyncio.Semaphore | None = None
    _discovered: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def ready(self) -> None:
        """Limits the server states, asked once (concurrent first calls wait for it)."""
        async with self._discovered:
            if self.discover is None:
                return
            discover, self.discover = self.discover, None
            slots, context = await discover()
            if self.max_concurrent is None:
                self.max_concurrent = slots
            if self.context_tokens is None:
                self.context_tokens = context

    # --- structured-output shapes -------------------------------------------------------

    def _shape_key(self, model: str) -> str:
        return json.dumps([self.url, model, "structured-shape"])

    async def shape(self, model: str) -> Shape:
        """The most enforced shape ``model`` here has not refused."""
        if model in self._known:
            return self._known[model]
        saved = await self.shapes.get(self._shape_key(model)) if self.shapes is not None else None
        shape = next((known for known in SHAPES if known == saved), SHAPES[0])
        self._known[model] = shape
        return shape

    async def refused(self, model: str, shape: Shape) -> Shape | None:
        """Remember that ``model`` refused ``shape``; the next one to try, or None."""
        index = SHAPES.index(shape)
        if index + 1 >= len(SHAPES):
            return None
        following = SHAPES[index + 1]
        if SHAPES.index(self._known.get(model, "json_schema")) < index + 1:
            self._known[model] = following
            if self.shapes is not None:
                await self.shapes.set(self._shape_key(model), following, SHAPE_TTL_SECONDS)
        return following

    # --- sizing -------------------------------------------------------------------------

    def fit(self, model: str, what: str, prompt_chars: int, cap: int) -> int:
        """The cap to send for a prompt of ``prompt_chars``: ``cap``, or less if the model's
        context cannot hold both; ``ProviderError`` before sending what cannot fit at all."""
        if self.context_tokens is None:
            return cap
        prompt = int(prompt_chars / CHARS_PER_TOKEN) + 16
        room = self.context_tokens - prompt
        if room >= cap:
            return cap
        if room >= min(cap, MIN_REPLY_TOKENS):
            return room
        raise ProviderError(
            f"{model}: the {what} prompt is about {prompt:,} tokens and the model's context "
            f"holds {self.context_tokens:,}: serve it with a longer context (llama-server -c), "
            "use a model with one, or lower DEEP_RESEARCH_SUMMARY_MAX_TOKENS"
        )

    # --- sending ------------------------------------------------------------------------

    async def once(self, key: str, ask: Callable[[], Awaitable[R]], *, again: bool) -> R:
        """``ask()``'s answer, or that of the request of the same ``key`` another caller of
        this run asked (awaited while in flight): its reply, or the error it ended in (the
        same request would end so again). ``again``: the caller sent this request itself
        before (a retry of its own), so it sends it. An ask cancelled with its caller is not
        shared: who waited on it asks."""
        while not again and (earlier := self._answers.get(key)) is not None:
            try:
                return cast(R, await asyncio.shield(earlier))
            except asyncio.CancelledError:
                if not earlier.cancelled():
                    raise  # this caller was cancelled, not the ask
        answer = asyncio.get_running_loop().create_future()
        self._answers[key] = answer
        try:
            result = await ask()
        except Exception as exc:
            answer.set_exception(exc)
            answer.exception()  # retrieved: nobody waiting is no error of asyncio's
            raise
        except BaseException:
            answer.cancel()
            if self._answers.get(key) is answer:
                del self._answers[key]
            raise
        answer.set_result(result)
        return result

    async def send(
        self,
        call: Callable[[int], Awaitable[T]],
        *,
        model: str,
        what: str,
        sent: Counter[str],
        fingerprint: str,
        cap: int,
        on_timeout: Callable[[int], None],
        shape_sensitive: bool,
    ) -> tuple[T, float]:
        """``call(cap)`` under the rules of the module docstring. ``fingerprint`` identifies
        the request and ``sent`` counts the sends of each, for the whole of one call (a
        request is never sent a third time, a repair that repeats one included);
        ``on_timeout`` bills a timed-out send of a cap; ``shape_sensitive``: a refusal
        naming ``response_format`` is ``ShapeRefused``. Returns the reply and the seconds it
        took (waiting for a slot not counted)."""
        retried = False
        rate_limited = 0
        while True:
            if sent[fingerprint] >= 2:
                raise SentTwice(f"{model}: the {what} request was already sent twice")
            sent[fingerprint] += 1
            started = time.monotonic()
            try:
                return await self._one(partial(call, cap), model=model, what=what)
            except openai.APITimeoutError:
                on_timeout(cap)
                if not retried:
                    retried = True
                    halved = None
                    if not self.on_openai and cap > MIN_REPLY_TOKENS:
                        cap = halved = max(MIN_REPLY_TOKENS, cap // 2)
                        fingerprint = f"{fingerprint} capped at {cap}"  # another request
                    self._retrying(model, what, time.monotonic() - started, halved)
                    continue
                raise ProviderError(self._timed_out(model, what, cap)) from None
            except openai.RateLimitError as exc:
                wait = _retry_after(exc)
                if wait is None or rate_limited >= self.rate_limit_retries:
                    raise
                rate_limited += 1
                sent[fingerprint] -= 1  # the server asked for it again, in ``wait``
                await asyncio.sleep(min(wait, MAX_RATE_LIMIT_WAIT))
            except openai.APIStatusError as exc:
                if shape_sensitive and names_response_format(exc):
                    raise ShapeRefused(_detail(exc)) from exc
                if exc.status_code >= 500 and names_a_parameter(exc):
                    raise ProviderError(
                        f"{model}: the server refused the {what} request ({_detail(exc)}): "
                        "a parameter it does not take, so it is not sent again"
                    ) from exc
                if exc.status_code < 500 or retried:
                    raise
                retried = True
            except openai.APIConnectionError:
                if retried:
                    raise
                retried = True

    async def _one(
        self, call: Callable[[], Awaitable[T]], *, model: str, what: str
    ) -> tuple[T, float]:
        if self.max_concurrent is not None and self._gate is None:
            self._gate = asyncio.Semaphore(self.max_concurrent)
        async with self._gate or contextlib.nullcontext():
            started = time.monotonic()  # the wait for a slot is not counted
            notice = asyncio.create_task(self._announce(model, what)) if self.on_slow else None
            try:
                reply = await call()
            finally:
                if notice is not None:
                    notice.cancel()
            return reply, time.monotonic() - started

    async def _announce(self, model: str, what: str) -> None:
        started = time.monotonic()
        while True:
            await asyncio.sleep(SLOW_NOTICE_SECONDS)
            if self.on_slow is not None:
                waited = time.monotonic() - started
                self.on_slow(f"waiting on the {what} call ({model}): {waited:.0f} s so far")

    def _retrying(self, model: str, what: str, waited: float, halved: int | None) -> None:
        if self.on_slow is not None:
            took = self.timeout_seconds or waited
            capped = f", its reply capped at {halved:,} tokens" if halved else ""
            self.on_slow(
                f"{model}: the {what} call timed out after {took:.0f} s; "
                f"sending it once more{capped}"
            )

    def _timed_out(self, model: str, what: str, cap: int) -> str:
        limit = f"{self.timeout_seconds:.0f} s" if self.timeout_seconds else "its timeout"
        rate = self.speed.per_second
        if rate:
            speed = (
                f"it writes about {rate:.1f} tokens/s here, so a {cap:,}-token reply may take "
                f"{cap / rate:.0f} s"
            )
            measure = ""
        else:  # no reply yet to measure it by
            speed = f"its replies may run to {cap:,} tokens"
            measure = " (`deep-research doctor` measures its tokens/s)"
        return (
            f"{model}: the {what} call timed out twice ({limit} each; {speed}): raise "
            f"{self.timeout_setting}, or serve a faster model{measure}"
        )


def names_response_format(exc: openai.APIStatusError) -> bool:
    """A refusal of the request's structured-output shape, not of the model or the key:
    a 4xx (not 401/403/404/429) or a 5xx whose body names ``response_format`` or a schema."""
    if exc.status_code in (401, 403, 404, 429):
        return False
    text = f"{exc.message} {exc.body!r}".lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object"))


REQUEST_PARAMETERS = (
    "max_completion_tokens",
    "max_tokens",
    "temperature",
    "reasoning_effort",
    "top_p",
    "stream_options",
    "service_tier",
    "parallel_tool_calls",
)
"""Parameters a chat request of ours may carry besides its messages and shape."""


def names_a_parameter(exc: openai.APIStatusError) -> bool:
    """A server error that is a refusal of the request as written, not a passing failure:
    its body names a parameter the request sent, or quotes a validation error (pydantic's
    "Input should be ...", as a FastAPI server such as llama-cpp-python's words it)."""
    text = f"{exc.message} {exc.body!r}".lower()
    return "input should be" in text or any(name in text for name in REQUEST_PARAMETERS)


def _detail(exc: openai.APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {(exc.message or '')[:160]}"


def _retry_after(exc: openai.RateLimitError) -> float | None:
    """Seconds the server asked us to wait (OpenAI's ``retry-after-ms``, else the standard
    ``Retry-After``); None when it did not say (out of quota: waiting will not help)."""
    headers = exc.response.headers
    try:
        millis = float(headers.get("retry-after-ms", ""))
    except ValueError:
        return retry_after_seconds(headers.get("retry-after"))
    return max(0.0, millis / 1000) if math.isfinite(millis) else None


def fingerprint(*parts: object) -> str:
    """One request's identity: its messages, shape and cap."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
