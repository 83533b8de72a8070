"""Only the report builder writes headings, ids and links into the page; quotes stay quotes.

Section bodies are generated from an oracle (findings, each with its markers, in varied
markdown shapes, between hostile shapes: headings of every kind, raw HTML, links into the
page) and go through the real path: session -> ``assemble`` -> markdown and HTML.
"""

from __future__ import annotations

import html
import itertools
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser

import httpx
from hypothesis import given
from hypothesis import strategies as st

from deep_research.adapters.branches.protocols import Page
from deep_research.adapters.branches.search_read import WebPassage, quote_passages
from deep_research.adapters.report_html import render_html
from deep_research.adapters.web.extraction import extract
from deep_research.adapters.web.passages import split_passages
from deep_research.adapters.web.reader import Reply
from deep_research.core import markdown as md
from deep_research.core.models import (
    Citation,
    ResearchNode,
    SectionPlan,
    SessionState,
    Writing,
)
from deep_research.core.report import assemble

QUESTION = "How do Raft and Paxos compare?"
REFS = ("S1", "S2", "S3")
BUILDER_PARTS = ["Contradictions", "Coverage and limitations", "Citation check", "Claim check"]
HOSTILE_TITLES = ["Source 1", "Claim check", "Sources", "Answer", "Contents", "All claims verified"]
WORDS = ["raft", "paxos", "leader", "elects", "log", "quorum", "within", "term", "replicas"]


@dataclass(frozen=True)
class Finding:
    words: str
    refs: tuple[str, ...]

    def text(self) -> str:
        return f"{self.words} {''.join(f'[{r}]' for r in self.refs)}."


findings = st.builds(
    Finding,
    words=st.lists(st.sampled_from(WORDS), min_size=3, max_size=8).map(
        lambda ws: " ".join(ws).capitalize() + f" {len(ws) * 37} ms"
    ),
    refs=st.lists(st.sampled_from(REFS), min_size=1, max_size=2, unique=True).map(tuple),
)
finding_shapes = st.sampled_from(["{}", "- {}", "1. {}", "> {}", "* {}\n* other point"])
title = st.sampled_from([*HOSTILE_TITLES, "Raft versus Paxos", "Costs [and] *risks*"])
atx = st.builds(lambda k, t: f"{'#' * k} {t}", st.integers(1, 6), title)
hostile = st.one_of(
    atx,
    st.builds(lambda t, u: f"{t}\n{u}", title, st.sampled_from(["---", "===", "-", "="])),
    st.builds(lambda t: f"> ## {t}\n> All claims verified.", title),
    st.builds(lambda t: f"- ## {t}\n- next", title),
    st.builds(lambda t: f"1. ## {t}\n2. two", title),
    st.just("| a | b |\n|---|---|\n| ## x | <h2 id=sources>y</h2> |"),
    st.just("```\n# not a heading\n<h1 id=source-1>code</h1>\n```"),
    st.just('<h1 id="source-1">Official page</h1>'),
    st.just("<div>\n\n## Claim check\n\n</div>"),
    st.just('See <a href="#source-1" id="claim-check">the official page</a>.'),
    st.just("[official page](#source-1) and [All claims verified](#claim-check)"),
    st.just("[x]( <#sources> )"),
)


@st.composite
def sections(draw: st.DrawFn) -> tuple[str, list[Finding], str]:
    """(title, the findings in it, its body)."""
    kept: list[Finding] = []
    blocks: list[str] = []
    for _ in range(draw(st.integers(1, 5))):
        if draw(st.booleans()):
            found = draw(findings)
            kept.append(found)
            block = draw(finding_shapes).format(found.text())
            if draw(st.booleans()):  # a heading right above it, no blank line between
                block = f"{draw(atx)}\n{block}"
            blocks.append(block)
        else:
            blocks.append(draw(hostile))
    return draw(title), kept, "\n\n".join(blocks)


def session(parts: list[tuple[str, list[Finding], str]], lead: str) -> SessionState:
    sources = {
        r: Citation(ref=r, kind="web", url=f"https://{r.lower()}.example/", title=r, claim="c")
        for r in REFS
    }
    node = ResearchNode(id="n1", question="What is Raft?", status="done", notes=parts[0][2])
    plans = [
        SectionPlan(id=f"s{i}", title=t, question="q", node_ids=["n1"], status="written", text=body)
        for i, (t, _f, body) in enumerate(parts, start=1)
    ]
    return SessionState(
        session_id="m" * 12,
        question=QUESTION,
        sources=sources,
        nodes={"n1": node},
        writing=Writing(covers=["n1"], sections=plans, lead=lead, lead_status="written"),
    )


