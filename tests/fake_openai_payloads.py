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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

ResearchStatus = Literal["completed", "failed", "incomplete"]
# Which server the fake speaks as: OpenAI itself, or a local OpenAI-compatible one.
Flavor = Literal["openai", "llama-cpp-python", "llama-server"]
FaultKind = Literal[
    "rate_limit",
    "insufficient_quota",
    "unauthorized",
    "server_error",
    "slow",
    "malformed",
    "drop",
    "drop_after",
]
Search = str | tuple[str, ...]  # one web search: a query, or the several queries it ran


# Model id -> announced shutdown date (ISO) or None, as of 2026-11-26 (DESIGN.md, "Facts";
# the openai SDK 3.57's model docstrings). A model is served while its date is after the
# fake's `today`; dated snapshots are served only when listed here. The released GPT-6 ids
# only: there is no gpt-6-terra, no 6.2 luna or terra.
DEFAULT_MODELS: Mapping[str, str | None] = {
    **dict.fromkeys(
        [
            "gpt-6-astra",
            "gpt-6-sol",
            "gpt-6-luna",
            "gpt-6.1-sol",
            "gpt-6.1-terra",
            "gpt-6.2-astra",
            "gpt-6.2-sol",
            *(f"gpt-5.6-{tier}" for tier in ("sol", "terra", "luna")),
            "gpt-5.5",
            "gpt-5.5-2026-04-23",
            "gpt-5.5-pro",
            "gpt-5.4",
            "gpt-5.4-mini",
            "text-embedding-3-small",
            "text-embedding-3-large",
        ]
    ),
    **dict.fromkeys(
        ["gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5-pro", "o3", "o3-pro"], "2026-12-11"
    ),
    **dict.fromkeys(["gpt-4.1", "gpt-4.1-mini", "gpt-4o", "gpt-4o-mini"], "2027-01-14"),
    **dict.fromkeys(["o4-mini", "o3-mini", "o1", "gpt-4.1-nano"], "2026-10-23"),
    **dict.fromkeys(["o3-deep-research", "o4-mini-deep-research"], "2026-07-23"),
    **dict.fromkeys(["gpt-5.1", "gpt-5.4-nano"], "2027-04-01"),
}

_REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "gpt-6")
_EFFORT_NONE = re.compile(r"^gpt-(5\.[1-9]\d*|6)")

# The reasoning efforts each model takes, in the order OpenAI's 400 lists them. Written from
# the facts (checked 2026-11-26: OpenAI's model pages for gpt-6-luna, gpt-6.1-terra and
# gpt-6.2-sol; langchain-openai 1.7.4's model profiles; OpenAI's 400s quoted in public issues;
# DESIGN.md "Facts"), never from `adapters/llm/params.py`: a fake that used the code's own
# rules could not catch their mistakes. No model after gpt-5 (-mini/-nano) takes `minimal`.
# A model not listed is not checked.
_NONE_TO_MAX = ("none", "low", "medium", "high", "xhigh", "max")
_LOW_TO_MAX = ("low", "medium", "high", "xhigh", "max")
_NONE_TO_XHIGH = ("none", "low", "medium", "high", "xhigh")
EFFORTS_TAKEN: Mapping[str, tuple[str, ...]] = {
    "gpt-6-sol": _NONE_TO_MAX,
    "gpt-6-luna": _NONE_TO_MAX,
    "gpt-6.1-terra": _NONE_TO_MAX,
    "gpt-6-astra": _LOW_TO_MAX,
    "gpt-6.1-sol": _LOW_TO_MAX,
    "gpt-6.2-astra": _LOW_TO_MAX,
    "gpt-6.2-sol": _LOW_TO_MAX,
    **dict.fromkeys(("gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna"), _NONE_TO_MAX),
    **dict.fromkeys(
        ("gpt-5.5", "gpt-5.5-2026-04-23", "gpt-5.4", "gpt-5.4-mini", "gpt-5.4-nano"),
        _NONE_TO_XHIGH,
    ),
    "gpt-5.1": ("none", "low", "medium", "high"),
    **dict.fromkeys(("gpt-5", "gpt-5-mini", "gpt-5-nano"), ("minimal", "low", "medium", "high")),
    "gpt-5-pro": ("high",),
    **dict.fromkeys(("o1", "o3", "o3-mini", "o4-mini", "o3-pro"), ("low", "medium", "high")),
}


