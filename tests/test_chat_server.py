"""How a request reaches a server (``adapters.llm.server.ChatServer``): retries that never
send one request a third time, refused shapes that are not retried, concurrency limits,
context fitting, and the shapes remembered per (server, model).

The calls here are scripted coroutines raising the openai SDK's own exceptions; the HTTP
path is covered against the loopback fake in tests/test_chat_model.py."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

import httpx2
import openai
import pytest

from deep_research.adapters.llm.server import ChatServer, SentTwice, ShapeRefused
from deep_research.core.errors import ProviderError

REQUEST = httpx2.Request("POST", "http://127.0.0.1:1/v1/chat/completions")


def status_error(status: int, message: str, body: object = None) -> openai.APIStatusError:
    response = httpx2.Response(status, request=REQUEST)
    kind = {
        400: openai.BadRequestError,
        422: openai.UnprocessableEntityError,
        429: openai.RateLimitError,
    }.get(status, openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return kind(message, response=response, body=body)


class Calls:
    """A scripted call: each send takes the next outcome (an exception, or a reply)."""

    def __init__(self, *outcomes: BaseException | str) -> None:
        self.outcomes = list(outcomes)
        self.sends = 0
        self.caps: list[int] = []

    async def __call__(self, cap: int = 0) -> str:
        self.sends += 1
        self.caps.append(cap)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


async def send(
    server: ChatServer,
    call: Callable[[int], Awaitable[str]],
    *,
    sensitive: bool = True,
    sent: Counter[str] | None = None,
    billed: list[int] | None = None,
) -> str:
    """``call`` sent as one planner request (cap 1,000); ``billed`` hears of each timed-out
    send's cap."""
    heard = [] if billed is None else billed
    reply, _seconds = await server.send(
        call,
        model="smollm2",
        what="planner (Plan)",
        sent=Counter() if sent is None else sent,
        fingerprint="same request",
        cap=1_000,
        on_timeout=heard.append,
        shape_sensitive=sensitive,
    )
    return reply


async def test_a_timeout_is_sent_once_more_then_named_with_the_speed_and_the_setting() -> None:
    server = ChatServer(url="http://local/v1", on_openai=False, timeout_seconds=120)
    server.speed.add(tokens=400, seconds=100)  # 4 tokens a second, measured earlier
    call = Calls(openai.APITimeoutError(REQUEST), openai.APITimeoutError(REQUEST))
    billed: list[int] = []
    with pytest.raises(ProviderError, match="timed out twice") as caught:
        await send(server, call, billed=billed)
    message = str(caught.value)
    assert "4.0 tokens/s here, so a 500-token reply may take 125 s" in message
    assert "DEEP_RESEARCH_REQUEST_TIMEOUT_SECONDS" in message
    assert call.sends == 2, "never a third send"
    assert call.caps == [1_000, 500], "off OpenAI the retry asks for half: a reply, cut off"
    assert billed == [1_000, 500], "each timed-out send counts its cap against the budget"


async def test_on_openai_a_timeout_is_sent_again_as_it_was() -> None:
    call = Calls(openai.APITimeoutError(REQUEST), "ok")
    assert await send(ChatServer(on_openai=True), call) == "ok"
    assert call.caps == [1_000, 1_000]


async def test_a_timeout_before_any_reply_points_at_doctor_to_measure_the_speed() -> None:
    server = ChatServer(url="http://local/v1", on_openai=False, timeout_seconds=120)
    call = Calls(openai.APITimeoutError(REQUEST), openai.APITimeoutError(REQUEST))
    with pytest.raises(ProviderError, match="timed out twice") as caught:
        await send(server, call)
    message = str(caught.value)
    assert "tokens/s here" not in message, "no speed measured: none is claimed"
    assert "deep-research doctor" in message
    assert "DEEP_RESEARCH_REQUEST_TIMEOUT_SECONDS" in message


async def test_the_retry_after_a_timeout_is_announced() -> None:
    heard: list[str] = []
    server = ChatServer(on_openai=False, timeout_seconds=120, on_slow=heard.append)
    reply = await send(server, Calls(openai.APITimeoutError(REQUEST), "ok"))
    assert reply == "ok"
    assert heard == [
        "smollm2: the planner (Plan) call timed out after 120 s; sending it once more, its "
        "reply capped at 500 tokens"
    ]


