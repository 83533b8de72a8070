"""Reading a JSON object out of what a model wrote, when the server could not enforce one.

A model asked for "one JSON object and nothing else" writes, in practice: the object; the
object in a ```json fence; a sentence, then the fence; the object, then an explanation; or
the object cut off at the token cap. ``json_object_in`` finds it in all of these:

- fenced code blocks are found by parsing the text as markdown (markdown-it-py), never by
  matching lines, and are tried first, in order; then the whole text;
- inside each, the object is decoded from a ``{`` (the first few are tried: a sentence may
  hold a brace before the object), and whatever follows it is ignored;
- a text that ends inside the object (cut off at the cap) is closed by langchain-core's
  partial-JSON parser: strings, arrays and objects left open are closed, and a value cut in
  half is dropped.

Anything else is a ``ValueError`` naming what was wrong, which the caller sends back to the
model once. The reader never raises anything else, whatever the text (tested with generated
inputs). ``read_reply`` reads a structured call's whole reply with it: the schema it must
validate against, a refusal, or what was wrong, for the repair request; ``usage_of`` and
``completion_usage`` read what it cost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from langchain_core.messages import AIMessage
from langchain_core.utils.json import parse_partial_json
from markdown_it import MarkdownIt
from openai.types import CompletionUsage
from pydantic import BaseModel, ValidationError

from deep_research.core.models import Usage

T = TypeVar("T", bound=BaseModel)

_STARTS_TRIED = 20
"""Opening braces tried per candidate: enough for a sentence or two before the object."""
_MAX_CHARS = 100_000
"""Past this a reply is not an answer to a schema-sized request: read only its start."""

_decoder = json.JSONDecoder()
_markdown = MarkdownIt("zero").enable(["fence"])
"""Block structure only: fences need no inline parsing, whose link rules take seconds on a
reply of a hundred thousand brackets."""


def json_object_in(text: str) -> dict[str, Any]:
    """The JSON object a model's reply holds (see the module docstring); ``ValueError`` if
    it holds none."""
    text = text[:_MAX_CHARS]
    candidates = [*_fenced_blocks(text), text]
    for read in (_first_object, _closed_object):  # a whole object anywhere before a cut one
        for candidate in candidates:
            if (found := read(candidate)) is not None:
                return found
    if not text.strip():
        raise ValueError("the reply was empty")
    raise ValueError("the reply holds no JSON object")


def _fenced_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks, in order (any info string: a model may label
    its JSON ``json``, ``JSON``, ``javascript`` or nothing)."""
    try:
        tokens = _markdown.parse(text)
    except RecursionError:  # absurd nesting: fall back to reading the text itself
        return []
    return [t.content for t in tokens if t.type == "fence"]


def _first_object(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    for _ in range(_STARTS_TRIED):
        if start < 0:
            return None
        try:
            value, _end = _decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def _closed_object(text: str) -> dict[str, Any] | None:
    """The object a reply was cut off in the middle of, its open parts closed."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = parse_partial_json(text[start:])
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def read_reply(reply: AIMessage, schema: type[T]) -> tuple[T | None, str, str]:
    """A structured call's reply as ``schema``, read from its text (the SDK parses none:
    ``llm.strict_format``), else None, what was wrong (for the repair request) and the
    text."""
    refusal = reply.additional_kwargs.get("refusal")
    if refusal:
        return None, f"the model refused: {refusal}", ""
    content = reply.content if isinstance(reply.content, str) else str(reply.text)
    try:
        return schema.model_validate(json_object_in(content)), "", content
    except ValidationError as exc:
        return None, validation_problem(exc), content
    except ValueError as exc:
        return None, str(exc), content


def validation_problem(exc: ValidationError) -> str:
    """What was wrong with a reply, for the repair request: the first field and why."""
    first = exc.errors()[0] if exc.errors() else None
    where = ".".join(str(p) for p in first["loc"]) if first else ""
    what = f"{where}: {first['msg']}" if first else str(exc)
    return f"{exc.error_count()} problem(s), first {what}"


TIER_PREFIXES = ("", "flex_", "priority_")
"""langchain-openai 1.7.4 names a reply's token details ``cache_read``, ``cache_creation``
(cache writes) and ``reasoning``, prefixed with the service tier on the flex and priority
tiers (``flex_cache_read``); checked 2026-11-26 in its ``_create_usage_metadata``."""


def _detail(details: Mapping[str, Any], key: str) -> int:
    """A token detail under any tier's prefix (a reply carries one of them)."""
    return sum(int(details.get(prefix + key) or 0) for prefix in TIER_PREFIXES)


def usage_of(message: AIMessage) -> Usage:
    meta = message.usage_metadata
    if not meta:
        return Usage()
    details_in: Mapping[str, Any] = meta.get("input_token_details") or {}
    details_out: Mapping[str, Any] = meta.get("output_token_details") or {}
    return Usage(
        input_tokens=meta.get("input_tokens", 0),
        cached_input_tokens=_detail(details_in, "cache_read"),
        cache_write_tokens=_detail(details_in, "cache_creation"),
        output_tokens=meta.get("output_tokens", 0),
        reasoning_tokens=_detail(details_out, "reasoning"),
    )


def completion_usage(usage: CompletionUsage | None) -> Usage:
    """Usage of a raw chat completion (what a ``LengthFinishReasonError`` carries)."""
    if usage is None:
        return Usage()
    prompt, done = usage.prompt_tokens_details, usage.completion_tokens_details
    return Usage(
        input_tokens=usage.prompt_tokens,
        cached_input_tokens=(prompt.cached_tokens if prompt else 0) or 0,
        cache_write_tokens=(prompt.cache_write_tokens if prompt else 0) or 0,
        output_tokens=usage.completion_tokens,
        reasoning_tokens=(done.reasoning_tokens if done else 0) or 0,
    )
