"""The search providers' HTTP seen through an httpx transport: the test double for their wire
formats. Each request is answered by the next scripted answer (then by ``default``) and
recorded as it was sent, with its arrival time; nothing leaves the process.

    wire = Wire(replay(recorded("tavily")["answer"]))
    provider = make_provider("tavily", ..., http_client=wire.client())
    wire.sent[0].flat()["header:authorization"]

A recorded answer (``tests/search_fixtures/<provider>.json``, one file a provider) is
``{"status", "headers"?, "json" | "text"}``; `replay` fills ``{status}`` and ``{message}``
into an error body. Raising an httpx exception in an answer is what a real transport does
when the connection fails (``httpx.ConnectError``) or breaks off (``RemoteProtocolError``).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

FIXTURES = Path(__file__).parent / "search_fixtures"
Answer = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]


def recorded(provider: str) -> dict[str, Any]:
    """The provider's recorded answers (DuckDuckGo's: what ``DDGS().text`` returned)."""
    name = "ddgs_text" if provider == "duckduckgo" else provider
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return data


def replay(
    answer: Mapping[str, Any],
    *,
    status: int | None = None,
    message: str = "",
    headers: Mapping[str, str] | None = None,
) -> Answer:
    """Answer with a recorded answer, at ``status`` (else its own) saying ``message``."""
    code = int(status or answer.get("status", 200))
    extra = {**answer.get("headers", {}), **(headers or {})}

    def answering(request: httpx.Request) -> httpx.Response:
        if "text" in answer:
            text = answer["text"].replace("{message}", message)
            return httpx.Response(code, text=text, headers=extra)
        body = json.dumps(answer["json"]).replace('"{status}"', str(code))
        body = body.replace("{status}", str(code)).replace("{message}", message)
        return httpx.Response(code, json=json.loads(body), headers=extra)

    return answering


@dataclass(frozen=True)
class Sent:
    request: httpx.Request
    at: float
    """``time.monotonic()`` when the request reached the transport."""
    status: int
    """What was answered; 0: no answer (the connection failed, or the client gave up)."""

    def flat(self) -> dict[str, object]:
        """The request as one mapping: ``method``, ``url`` (without its query),
        ``header:<lowercase name>``, ``param:<query parameter>``, ``json:<body key>``."""
        request = self.request
        flat: dict[str, object] = {
            "method": request.method,
            "url": str(request.url.copy_with(query=None)),
        }
        flat |= {f"header:{k.lower()}": v for k, v in request.headers.items()}
        flat |= {f"param:{k}": v for k, v in request.url.params.items()}
        if request.content:
            body = json.loads(request.content)
            flat |= {f"json:{k}": v for k, v in body.items()}
        return flat


class Wire:
    def __init__(self, default: Answer, *first: Answer) -> None:
        self.sent: list[Sent] = []
        self._default = default
        self._first = deque(first)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self._handle))

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        at = time.monotonic()
        answer = self._first.popleft() if self._first else self._default
        try:
            result = answer(request)
            response = result if isinstance(result, httpx.Response) else await result
        except BaseException:  # recorded, then raised on: a failed or abandoned request
            self.sent.append(Sent(request, at, 0))
            raise
        self.sent.append(Sent(request, at, response.status_code))
        return response
