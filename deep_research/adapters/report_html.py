"""A report as a standalone HTML page (markdown-it-py), with clickable citations.

Invariants (model and web text is untrusted):
- Raw HTML is escaped, and markdown-it drops links to unsafe schemes (``javascript:``…).
- The numbered sources come from the report's data (``core.report.Report``), never from
  a list found under a "Sources" heading: ``[N]`` links to the entry N the report builder
  wrote, whatever headings or lists the synthesis holds.
- Only a marker the builder wrote is a citation: an escaped ``\\[N\\]`` (a bracketed number
  a model wrote) is text, and so is a model's link whose text reads like a citation.
- Link reference definitions are not read: ``[1]: https://…`` is text, not where ``[1]`` goes.
- The page carries its own content security policy, for a copy opened from disk.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

from deep_research.core.report import Report, anchor, source_entry

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token

REPORT_POLICY = (
    "default-src 'none'; img-src 'self' data:; style-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
"""No script, nothing fetched from elsewhere (a model-written image would be a beacon)."""
# A page's own policy cannot say frame-ancestors (browsers ignore it there, with a warning).
_META_POLICY = REPORT_POLICY.removesuffix("; frame-ancestors 'none'")
CITATION = re.compile(r"\[(\d{1,4})\]")
_CITATION_TEXT = re.compile(r"\s*\[?\s*\d{1,4}\s*\]?\s*")


def render_html(report: Report | str) -> str:
    """The page of ``report``. A bare markdown string is a report saved before its sources
    were kept as data: shown as written, its ``[N]`` not linked."""
    plain = _parser(0)
    if isinstance(report, str):
        body = plain.render(report)
    else:
        cited = _parser(len(report.sources))
        items = "".join(
            f'<li id="source-{n}">{plain.render(source_entry(source))}</li>'
            for n, source in enumerate(report.sources, start=1)
        )
        listed = f"<ol>{items}</ol>" if items else "<p><em>No sources were cited.</em></p>"
        body = (
            cited.render(report.before_sources())
            + f'<h2 id="sources">Sources</h2>{listed}'
            + cited.render(report.after_sources())
        )
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(_META_POLICY)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>deep-research report</title></head><body><main>{body}</main></body></html>"
    )


def _parser(sources: int) -> MarkdownIt:
    """Commonmark with tables, raw HTML off, no reference definitions; ``[1]`` …
    ``[sources]`` linked to their entries."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table").disable("reference")

    def link_citations(state: StateCore) -> None:
        _link_citations(state, sources)

    # Before text_join: escaped brackets are still tokens of their own (text_special).
    parser.core.ruler.before("text_join", "citations", link_citations)
    parser.core.ruler.push("anchors", _anchor_headings)
    return parser


def _anchor_headings(state: StateCore) -> None:
    """Each ``##`` heading gets the id its table-of-contents entry links to."""
    for at, token in enumerate(state.tokens):
        if token.type == "heading_open" and token.tag == "h2" and at + 1 < len(state.tokens):
            words = state.tokens[at + 1].children or []
            token.attrSet("id", anchor("".join(w.content for w in words if w.type != "softbreak")))


def _link_citations(state: StateCore, sources: int) -> None:
    for block in state.tokens:
        if block.type == "inline" and block.children:
            block.children = _linked(_unlinked(block.children), sources)


def _unlinked(tokens: list[Token]) -> list[Token]:
    """``tokens`` without the links whose text reads as a citation (``[[1]](https://…)``):
    their text is kept, the link is not."""
    dropped: set[int] = set()
    for start, token in enumerate(tokens):
        if token.type != "link_open":
            continue
        end = next(i for i in range(start, len(tokens)) if tokens[i].type == "link_close")
        inner = tokens[start + 1 : end]
        if all(t.type in ("text", "text_special") for t in inner) and _CITATION_TEXT.fullmatch(
            "".join(t.content for t in inner)
        ):
            dropped |= {start, end}
    return [token for index, token in enumerate(tokens) if index not in dropped]


def _linked(tokens: list[Token], sources: int) -> list[Token]:
    """``tokens`` with each ``[N]`` of their text (1 <= N <= sources) a link to
    ``#source-N``, outside other links."""
    from markdown_it.token import Token

    children: list[Token] = []
    depth = 0
    for token in tokens:
        depth += {"link_open": 1, "link_close": -1}.get(token.type, 0)
        if token.type != "text" or depth or not CITATION.search(token.content):
            children.append(token)
            continue
        at = 0
        for match in CITATION.finditer(token.content):
            if not 1 <= int(match[1]) <= sources:
                continue
            children.append(_text(token.content[at : match.start()]))
            link = Token("link_open", "a", 1)
            link.attrSet("href", f"#source-{match[1]}")
            children += [link, _text(match[0]), Token("link_close", "a", -1)]
            at = match.end()
        children.append(_text(token.content[at:]))
    return [c for c in children if c.type != "text" or c.content]


def _text(content: str) -> Token:
    from markdown_it.token import Token

    token = Token("text", "", 0)
    token.content = content
    return token
