"""The Sources list of a report, as a reader sees it, and sessions saved before claims."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deep_research.core.models import Citation, IterationRecord, SessionState, Verdict
from tests.fakes import answer_report

if TYPE_CHECKING:
    from markdown_it.token import Token

WEB = Citation(
    ref="S1",
    kind="web",
    url="https://docs.trychroma.com/scale",
    title="Chroma scale",
    locator="https://docs.trychroma.com/scale",
    claim="Chroma scales to 10M vectors.",
)
KB = Citation(
    ref="S2",
    kind="kb",
    title="budgets.md › Cost limits",
    locator="budgets.md#Cost limits:0-120",
    quote="A run stops once its spend reaches the cost limit.",
)


def sources_section(report: str) -> str:
    return report.split("## Sources\n\n", 1)[1].split("\n\n", 1)[0]


def test_web_sources_show_their_claim_and_say_no_text_was_captured() -> None:
    state = SessionState(session_id="a" * 12, question="q?", sources={"S1": WEB, "S2": KB})
    report = answer_report(state, "Chroma handles 10M vectors [S1]; runs stop at the limit [S2].")
    assert sources_section(report) == (
        "1. [Chroma scale](<https://docs.trychroma.com/scale>)\n"
        "   cited for: “Chroma scales to 10M vectors.” — _source text not captured_\n"
        "2. `budgets.md#Cost limits:0-120` — budgets.md › Cost limits\n"
        "   > A run stops once its spend reaches the cost limit."
    )


def test_the_footer_says_when_part_of_the_spend_is_unknown() -> None:
    from deep_research.adapters.prices import PriceTable
    from deep_research.core.budget import make_entry
    from deep_research.core.models import SessionState, Usage
    from tests.fakes import answer_report

    state = SessionState(session_id="abcdabcdabcd", question="q?")
    state.ledger.append(
        make_entry("planner", "gpt-6-sol", Usage(input_tokens=10), prices=PriceTable())
    )
    assert "spend is unknown" not in answer_report(state, "body")
    state.ledger.append(
        make_entry("deep_research", "gpt-5.5", Usage(), usage_unknown=True, prices=PriceTable())
    )
    assert "1 cancelled or failed research job(s) reported no usage" in answer_report(state, "b")


# --- what the report quotes cannot forge it ---------------------------------------------

FORGED_TITLE = "Official NIST page](https://phish.example/login) [real"
PAGES = [  # (title, url)
    (FORGED_TITLE, "https://nist.gov/page"),
    ("closing) (paren", "https://example.org/a_(b)"),
    ("<script>x</script> <https://phish.example/auto>", "https://example.org/?a=<b>"),
    ("one\n## Sources\n1. [x](https://phish.example/nl)", "https://example.org/a b\nc"),
    ("click me", "javascript:alert(1)"),
    ("[1]: https://phish.example/def", " JavaScript:alert(2)"),
]
HREFS = {  # where each http(s) source's link goes
    "https://nist.gov/page": "https://nist.gov/page",
    "https://example.org/a_(b)": "https://example.org/a_(b)",
    "https://example.org/?a=<b>": "https://example.org/?a=%3Cb%3E",
    "https://example.org/a b\nc": "https://example.org/a%20b%0Ac",
}


def forged_state() -> SessionState:
    sources = {
        f"S{i}": Citation(ref=f"S{i}", kind="web", url=url, title=title, locator=url, claim="c")
        for i, (title, url) in enumerate(PAGES, start=1)
    }
    sources["S7"] = Citation(
        ref="S7",
        kind="kb",
        title="notes.md › a](https://phish.example/kb) b",
        locator="notes.md`[x](https://phish.example/tick)`#A:0-9",
        quote="quoted ](https://phish.example/q) <i>text</i>\n# not a heading\n> nor a quote",
    )
    return SessionState(session_id="c" * 12, question="q <b>?</b>", sources=sources)


def links(markdown: str) -> list[tuple[str, str]]:
    """Every link of ``markdown`` as a reader gets it: (href, text)."""
    from markdown_it import MarkdownIt

    found: list[tuple[str, str]] = []
    for block in MarkdownIt("commonmark", {"html": True}).parse(markdown):
        children = block.children or []
        for at, token in enumerate(children):
            if token.type == "link_open":
                end = next(i for i in range(at, len(children)) if children[i].type == "link_close")
                words = "".join(t.content for t in children[at + 1 : end])
                found.append((str(token.attrs["href"]), words))
    return found


def plain(inline: Token) -> str:
    """The text a reader sees of an inline token."""
    return "".join(t.content for t in inline.children or [] if t.type in ("text", "code_inline"))


def test_titles_quotes_and_urls_are_written_as_text_and_links_go_where_they_say() -> None:
    from markdown_it import MarkdownIt

    body = " ".join(f"Page {i} says so [S{i}]." for i in range(1, 8))
    report = answer_report(forged_state(), body)

    assert links(report) == [
        (HREFS[url], " ".join(title.split())) for title, url in PAGES if url in HREFS
    ]
    tokens = MarkdownIt("commonmark", {"html": True}).parse(report)
    assert not [t for t in tokens if t.type.startswith("html")]
    headings = [plain(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["q <b>?</b>", "Answer", "Sources"]
    listed = {line[:3]: line for line in sources_section(report).splitlines()}
    assert listed["5. "] == "5. click me — javascript:alert(1)"
    assert listed["7. "].startswith("7. ``notes.md`[x](https://phish.example/tick)`#A:0-9`` — ")
    quotes = [plain(tokens[i + 2]) for i, t in enumerate(tokens) if t.type == "blockquote_open"]
    assert quotes[-1] == (
        "quoted ](https://phish.example/q) <i>text</i> # not a heading > nor a quote"
    )


def test_the_html_report_links_each_source_to_its_own_address() -> None:
    from deep_research.adapters.report_html import render_html
    from tests.fakes import answer_assembled

    body = " ".join(f"Page {i} says so [S{i}]." for i in range(1, 8))
    page = render_html(answer_assembled(forged_state(), body))
    anchors = html_anchors(page)
    assert "phish.example" not in " ".join(href for _, href, _ in anchors)
    assert [tag for tag in ("<script>", "<b>", "<i>") if tag in page] == []
    sources = {where: (href, words) for where, href, words in anchors if where}
    assert sources == {
        f"source-{i}": (HREFS[url], " ".join(title.split()))
        for i, (title, url) in enumerate(PAGES, start=1)
        if url in HREFS
    }
    cited = [(href, words) for where, href, words in anchors if not where]
    assert cited == [(f"#source-{i}", f"[{i}]") for i in range(1, 8)]


def html_anchors(page: str) -> list[tuple[str, str, str]]:
    """(id of the list item it is in, or "", href, text) of every link of ``page``."""
    from html.parser import HTMLParser

    class Anchors(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.item, self.href, self.words = "", "", ""
            self.found: list[tuple[str, str, str]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "li":
                self.item = dict(attrs).get("id") or ""
            elif tag == "a":
                self.href, self.words = dict(attrs).get("href") or "", ""

        def handle_endtag(self, tag: str) -> None:
            if tag == "a":
                self.found.append((self.item, self.href, self.words))
                self.href = ""
            elif tag == "li":
                self.item = ""

        def handle_data(self, data: str) -> None:
            if self.href:
                self.words += data

    parser = Anchors()
    parser.feed(page)
    return parser.found


def verdict(missing: list[str], confidence: float = 0.6) -> Verdict:
    return Verdict(
        is_complete=False,
        recommend_more_iterations=True,
        missing_aspects=missing,
        weak_evidence_areas=[],
        overall_confidence=confidence,
    )


def test_the_judges_gaps_stay_when_a_later_replan_added_nothing() -> None:
    state = SessionState(session_id="c" * 12, question="q?")
    state.iterations = [
        IterationRecord(number=1, verdict=verdict(["How compaction reclaims space"])),
        IterationRecord(number=2),  # its replan added nothing: no draft, no verdict
    ]
    state.stop_reason = "nothing_to_do"
    report = answer_report(state, "An answer.")
    assert "- **Missing:** How compaction reclaims space" in report
    assert "judge confidence 0.60" in report


def test_an_extractive_run_claims_no_judge_it_did_not_have() -> None:
    state = SessionState(session_id="d" * 12, question="q?", mode="extractive")
    done = verdict([], confidence=0.93).model_copy(
        update={"is_complete": True, "recommend_more_iterations": False}
    )
    state.iterations = [IterationRecord(number=1, verdict=done)]
    state.stop_reason = "complete"
    status = answer_report(state, "Quoted passages.").splitlines()[2]
    assert "judge" not in status
    assert "every sub-question was answered from quoted passages" in status
    assert "passage coverage 0.93" in status


def test_a_clean_citation_check_counts_sources_not_markers() -> None:
    state = SessionState(session_id="e" * 12, question="q?", sources={"S1": WEB, "S2": KB})
    body = (
        "Chroma handles ten million vectors in one collection [S1]. "
        "Chroma also keeps those vectors on local disk by default [S1]. "
        "A research run stops once its spend reaches the cost limit [S2]."
    )
    report = answer_report(state, body)
    assert "the body cites 2 sources (3 citations), each of them listed below" in report


def test_long_quotes_are_cut_between_words_and_say_so() -> None:
    long_quote = "A run stops once its spend reaches the cost limit, " * 10
    kb = KB.model_copy(update={"quote": long_quote})
    state = SessionState(session_id="f" * 12, question="q?", sources={"S2": kb})
    quote = sources_section(answer_report(state, "Runs stop at the limit [S2].")).splitlines()[1]
    assert quote.endswith("…")
    assert len(quote) <= len("   > ") + 300
    last_word = quote.removesuffix("…").split()[-1]
    assert last_word in long_quote.split(), "no word is cut in half"


def test_kb_sources_show_their_front_matter_tags() -> None:
    kb = KB.model_copy(update={"title": "Budgets handbook › Cost limits", "tags": ("money",)})
    state = SessionState(session_id="e" * 12, question="q?", sources={"S2": kb})
    entry = sources_section(answer_report(state, "Runs stop at the limit [S2].")).splitlines()[0]
    assert entry == "1. `budgets.md#Cost limits:0-120` — Budgets handbook › Cost limits `#money`"


def test_a_bracket_after_an_escaped_backslash_is_no_citation() -> None:
    from deep_research.adapters.report_html import render_html
    from tests.fakes import answer_assembled

    state = SessionState(session_id="g" * 12, question="q?", sources={"S1": WEB, "S2": KB})
    body = "Chroma handles ten million vectors [S1]. The budget page never said \\\\[1]."
    html = render_html(answer_assembled(state, body))
    assert html.count('href="#source-') == 1, "only the builder's [1] is a link"
    assert "never said \\[1]" in html


def test_a_long_report_opens_with_contents_linking_every_part_to_its_heading() -> None:
    import re

    from deep_research.adapters.report_html import render_html
    from deep_research.core.report import Report, ReportNote, ReportSection

    titles = ["Costs [and] *risks*", "Who runs it?", "Limits", "What changed in 2024"]
    report = Report(
        title="q?",
        status="> complete",
        lead="The answer [1].",
        sections=[ReportSection(title=t, body=f"About {t} [1].") for t in titles],
        contradictions="- **x**: one side [1] | the other [1]",
        claim_check="## Claim check\n\n1 claim supported.",
        sources=[Citation(kind="web", url="https://a.example/", title="A")],
        notes=[ReportNote(node_id="t1", question="q1?", meta="")],
    )
    markdown = report.markdown
    contents = markdown.split("**Contents**\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    listed = [re.fullmatch(r"\d+\. \[(.+)\]\(#(.+)\)", line) for line in contents]
    assert all(listed), contents
    headings = re.findall(r"^## (.+)$", markdown, re.MULTILINE)
    assert [m[1] for m in listed if m] == headings
    assert headings[1:5] == [md_text(t) for t in titles]
    assert headings[0] == "Answer"
    assert headings[5:] == ["Contradictions", "Claim check", "Sources", "Findings by sub-question"]
    ids = set(re.findall(r'<h2 id="([^"]+)"', render_html(report)))
    assert {m[2] for m in listed if m} == ids, "every entry links to its heading in the page"

    short = report.model_copy(update={"sections": report.sections[:3]})
    assert "**Contents**" not in short.markdown


def md_text(title: str) -> str:
    from deep_research.core import markdown

    return markdown.text(title)
