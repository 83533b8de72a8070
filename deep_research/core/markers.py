"""Citation markers where they sit in model-written markdown: a parse, not a line pattern.

    found = markers(text)   # each with its place in ``text`` and the names it cites

A marker is read only where markdown shows text: a paragraph, a heading (ATX or setext), a
list item, a quote, a table cell. Never in code (a span, a fence, an indented block), raw
HTML, a link (its text or destination) or an image: ``[1](https://x)`` is a link, and so is
``[1]`` where the text defines the reference ``[1]: https://x``.

The forms, written here and nowhere else:

- ``[S3]``, ``[3]``, ``【3】``, ``【S3】``; several names in one marker, ``[S1, S2]``,
  ``[1; 2]``, ``[1,2]``; each marker of a run ``[S1][S2]`` is its own.
- ``(S3)``, ``(S1, S2)``: with the ``S`` only; ``(3)`` is how prose counts, not a citation.
- A span, ``[1–3]`` or ``[S1-S3]``, is read but flagged (``Marker.span``): it names sources
  nobody named one by one, so no reader ties it to any.
- ``\\[3\\]`` is a marker already made literal text (``Marker.literal``): never tied again;
  ``as_shown`` writes it as a reader sees it, for a writer that escapes it again.

A name is ``S`` and 1-5 digits (a session ref) or 1-4 digits (a number); no space inside the
brackets. Offsets are those of ``text`` itself: a marker is replaced by slicing, and a marker
whose place cannot be found exactly (a table cell with an escaped ``\\|``) is found by its own
text and flagged as a span is: never tied, so made literal, never left live.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline
    from markdown_it.token import Token

_NAME = r"S\d{1,5}|\d{1,4}"
_LIST = re.compile(rf"(?:{_NAME})(?:[,;] ?(?:{_NAME}))*")
_SPAN = re.compile(rf"(?:{_NAME}) ?[-–—] ?(?:{_NAME})")
_NAMES = re.compile(_NAME)
_FORMS = (("\\[", "\\]"), ("[", "]"), ("【", "】"), ("(", ")"))
"""Opening and closing of each form; the escaped one first, so it is never read as ``[``."""
_LONGEST = 40
_TERMINATORS = frozenset("\n!#$%&*+-:<=>@[\\]^_`{}~(【")
"""markdown-it's own stops for plain text, and the openings of ``(S1)`` and ``【1】``."""


@dataclass(frozen=True)
class Marker:
    start: int
    end: int
    names: tuple[str, ...]
    """What it cites, as written in order: ``S3`` (a session ref) or ``3`` (a number)."""
    body: str
    """What stands between its brackets."""
    span: bool = False
    """A span (``[1–3]``), or a marker whose place was not exact: never tied to a source."""
    literal: bool = False

    @property
    def shown(self) -> str:
        """How a reader sees it: ``[1, 2]``."""
        return f"[{self.body}]"


def markers(text: str) -> list[Marker]:
    """The markers of ``text`` read as markdown, in order (see the module docstring)."""
    return list(_markers(text))


def as_shown(text: str) -> str:
    """``text`` with each literal marker as a reader sees it (``\\[7\\]`` -> ``[7]``): for
    a writer that escapes what it writes (``markdown.text``), which makes it literal again,
    where else its backslashes would be shown."""
    pieces: list[str] = []
    done = 0
    for marker in markers(text):
        if marker.literal:
            pieces += [text[done : marker.start], marker.shown]
            done = marker.end
    return "".join(pieces) + text[done:]


@functools.lru_cache(maxsize=512)
def _markers(text: str) -> tuple[Marker, ...]:
    """``markers``, kept: a report's texts are read for their markers several times as it
    is assembled (their refs, then their renumbering), and a parse is the cost."""
    # Same length as ``text``, as markdown-it reads it: offsets hold.
    source = text.replace("\r\n", " \n").replace("\r", "\n").replace("\0", "\ufffd")
    starts = [0, *(i + 1 for i, ch in enumerate(source) if ch == "\n")]
    cursor: dict[int, int] = {}
    found: list[Marker] = []
    for token in _parser().parse(source):
        if token.type == "inline" and token.map and token.children:
            found += _placed(source, starts, token.map[0], token, cursor)
    return tuple(found)


def _placed(
    source: str, starts: list[int], first: int, token: Token, cursor: dict[int, int]
) -> list[Marker]:
    """The markers of one inline ``token``, at their offsets in ``source``: each line of the
    token's content is found in its line of the source (after any quote or list marker)."""
    lines = token.content.split("\n")
    line_starts = [0]
    for line in lines[:-1]:
        line_starts.append(line_starts[-1] + len(line) + 1)
    places: list[int | None] = []
    for i, line in enumerate(lines):
        number = first + i
        if number >= len(starts):
            places.append(None)
            continue
        end = starts[number + 1] - 1 if number + 1 < len(starts) else len(source)
        row = source[starts[number] : end]
        begin = cursor.get(number, 0)
        stripped = line.lstrip()
        at = row.find(stripped, begin)
        if at < 0:
            places.append(None)
            continue
        cursor[number] = at + len(stripped)
        places.append(starts[number] + at - (len(line) - len(stripped)))
    out: list[Marker] = []
    links = 0
    for child in token.children or ():
        if child.type == "link_open":
            links += 1
        elif child.type == "link_close":
            links -= 1
        elif child.type == "citation_marker" and links == 0:
            start = int(child.meta["start"])
            i = bisect.bisect_right(line_starts, start) - 1
            place = places[i]
            at = -1 if place is None else place + start - line_starts[i]
            exact = at >= 0 and source[at : at + len(child.content)] == child.content
            if not exact:
                # Its line is not the source's as written (a table cell with an escaped
                # "\|"): found by its own text after what was read of that line, and never
                # tied, as a span is not, so that it is made literal rather than left live.
                number = first + i
                if number >= len(starts):
                    continue
                found = source.find(child.content, starts[number] + cursor.get(-number - 1, 0))
                line_end = starts[number + 1] if number + 1 < len(starts) else len(source)
                if found < 0 or found >= line_end:
                    continue
                cursor[-number - 1] = found + len(child.content) - starts[number]
                at = found
            out.append(
                Marker(
                    start=at,
                    end=at + len(child.content),
                    names=tuple(child.meta["names"]),
                    body=str(child.meta["body"]),
                    span=bool(child.meta["span"]) or not exact,
                    literal=bool(child.meta["literal"]),
                )
            )
    return out


def _read_at(src: str, pos: int, most: int) -> tuple[int, str, bool, bool] | None:
    """The marker at ``src[pos]``: its end, body, whether a span, whether literal."""
    for opening, closing in _FORMS:
        if not src.startswith(opening, pos):
            continue
        inner = pos + len(opening)
        close = src.find(closing, inner, min(most, inner + _LONGEST))
        if close < 0:
            return None
        body = src[inner:close]
        span = _SPAN.fullmatch(body) is not None
        if not span and _LIST.fullmatch(body) is None:
            return None
        if opening == "(" and not all(n.startswith("S") for n in _NAMES.findall(body)):
            return None
        return close + len(closing), body, span, opening == "\\["
    return None


def _marker_rule(state: StateInline, silent: bool) -> bool:
    if silent and state.src.startswith("[", state.pos):
        return False  # a link's label is being scanned: its brackets must count as text
    found = _read_at(state.src, state.pos, state.posMax)
    if found is None:
        return False
    end, body, span, literal = found
    if not silent:
        token = state.push("citation_marker", "", 0)
        token.content = state.src[state.pos : end]
        token.meta = {
            "start": state.pos,
            "names": _NAMES.findall(body),
            "body": body,
            "span": span,
            "literal": literal,
        }
    state.pos = end
    return True


def _literal_rule(state: StateInline, silent: bool) -> bool:
    """``\\[2\\]``, read before markdown's escapes take its backslashes."""
    if not state.src.startswith("\\[", state.pos):
        return False
    return _marker_rule(state, silent)


def _text_rule(state: StateInline, silent: bool) -> bool:
    """markdown-it's plain-text rule, also stopping where ``(S1)`` or ``【1】`` may open."""
    pos = state.pos
    while pos < state.posMax and state.src[pos] not in _TERMINATORS:
        pos += 1
    if pos == state.pos:
        return False
    if not silent:
        state.pending += state.src[state.pos : pos]
    state.pos = pos
    return True


@functools.cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt  # lazy: only reading model text needs it

    parser = MarkdownIt("commonmark").enable("table")
    parser.inline.ruler.at("text", _text_rule)
    parser.inline.ruler.before("escape", "citation_literal", _literal_rule)
    # After links: ``[1](url)`` and a defined ``[1]`` are links, not markers.
    parser.inline.ruler.after("link", "citation_marker", _marker_rule)
    return parser
