"""Markdown -> chunks. Pure: no I/O, no LangChain, no Chroma.

Sizes are counted by a `TokenCounter` the caller passes in: the embedding model's own
tokenizer when it has one (see `NamedEmbeddings.count_tokens`), else
`core.memory.estimate_line_tokens`.
Counts are assumed to add up over lines and over whitespace-separated words, which is
exact for WordPiece tokenizers (BERT splits on whitespace and around CJK characters).

Invariants:
- line numbers are 1-based in the original file, front matter counted;
- a chunk's ``text`` is exactly its lines ``start_line..end_line`` joined by "\\n"
  (one exception: a line longer than the token cap is cut into word-aligned pieces that
  overlap and together cover the line, each its own chunk with ``start_line ==
  end_line``, ``piece`` set and its ``column``; a run of text with no whitespace, such as
  CJK prose, is cut between characters);
- ``indexed_text`` (title, heading path, text) fits ``max_tokens`` by the counter, except
  when a title plus heading path take over half the cap (the text still gets half);
- a fenced code block or a table is never cut unless it alone is over the cap; then it
  is cut between lines (and a line over the cap into pieces), each part within the cap;
- chunks never span two sections (a heading starts a new chunk), except that a heading
  with no body of its own is carried into the next section's first chunk;
- a chunk id depends on (root, source, heading path, ordinal under that heading path), so
  ids are stable across runs and an edited section keeps its ids (its content hash changes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from deep_research.core.memory import estimate_line_tokens
from deep_research.kb.markdown import (
    HEADING_SEPARATOR,
    Block,
    MetaValue,
    parse_blocks,
    split_front_matter,
    split_sections,
    tags_of,
)

UnitKind = Literal["heading", "line", "block", "piece"]

TokenCounter = Callable[[Sequence[str]], list[int]]
"""Tokens in each text, special tokens excluded; one call per batch of texts."""


def estimate_token_counts(texts: Sequence[str]) -> list[int]:
    return [estimate_line_tokens(text) for text in texts]


@dataclass(frozen=True)
class Chunk:
    id: str
    source: str
    """The file's path relative to its root folder."""
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
    root: str = ""
    """The name of the folder the file was ingested from ("" for a file chunked outside a
    KB)."""
    piece: bool = False
    """A word-aligned piece of one over-long line, not the whole line."""
    column: int = 0
    """For a piece: where its text starts in the line (pieces overlap and cover the line)."""

    @property
    def indexed_text(self) -> str:
        """What the rankers see: title and heading path give a chunk its context."""
        context = [part for part in (_own_title(self.title, self.heading), self.heading) if part]
        return "\n".join([*context, self.text]) if context else self.text

    @property
    def document(self) -> tuple[str, str]:
        return (self.root, self.source)

    @property
    def locator(self) -> str:
        """``root/path#heading:start-end``: what a citation stores (``search.resolve_locator``)."""
        return make_locator(self.root, self.source, self.heading, self.start_line, self.end_line)


def _own_title(title: str, heading: str) -> str:
    """The title, unless the heading path already starts with it (a document's H1 is
    usually its title): said once, it leaves more of the model's window to the text."""
    if heading == title or heading.startswith(title + HEADING_SEPARATOR):
        return ""
    return title


def document_key(root: str, source: str) -> str:
    """``root/path``: one file of the KB (a bare ``path`` without a root)."""
    return f"{root}/{source}" if root else source


def make_anchor(root: str, source: str, heading: str) -> str:
    key = document_key(root, source)
    return f"{key}#{heading}" if heading else key


def make_locator(root: str, source: str, heading: str, start_line: int, end_line: int) -> str:
    """``root/path#heading:start-end`` (``root/path:start-end`` before the first heading)."""
    return f"{make_anchor(root, source, heading)}:{start_line}-{end_line}"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def chunk_id(root: str, source: str, heading: str, ordinal: int) -> str:
    key = f"{root}\x00{source}" if root else source
    return hashlib.sha256(f"{key}\x00{heading}\x00{ordinal}".encode()).hexdigest()[:32]


