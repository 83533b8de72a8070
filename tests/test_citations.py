"""The citation checker and the report section it writes."""

from __future__ import annotations

import re

from deep_research.adapters.branches.kb import plain_text
from deep_research.core.citations import (
    check,
    identity,
    is_factual,
    keep_cited,
    register,
    renumber_all,
    sentence_of,
    sentences,
    shift,
    strip_trailing,
)
from deep_research.core.models import Citation, SessionState
from tests.fakes import answer_report

SOURCE = Citation(
    ref="S1",
    kind="web",
    url="https://db.example/compaction",
    title="Compaction in LSM trees",
    quote="Deletes write tombstones; compaction later merges segments and drops tombstoned rows.",
)
WEB = Citation(
    ref="S2",
    kind="web",
    url="https://bananas.example/ripening",
    title="Fruit storage guide",
    claim="Bananas ripen quickly when stored beside apples.",
)


def test_cited_supported_sentences_pass() -> None:
    body = "Deletes write tombstones that compaction later drops from merged segments [1]."
    result = check(body, [SOURCE])
    assert result.clean
    assert result.cited == 1


def test_uncited_factual_sentences_are_flagged() -> None:
    body = "Qdrant compacts segments every 30 seconds by default.\n\nThis is a plain remark here."
    result = check(body, [SOURCE])
    assert result.uncited == ["Qdrant compacts segments every 30 seconds by default."]


def test_citation_sharing_no_word_with_its_source_is_unsupported() -> None:
    body = "Bananas ripen quickly when stored beside apples [1]."
    assert check(body, [SOURCE]).unsupported == [
        ("Bananas ripen quickly when stored beside apples .", 1)
    ]


def test_short_quotes_are_not_judged() -> None:
    link_only = SOURCE.model_copy(update={"quote": "(db.example)", "title": ""})
    assert check("Bananas ripen quickly when stored beside apples [1].", [link_only]).clean


def test_a_claim_is_never_its_own_evidence() -> None:
    # The claim shares every word with the sentence; it must not count as support...
    supported_by_itself = check("Bananas ripen quickly when stored beside apples [1].", [WEB])
    assert supported_by_itself.unsupported == []
    assert supported_by_itself.no_source_text == 1
    # ...nor hide a quote that says otherwise.
    contradicted = WEB.model_copy(update={"quote": SOURCE.quote})
    result = check("Bananas ripen quickly when stored beside apples [1].", [contradicted])
    assert result.unsupported == [("Bananas ripen quickly when stored beside apples .", 1)]
    assert result.no_source_text == 0


def test_citations_without_source_text_are_counted_not_judged() -> None:
    body = (
        "Bananas ripen quickly when stored beside apples [1].\n\n"
        "Deletes write tombstones that compaction later drops from merged segments [2][1]."
    )
    result = check(body, [WEB, SOURCE])
    assert (result.cited, result.no_source_text, result.unsupported) == (3, 2, [])
    assert result.clean


def test_headings_tables_and_code_are_not_sentences() -> None:
    body = "# Heading with 2024 numbers\n| a | 1 |\n```\nx = 2024 and more code here\n```\n"
    assert sentences(body) == []
    assert is_factual("It grew by 40% in 2024.")
    assert not is_factual("it is generally a good idea.")


def test_report_removes_unknown_markers_and_says_so() -> None:
    state = SessionState(session_id="a" * 12, question="q?", sources={"S1": SOURCE})
    report = answer_report(state, "Tombstones are dropped by compaction [S1][S9].")
    assert "[S9]" not in report
    assert "1 citation(s) pointed to no source and were removed" in report
    assert "1. [Compaction in LSM trees](<https://db.example/compaction>)" in report


def test_report_says_how_many_citations_could_not_be_checked() -> None:
    state = SessionState(session_id="a" * 12, question="q?", sources={"S1": SOURCE, "S2": WEB})
    report = answer_report(state, "Tombstones are dropped by compaction [S1][S2].")
    assert (
        "1 of the 2 citations could not be checked against source text: the web research "
        "provider returns the page's address, not its text" in report
    )
    unclean = answer_report(
        state,
        (
            "Qdrant compacts segments every 30 seconds by default.\n\n"
            "Bananas ripen quickly when stored beside apples [S2]."
        ),
    )
    assert "## Citation check" in unclean
    assert "- 1 of the 1 citations could not be checked against source text" in unclean


def test_kb_snippets_read_as_prose() -> None:
    chunk = "# Title\n## Section\nFirst line.\n| a | b |\n|---|---|\n| x | y |\n```\ncode\n```"
    assert plain_text(chunk) == "First line. a — b x — y code"