def api_error(
    status: int, message: str, type_: str, code: str | None, param: str | None = None
) -> tuple[int, dict[str, Any]]:
    """An error as the real API words it: {"error": {message, type, param, code}}."""
    return status, {"error": {"message": message, "type": type_, "param": param, "code": code}}


# Injected faults (`Fault`), as the real API words them.
RATE_LIMITED = api_error(
    429,
    "Rate limit reached for requests per min (RPM): Limit 500, Used 500, Requested 1. "
    "Please try again in 120ms. (fake)",
    "requests",
    "rate_limit_exceeded",
)
NO_QUOTA = api_error(
    429,
    "You exceeded your current quota, please check your plan and billing details.",
    "insufficient_quota",
    "insufficient_quota",
)
UNAUTHORIZED = api_error(
    401,
    "Incorrect API key provided: sk-fake***. You can find your API key at "
    "https://platform.openai.com/account/api-keys.",
    "invalid_request_error",
    "invalid_api_key",
)


def model_not_found(model: str) -> tuple[int, dict[str, Any]]:
    return api_error(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error",
        "model_not_found",
    )


def model_object(model: str, shutdown_date: str | None) -> dict[str, Any]:
    return {
        "id": model,
        "object": "model",
        "created": 1_700_000_000,
        "owned_by": "openai",
        "shutdown_date": shutdown_date,
    }


def refused_temperature(model: str, temperature: Any, effort: Any) -> bool:
    """Reasoning models refuse `temperature`, except at effort `none` on a model that takes
    it (gpt-5.1+ and some GPT-6: `EFFORTS_TAKEN`; never astra, 6.1-sol, 6.2)."""
    name = model.removeprefix("openai/")
    if temperature is None or not name.startswith(_REASONING_PREFIXES):
        return False
    taken = EFFORTS_TAKEN.get(name)
    takes_none = "none" in taken if taken is not None else bool(_EFFORT_NONE.match(name))
    return not (effort == "none" and takes_none)


def refused_effort(model: str, effort: Any, param: str) -> tuple[int, dict[str, Any]] | None:
    """A reasoning effort `model` does not take (`EFFORTS_TAKEN`), refused as OpenAI words it
    (`param`: `reasoning_effort` in chat completions, `reasoning.effort` in Responses)."""
    taken = EFFORTS_TAKEN.get(model.removeprefix("openai/"))
    if effort is None or taken is None or effort in taken:
        return None
    quoted = [f"'{e}'" for e in taken]
    listed = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])}, and {quoted[-1]}"
    return api_error(
        400,
        f"Unsupported value: '{effort}' is not supported with the '{model}' model. "
        f"Supported values are: {listed}.",
        "invalid_request_error",
        "unsupported_value",
        param,
    )


