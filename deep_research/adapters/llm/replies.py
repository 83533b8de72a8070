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
inputs).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.utils.json import parse_partial_json
from markdown_it import MarkdownIt

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
    for candidate in candidates:
        found = _first_object(candidate)
        if found is not None:
            return found
    for candidate in candidates:
        found = _closed_object(candidate)
        if found is not None:
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