def test_a_kb_quote_leaves_nothing_out_between_its_first_and_last_word() -> None:
    """Headings past the first text, code and its ``#`` comments are the chunk's text too:
    a quote joined from parts of it would read as one passage the page never had."""
    chunk = (
        "## Install\n\nRun the **installer** [once](https://x.example).\n\n"
        "### Then\n\n```sh\n# pin the version\npip install x==1.2\n```\n\nDone, it is <b>ready</b>."
    )
    assert plain_text(chunk) == (
        "Run the installer once. Then # pin the version pip install x==1.2 Done, it is ready."
    )


# --- marker forms, identity, registration -------------------------------------------------


def kb(locator: str, quote: str = "") -> Citation:
    return Citation(kind="kb", title=locator, locator=locator, quote=quote)


def test_a_local_marker_past_the_list_stays_as_literal_text() -> None:
    sources: dict[str, Citation] = {}
    notes, registered = register(sources, "Founded in [2024], see [1].", [kb("a.md#x:1-3")])
    assert notes == r"Founded in \[2024\], see [S1]."
    assert [c.ref for c in registered] == ["S1"]


def test_literal_numbers_in_a_draft_never_become_citations() -> None:
    sources = {"S1": kb("a.md#x:1-3", "Deletes write tombstones.")}
    (body,), cited = renumber_all(["Item [2] of the list [S1]; the year [2024]."], sources)
    assert body == r"Item \[2\] of the list [1]; the year \[2024\]."
    assert cited == [sources["S1"]]
    result = check(body + " Another sentence with enough words to check [1].", cited)
    assert result.cited == 2, "the two real markers; never the literal [2] or [2024]"


def test_keep_cited_renumbers_by_first_use_and_keeps_unknown_numbers_literal() -> None:
    text, used = keep_cited("B [3], A [1], B again [3], and [9].", available=4)
    assert text == r"B [1], A [2], B again [1], and \[9\]."
    assert used == [2, 0]


def test_a_markdown_link_is_not_a_marker() -> None:
    text, used = keep_cited("See [2](https://x.io) and [1].", available=2)
    assert text == "See [2](https://x.io) and [1]."
    assert used == [0]


def test_identity_kb_by_locator_web_by_passage_or_claim() -> None:
    assert identity(kb("a.md#x:1-3", "one")) == identity(kb("a.md#x:1-3", "other"))
    page = "https://db.example/page"
    one = Citation(kind="web", url=page, quote="Tombstones mark deletes.", claim="A.")
    two = Citation(kind="web", url=page, quote="Compaction  merges segments.", claim="A.")
    spaced = Citation(kind="web", url=page, quote="Compaction merges\nsegments.", claim="B.")
    assert identity(one) != identity(two), "two passages of one page are two citations"
    assert identity(two) == identity(spaced), "one passage is one citation, whatever cites it"
    claim_a = Citation(kind="web", url=page, claim="Deletes are  lazy.")
    claim_b = Citation(kind="web", url=page, claim="Compaction is periodic.")
    assert identity(claim_a) != identity(claim_b)
    assert identity(claim_a) == identity(claim_a.model_copy(update={"claim": "deletes are lazy."}))


def test_shift_and_strip_trailing() -> None:
    assert shift(r"a [1] b [2] c \[2024\]", 3) == r"a [4] b [5] c \[2024\]"
    assert strip_trailing("A line. [S1][S2] ") == "A line."
    assert strip_trailing("Year \\[2024\\]") == "Year \\[2024\\]"


def test_the_claim_of_a_marker_is_its_sentence_without_markers() -> None:
    notes = "- Raft uses timeouts [1][2]. Paxos differs [2].\nA third [3]!"
    assert sentence_of(notes, 1) == "Raft uses timeouts."
    assert sentence_of(notes, 2) == "Raft uses timeouts.", "the first sentence citing it"
    assert sentence_of(notes, 3) == "A third!"
    assert sentence_of(notes, 4) == ""


def test_a_synthesis_cannot_make_the_reports_markers_link_elsewhere() -> None:
    """A link reference definition in a synthesis (invisible once rendered) would turn every
    ``[1]`` of the report, or ``[1][x]``, into a link to where it says."""
    from markdown_it import MarkdownIt

    state = SessionState(session_id="a" * 12, question="q?", sources={"S1": SOURCE, "S2": WEB})
    body = (
        "Tombstones are dropped by compaction [S1]. Bananas ripen quickly [S2][x].\n\n"
        "[S1]: https://phish.example/s1\r[ 2 ]: <https://phish.example/2>\n"
        "> - [x]:\n>   https://phish.example/x 'title'\n\n"
        "```python\ndef f() -> list[int]:\n    return d[k]\n```\n"
    )
    report = answer_report(state, body)
    env: dict[str, object] = {}
    parser = MarkdownIt("commonmark", {"html": True})
    parser.parse(report, env)
    assert not env.get("references")
    anchors = re.findall(r'<a href="([^"]*)">([^<]*)</a>', parser.render(report))
    assert [(href, text) for href, text in anchors if "phish" in href and text != href] == []
    assert "def f() -> list[int]:\n    return d[k]\n" in report  # code is left as written