def refused_max_tokens(model: str, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """Reasoning models (o-series, gpt-5.x, GPT-6) refuse chat completions' `max_tokens`."""
    name = model.removeprefix("openai/")
    if body.get("max_tokens") is None or not name.startswith(_REASONING_PREFIXES):
        return None
    return api_error(
        400,
        "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "invalid_request_error",
        "unsupported_parameter",
        "max_tokens",
    )


def unsupported_temperature() -> tuple[int, dict[str, Any]]:
    return api_error(
        400,
        "Unsupported parameter: 'temperature' is not supported with this model.",
        "invalid_request_error",
        "unsupported_parameter",
        "temperature",
    )


def refused_mcp_tool(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """An `mcp` tool the API refuses: no `server_label`, no `server_url` (nor connector or
    tunnel), or, in a background job, approvals left on — nobody could answer them (OpenAI's
    deep research guide: MCP servers need `require_approval: "never"`)."""
    for index, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "mcp":
            continue
        where = f"tools[{index}]"
        if not tool.get("server_label"):
            return api_error(
                400,
                "Missing required parameter: 'server_label'.",
                "invalid_request_error",
                "missing_required_parameter",
                f"{where}.server_label",
            )
        if not any(tool.get(k) for k in ("server_url", "connector_id", "tunnel_id")):
            return api_error(
                400,
                "One of server_url, connector_id or tunnel_id must be provided.",
                "invalid_request_error",
                "invalid_value",
                where,
            )
        if body.get("background") and tool.get("require_approval") != "never":
            return api_error(
                400,
                "MCP tools in background mode must set require_approval to 'never'.",
                "invalid_request_error",
                "invalid_value",
                f"{where}.require_approval",
            )
    return None


WEB_SEARCH_FIELDS = {"type", "filters", "search_context_size", "user_location"}
LOCATION_FIELDS = {"type", "city", "country", "region", "timezone"}
"""What a `web_search` tool and its `user_location` may hold (openai SDK 3.57,
`types/responses/web_search_tool_param.py`, checked 2026-11-26; `country` is a two-letter
ISO code there); the API refuses anything else before creating a job."""


def refused_web_search(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """A `web_search` tool with a field the API does not know, a filter other than
    `allowed_domains`, or a location whose country is not a two-letter code."""
    for index, tool in enumerate(body.get("tools") or []):
        if tool.get("type") != "web_search":
            continue
        where = f"tools[{index}]"
        location = tool.get("user_location") or {}
        unknown = (
            [f"{where}.{k}" for k in tool if k not in WEB_SEARCH_FIELDS]
            + [f"{where}.filters.{k}" for k in tool.get("filters") or {} if k != "allowed_domains"]
            + [f"{where}.user_location.{k}" for k in location if k not in LOCATION_FIELDS]
        )
        if unknown:
            return api_error(
                400,
                f"Unknown parameter: '{unknown[0]}'.",
                "invalid_request_error",
                "unknown_parameter",
                unknown[0],
            )
        country = location.get("country")
        if country is not None and not (
            isinstance(country, str) and len(country) == 2 and country.isalpha()
        ):
            return api_error(
                400,
                f"Invalid value for '{where}.user_location.country': expected a two-letter "
                "ISO country code.",
                "invalid_request_error",
                "invalid_value",
                f"{where}.user_location.country",
            )
    return None


SOURCES_INCLUDE = "web_search_call.action.sources"


def refused_flex() -> tuple[int, dict[str, Any]]:
    """The flex tier refused for a model or mode that does not offer it (the message OpenAI
    sends, as public issues quote it in 2026; the param as its other 400s name one)."""
    return api_error(
        400,
        "Unsupported service_tier: flex",
        "invalid_request_error",
        "unsupported_value",
        "service_tier",
    )


def unverified_summary() -> tuple[int, dict[str, Any]]:
    return api_error(
        400,
        "Your organization must be verified to generate reasoning summaries. Please go to: "
        "https://platform.openai.com/settings/organization/general and click on Verify "
        "Organization. If you just verified, it can take up to 15 minutes for access to "
        "propagate.",
        "invalid_request_error",
        "unsupported_value",
        "reasoning.summary",
    )


# --- local servers (llama-cpp-python 0.3.36 and the llama.cpp server it vendors) ---------

# Body keys each flavour reads as the completion cap; the first one present wins.
CAP_KEYS: Mapping[Flavor, tuple[str, ...]] = {
    "openai": ("max_completion_tokens", "max_tokens"),
    # llama_cpp/server/types.py: CreateChatCompletionRequest has `max_tokens` only, and as
    # a pydantic model without extra="forbid" it drops `max_completion_tokens` silently.
    "llama-cpp-python": ("max_tokens",),
    # server-schema.cpp: field "n_predict", aliases "max_completion_tokens", "max_tokens".
    "llama-server": ("n_predict", "max_completion_tokens", "max_tokens"),
}
N_CTX_TRAIN = 131_072  # the fake local model's training context (Llama 3.1's)
# Where FastAPI (>= 0.124) says the refused endpoint is: llama_cpp/server/app.py, line of
# create_chat_completion's @router.post in 0.3.36 (the directory is the install's).
_LLAMA_CPP_APP = "/usr/local/lib/python3.12/site-packages/llama_cpp/server/app.py"
_LLAMA_CPP_CHAT_LINE = 376


def llama_cpp_python_refusal(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """A `response_format` llama-cpp-python's request model refuses, as its server words it.

    types.py types it `ChatCompletionRequestResponseFormat` (type: Literal["text",
    "json_object"]), so FastAPI raises RequestValidationError; errors.py's RouteErrorHandler
    catches every non-HTTPException, fails to re-parse the body for a formatter and wraps
    `str(error)` as a 500 `internal_server_error` (no x-should-retry: the SDK retries it)."""
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind is None or kind in ("text", "json_object"):
        return None
    error = {
        "type": "literal_error",
        "loc": ("body", "response_format", "type"),
        "msg": "Input should be 'text' or 'json_object'",
        "input": kind,
        "ctx": {"expected": "'text' or 'json_object'"},
    }
    message = (
        f"1 validation error:\n  {error}\n"
        f'  File "{_LLAMA_CPP_APP}", line {_LLAMA_CPP_CHAT_LINE}, in create_chat_completion\n'
        "    POST /v1/chat/completions"
    )
    return api_error(500, message, "internal_server_error", None)


def exceed_context_size(n_prompt_tokens: int, n_ctx: int) -> tuple[int, dict[str, Any]]:
    """llama-server's refusal of a prompt that fills its slot (server-context.cpp, the
    `can_split` branch; server_task_result_error::to_json adds the two counts)."""
    message = (
        f"request ({n_prompt_tokens} tokens) exceeds the available context size "
        f"({n_ctx} tokens), try increasing it"
    )
    error = {
        "code": 400,
        "message": message,
        "n_ctx": n_ctx,
        "n_prompt_tokens": n_prompt_tokens,
        "type": "exceed_context_size_error",
    }
    return 400, {"error": error}


def not_found(flavor: Flavor, message: str) -> tuple[int, dict[str, Any]]:
    """A route the server does not have (`message` is the fake's own, for "openai")."""
    if flavor == "llama-cpp-python":  # FastAPI's default 404
        return 404, {"detail": "Not Found"}
    if flavor == "llama-server":  # server-http.cpp's error handler
        return 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
    return 404, {"error": {"message": message, "type": "fake_error", "code": None}}


def local_model_list(flavor: Flavor, models: list[str], n_ctx: int) -> dict[str, Any]:
    """GET /v1/models of llama-cpp-python (app.py get_models) or llama-server
    (server-context.cpp get_res_models: `meta.n_ctx` is one slot's context)."""
    if flavor == "llama-cpp-python":
        data = [{"id": m, "object": "model", "owned_by": "me", "permissions": []} for m in models]
        return {"object": "list", "data": data}
    meta = {
        "vocab_type": 2,
        "n_vocab": 128_256,
        "n_ctx": n_ctx,
        "n_ctx_train": N_CTX_TRAIN,
        "n_embd": 4096,
        "n_params": 8_030_261_248,
        "size": 4_920_739_840,
        "ftype": "Q4_K - Medium",
    }
    info = [
        {
            "id": m,
            "aliases": [],
            "tags": [],
            "object": "model",
            "created": int(time.time()),
            "owned_by": "llamacpp",
            "meta": meta,
        }
        for m in models
    ]
    listed = [
        {"name": m, "model": m, "type": "model", "capabilities": ["completion"]} for m in models
    ]
    return {"models": listed, "object": "list", "data": info}


def llama_server_props(model: str, slots: int, n_ctx: int) -> dict[str, Any]:
    """GET /props as server-context.cpp get_res_props builds it (the fields a client reads)."""
    params = {"n_predict": -1, "temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05}
    return {
        "default_generation_settings": {"params": params, "n_ctx": n_ctx},
        "total_slots": slots,
        "model_alias": model,
        "model_path": f"/models/{model}.gguf",
        "modalities": {"vision": False, "video": False, "audio": False},
        "endpoint_slots": True,
        "endpoint_props": False,
        "endpoint_metrics": False,
        "chat_template": "",
        "build_info": "b0-fake",
        "is_sleeping": False,
    }


def schema_in_prompt(messages: Iterable[Any]) -> dict[str, Any] | None:
    """The last ```json block of the messages that is an object with a string "title": the
    schema a json_object / text request asks for in its prompt, as a model reads it."""
    found = None
    for message in messages:
        text = text_of(message.get("content")) if isinstance(message, dict) else ""
        end = 0
        while (start := text.find("```json", end)) >= 0:
            end = text.find("```", start + 7)
            if end < 0:
                break
            try:
                obj = json.loads(text[start + 7 : end])
            except json.JSONDecodeError:
                obj = None
            if isinstance(obj, dict) and isinstance(obj.get("title"), str):
                found = obj
            end += 3
    return found


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
    query: dict[str, list[str]] = field(default_factory=dict)  # the url's, parsed


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[dict[str, Any]]
    # response_format.json_schema.name; without a json_schema (json_object, text) the
    # "title" of the last ```json schema in the messages (`schema_in_prompt`).
    schema_name: str | None
    schema: dict[str, Any] | None
    max_tokens: int | None  # the cap this flavour honours (`CAP_KEYS`), if any was sent
    temperature: float | None
    raw: dict[str, Any]
    cap_param: str | None = None  # the body key `max_tokens` came from

    @classmethod
    def from_body(
        cls, body: dict[str, Any], cap_keys: tuple[str, ...] = CAP_KEYS["openai"]
    ) -> ChatRequest:
        fmt = body.get("response_format") or {}
        messages = body.get("messages", [])
        if fmt.get("type") == "json_schema":
            js = fmt.get("json_schema") or {}
            name, schema = js.get("name"), js.get("schema")
        else:
            schema = schema_in_prompt(messages)
            name = schema["title"] if schema is not None else None
        cap_param = next((key for key in cap_keys if key in body), None)
        return cls(
            model=body.get("model", ""),
            messages=messages,
            schema_name=name,
            schema=schema,
            max_tokens=body.get(cap_param) if cap_param else None,
            temperature=body.get("temperature"),
            raw=body,
            cap_param=cap_param,
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
    cache_write_tokens: int = 0  # GPT-6 bills them (1.25x input); part of the prompt tokens
    reasoning_tokens: int = 0
    finish_reason: str = "stop"
    refusal: str | None = None  # set to make the model refuse (content is then null)
    service_tier: str = "default"  # the tier the reply says it ran on


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
        "service_tier": reply.service_tier,
        "choices": [
            {"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {
                "cached_tokens": reply.cached_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
                "audio_tokens": 0,
            },
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
    """A `url_citation`; `quote` must occur in the report text and becomes its exact span.

    The span is the first occurrence of `quote`, or the one at `start` when given (a page
    cited twice has the same inline link twice)."""

    url: str
    title: str
    quote: str
    start: int | None = None

    def span(self, text: str) -> tuple[int, int]:
        start = text.find(self.quote) if self.start is None else self.start
        if start < 0 or text[start : start + len(self.quote)] != self.quote:
            raise ValueError(f"citation quote {self.quote!r} does not occur in the report text")
        return start, start + len(self.quote)


def site_of(url: str) -> str:
    """`https://docs.trychroma.com/scale` -> `trychroma.com`: the label real replies link."""
    host = (urlsplit(url).hostname or url).removeprefix("www.")
    return ".".join(host.split(".")[-2:])


def inline_link(url: str) -> str:
    """The `([site](url))` link that real replies put after a cited sentence."""
    return f"([{site_of(url)}]({url}))"


@dataclass(frozen=True)
class ResearchReport:
    """What a deep-research response ends with once it leaves `in_progress`."""

    text: str
    citations: tuple[Citation, ...] = ()
    # A search is a query, or the tuple of queries one call ran; each query is billed.
    searches: tuple[Search, ...] = ("fake search",)
    opens: tuple[str, ...] = ()  # open_page urls: not billed
    # Pages the searches used besides the cited ones: every search action lists them with
    # the cited pages as its `sources`, sent only when the request a reply answers asks in
    # its own `include` (a retrieve's `include[]`: a create's is not remembered).
    consulted: tuple[str, ...] = ()
    finds: tuple[tuple[str, str], ...] = ()  # find_in_page (url, pattern): not billed
    reasoning: tuple[str, ...] = ("Planned the search.",)
    status: ResearchStatus = "completed"
    input_tokens: int | None = None  # None: estimated from the request input
    cached_tokens: int = 0
    cache_write_tokens: int = 0  # reported always (the SDK type requires it), as 3.57 does
    output_tokens: int | None = None  # None: estimated from text + reasoning_tokens
    reasoning_tokens: int = 64
    error_message: str = "The fake deep-research run failed."
    tool_usage: bool = True  # False: no `tool_usage` (older servers, gateways)
    usage_on_cancel: bool = True  # False: a cancelled response carries `usage: null`

    def __post_init__(self) -> None:
        for c in self.citations:
            c.span(self.text)

    @classmethod
    def from_claims(cls, claims: Iterable[tuple[str, str, str]], **fields: Any) -> ResearchReport:
        """A report of (sentence, url, title) claims, each cited by its inline link.

        `Chroma scales to 10M vectors ([trychroma.com](https://docs.trychroma.com/scale)).`
        with the url_citation span covering the `([site](url))` link, as in real replies."""
        text, citations = "", []
        for sentence, url, title in claims:
            link = inline_link(url)
            text += " " if text else ""
            start = len(text) + len(sentence.rstrip().rstrip(".")) + 1
            text += f"{sentence.rstrip().rstrip('.')} {link}."
            citations.append(Citation(url, title, link, start=start))
        return cls(text=text, citations=tuple(citations), **fields)

    @property
    def queries(self) -> tuple[tuple[str, ...], ...]:
        return tuple((s,) if isinstance(s, str) else s for s in self.searches)

    @property
    def billed_searches(self) -> int:
        """What `tool_usage.web_search.num_requests` reports: one per search query."""
        return sum(len(q) for q in self.queries)


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
    final_status: str  # the report's status, or `incomplete` when max_output_tokens cuts it
    status: str = "queued"
    created_at: int = field(default_factory=lambda: int(time.time()))
    finished_at: int | None = None

    def finish(self, status: str) -> None:
        self.status, self.finished_at = status, int(time.time())


def output_tokens(report: ResearchReport) -> int:
    if report.output_tokens is not None:
        return report.output_tokens
    return approx_tokens(report.text) + report.reasoning_tokens


def final_status(report: ResearchReport, max_output_tokens: Any) -> str:
    """A cap below what the report needs cuts it off: `incomplete`, like the real API."""
    capped = isinstance(max_output_tokens, int) and max_output_tokens < output_tokens(report)
    return "incomplete" if capped and report.status == "completed" else report.status


def _usage(stored: StoredResponse, prompt: str) -> dict[str, Any] | None:
    r, share = stored.report, 1.0
    if stored.status == "cancelled":
        if not r.usage_on_cancel:
            return None
        share = 0.5  # cancelled midway: what it used so far
    inp = r.input_tokens if r.input_tokens is not None else approx_tokens(prompt)
    out, reasoning = output_tokens(r), r.reasoning_tokens
    cap = stored.body.get("max_output_tokens")
    if isinstance(cap, int) and out > cap:
        out, reasoning = cap, min(reasoning, cap)
    out, reasoning = int(out * share), int(reasoning * share)
    return {
        "input_tokens": inp,
        "input_tokens_details": {
            "cached_tokens": r.cached_tokens,
            "cache_write_tokens": r.cache_write_tokens,
        },
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": inp + out,
    }


def _tool_usage(stored: StoredResponse) -> dict[str, Any] | None:
    if not stored.report.tool_usage:
        return None
    searches = stored.report.billed_searches
    if stored.status == "cancelled":
        searches //= 2
    no_images = {"image_tokens": 0, "text_tokens": 0}
    return {
        "image_gen": {
            "input_tokens": 0,
            "input_tokens_details": no_images,
            "output_tokens": 0,
            "output_tokens_details": no_images,
            "total_tokens": 0,
        },
        "web_search": {"num_requests": searches},
    }


def _output(
    report: ResearchReport, rid: str, with_message: bool, with_sources: bool
) -> list[dict[str, Any]]:
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
    used = dict.fromkeys([*(c.url for c in report.citations), *report.consulted])
    sources = {"sources": [{"type": "url", "url": url} for url in used]} if with_sources else {}
    actions: list[dict[str, Any]] = [
        {"type": "search", "query": qs[0], "queries": list(qs), **sources} for qs in report.queries
    ]
    actions += [{"type": "open_page", "url": url} for url in report.opens]
    actions += [{"type": "find_in_page", "url": u, "pattern": p} for u, p in report.finds]
    items += [
        {"id": f"ws_{suffix}_{i}", "type": "web_search_call", "status": "completed", "action": a}
        for i, a in enumerate(actions)
    ]
    if with_message:
        annotations = []
        for c in report.citations:
            start, end = c.span(report.text)
            annotations.append(
                {
                    "type": "url_citation",
                    "url": c.url,
                    "title": c.title,
                    "start_index": start,
                    "end_index": end,
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


def response_object(stored: StoredResponse, include: Iterable[str] = ()) -> dict[str, Any]:
    """The response as a reply shows it; ``include``: what the request it answers asked to
    include (a create's body ``include``, a retrieve's ``include[]``; a cancel takes none)."""
    body, status = stored.body, stored.status
    finished = status in ("completed", "failed", "incomplete", "cancelled")
    output: list[dict[str, Any]] = []
    with_sources = SOURCES_INCLUDE in include
    if status in ("completed", "incomplete"):
        output = _output(stored.report, stored.id, status == "completed", with_sources)
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
        "tool_usage": _tool_usage(stored) if finished else None,
        "service_tier": served_tier(body),
    }


def served_tier(body: dict[str, Any]) -> str:
    """The tier a reply says it ran on: the one asked for; "default" for none or "auto"."""
    asked = body.get("service_tier")
    return asked if isinstance(asked, str) and asked != "auto" else "default"


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
