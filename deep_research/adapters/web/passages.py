"""A page's main text cut into passages: what search-and-read ranks, and cites verbatim.

Pure text, no I/O: each passage is a verbatim slice of the page's markdown.
"""

from __future__ import annotations

import re

_HEADING = re.compile(r"#{1,6}\s")
_STRUCTURED = re.compile(r"(```|~~~|\||[-*+]\s|\d+[.)]\s)")
_SENTENCE_GAP = re.compile(r"(?<=[.!?])\s+")
_LINE_GAP = re.compile(r"\n+")
_WORD_GAP = re.compile(r"\s+")

Span = tuple[int, int]


def split_passages(text: str, max_words: int = 120) -> list[str]:
    """A page's markdown as passages of at most ``max_words`` words, each a verbatim slice.

    Blank-line separated blocks are packed together up to the limit, a fenced code block
    counting as one block. A heading closes the passage before it and opens the next one
    (it is kept at its head, if it fits), so a passage never straddles two sections and a
    heading is never a passage on its own. A block over the limit is cut at sentence ends
    (prose) or line ends (code, tables, lists), then at lines or sentences, then at words.
    """
    if max_words < 1:
        raise ValueError("max_words must be at least 1")
    passages: list[Span] = []
    current: tuple[int, int, int, bool] | None = None  # start, end, words, has body text
    for start, end, heading in _blocks(text):
        words = len(text[start:end].split())
        if heading:
            if current is not None and current[3]:
                passages.append(current[:2])
                current = None
            current = (
                (start, end, words, False)
                if current is None
                else (current[0], end, current[2] + words, False)
            )
        elif current is not None and current[2] + words <= max_words:
            current = (current[0], end, current[2] + words, True)
        else:
            if current is not None and current[3]:
                passages.append(current[:2])
            *done, last = _fit(text, (start, end), max_words)
            passages += done
            current = (*last, len(text[last[0] : last[1]].split()), True)
    if current is not None and current[3]:
        passages.append(current[:2])
    return [text[a:b] for a, b in passages]


def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """(start, end, is_heading) of each block, without the whitespace around it."""
    blocks: list[tuple[int, int, bool]] = []
    start = end = -1  # the open block; -1: none
    fence = ""
    position = 0
    for line in text.splitlines(keepends=True):
        line_start, position = position, position + len(line)
        stripped = line.strip()
        first = line_start + len(line) - len(line.lstrip())
        last = line_start + len(line.rstrip())
        if not fence and (not stripped or _HEADING.match(stripped)):
            if start >= 0:
                blocks.append((start, end, False))
                start = -1
            if stripped:
                blocks.append((first, last, True))
            continue
        if fence:
            fence = "" if stripped.startswith(fence) else fence
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        if stripped:
            start = first if start < 0 else start
            end = last
    if start >= 0:
        blocks.append((start, end, False))
    return blocks


def _fit(text: str, span: Span, max_words: int, depth: int = 0) -> list[Span]:
    """``span`` cut into pieces of at most ``max_words`` words at the coarsest boundaries."""
    if len(text[span[0] : span[1]].split()) <= max_words:
        return [span]
    structured = _STRUCTURED.match(text, span[0]) is not None
    gaps = (_LINE_GAP, _SENTENCE_GAP) if structured else (_SENTENCE_GAP, _LINE_GAP)
    gap = (*gaps, _WORD_GAP)[depth]
    pieces = [
        part for unit in _cut(text, span, gap) for part in _fit(text, unit, max_words, depth + 1)
    ]
    packed: list[Span] = []
    for piece in pieces:
        if packed and len(text[packed[-1][0] : piece[1]].split()) <= max_words:
            packed[-1] = (packed[-1][0], piece[1])
        else:
            packed.append(piece)
    return packed


def _cut(text: str, span: Span, gap: re.Pattern[str]) -> list[Span]:
    units: list[Span] = []
    start = span[0]
    for match in gap.finditer(text, span[0], span[1]):
        if match.start() > start:
            units.append((start, match.start()))
        start = match.end()
    if start < span[1]:
        units.append((start, span[1]))
    return units
