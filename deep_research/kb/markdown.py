"""The structure of a markdown text: YAML front matter, blocks, sections. Pure.

Blocks are headings (ATX and setext), fenced code (an unclosed fence runs to the end),
tables and runs of text lines; blank lines separate them. Indexes are 0-based into the
body's lines.

Front matter is read without expanding YAML aliases: a few hundred bytes of nested aliases
("billion laughs") expand to billions of nodes, and a self-referential one never ends. A
file whose front matter uses them, or nests deeper than `MAX_FRONT_MATTER_DEPTH`, raises
`FrontMatterRefused` (its ingest skips it with the reason).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import yaml

MetaValue = str | int | float | bool

HEADING_SEPARATOR = " > "

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_NOT_SETEXT_TEXT = re.compile(r"^\s*([-*+>|]|\d+[.)])")
_FM_OPEN = "---"
# The libyaml loader when available: ten times faster, same safe subset.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FM_CLOSE = ("---", "...")
MAX_FRONT_MATTER_DEPTH = 20
"""Nested lists and mappings in front matter (real ones use two or three levels)."""


class FrontMatterRefused(ValueError):
    """Front matter this reader will not load; the message is the reason, for the user."""


@dataclass(frozen=True)
class FrontMatter:
    meta: Mapping[str, MetaValue | list[str]]
    body: str
    body_start_line: int
    """1-based line of the original text where ``body`` begins."""


# --- front matter ---------------------------------------------------------------------


def _meta_value(value: object) -> MetaValue | list[str] | None:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        items = [_meta_value(item) for item in value]
        return [str(item) for item in items if item is not None and not isinstance(item, list)]
    return None  # nested mappings and other YAML objects are not kept


def split_front_matter(text: str) -> FrontMatter:
    """YAML front matter between a leading ``---`` line and ``---``/``...``.

    Anything that is not a well-formed YAML mapping is left in the body untouched.
    """
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != _FM_OPEN:
        return FrontMatter({}, text, 1)
    for index in range(1, len(lines)):
        if lines[index].rstrip() in _FM_CLOSE:
            break
    else:
        return FrontMatter({}, text, 1)
    source = "\n".join(lines[1:index])
    try:
        _check_yaml(source)
        loaded = yaml.load(source, Loader=_YAML_LOADER)
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: a date like 2024-13-45
        if isinstance(exc, FrontMatterRefused):
            raise
        return FrontMatter({}, text, 1)
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        return FrontMatter({}, text, 1)
    meta: dict[str, MetaValue | list[str]] = {}
    for key, value in loaded.items():
        converted = _meta_value(value)
        if converted is not None:
            meta[str(key)] = converted
    return FrontMatter(meta, "\n".join(lines[index + 1 :]), index + 2)


def _check_yaml(source: str) -> None:
    """Raise FrontMatterRefused for aliases or deep nesting; reading the events is linear
    in the text, whatever the aliases would have expanded to."""
    too_deep = f"YAML front matter nests deeper than {MAX_FRONT_MATTER_DEPTH} levels"
    depth = 0
    try:
        for event in yaml.parse(source, Loader=_YAML_LOADER):
            if isinstance(event, yaml.AliasEvent):
                raise FrontMatterRefused(
                    f"YAML front matter uses an alias (*{event.anchor}), which is not "
                    "expanded: write the value out"
                )
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_FRONT_MATTER_DEPTH:
                    raise FrontMatterRefused(too_deep)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.YAMLError as exc:
        # The libyaml of PyYAML 6.0.4 refuses deep nesting itself, while it scans ahead of
        # the events that would have told us: the same refusal, not a malformed block.
        if "maximum nesting depth" in str(exc):
            raise FrontMatterRefused(too_deep) from exc
        raise


def tags_of(meta: Mapping[str, MetaValue | list[str]]) -> tuple[str, ...]:
    raw = meta.get("tags", [])
    items = raw if isinstance(raw, list) else re.split(r"[,\s]+", str(raw))
    seen: dict[str, None] = {}
    for item in items:
        tag = item.strip().lstrip("#").lower()
        if tag:
            seen[tag] = None
    return tuple(seen)


# --- blocks and sections --------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    kind: Literal["heading", "text", "code", "table"]
    start: int
    end: int  # exclusive, 0-based indexes into the body lines
    level: int = 0
    title: str = ""


def _fence_end(lines: list[str], start: int, fence: str) -> int:
    """Index after the closing fence; an unclosed fence runs to the end of the text."""
    char, size = fence[0], len(fence)
    for index in range(start + 1, len(lines)):
        stripped = lines[index].strip()
        if stripped and set(stripped) == {char} and len(stripped) >= size:
            return index + 1
    return len(lines)


def _is_table_start(lines: list[str], index: int) -> bool:
    return (
        "|" in lines[index]
        and index + 1 < len(lines)
        and "-" in lines[index + 1]
        and bool(_TABLE_SEP.match(lines[index + 1]))
    )


def _starts_block(lines: list[str], index: int) -> bool:
    line = lines[index]
    return (
        not line.strip()
        or bool(_ATX.match(line))
        or bool(_FENCE_OPEN.match(line))
        or _is_table_start(lines, index)
    )


def parse_blocks(lines: list[str]) -> Iterator[Block]:
    index, count = 0, len(lines)
    while index < count:
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        fence = _FENCE_OPEN.match(line)
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            end = _fence_end(lines, index, fence.group(1))
            yield Block("code", index, end)
            index = end
            continue
        atx = _ATX.match(line)
        if atx:
            yield Block(
                "heading", index, index + 1, len(atx.group(1)), (atx.group(2) or "").strip()
            )
            index += 1
            continue
        if _is_table_start(lines, index):
            end = index + 2
            while end < count and lines[end].strip() and "|" in lines[end]:
                end += 1
            yield Block("table", index, end)
            index = end
            continue
        previous_blank = index == 0 or not lines[index - 1].strip()
        if (
            previous_blank
            and index + 1 < count
            and _SETEXT.match(lines[index + 1])
            and not _NOT_SETEXT_TEXT.match(line)
        ):
            level = 1 if lines[index + 1].strip()[0] == "=" else 2
            yield Block("heading", index, index + 2, level, line.strip())
            index += 2
            continue
        end = index + 1
        while end < count and not _starts_block(lines, end):
            end += 1
        yield Block("text", index, end)
        index = end


def split_sections(blocks: list[Block]) -> Iterator[tuple[str, list[Block]]]:
    """(heading path, blocks) per section; text before the first heading has path ''."""
    stack: list[tuple[int, str]] = []
    path = ""
    current: list[Block] = []
    for block in blocks:
        if block.kind == "heading":
            if current:
                yield path, current
            while stack and stack[-1][0] >= block.level:
                stack.pop()
            stack.append((block.level, block.title))
            path = HEADING_SEPARATOR.join(title for _, title in stack if title)
            current = [block]
        else:
            current.append(block)
    if current:
        yield path, current
