"""Writing untrusted text into markdown: every writer of a report goes through these.

Titles, quotes, questions and errors come from models and web pages. Written as they are,
a title such as ``NIST](https://phish.example) [x`` turns its source's link into another
one, and a line ``[1]: https://phish.example`` in a synthesis makes every ``[1]`` of the
report a link there (a link reference definition, invisible once rendered). So:

- ``text`` writes a string as inline text: on one line, with every character markdown
  could read as markup escaped, so that it renders as exactly the string;
- ``link`` writes a link only to an ``http(s)`` address, its destination in ``<…>`` with
  whitespace, ``<``, ``>`` and backslashes percent-encoded; anything else is shown as text;
- ``code`` writes a code span that no backtick in the string can close early;
- ``no_definitions`` keeps model-written markdown as markdown, but defining no link
  reference (``[1]: https://…``, ``[x]: https://…`` for a ``[S1][x]``).

And reading it: ``paragraphs`` is what a model's markdown says, from a markdown-it parse
(never line by line): its paragraphs at any depth, whatever headings, tables, code or HTML
stand around them.
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

_INLINE = re.compile(r"[\\`*_\[\]<>&~]")
"""Emphasis, code, links and images, autolinks and raw HTML, entities, strikethrough."""
_ORDERED = re.compile(r"\d{1,9}(?=[.)])")
_UNSAFE_IN_URL = re.compile(r"[\s<>\\\x00-\x1f\x7f]")
_WEB = re.compile(r"https?://", re.IGNORECASE)
_DEFINITION = re.compile(
    r"^((?:[ \t]*(?:>|[-+*]|\d{1,9}[.)]))*[ \t]*\[(?:\\[\s\S]|[^\\\[\]]){0,999}\]):", re.MULTILINE
)
"""A label that may start a link reference definition; it may span lines."""


def text(value: str) -> str:
    """``value`` as markdown inline text that renders as exactly ``value`` (whitespace,
    newlines included, collapsed to single spaces: a line break could start a heading)."""
    flat = _INLINE.sub(lambda m: "\\" + m[0], " ".join(value.split()))
    # At the start of a line, these would open a heading, a quote, a list or a rule.
    if ordered := _ORDERED.match(flat):
        return flat[: ordered.end()] + "\\" + flat[ordered.end() :]
    return "\\" + flat if flat[:1] in ("#", ">", "+", "-", "=") else flat


def clip(value: str, limit: int) -> str:
    """``value`` on one line, at most ``limit`` characters, cut between words and ending in
    "…" when it was cut (a quote cut mid-word reads as a typo in the source)."""
    flat = " ".join(value.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1]
    if flat[limit - 1] != " " and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:") + "…"


def web_url(url: str) -> str | None:
    """``url`` fit for a link destination in ``<…>``, or None when it is not http(s)."""
    url = url.strip()
    if not _WEB.match(url):
        return None
    return _UNSAFE_IN_URL.sub(lambda m: "".join(f"%{b:02X}" for b in m[0].encode()), url)


def link(label: str, url: str) -> str:
    """A link to ``url`` reading ``label`` (the url itself when empty); when ``url`` is not
    http(s), no link: the label and the url, as text."""
    target = web_url(url)
    if target is None:
        shown = f"{label} — {url}" if label.strip() and url.strip() else label or url
        return text(shown)
    return f"[{text(label) or text(url)}](<{target}>)"


def code(value: str) -> str:
    """``value`` as a code span, on one line; a span of backticks longer than any run in
    ``value`` opens and closes it."""
    flat = " ".join(value.split())
    if not flat:
        return ""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat[0] == "`" or flat[-1] == "`" else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def no_definitions(markdown: str) -> str:
    """Model-written ``markdown`` as a reader sees it, but defining no link reference.

    A definition is a label at the start of a block (after any quote and list markers),
    followed at once by a colon; its colon is escaped (``]\\:`` renders as ``]:``). Labels
    elsewhere, in code such as ``list[int]:``, are left as they are."""
    return _DEFINITION.sub(r"\1\\:", re.sub(r"\r\n?", "\n", markdown))


_BRACKET_AFTER_BACKSLASHES = re.compile(r"(?<!\\)((?:\\\\)+)\[")


def no_forged_markers(markdown: str) -> str:
    """Model-written ``markdown`` with every ``[`` that follows an even run of backslashes
    escaped: ``\\[1]`` renders as a backslash and a live ``[1]``, which the citation rules
    (a ``[n]`` after a backslash is literal) would not count but a reader would click."""
    return _BRACKET_AFTER_BACKSLASHES.sub(lambda m: m.group(1) + "\\[", markdown)


# --- reading ------------------------------------------------------------------------------


@functools.cache
def parser() -> MarkdownIt:
    """How the project reads markdown a model wrote: CommonMark with tables, no link
    reference definitions (``no_definitions``), raw HTML read as HTML (so it is no text)."""
    from markdown_it import MarkdownIt  # lazy: only reading a reply needs it

    return MarkdownIt("commonmark").enable("table").disable("reference")


@dataclass(frozen=True)
class Paragraph:
    text: str
    """Its inline markdown as written (markers, emphasis, escapes kept), on one line; a
    table row's cells joined by " | ", as they stand in the row."""
    kind: Literal["paragraph", "item", "row"]
    """A paragraph; one in a list item (a bullet or a numbered item); a table's body row."""


def paragraphs(markdown: str) -> list[Paragraph]:
    """The paragraphs of ``markdown``, in order, at any depth (in a quote, a list item),
    and the body rows of its tables. Headings (ATX, setext, anywhere), a table's header,
    code and HTML are none. A text up to ``KEPT_CHARS`` is parsed once a process: a node's
    notes are read for their findings by the judge's context, the writer and the claim
    check, and a parse is the cost."""
    if len(markdown) > KEPT_CHARS:
        return list(_parsed(markdown))
    return list(_kept(markdown))


KEPT_CHARS = 20_000
"""The longest text whose parse is kept: 1,024 of them, with their parses, hold ~40 MB at most."""


def _parsed(markdown: str) -> tuple[Paragraph, ...]:
    out: list[Paragraph] = []
    depth = 0
    cells: list[str] | None = None
    for opening, inline in itertools.pairwise(parser().parse(markdown)):
        if opening.type == "list_item_open":
            depth += 1
        elif opening.type == "list_item_close":
            depth -= 1
        elif opening.type == "tbody_open":
            cells = []
        elif opening.type == "tr_close" and cells:
            out.append(Paragraph(" | ".join(cells), "row"))
            cells = []
        elif opening.type == "tbody_close":
            cells = None
        elif opening.type == "td_open" and cells is not None and inline.type == "inline":
            cells.append(" ".join(inline.content.split()))
        elif opening.type == "paragraph_open" and inline.type == "inline":
            text = " ".join(inline.content.split())
            if text:
                out.append(Paragraph(text, "item" if depth > 0 else "paragraph"))
    return tuple(out)


_kept = functools.lru_cache(maxsize=1024)(_parsed)


# --- model text as a part of the report ------------------------------------------------


def demoted(text: str, anchors: frozenset[str] = frozenset()) -> str:
    """``text``, written by a model or quoted from a page, as the body of a part: only the
    report builder writes headings, ids and links into the page. Read from a markdown-it
    parse (code and fences are left as they are), each of its headings (ATX at any level,
    setext, in a quote or a list item) becomes a bold paragraph where it stood, its raw HTML
    is text (``\\<h1 id=…>``), and its links into the page (``[official page](#source-1)``)
    are text, unless to one of ``anchors``. What it says, its ``[N]`` markers included, is
    kept; a viewer with raw HTML on (GitHub) reads the result as the HTML page does."""
    for _ in range(_PASSES):
        if not _builders_markup(text, anchors):
            break
        text = _without_links(_without_headings(_without_html(text)), anchors)
    return text


def _builders_markup(text: str, anchors: frozenset[str]) -> bool:
    """Whether ``text`` holds what only the builder may write: a heading, raw HTML, a link
    into the page (but to one of ``anchors``). One parse: most text holds none."""
    for token in parser().parse(text):
        if token.type in ("heading_open", "html_block"):
            return True
        for child in token.children or ():
            if child.type == "html_inline":
                return True
            href = str(child.attrGet("href") or "") if child.type == "link_open" else ""
            if href.startswith("#") and href[1:] not in anchors:
                return True
    return False


_PASSES = 8
"""Each pass removes what the last one uncovered (an HTML block hiding a heading)."""


def _edited(lines: list[str], edits: dict[tuple[int, int], list[str]]) -> str:
    """``lines`` with each range of ``edits`` (disjoint) replaced by its lines."""
    for (start, end), new in sorted(edits.items(), reverse=True):
        lines[start:end] = new
    return "\n".join(lines)


def _without_html(text: str) -> str:
    lines = text.split("\n")
    edits: dict[tuple[int, int], list[str]] = {}
    for token in parser().parse(text):
        if token.map is None:
            continue
        start, end = token.map
        if token.type == "html_block":
            edits[start, end] = [line.replace("<", "\\<") for line in lines[start:end]]
        elif token.type == "inline" and any(c.type == "html_inline" for c in token.children or []):
            joined = "\n".join(edits.get((start, end), lines[start:end]))
            for tag in {c.content for c in token.children or [] if c.type == "html_inline"}:
                joined = re.sub(rf"(?<!\\){re.escape(tag)}", lambda m: "\\" + m[0], joined)
            edits[start, end] = joined.split("\n")
    return _edited(lines, edits)


def _without_headings(markdown: str) -> str:
    lines = markdown.split("\n")
    edits: dict[tuple[int, int], list[str]] = {}
    tokens = parser().parse(markdown)
    for token, inline in itertools.pairwise(tokens):
        if token.type != "heading_open" or token.map is None:
            continue
        start, end = token.map
        first = lines[start]
        words = inline.content.split("\n")[0].rstrip()
        if token.markup.startswith("#"):  # ATX: what comes before its #s is quote or list
            prefix = first[: first.index("#")]
        elif first.rstrip().endswith(words):  # setext: its text ends its first line
            prefix = first[: len(first.rstrip()) - len(words)]
        else:
            prefix = first[: len(first) - len(first.lstrip(" \t>-+*.)0123456789"))]
        blank = "".join(c for c in prefix if c == ">")  # a blank line in the same quote
        content = " ".join(inline.content.split())
        shown = f"**{content}**" if any(c.isalnum() for c in content) else text(content)
        before = [blank] if start and lines[start - 1].strip(" \t>") else []
        after = [blank] if end < len(lines) and lines[end].strip(" \t>") else []
        edits[start, end] = [*before, prefix + shown, *after] if content else [blank]
    return _edited(lines, edits)


_FRAGMENT_LINK = re.compile(r"\]\(\s*<?#([^\s)>]*)")
"""Where a link's destination is a place in the page: its ``(`` is escaped to unlink it."""


def _without_links(text: str, anchors: frozenset[str]) -> str:
    lines = text.split("\n")
    edits: dict[tuple[int, int], list[str]] = {}

    def unlinked(found: re.Match[str]) -> str:
        kept = found[1].replace("\\", "") in anchors
        return found[0] if kept else "]\\(" + found[0][2:]

    for token in parser().parse(text):
        links = [c for c in token.children or [] if c.type == "link_open"]
        if token.map is None or not any(
            str(c.attrGet("href") or "").startswith("#") for c in links
        ):
            continue
        start, end = token.map
        joined = _FRAGMENT_LINK.sub(unlinked, "\n".join(lines[start:end]))
        edits[start, end] = joined.split("\n")
    return _edited(lines, edits)
