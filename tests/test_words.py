"""Word rules: one home each (``core.words``, ``kb.words``), different on purpose."""

from __future__ import annotations

from deep_research.adapters.verifier import claim_words
from deep_research.core.citations import Citation, check
from deep_research.core.words import (
    CITATION_STOPWORDS,
    CLAIM_FUNCTION_WORDS,
    QUESTION_STOPWORDS,
    prefix_words,
)
from deep_research.kb.words import question_stems

SENTENCE = "Raft doesn't elect 2 leaders in 3.10 seconds, versus Paxos."


def test_each_rule_keeps_what_its_user_needs() -> None:
    # the claim verifier: negations and whole numbers matter ("not" must match "not").
    assert claim_words(SENTENCE) == {
        "raft",
        "not",
        "elect",
        "2",
        "leader",
        "3.10",
        "second",
        "versus",
        "paxo",
    }
    # the no-model mode: terms in order, negations and "versus" dropped, digits split.
    assert question_stems(SENTENCE) == [
        "raft",
        "doesn",
        "elect",
        "2",
        "leader",
        "3",
        "10",
        "second",
        "paxo",
    ]
    # the report check: no stemmer in core, five-letter prefixes of the longer words.
    assert prefix_words(SENTENCE) == {
        "raft",
        "doesn",
        "elect",
        "leade",
        "3.10",
        "secon",
        "versu",
        "paxos",
    }


def test_the_stop_lists_differ_where_their_rules_do() -> None:
    assert "not" in QUESTION_STOPWORDS
    assert "not" not in CLAIM_FUNCTION_WORDS
    assert "not" in CITATION_STOPWORDS  # a negation is no evidence of support


def test_the_report_check_reads_support_through_prefix_words() -> None:
    quote = (
        "Raft elects one leader per term with randomized election timeouts; followers "
        "reset their timers whenever heartbeats arrive from the current leader."
    )
    source = Citation(kind="web", url="https://raft.example", title="Raft", quote=quote)
    body = "Raft elects a leader with randomized election timeouts every term [1]."
    assert prefix_words(body) & prefix_words(quote)
    assert check(body, [source]).unsupported == []
    off_topic = "Bananas ripen faster when stored beside apples in warm kitchens [1]."
    assert check(off_topic, [source]).unsupported