# --- units and packing ----------------------------------------------------------------


@dataclass(frozen=True)
class _Unit:
    kind: UnitKind
    start: int
    end: int  # exclusive line index
    tokens: int
    text: str = ""  # only for pieces: the exact substring of the line
    column: int = 0  # only for pieces: where the text starts in the line


def _atoms(line: str, count: TokenCounter, max_tokens: int) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of the words of a line; a word over the cap goes char by char."""
    words = [m.span() for m in re.finditer(r"\S+", line)]
    atoms: list[tuple[int, int, int]] = []
    for (a, b), tokens in zip(words, count([line[a:b] for a, b in words]), strict=True):
        if tokens <= max_tokens:
            atoms.append((a, b, tokens))
        else:
            chars = count(list(line[a:b]))
            atoms.extend((i, i + 1, chars[i - a]) for i in range(a, b))
    return atoms


def _pieces(
    line: str, index: int, max_tokens: int, overlap_tokens: int, count: TokenCounter
) -> list[_Unit]:
    """Windows of at most ``max_tokens`` over one over-long line, overlapping by whole words.

    The windows are as few as the cap allows and of about equal size: no short tail piece
    (a weak chunk, and embedding cost grows faster than length).
    """
    atoms = _atoms(line, count, max_tokens)
    # prefix[i] = tokens of atoms[:i]: a window's size is a difference of two prefixes
    prefix = [0]
    for _, _, atom_tokens in atoms:
        prefix.append(prefix[-1] + atom_tokens)
    step = max(max_tokens - overlap_tokens, 1)
    windows = max(1, -(-(prefix[-1] - overlap_tokens) // step))
    even = -(-(prefix[-1] + (windows - 1) * overlap_tokens) // windows)
    pieces = _windows(line, index, atoms, prefix, min(even, max_tokens), overlap_tokens)
    if len(pieces) > windows:  # word boundaries did not allow even windows
        pieces = _windows(line, index, atoms, prefix, max_tokens, overlap_tokens)
    return pieces


def _windows(
    line: str,
    index: int,
    atoms: list[tuple[int, int, int]],
    prefix: list[int],
    size: int,
    overlap_tokens: int,
) -> list[_Unit]:
    def tokens(first: int, end: int) -> int:
        return prefix[end] - prefix[first]

    pieces: list[_Unit] = []
    start = 0
    while start < len(atoms):
        end = start + 1
        while end < len(atoms) and tokens(start, end + 1) <= size:
            end += 1
        # The first piece starts the line and the last ends it, whitespace and all, so
        # the pieces together hold the whole line.
        column = 0 if start == 0 else atoms[start][0]
        stop = len(line) if end >= len(atoms) else atoms[end - 1][1]
        pieces.append(
            _Unit("piece", index, index + 1, tokens(start, end), line[column:stop], column)
        )
        if end >= len(atoms):
            return pieces
        back = end
        while back - 1 > start and tokens(back - 1, end) <= overlap_tokens:
            back -= 1
        start = back
    return pieces


def _units(
    lines: list[str],
    line_tokens: list[int],
    blocks: list[Block],
    max_tokens: int,
    overlap: int,
    count: TokenCounter,
) -> list[_Unit]:
    units: list[_Unit] = []
    for block in blocks:
        tokens = sum(line_tokens[block.start : block.end])
        if block.kind == "heading" or (block.kind != "text" and tokens <= max_tokens):
            kind: UnitKind = "heading" if block.kind == "heading" else "block"
            units.append(_Unit(kind, block.start, block.end, tokens))
            continue
        if block.kind != "text":
            units.extend(_block_parts(lines, line_tokens, block, max_tokens, overlap, count))
            continue
        for index in range(block.start, block.end):
            if line_tokens[index] > max_tokens:
                units.extend(_pieces(lines[index], index, max_tokens, overlap, count))
            else:
                units.append(_Unit("line", index, index + 1, line_tokens[index]))
    return units


def _block_parts(
    lines: list[str],
    line_tokens: list[int],
    block: Block,
    max_tokens: int,
    overlap: int,
    count: TokenCounter,
) -> Iterator[_Unit]:
    """An oversized code block or table, cut between lines into runs within the cap."""
    first, used = block.start, 0
    for index in range(block.start, block.end):
        tokens = line_tokens[index]
        if used + tokens <= max_tokens:
            used += tokens
            continue
        if index > first:
            yield _Unit("block", first, index, used)
        if tokens > max_tokens:
            yield from _pieces(lines[index], index, max_tokens, overlap, count)
            first, used = index + 1, 0
        else:
            first, used = index, tokens
    if block.end > first:
        yield _Unit("block", first, block.end, used)


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


def chunk_markdown(
    text: str,
    source: str,
    *,
    max_tokens: int,
    overlap_tokens: int,
    count_tokens: TokenCounter = estimate_token_counts,
    root: str = "",
) -> list[Chunk]:
    """Split one markdown document into chunks (see the module docstring).

    ``count_tokens`` is called once for the document's lines, title and heading paths,
    and once more per over-long line.
    """
    if max_tokens < 1 or overlap_tokens < 0:
        raise ValueError("max_tokens must be >= 1 and overlap_tokens >= 0")
    front = split_front_matter(text.replace("\r\n", "\n"))
    lines = front.body.split("\n")
    blocks = list(parse_blocks(lines))
    first_h1 = next((b.title for b in blocks if b.kind == "heading" and b.level == 1), "")
    title_value = front.meta.get("title")
    title = str(title_value) if title_value and not isinstance(title_value, list) else ""
    title = title or first_h1 or PurePosixPath(source).stem
    tags = tags_of(front.meta)
    meta = tuple(
        (key, ", ".join(value) if isinstance(value, list) else value)
        for key, value in sorted(front.meta.items())
        if key not in ("title", "tags")
    )
    offset = front.body_start_line
    sections = list(split_sections(blocks))
    headings = list(dict.fromkeys(heading for heading, _ in sections if heading))
    counts = count_tokens([*lines, title, *headings])
    line_tokens = counts[: len(lines)]
    title_tokens = counts[len(lines)]
    heading_tokens = dict(zip(headings, counts[len(lines) + 1 :], strict=True))

    def budget(heading: str) -> int:
        """What the text may use once the title and heading path are counted."""
        context = heading_tokens.get(heading, 0) + (
            title_tokens if _own_title(title, heading) else 0
        )
        return max(max_tokens - context, max_tokens // 2, 1)

    chunks: list[Chunk] = []
    ordinals: dict[str, int] = {}

    def emit(heading: str, first: _Unit, last: _Unit) -> None:
        piece = first.kind == "piece"
        body = first.text if piece else "\n".join(lines[first.start : last.end])
        ordinal = ordinals.get(heading, 0)
        ordinals[heading] = ordinal + 1
        chunks.append(
            Chunk(
                id=chunk_id(root, source, heading, ordinal),
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
                root=root,
                piece=piece,
                column=first.column,
            )
        )

    carried: list[_Unit] = []  # a heading with no body of its own
    carried_heading = ""
    for heading, section in sections:
        cap = budget(heading)
        overlap = min(overlap_tokens, cap // 2)
        units = carried + _units(lines, line_tokens, section, cap, overlap, count_tokens)
        if all(unit.kind == "heading" for unit in units):
            carried, carried_heading = units, heading
            continue
        carried = []
        for group in _pack(units, cap, overlap):
            emit(heading, group[0], group[-1])
    if carried:
        # Only headings left at the end of the document: still worth a chunk.
        emit(carried_heading, carried[0], carried[-1])
    return chunks
