"""The citation checker and the report section it writes."""

from __future__ import annotations

from deep_research.adapters.kb_branch import plain_text
from deep_research.core.citecheck import check, is_factual, sentences
from deep_research.core.models import Citation, SessionState
from deep_research.core.report import build_report

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
    report = build_report(state, "Tombstones are dropped by compaction [S1][S9].")
    assert "[S9]" not in report
    assert "1 citation(s) pointed to no source and were removed" in report
    assert "1. [Compaction in LSM trees](https://db.example/compaction)" in report


def test_report_says_how_many_citations_could_not_be_checked() -> None:
    state = SessionState(session_id="a" * 12, question="q?", sources={"S1": SOURCE, "S2": WEB})
    report = build_report(state, "Tombstones are dropped by compaction [S1][S2].")
    assert (
        "1 of the 2 citations could not be checked against source text: the web research "
        "provider returns the page's address, not its text" in report
    )
    unclean = build_report(
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