async def test_a_timeout_then_a_reply_is_the_reply() -> None:
    call = Calls(openai.APITimeoutError(REQUEST), "ok")
    billed: list[int] = []
    reply = await send(ChatServer(), call, billed=billed)
    assert (reply, call.sends, billed) == ("ok", 2, [1_000])


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # llama-cpp-python: a JSON schema is a validation error of its request model, as 500.
        (
            500,
            {
                "detail": [
                    {
                        "loc": ["body", "response_format", "type"],
                        "msg": "Input should be 'text' or 'json_object'",
                    }
                ]
            },
        ),
        (400, {"error": {"message": "response_format json_schema is not supported"}}),
        (422, {"error": {"message": "Unsupported value: 'json_schema'"}}),
    ],
)
async def test_a_refused_shape_is_a_capability_answer_sent_once(status: int, body: object) -> None:
    call = Calls(status_error(status, "refused", body))
    with pytest.raises(ShapeRefused):
        await send(ChatServer(), call)
    assert call.sends == 1


async def test_a_plain_server_error_is_sent_once_more_and_no_further() -> None:
    call = Calls(status_error(500, "boom"), status_error(500, "boom"))
    with pytest.raises(openai.InternalServerError):
        await send(ChatServer(), call)
    assert call.sends == 2


@pytest.mark.parametrize(
    "body",
    [
        # FastAPI's validation error of another field, as llama-cpp-python sends it (500).
        {"detail": [{"loc": ["body", "temperature"], "msg": "Input should be a valid number"}]},
        {"error": {"message": "unknown parameter max_completion_tokens", "code": 500}},
    ],
)
async def test_a_server_error_naming_a_request_parameter_is_not_sent_again(body: object) -> None:
    call = Calls(status_error(500, "Internal Server Error", body), "never sent")
    with pytest.raises(ProviderError, match="refused the planner"):
        await send(ChatServer(), call, sensitive=False)
    assert call.sends == 1, "the same request would be refused the same way"


async def test_a_refusal_of_the_model_is_not_a_shape_answer() -> None:
    call = Calls(status_error(404, "model_not_found: response_format"))
    with pytest.raises(openai.APIStatusError):
        await send(ChatServer(), call)
    assert call.sends == 1


async def test_a_rate_limit_that_says_when_is_waited_out() -> None:
    limited = openai.RateLimitError(
        "slow down",
        response=httpx2.Response(429, request=REQUEST, headers={"retry-after-ms": "5"}),
        body=None,
    )
    call = Calls(limited, limited, limited, "ok")
    reply = await send(ChatServer(rate_limit_retries=4), call)
    assert (reply, call.sends) == ("ok", 4)


async def test_a_standard_retry_after_is_read_as_every_client_reads_it() -> None:
    limited = openai.RateLimitError(
        "slow down",
        response=httpx2.Response(429, request=REQUEST, headers={"retry-after": "0"}),
        body=None,
    )
    call = Calls(limited, "ok")
    assert await send(ChatServer(), call) == "ok"
    assert call.sends == 2


async def test_a_rate_limit_without_a_time_is_out_of_quota_and_not_retried() -> None:
    call = Calls(status_error(429, "insufficient_quota"))
    with pytest.raises(openai.RateLimitError):
        await send(ChatServer(), call)
    assert call.sends == 1


async def test_one_request_is_never_sent_a_third_time_across_repairs() -> None:
    server = ChatServer()
    sent: Counter[str] = Counter()
    for _ in range(2):
        await send(server, Calls("ok"), sent=sent, sensitive=False)
    third = Calls("ok")
    with pytest.raises(SentTwice, match="already sent twice"):
        await send(server, third, sent=sent, sensitive=False)
    assert third.sends == 0


async def test_calls_in_flight_never_exceed_the_server_slots() -> None:
    server = ChatServer(max_concurrent=2)
    running = 0
    peak = 0

    async def call(cap: int = 0) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    await asyncio.gather(*(send(server, call) for _ in range(6)))
    assert peak == 2


async def test_the_limits_a_server_states_fill_only_what_no_setting_gave() -> None:
    asked = 0

    async def discover() -> tuple[int | None, int | None]:
        nonlocal asked
        asked += 1
        return 4, 8192

    server = ChatServer(max_concurrent=1, discover=discover)
    await asyncio.gather(server.ready(), server.ready())
    assert (server.max_concurrent, server.context_tokens, asked) == (1, 8192, 1)


