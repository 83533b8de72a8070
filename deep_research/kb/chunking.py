"""Markdown -> chunks. Pure: no I/O, no LangChain, no Chroma.

Invariants:
- line numbers are 1-based in the original file, front matter counted;
- a chunk's ``text`` is exactly its lines ``start_line..end_line`` joined by "\\n"
  (one exception: a line longer than the token cap is cut into word-aligned pieces,
  each its own chunk with ``start_line == end_line``);
- a fenced code block or a table is never cut; one larger than the cap is a chunk alone;
- chunks never span two sections (a heading starts a new chunk), except that a heading
  with no body of its own is carried into the next section's first chunk;
- a chunk id depends on (source, heading path, ordinal under that heading path), so ids
  are stable across runs and an edited section keeps its ids (its content hash changes).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

import yaml

MetaValue = str | int | float | bool
UnitKind = Literal["heading", "line", "block", "piece"]

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


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough for English and code, and offline."""
    return estimate_tokens_for_chars(len(text))


def estimate_tokens_for_chars(chars: int) -> int:
    return (chars + 3) // 4


@dataclass(frozen=True)
class FrontMatter:
    meta: Mapping[str, MetaValue | list[str]]
    body: str
    body_start_line: int
    """1-based line of the original text where ``body`` begins."""


@dataclass(frozen=True)
class Chunk:
    id: str
    source: str
    heading: str
    start_line: int
    end_line: int
    text: str
    content_hash: str
    title: str = ""
    tags: tuple[str, ...] = ()
    ordinal: int = 0
    """Position of the chunk in its file (0-based)."""
    meta: tuple[tuple[str, MetaValue], ...] = ()
    """Other front matter scalars (dates, author …), lists joined by ", "."""

    @property
    def indexed_text(self) -> str:
        """What the rankers see: title and heading path give a chunk its context."""
        context = [part for part in (self.title, self.heading) if part]
        return "\n".join([*context, self.text]) if context else self.text

    @property
    def locator(self) -> str:
        return make_locator(self.source, self.heading, self.start_line, self.end_line)


def make_locator(source: str, heading: str, start_line: int, end_line: int) -> str:
    """``path#heading:start-end`` (``path:start-end`` for text before the first heading)."""
    anchor = f"{source}#{heading}" if heading else source
    return f"{anchor}:{start_line}-{end_line}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chunk_id(source: str, heading: str, ordinal: int) -> str:
    return hashlib.sha256(f"{source}\x00{heading}\x00{ordinal}".encode()).hexdigest()[:32]


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
    try:
        loaded = yaml.load("\n".join(lines[1:index]), Loader=_YAML_LOADER)
    except yaml.YAMLError:
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


def _tags(meta: Mapping[str, MetaValue | list[str]]) -> tuple[str, ...]:
    raw = meta.get("tags", [])
    items = raw if isinstance(raw, list) else re.split(r"[,\s]+", str(raw))
    seen: dict[str, None] = {}
    for item in items:
        tag = item.strip().lstrip("#").lower()
        if tag:
            seen[tag] = None
    return tuple(seen)


# --- blocks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Block:
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


def _blocks(lines: list[str]) -> Iterator[_Block]:
    index, count = 0, len(lines)
    while index < count:
        line = lines[index]
        if not line.strip():
            index += 1
            continue
        fence = _FENCE_OPEN.match(line)
        if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
            end = _fence_end(lines, index, fence.group(1))
            yield _Block("code", index, end)
            index = end
            continue
        atx = _ATX.match(line)
        if atx:
            yield _Block(
                "heading", index, index + 1, len(atx.group(1)), (atx.group(2) or "").strip()
            )
            index += 1
            continue
        if _is_table_start(lines, index):
            end = index + 2
            while end < count and lines[end].strip() and "|" in lines[end]:
                end += 1
            yield _Block("table", index, end)
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
            yield _Block("heading", index, index + 2, level, line.strip())
            index += 2
            continue
        end = index + 1
        while end < count and not _starts_block(lines, end):
            end += 1
        yield _Block("text", index, end)
        index = end


# --- units and packing ----------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    kind: UnitKind
    start: int
    end: int  # exclusive line index
    tokens: int
    text: str = ""  # only for pieces: the exact substring of the line


def _pieces(line: str, index: int, max_tokens: int, overlap_tokens: int) -> Iterator[_Unit]:
    """Word-aligned windows over one over-long line; a word longer than a window is cut."""
    words = [m.span() for m in re.finditer(rf"\S{{1,{max_tokens * 4}}}", line)]

    def tokens(first: int, last: int) -> int:
        return estimate_tokens_for_chars(words[last][1] - words[first][0])

    start = 0
    while start < len(words):
        end = start + 1
        while end < len(words) and tokens(start, end) <= max_tokens:
            end += 1
        yield _Unit(
            "piece",
            index,
            index + 1,
            tokens(start, end - 1),
            line[words[start][0] : words[end - 1][1]],
        )
        if end >= len(words):
            return
        back = end
        while back - 1 > start and tokens(back - 1, end - 1) <= overlap_tokens:
            back -= 1
        start = back


