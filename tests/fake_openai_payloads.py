"""Wire shapes for the fake OpenAI server: requests as parsed, answers as JSON.

Pure data and functions, kept apart from the HTTP plumbing in `fake_openai.py` so
the shapes can be read next to the `openai` SDK types they imitate
(`ChatCompletion`, `Response`, `CreateEmbeddingResponse`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

ResearchStatus = Literal["completed", "failed", "incomplete"]
FaultKind = Literal["rate_limit", "server_error", "slow", "malformed", "drop", "drop_after"]


def approx_tokens(text: str) -> int:
    """About four characters a token: good enough for usage figures in tests."""
    return max(1, (len(text) + 3) // 4)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def text_of(content: Any) -> str:
    """Flatten a message `content` (a string or a list of typed parts) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def input_text(value: Any) -> str:
    """Flatten a Responses API `input` (string, or list of messages / parts) to text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(item.get("content")) for item in value if isinstance(item, dict))
    return ""


# --- requests ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names; secret headers removed
    body: Any  # parsed JSON, or None
    authorized: bool  # an Authorization header was sent (its value is not kept)
    fault: FaultKind | None


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    schema_name: str | None  # response_format.json_schema.name, if any
    schema: dict[str, Any] | None
    max_tokens: int | None  # max_completion_tokens, else max_tokens
    temperature: float | None
    raw: dict[str, Any]

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ChatRequest:
        fmt = body.get("response_format") or {}
        js = (fmt.get("json_schema") or {}) if fmt.get("type") == "json_schema" else {}
        return cls(
            model=body.get("model", ""),
            messages=body.get("messages", []),
            schema_name=js.get("name"),
            schema=js.get("schema"),
            max_tokens=body.get("max_completion_tokens", body.get("max_tokens")),
            temperature=body.get("temperature"),
            raw=body,
        )

    @property
    def text(self) -> str:
        """All message contents joined: handy for `"keyword" in req.text` routing."""
        return "\n".join(text_of(m.get("content")) for m in self.messages)


@dataclass(frozen=True)
class ResearchRequest:
    model: str
    input_text: str  # the `input` flattened: developer + user message texts
    tools: list[dict[str, Any]]
    background: bool
    raw: dict[str, Any]

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ResearchRequest:
        return cls(
            model=body.get("model", ""),
            input_text=input_text(body.get("input")),
            tools=body.get("tools") or [],
            background=bool(body.get("background")),
            raw=body,
        )


# --- chat completions -------------------------------------------------------------------


@dataclass(frozen=True)
class ChatReply:
    """One scripted chat completion. A dict `content` is sent as its JSON encoding."""

    content: str | dict[str, Any]
    prompt_tokens: int | None = None  # None: estimated from the request
    completion_tokens: int | None = None  # None: estimated from the content
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    finish_reason: str = "stop"
    refusal: str | None = None  # set to make the model refuse (content is then null)


def chat_completion(model: str, reply: ChatReply, prompt_text: str) -> dict[str, Any]:
    content = reply.content if isinstance(reply.content, str) else json.dumps(reply.content)
    completion = reply.completion_tokens
    if completion is None:
        completion = approx_tokens(content) + reply.reasoning_tokens
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else approx_tokens(prompt_text)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if reply.refusal else content,
        "refusal": reply.refusal,
        "annotations": [],
    }
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "service_tier": "default",
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": reply.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reply.reasoning_tokens,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    }


# --- deep research (Responses API) ------------------------------------------------------


@dataclass(frozen=True)
class Citation:
    """A `url_citation`; `quote` must occur in the report text and becomes its exact span."""

    url: str
    title: str
    quote: str


@dataclass(frozen=True)
class ResearchReport:
    """What a deep-research response ends with once it leaves `in_progress`."""

    text: str
    citations: tuple[Citation, ...] = ()
    searches: tuple[str, ...] = ("fake search",)
    reasoning: tuple[str, ...] = ("Planned the search.",)
    status: ResearchStatus = "completed"
    input_tokens: int | None = None  # None: estimated from the request input
    cached_tokens: int = 0
    output_tokens: int | None = None  # None: estimated from text + reasoning_tokens
    reasoning_tokens: int = 64
    error_message: str = "The fake deep-research run failed."

    def __post_init__(self) -> None:
        for c in self.citations:
            if c.quote not in self.text:
                raise ValueError(f"citation quote {c.quote!r} does not occur in the report text")


def default_report(prompt: str) -> ResearchReport:
    topic = " ".join(prompt.split())[:80] or "the question"
    first, second = f"Finding one about {topic}.", "Finding two, from a second source."
    return ResearchReport(
        text=f"# Report\n\n{first} {second}\n",
        citations=(
            Citation("https://example.com/a", "Source A", first),
            Citation("https://example.org/b", "Source B", second),
        ),
        searches=(f"{topic} overview", f"{topic} evidence"),
    )


@dataclass
class StoredResponse:
    """Server-side state of one Responses API object; lives as long as the server."""

    id: str
    model: str
    body: dict[str, Any]
    report: ResearchReport
    polls_left: int
    held: bool
    status: str = "queued"
    created_at: int = field(default_factory=lambda: int(time.time()))
    finished_at: int | None = None

    def finish(self, status: str) -> None:
        self.status, self.finished_at = status, int(time.time())


def _usage(stored: StoredResponse, prompt: str) -> dict[str, Any]:
    r = stored.report
    inp = r.input_tokens if r.input_tokens is not None else approx_tokens(prompt)
    out = r.output_tokens
    if out is None:
        out = approx_tokens(r.text) + r.reasoning_tokens
    return {
        "input_tokens": inp,
        "input_tokens_details": {"cached_tokens": r.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": r.reasoning_tokens},
        "total_tokens": inp + out,
    }


def _output(report: ResearchReport, rid: str, with_message: bool) -> list[dict[str, Any]]:
    # Item ids derive from the response id, so every retrieve returns the same items.
    suffix = rid.removeprefix("resp_")
    items: list[dict[str, Any]] = [
        {
            "id": f"rs_{suffix}_{i}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": s}],
        }
        for i, s in enumerate(report.reasoning)
    ]
    items += [
        {
            "id": f"ws_{suffix}_{i}",
            "type": "web_search_call",
            "status": "completed",
            "action": {"type": "search", "query": q},
        }
        for i, q in enumerate(report.searches)
    ]
    if with_message:
        annotations = []
        for c in report.citations:
            start = report.text.index(c.quote)
            annotations.append(
                {
                    "type": "url_citation",
                    "url": c.url,
                    "title": c.title,
                    "start_index": start,
                    "end_index": start + len(c.quote),
                }
            )
        content = {"type": "output_text", "text": report.text, "annotations": annotations}
        items.append(
            {
                "id": f"msg_{suffix}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [content],
            }
        )
    return items


def response_object(stored: StoredResponse) -> dict[str, Any]:
    body, status = stored.body, stored.status
    finished = status in ("completed", "failed", "incomplete")
    output: list[dict[str, Any]] = []
    if status == "completed":
        output = _output(stored.report, stored.id, with_message=True)
    elif status == "incomplete":
        output = _output(stored.report, stored.id, with_message=False)
    error = None
    if status == "failed":
        error = {"code": "server_error", "message": stored.report.error_message}
    return {
        "id": stored.id,
        "object": "response",
        "created_at": stored.created_at,
        "completed_at": stored.finished_at if status == "completed" else None,
        "status": status,
        "background": body.get("background"),
        "model": stored.model,
        "output": output,
        "error": error,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "max_tool_calls": body.get("max_tool_calls"),
        "metadata": body.get("metadata") or {},
        "parallel_tool_calls": True,
        "reasoning": body.get("reasoning") or {"effort": "medium", "summary": None},
        "store": body.get("store", True),
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": body.get("tools") or [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _usage(stored, input_text(body.get("input"))) if finished else None,
    }


# --- embeddings -------------------------------------------------------------------------


def embed(text: str, dimensions: int) -> list[float]:
    """Hashed bag of words, L2-normalised: deterministic, and texts sharing words are close."""
    vec = [0.0] * dimensions
    for token in re.findall(r"\w+", text.lower()):
        digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
        index = int.from_bytes(digest[:4], "little") % dimensions
        vec[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0], norm = 1.0, 1.0
    return [v / norm for v in vec]


def embeddings(body: dict[str, Any], default_dimensions: int) -> dict[str, Any]:
    raw = body.get("input")
    items: list[Any] = raw if isinstance(raw, list) else [raw]
    # A flat list of ints is a single tokenised input, not a batch.
    if items and all(isinstance(i, int) for i in items):
        items = [items]
    texts = [i if isinstance(i, str) else " ".join(str(t) for t in i) for i in items]
    dims = int(body.get("dimensions") or default_dimensions)
    data = []
    for index, text in enumerate(texts):
        vector = embed(text, dims)
        encoded: list[float] | str = vector
        if body.get("encoding_format") == "base64":
            encoded = base64.b64encode(struct.pack(f"<{dims}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": encoded})
    tokens = sum(approx_tokens(t) for t in texts)
    return {
        "object": "list",
        "model": body.get("model", ""),
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
