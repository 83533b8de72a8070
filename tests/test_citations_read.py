"""Model text as a reader sees it: an untied marker shown as ``[7]`` (never a link), a
``[n]`` counting the evidence entries tied to the n-th, and model text read as markdown
(headings, setext too, are no sentence and no evidence entry)."""

from __future__ import annotations

from deep_research.adapters.report_html import render_html
from deep_research.core.authoring import CondenseRequest, WritingLimits
from deep_research.core.citations import check, read_reply, sentences, untied_note
from deep_research.core.ledger import Claim, ClaimLedger, Revision, claims_of, marked
from deep_research.core.markers import markers
from deep_research.core.models import Citation, SessionState
from deep_research.core.ports import Meter
from deep_research.core.report import Report
from tests.fakes import FakeAuthor, answer_assembled
from tests.test_report import html_anchors
from tests.test_writing import DETAIL, researched, write

RAFT = Citation(
    ref="S11",
    kind="kb",
    title="raft.md › Elections",
    locator="raft.md#Elections:0-90",
    quote="Raft elects a leader by randomized timeouts among the servers of a cluster.",
)
UNTIED = "Raft elects a leader in 150 ms [7]."


def untied_report() -> Report:
    """A report whose lead holds a claim the writer cited with a number no evidence listed."""
    reading = read_reply(UNTIED, ["Raft elects a leader by timeouts [S11]."])
    assert reading.untied == ("[7]",)
    state = SessionState(session_id="e" * 12, question="How does Raft elect?")
    state.sources["S11"] = RAFT
    return answer_assembled(state, "Raft uses randomized timeouts [S11]. " + reading.text)


def test_an_untied_marker_is_shown_as_written_in_the_checks_and_never_linked() -> None:
    report = untied_report()
    assert "“Raft elects a leader in 150 ms \\[7\\].”" in report.citation_check
    drafts = claims_of(report, extractive=False)
    claims = [
        Claim(
            id=f"C{i}",
            text=d.text,
            section=d.section,
            refs=list(d.refs),
            verdict="supported" if d.refs else "uncited",
        )
        for i, d in enumerate(drafts, start=1)
    ]
    revision = Revision(section="Answer", before=claims[1].text, verdict_before="uncited")
    ledger = ClaimLedger(session_id="e" * 12, claims=claims, revisions=[revision])
    checked = marked(report, ledger)
    assert "“Raft elects a leader in 150 ms \\[7\\].”" in checked.claim_check
    assert "\\\\" not in checked.claim_check + report.citation_check, "no backslash shown"
    for shown in (report, checked):
        page = render_html(shown)
        assert "150 ms \\" not in page
        assert page.count("Raft elects a leader in 150 ms [7].") >= 2, "body and check"
        assert "[7]" not in [words for _where, _href, words in html_anchors(page)]
    assert not [m for m in markers(checked.markdown) if m.names == ("7",) and not m.literal]


def test_the_untied_note_speaks_of_one_marker_in_the_singular() -> None:
    assert untied_note(["[7]"]) == (
        "[7] could not be tied to a source (a number the evidence did not list, or one that "
        "could mean more than one source), so the sentence carrying it counts as uncited."
    )
    assert untied_note(["[7]", "[8]"]).endswith("so the sentences carrying them count as uncited.")


def test_a_number_counting_the_evidence_entries_is_tied_to_that_entry() -> None:
    shown = ["Raft elects a leader [S11].", "Paxos needs a quorum [S12]."]
    reading = read_reply("Raft elects [1]. Paxos needs a quorum [2].", shown)
    assert (reading.text, reading.untied) == ("Raft elects [S11]. Paxos needs a quorum [S12].", ())
    assert read_reply("Both [1, 2].", shown).text == "Both [S11][S12]."
    # The first entries of two lists differ: [1] could mean either, and none is tied.
    doubtful = read_reply("Raft [1]. Paxos [2].", shown, ["Zab orders writes [S13]."])
    assert doubtful.text == r"Raft \[1\]. Paxos \[2\]."
    assert doubtful.untied == ("[1]", "[2]")
    # An entry citing two refs, or a place past the entries, means no one ref.
    assert read_reply("Both [1].", ["Both agree [S11][S12]."]).untied == ("[1]",)
    assert read_reply("Raft [3].", shown).untied == ("[3]",)
    # [S11] written beside [2]: the reply's numbering is in doubt.
    assert read_reply("Raft [S11]. Paxos [2].", shown).untied == ("[2]",)


MODEL_TEXT = (
    "## Findings\n\n"
    "Leader elections in Raft clusters finish within 300 ms.\n\n"
    "Measured results for 2024 across all clusters\n"
    "---------------------------------------------\n\n"
    "- Paxos deployments at Google serve 10000 requests per second.\n"
    "> Zab orders 5000 writes per second in ZooKeeper ensembles.\n"
)


def test_the_lexical_check_reads_sentences_from_the_markdown_parse() -> None:
    assert sentences(MODEL_TEXT) == [
        "Leader elections in Raft clusters finish within 300 ms.",
        "Paxos deployments at Google serve 10000 requests per second.",
        "Zab orders 5000 writes per second in ZooKeeper ensembles.",
    ]
    # A sentence a model wrapped over two lines is one sentence, not two scraps.
    wrapped = "Raft elections in five-server clusters\nfinish within 300 ms on average."
    assert check(wrapped, []).uncited == [" ".join(wrapped.split())]
    assert check("Heading with many words and 2024\n===\n", []).uncited == []


class HeadedCondenser(FakeAuthor):
    """Condenses as ``FakeAuthor`` does, under an ATX heading and a setext one."""

    async def condense(self, request: CondenseRequest, meter: Meter) -> str:
        facts = await super().condense(request, meter)
        first, _, rest = facts.partition("\n")
        return f"## Condensed\n\n{first}\n\nMore facts\n----------\n\n" + rest.replace("\n", "\n\n")


async def test_a_condensed_reply_is_read_as_markdown_its_headings_no_evidence_entry() -> None:
    state = researched(2, facts=20, detail=DETAIL)
    state.nodes["n02"].notes = " ".join(state.nodes["n02"].notes.split(". ")[:3]) + "."
    author = HeadedCondenser()
    await write(state, author, limits=WritingLimits(max_sections=2, own_evidence_tokens=500))
    assert author.condensed, "the section was condensed"
    entries = [e for request in author.sections for e in request.evidence]
    assert not [e for e in entries if "Condensed" in e or "More facts" in e or "---" in e]
    assert all(markers(e) for e in entries), "every entry the writer reads cites"
