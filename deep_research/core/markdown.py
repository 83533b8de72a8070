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
"""

from __future__ import annotations

import re

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