def _units(lines: list[str], blocks: list[_Block], max_tokens: int, overlap: int) -> list[_Unit]:
    units: list[_Unit] = []
    for block in blocks:
        if block.kind == "heading":
            text = "\n".join(lines[block.start : block.end])
            units.append(_Unit("heading", block.start, block.end, estimate_tokens(text)))
        elif block.kind in ("code", "table"):
            text = "\n".join(lines[block.start : block.end])
            units.append(_Unit("block", block.start, block.end, estimate_tokens(text)))
        else:
            for index in range(block.start, block.end):
                tokens = estimate_tokens(lines[index]) + 1
                if tokens > max_tokens:
                    units.extend(_pieces(lines[index], index, max_tokens, overlap))
                else:
                    units.append(_Unit("line", index, index + 1, tokens))
    return units


def _overlap_tail(current: list[_Unit], overlap_tokens: int) -> list[_Unit]:
    """Trailing plain lines of the last chunk, up to the overlap budget (never a block)."""
    tail: list[_Unit] = []
    used = 0
    for unit in reversed(current[1:]):  # never repeat the whole previous chunk
        if unit.kind != "line" or used + unit.tokens > overlap_tokens:
            break
        tail.insert(0, unit)
        used += unit.tokens
    return tail


def _pack(units: list[_Unit], max_tokens: int, overlap_tokens: int) -> list[list[_Unit]]:
    groups: list[list[_Unit]] = []
    current: list[_Unit] = []
    used = 0
    for unit in units:
        if unit.kind == "piece" or unit.tokens > max_tokens:
            if current:
                groups.append(current)
            groups.append([unit])
            current, used = [], 0
            continue
        if current and used + unit.tokens > max_tokens:
            groups.append(current)
            current = _overlap_tail(current, overlap_tokens)
            used = sum(u.tokens for u in current)
            if used + unit.tokens > max_tokens:
                current, used = [], 0
        current.append(unit)
        used += unit.tokens
    if current:
        groups.append(current)
    return groups


def _sections(blocks: list[_Block]) -> Iterator[tuple[str, list[_Block]]]:
    """(heading path, blocks) per section; text before the first heading has path ''."""
    stack: list[tuple[int, str]] = []
    path = ""
    current: list[_Block] = []
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


def chunk_markdown(text: str, source: str, *, max_tokens: int, overlap_tokens: int) -> list[Chunk]:
    """Split one markdown document into chunks (see the module docstring)."""
    if max_tokens < 1 or overlap_tokens < 0:
        raise ValueError("max_tokens must be >= 1 and overlap_tokens >= 0")
    overlap_tokens = min(overlap_tokens, max_tokens // 2)
    front = split_front_matter(text.replace("\r\n", "\n"))
    lines = front.body.split("\n")
    blocks = list(_blocks(lines))
    first_h1 = next((b.title for b in blocks if b.kind == "heading" and b.level == 1), "")
    title_value = front.meta.get("title")
    title = str(title_value) if title_value and not isinstance(title_value, list) else ""
    title = title or first_h1 or PurePosixPath(source).stem
    tags = _tags(front.meta)
    meta = tuple(
        (key, ", ".join(value) if isinstance(value, list) else value)
        for key, value in sorted(front.meta.items())
        if key not in ("title", "tags")
    )
    offset = front.body_start_line

    chunks: list[Chunk] = []
    ordinals: dict[str, int] = {}
    carried: list[_Unit] = []  # a heading with no body of its own
    carried_heading = ""
    for heading, section in _sections(blocks):
        units = carried + _units(lines, section, max_tokens, overlap_tokens)
        if all(unit.kind == "heading" for unit in units):
            carried, carried_heading = units, heading
            continue
        carried = []
        for group in _pack(units, max_tokens, overlap_tokens):
            first, last = group[0], group[-1]
            body = first.text if first.kind == "piece" else "\n".join(lines[first.start : last.end])
            ordinal = ordinals.get(heading, 0)
            ordinals[heading] = ordinal + 1
            chunks.append(
                Chunk(
                    id=chunk_id(source, heading, ordinal),
                    source=source,
                    heading=heading,
                    start_line=first.start + offset,
                    end_line=last.end - 1 + offset,
                    text=body,
                    content_hash=content_hash(body),
                    title=title,
                    tags=tags,
                    ordinal=len(chunks),
                    meta=meta,
                )
            )
    if carried:
        # Only headings left at the end of the document: still worth a chunk.
        heading_path = carried_heading
        body = "\n".join(lines[carried[0].start : carried[-1].end])
        ordinal = ordinals.get(heading_path, 0)
        chunks.append(
            Chunk(
                id=chunk_id(source, heading_path, ordinal),
                source=source,
                heading=heading_path,
                start_line=carried[0].start + offset,
                end_line=carried[-1].end - 1 + offset,
                text=body,
                content_hash=content_hash(body),
                title=title,
                tags=tags,
                ordinal=len(chunks),
                meta=meta,
            )
        )
    return chunks
