"""A report as a standalone HTML page (markdown-it-py), with clickable citations.

Invariants (model and web text is untrusted):
- Raw HTML is escaped, and markdown-it drops links to unsafe schemes (``javascript:``…).
- The numbered sources come from the report's data (``core.report.Report``), never from
  a list found under a "Sources" heading: ``[N]`` links to the entry N the report builder
  wrote, whatever headings or lists the synthesis holds.
- Only a marker the builder wrote is a citation: an escaped ``\\[N\\]`` (a bracketed number
  a model wrote) is text, and so is a model's link whose text reads like a citation.
- Link reference definitions are not read: ``[1]: https://…`` is text, not where ``[1]`` goes.
- Every heading and every id of the page is written here from the report's data (its title,
  its parts, Sources, ``source-N``, the findings by sub-question); the text under them is
  rendered with no heading rule, so a heading a model wrote (ATX, setext, in a quote or a
  list) is never an ``<h1>``-``<h6>``, and with raw HTML off, never an id.
- A link into the page goes only to a heading's id (``Report.parts``: a section a model
  titled "Claim check" or "Source 1" has another id); ``#source-N`` only from a builder's
  ``[N]``.
- The page carries its own content security policy, for a copy opened from disk, and its
  stylesheet inline (the page's own, given by the caller), allowed there by its hash alone.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from typing import TYPE_CHECKING

from deep_research.core import markdown as md
from deep_research.core.report import (
    CONSULTED_TITLE,
    FINDINGS,
    SOURCE_ID,
    SOURCES_ID,
    SOURCES_TITLE,
    Report,
    anchor,
    consulted_link,
    source_entry,
)

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.rules_core import StateCore
    from markdown_it.token import Token


def report_policy(stylesheet: str = "") -> str:
    """No script, nothing fetched from elsewhere (a model-written image would be a beacon);
    of inline styles, only ``stylesheet`` (by its hash): a model's text cannot add one."""
    styles = f"'self' '{style_hash(stylesheet)}'" if stylesheet else "'self'"
    return (
        f"default-src 'none'; img-src 'self' data:; style-src {styles}; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    )


def style_hash(stylesheet: str) -> str:
    """The source expression that allows ``<style>stylesheet</style>`` under a policy."""
    digest = hashlib.sha256(stylesheet.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


REPORT_POLICY = report_policy()
"""The policy of a report with no stylesheet (and of the markdown one)."""
CITATION = re.compile(r"\[(\d{1,4})\]")
_CITATION_TEXT = re.compile(r"\s*\[?\s*\d{1,4}\s*\]?\s*")


def render_html(report: Report | str, *, stylesheet: str = "") -> str:
    """The page of ``report``, styled by ``stylesheet`` (CSS, inline: the page is whole on
    its own; serve it under ``report_policy(stylesheet)``). A bare markdown string is a
    report saved before its sources were kept as data: shown as written (no heading has an
    id), its ``[N]`` not linked."""
    if "</" in stylesheet:
        raise ValueError("a stylesheet inlined in a report may not hold '</'")
    if isinstance(report, str):
        body, title = _parser(0, frozenset(), headings=True).render(report), ""
    else:
        body, title = _page(report), " ".join(report.title.split())
    # A page's own policy cannot say frame-ancestors (browsers ignore it there, with a warning).
    policy = report_policy(stylesheet).removesuffix("; frame-ancestors 'none'")
    style = f"<style>{stylesheet}</style>" if stylesheet else ""
    return (
        '<!doctype html><html><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title or 'deep-research report')}</title>{style}</head>"
        f'<body><main class="report">{body}</main></body></html>'
    )


def _page(report: Report) -> str:
    """The page's body: its headings, and their ids, are written here from the report's
    data; every text under them is rendered by a parser that makes no heading."""
    parts = report.parts()
    ids = frozenset([*(p.id for p in parts if p.id), SOURCES_ID, anchor(FINDINGS)])
    text = _parser(0, ids)
    cited = _parser(len(report.sources), ids)

    def heading(level: int, title: str, id_: str = "") -> str:
        at = f' id="{html.escape(id_)}"' if id_ else ""
        return f"<h{level}{at}>{text.renderInline(title)}</h{level}>"

    out = [heading(1, md.text(report.title))]
    out += [text.render(t) for t in (report.status, report.notice, report.contents(parts)) if t]
    for part in parts:
        out.append(
            (heading(2, part.title, part.id) if part.title else "") + cited.render(part.body)
        )
    items = "".join(
        f'<li id="{SOURCE_ID.format(n)}">{text.render(source_entry(source))}</li>'
        for n, source in enumerate(report.sources, start=1)
    )
    out.append(heading(2, SOURCES_TITLE, SOURCES_ID))
    out.append(f"<ol>{items}</ol>" if items else "<p><em>No sources were cited.</em></p>")
    if report.consulted:
        listed = "".join(
            f"<li>{text.renderInline(consulted_link(u))}</li>" for u in report.consulted
        )
        summary = html.escape(f"{CONSULTED_TITLE} ({len(report.consulted)})")
        out.append(f"<details><summary>{summary}</summary><ul>{listed}</ul></details>")
    if report.notes:
        out.append(heading(2, FINDINGS, anchor(FINDINGS)))
        out += [heading(3, title) + cited.render(notes) for title, notes in report.note_parts()]
    if report.footer:
        out.append(text.render(report.footer))
    return "".join(out)


def _parser(sources: int, anchors: frozenset[str], *, headings: bool = False) -> MarkdownIt:
    """Commonmark with tables, raw HTML off, no reference definitions, no heading (unless
    ``headings``: a saved report's own markdown); ``[1]`` … ``[sources]`` linked to their
    entries; a link into the page only to one of ``anchors``."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table").disable("reference")
    if not headings:
        parser.disable(["heading", "lheading"])
    plain = parser.validateLink

    def valid(url: str) -> bool:
        return url[1:] in anchors if url.startswith("#") else plain(url)

    parser.validateLink = valid  # type: ignore[method-assign]

    def link_citations(state: StateCore) -> None:
        for block in state.tokens:
            if block.type == "inline" and block.children:
                block.children = _linked(_unlinked(block.children), sources)

    # Before text_join: escaped brackets are still tokens of their own (text_special).
    parser.core.ruler.before("text_join", "citations", link_citations)
    return parser


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
            link.attrSet("href", "#" + SOURCE_ID.format(match[1]))
            children += [link, _text(match[0]), Token("link_close", "a", -1)]
            at = match.end()
        children.append(_text(token.content[at:]))
    return [c for c in children if c.type != "text" or c.content]


def _text(content: str) -> Token:
    from markdown_it.token import Token

    token = Token("text", "", 0)
    token.content = content
    return token