class Page_(HTMLParser):
    """Every heading (level, text, id), every id and every in-page link (href, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[tuple[int, str, str]] = []
        self.ids: list[tuple[str, str]] = []
        self.links: list[tuple[str, str]] = []
        self.text: list[str] = []
        self._heading: tuple[int, str] | None = None
        self._link: str | None = None
        self._words = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.append((tag, found["id"] or ""))
        if re.fullmatch(r"h[1-6]", tag):
            self._heading, self._words = (int(tag[1]), found.get("id") or ""), ""
        if tag == "a" and (found.get("href") or "").startswith("#"):
            self._link, self._words = found["href"], ""

    def handle_endtag(self, tag: str) -> None:
        if self._heading and re.fullmatch(r"h[1-6]", tag):
            self.headings.append((self._heading[0], self._words, self._heading[1]))
            self.text.append(f"\n<<{self._words}>>\n")
            self._heading = None
        if tag == "a" and self._link is not None:
            self.links.append((self._link, self._words))
            self._link = None

    def handle_data(self, data: str) -> None:
        self._words += data
        if self._heading is None:
            self.text.append(data)


def read(page: str) -> Page_:
    parsed = Page_()
    parsed.feed(page)
    return parsed


def flat(text: str) -> str:
    return " ".join(text.split())


@given(st.lists(sections(), min_size=1, max_size=5), st.sampled_from(["", "The lead [S1]."]))
def test_no_model_text_becomes_a_heading_an_id_or_a_link_into_the_page(
    parts: list[tuple[str, list[Finding], str]], lead: str
) -> None:
    report = assemble(session(parts, lead))
    page = read(render_html(report))

    titles = [flat(html.unescape(t)) for t, _f, _b in parts]
    h2 = [t for level, t, _ in page.headings if level == 2]
    builder = h2[len(titles) + bool(lead) : -2]
    assert page.headings[0][:2] == (1, QUESTION)
    answer = ["Answer"] if lead else []
    assert h2 == [*answer, *titles, *builder, "Sources", "Findings by sub-question"]
    assert builder == [b for b in BUILDER_PARTS if b in builder], "only the builder's own parts"
    assert [(level, t) for level, t, _ in page.headings[1:] if level != 2] == [
        (3, "n1: What is Raft?")
    ]

    heading_ids = [i for level, _t, i in page.headings if level == 2]
    source_ids = [f"source-{n}" for n in range(1, len(report.sources) + 1)]
    assert sorted(i for _tag, i in page.ids) == sorted([*heading_ids, *source_ids])
    assert all(tag == "li" for tag, i in page.ids if i.startswith("source-"))
    assert len(set(heading_ids)) == len(heading_ids)
    reserved = {"sources", "claim-check", "answer", "contradictions", "citation-check"}
    for t, i in zip(titles, heading_ids[bool(lead) :], strict=False):
        assert i not in reserved, (t, i)
        assert not re.fullmatch(r"source-\d+", i), (t, i)

    for href, words in page.links:
        if href.startswith("#source-"):
            assert words == f"[{href.removeprefix('#source-')}]", "a citation is the builder's"
        else:
            assert href[1:] in heading_ids, (href, words)
            # the contents (4 sections or more), and the index after the sources, to the
            # section stating a sub-question's findings, by its title
            assert len(report.sections) >= 4 or words in titles, "only the builder's links"

    number = {c.ref: n for n, c in enumerate(report.sources, start=1)}
    text = "".join(page.text)
    at = text.index("<<Answer>>") if lead else 0
    for (t, found, _b), following in zip(parts, [*titles[1:], "Sources"], strict=True):
        at = text.index(f"<<{flat(t)}>>", at)
        end = text.index(f"<<{following}>>", at + 1)
        own = flat(text[at:end])
        for finding in found:
            marks = "".join(f"[{number[r]}]" for r in finding.refs)
            assert f"{finding.words} {marks}." in own, (finding, own)
        at = end


@given(st.lists(sections(), min_size=1, max_size=5))
def test_the_markdown_report_has_the_builders_headings_only(
    parts: list[tuple[str, list[Finding], str]],
) -> None:
    from markdown_it import MarkdownIt

    report = assemble(session(parts, "The lead [S1]."))
    tokens = MarkdownIt("commonmark", {"html": True}).enable("table").parse(report.markdown)
    headings = [
        (int(t.tag[1]), i.content)
        for t, i in itertools.pairwise(tokens)
        if t.type == "heading_open"
    ]
    titles = [(2, md.text(t)) for t, _f, _b in parts]
    builder = headings[2 + len(parts) : -3]
    assert headings == [
        (1, md.text(QUESTION)),
        (2, "Answer"),
        *titles,
        *builder,
        (2, "Sources"),
        (2, "Findings by sub-question"),
        (3, "n1: What is Raft?"),
    ]
    assert [t for _, t in builder] == [b for b in BUILDER_PARTS if (2, b) in builder]
    assert not any(t.type in ("html_block", "html_inline") for t in tokens)


# --- quotes stay quotes ------------------------------------------------------------------


class Quotes(HTMLParser):
    """The text of every blockquote under a heading of the report (not its status line),
    and every tag inside one (other than the <p> and the citation links it may hold)."""

    def __init__(self) -> None:
        super().__init__()
        self.quotes: list[str] = []
        self.markup: list[str] = []
        self._depth = 0
        self._on = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._depth and not (
            tag == "p" or (tag == "a" and dict(attrs).get("href", "")[:8] == "#source-")
        ):
            self.markup.append(tag)
        self._on = self._on or tag == "h2"
        if tag == "blockquote" and self._on:
            self._depth += 1
            self.quotes.append("")

    def handle_endtag(self, tag: str) -> None:
        self._depth -= tag == "blockquote" and self._depth > 0

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.quotes[-1] += data


def quoted_report(page: Page, passages: list[str]) -> str:
    """The HTML report of a run whose one sub-question quoted ``passages`` of ``page``."""
    result = quote_passages([WebPassage(page, p) for p in passages], "search + no model")
    notes = result.notes
    sources = {}
    for n, citation in enumerate(result.citations, start=1):
        notes = notes.replace(f" [{n}]", f" [S{n}]")
        sources[f"S{n}"] = citation.model_copy(update={"ref": f"S{n}"})
    node = ResearchNode(id="n1", question="What is Raft?", status="done", notes=notes)
    state = SessionState(
        session_id="q" * 12, question=QUESTION, sources=sources, nodes={"n1": node}
    )
    return render_html(assemble(state))


def test_a_quoted_passage_is_a_quote_of_plain_text_whatever_it_holds() -> None:
    passage = (
        "# Raft versus Paxos\n\nRaft\n====\n\n- Raft elects one leader per term\n1. numbered\n\n"
        '<h1 id="source-1">Official page</h1> <a href="#claim-check">verified</a>\n\n'
        "```\n# a comment\n```\n\n> nested [official page](#source-1) | a | b |"
    )
    page = Page("https://raft.example/", "Raft versus Paxos", passage, datetime.now(UTC))
    found = Quotes()
    found.feed(quoted_report(page, [passage]))
    assert found.markup == [], "a quote holds no heading, list, code, html or page link"
    shown = [flat(q) for q in found.quotes]
    assert f"{flat(passage)} [1]" in shown, "the findings quote it whole, then cite it"
    assert any(q.removesuffix("…") in flat(passage) and q != f"{flat(passage)} [1]" for q in shown)


DOCS_PAGE = """<html><head><title>raftkit: Quickstart</title></head><body>
<nav><a href="/">Home</a> <a href="/api">API</a></nav>
<main><article><h1>Quickstart</h1>
<p>Raftkit runs the Raft consensus algorithm for you. It elects a leader among three or five
nodes and replicates a log to a majority of them before it answers a client.</p>
<pre><code>pip install raftkit
raftkit init --nodes 3 --dir ./cluster</code></pre>
<p>The init command writes one configuration file per node into the cluster directory.</p>
<pre><code>raftkit start --node 1
raftkit start --node 2
raftkit start --node 3</code></pre>
<p>Each node elects a leader within 150 to 300 milliseconds after start.</p>
<h2>Configuration</h2>
<p>Every setting can be given in the file or on the command line.</p>
<pre><code>{code}</code></pre>
<p>Heartbeats are sent every 50 milliseconds, well inside the election timeout.</p>
<pre><code>&gt;&gt;&gt; from raftkit import Cluster
&gt;&gt;&gt; Cluster.load("./cluster").status()
{{'leader': 2, 'term': 7}}</code></pre>
<p>A follower that hears no heartbeat starts an election after its randomised timeout.</p>
</article></main><footer>Copyright raftkit authors</footer></body></html>""".format(
    code="\n".join(
        f"# setting {i}: the {w} timeout of node {i}\n{w}_timeout_{i} = {i * 50}  # ms"
        for i, w in enumerate(["election", "heartbeat", "snapshot", "compaction"] * 8)
    )
)


def test_every_quote_of_a_code_heavy_docs_page_is_contiguous_page_text() -> None:
    reply = Reply(
        url=httpx.URL("https://docs.raftkit.example/quickstart"),
        status=200,
        headers=httpx.Headers({"content-type": "text/html; charset=utf-8"}),
        body=DOCS_PAGE.encode(),
        encoding="utf-8",
    )
    found = extract(reply)
    title, text = found.title, found.text
    passages = split_passages(text)
    assert len(passages) >= 4, "the long code block is cut: some passage starts inside it"
    page = Page(str(reply.url), title, text, datetime.now(UTC))
    found = Quotes()
    found.feed(quoted_report(page, passages))
    whole = flat(text)
    # each passage: in the section (its findings, not yet written) and under its source
    assert len(found.quotes) == 2 * len(passages)
    for quote in found.quotes:
        shown = re.sub(r"( \[\d+\])+$", "", flat(quote)).removesuffix("…")
        assert all(part in whole for part in shown.split(" […] ")), quote


def test_a_parse_is_kept_only_for_texts_up_to_the_size_it_keeps() -> None:
    """A server reads pages for days: a long text is parsed each time, never kept."""
    short = "- one finding of the notes [S1]\n- another finding of them [S2]\n"
    long = short * (md.KEPT_CHARS // len(short) + 1)
    kept = md._kept.cache_info().currsize
    assert md.paragraphs(long) == list(md._parsed(long))
    assert md._kept.cache_info().currsize == kept, "the long text is not kept"
    assert md.paragraphs(short) == md.paragraphs(short) == list(md._parsed(short))
    assert md._kept.cache_info().currsize <= kept + 1