def test_a_prompt_that_cannot_fit_the_context_is_refused_before_it_is_sent() -> None:
    server = ChatServer(context_tokens=8192)
    assert server.fit("smollm2", "planner", prompt_chars=3_000, cap=2_000) == 2_000
    lowered = server.fit("smollm2", "planner", prompt_chars=21_000, cap=2_000)
    assert 256 <= lowered < 2_000, "the cap shrinks to what fits beside the prompt"
    with pytest.raises(Exception, match=r"context holds 8,192") as caught:
        server.fit("smollm2", "planner", prompt_chars=30_000, cap=2_000)
    assert "llama-server -c" in str(caught.value)


class DictCache:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def set(self, key: str, value: str, ttl_seconds: float) -> None:
        self.values[key] = value


async def test_a_refused_shape_is_remembered_per_server_and_model() -> None:
    cache = DictCache()
    first = ChatServer(url="http://local:8080/v1", shapes=cache)
    assert await first.shape("smollm2") == "json_schema"
    assert await first.refused("smollm2", "json_schema") == "json_object"
    assert await first.refused("smollm2", "text") is None, "nothing after plain text"

    later = ChatServer(url="http://local:8080/v1", shapes=cache)
    assert await later.shape("smollm2") == "json_object", "a later run starts where it ended"
    assert await later.shape("other-model") == "json_schema"
    elsewhere = ChatServer(url="http://other:8080/v1", shapes=cache)
    assert await elsewhere.shape("smollm2") == "json_schema", "another server is asked anew"


async def test_a_slow_call_is_announced_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from deep_research.adapters.llm import server as module

    monkeypatch.setattr(module, "SLOW_NOTICE_SECONDS", 0.01)
    heard: list[str] = []
    told_twice = asyncio.Event()

    def hear(message: str) -> None:
        heard.append(message)
        if len(heard) == 2:
            told_twice.set()

    async def call(cap: int = 0) -> str:
        await told_twice.wait()  # answers once the live view has heard of it twice
        return "ok"

    reply = await send(ChatServer(on_slow=hear), call)
    assert reply == "ok"
    assert heard[0].startswith("waiting on the planner (Plan) call (smollm2):")
    count = len(heard)
    await asyncio.sleep(0.05)
    assert len(heard) == count, "no notice once the call has answered"


class Asks:
    """An ask that waits to be released, then answers (or raises) ``outcome``."""

    def __init__(self, outcome: BaseException | str) -> None:
        self.outcome = outcome
        self.asked = 0
        self.release = asyncio.Event()

    async def __call__(self) -> str:
        self.asked += 1
        await self.release.wait()
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


async def test_callers_asking_the_same_share_one_ask_in_flight_and_after() -> None:
    server, ask = ChatServer(), Asks("plan")
    waiting = [asyncio.create_task(server.once("k", ask, again=False)) for _ in range(3)]
    await asyncio.sleep(0)
    ask.release.set()
    assert await asyncio.gather(*waiting) == ["plan"] * 3
    assert await server.once("k", ask, again=False) == "plan"
    assert ask.asked == 1
    assert await server.once("other", ask, again=False) == "plan"
    assert await server.once("k", ask, again=True) == "plan", "a caller's own retry sends"
    assert ask.asked == 3


async def test_an_error_is_shared_but_a_cancelled_ask_is_asked_again_once() -> None:
    server, failing = ChatServer(), Asks(ProviderError("timed out twice"))
    waiting = [asyncio.create_task(server.once("k", failing, again=False)) for _ in range(3)]
    await asyncio.sleep(0)
    failing.release.set()
    outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert [str(o) for o in outcomes] == ["timed out twice"] * 3
    assert failing.asked == 1, "the same request would end so again"

    cancelled, after = Asks("never"), Asks("plan")
    leader = asyncio.create_task(server.once("c", cancelled, again=False))
    await asyncio.sleep(0)
    followers = [asyncio.create_task(server.once("c", after, again=False)) for _ in range(2)]
    await asyncio.sleep(0)
    leader.cancel()  # its caller was cancelled (a stopped branch): no answer for others
    await asyncio.sleep(0)
    after.release.set()
    assert await asyncio.gather(*followers) == ["plan", "plan"]
    assert after.asked == 1, "one waiter asks, the other waits for it"
    with pytest.raises(asyncio.CancelledError):
        await leader
