"""A judge adds evidence, never removes what the code found (``adapters.claims.bound``).

The property tests build a source from an oracle: facts, each a sentence with its own name,
number and polarity. A claim restates one fact (as stated, or altered in one detail), and
the judge answers "supported" with a quote (the fact's own sentence, another fact's, words the
source does not hold, or nothing). The code must take the judge's word exactly when the
quote is the source's sentence of that very fact and the claim is unaltered.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from deep_research.adapters.claim_repair import rewrite_of
from deep_research.adapters.claims import JudgeVerdict, ToJudge, bound, unchecked_quote
from deep_research.adapters.verifier import SupportVerdict, specifics_unstated

NAMES = ["Aldwin", "Brevik", "Corvath", "Dunmere", "Eskaro", "Fennix", "Galdor", "Hollis"]
THINGS = ["the ingest queue", "a cold cache", "the west cluster", "one shard"]


@dataclass(frozen=True)
class Fact:
    name: str
    number: int
    negated: bool
    thing: str

    def sentence(self, *, reworded: bool = False) -> str:
        verb = "does not serve" if self.negated else "serves"
        if reworded:
            return f"On {self.thing}, {self.name} {verb} {self.number:,} requests each second."
        return f"{self.name} {verb} {self.number:,} requests per second on {self.thing}."


@st.composite
def facts(draw: st.DrawFn) -> list[Fact]:
    names = draw(st.permutations(NAMES))[: draw(st.integers(2, 5))]
    numbers = draw(
        st.lists(st.integers(2, 99_999), min_size=len(names), max_size=len(names), unique=True)
    )
    return [
        Fact(name, number, draw(st.booleans()), draw(st.sampled_from(THINGS)))
        for name, number in zip(names, numbers, strict=True)
    ]


ALTERATIONS = ("none", "number", "negation", "name")
QUOTES = ("own", "own_spaced", "other", "invented", "nothing")


def altered(fact: Fact, how: str, facts: list[Fact]) -> Fact:
    if how == "number":
        taken = {f.number for f in facts}
        return Fact(fact.name, next(n for n in range(100_001, 200_000) if n not in taken),
                    fact.negated, fact.thing)  # fmt: skip
    if how == "negation":
        return Fact(fact.name, fact.number, not fact.negated, fact.thing)
    if how == "name":
        return Fact(next(n for n in NAMES if all(f.name != n for f in facts)), fact.number,
                    fact.negated, fact.thing)  # fmt: skip
    return fact


def quote_of(how: str, fact: Fact, facts: list[Fact]) -> str:
    if how == "own":
        return fact.sentence()
    if how == "own_spaced":  # spaces and quotation marks are not words
        return "“" + "  \n".join(fact.sentence().split(" ")) + "”"
    if how == "other":
        return next(f for f in facts if f is not fact).sentence()
    if how == "invented":
        return f"{fact.name} is the fastest server ever built."
    return ""


@given(
    facts=facts(),
    pick=st.integers(0, 4),
    alteration=st.sampled_from(ALTERATIONS),
    quoting=st.sampled_from(QUOTES),
    reworded=st.booleans(),
    contradicted=st.booleans(),
)
def test_a_judges_supported_is_taken_only_with_a_quote_that_holds_the_claim(
    facts: list[Fact],
    pick: int,
    alteration: str,
    quoting: str,
    reworded: bool,
    contradicted: bool,
) -> None:
    fact = facts[pick % len(facts)]
    claim = altered(fact, alteration, facts).sentence(reworded=reworded) + " [1]"
    source = " ".join(f.sentence() for f in facts)
    text = SupportVerdict(
        "contradicted" if contradicted else "partial",
        0.4,
        (source,),
        "text",
        ("number 1",) if contradicted else (),
        uncertain=True,
    )
    quote = quote_of(quoting, fact, facts)
    answer = JudgeVerdict(verdict="supported", explanation="", model="m", quote=quote)

    verdict, why = bound(ToJudge(claim, (source,)), text, answer)

    holds = alteration == "none" and quoting in ("own", "own_spaced")
    assert (verdict.support == "supported") == holds, (claim, quote, why)
    assert bool(why) != holds
    if holds:
        assert verdict.verifier == "m"
        assert verdict.conflicts == ()
        assert " ".join(verdict.passages[0].split()) == fact.sentence(), "the quote is shown"
    else:
        assert verdict == SupportVerdict(
            text.support, text.score, text.passages, "text", text.conflicts
        ), "the text verdict stands, settled"
        assert why.startswith("the judge model (m) said supported, quoting")


@given(
    facts=facts(),
    answer=st.sampled_from(["partial", "unsupported", "contradicted"]),
)
def test_a_contradiction_the_code_found_stands_against_any_other_answer(
    facts: list[Fact], answer: str
) -> None:
    source = " ".join(f.sentence() for f in facts)
    claim = altered(facts[0], "number", facts).sentence()
    text = SupportVerdict("contradicted", 0.3, (source,), "text", ("number 1",), uncertain=True)
    said = JudgeVerdict(verdict=answer, explanation="", model="m", quote="")  # type: ignore[arg-type]
    verdict, why = bound(ToJudge(claim, (source,)), text, said)
    assert (verdict.support, verdict.verifier, why) == ("contradicted", "text", "")
    unsure = SupportVerdict("partial", 0.5, (source,), "text", uncertain=True)
    taken, _ = bound(ToJudge(claim, (source,)), unsure, said)
    assert (taken.support, taken.verifier) == (answer, "m"), "without a conflict, it decides"


def test_a_quote_is_one_run_of_whole_words_in_the_sentences_it_stands_in() -> None:
    passage = (
        "In Raft, leader election takes 15000 ms. Kafka guarantees ordering within a "
        "partition. It does not guarantee total ordering across partitions."
    )
    item = ToJudge("In Raft, leader election takes 1500 ms.", (passage,))
    assert "quoting words its source does not hold" in unchecked_quote(
        item, "In Raft, leader election takes 1500"
    ), "a number is a whole word: 1500 is not in 15000"
    stitched = ToJudge("Kafka guarantees ordering across partitions.", (passage,))
    assert "does not hold" in unchecked_quote(
        stitched, "Kafka guarantees ordering … across partitions"
    ), "no elision: parts of two sentences are no quote"
    flipped = ToJudge("Total ordering across partitions is guaranteed.", (passage,))
    assert "negation" in unchecked_quote(flipped, "guarantee total ordering across partitions")
    fine = ToJudge("Kafka keeps messages ordered within a partition.", (passage,))
    assert unchecked_quote(fine, "“Kafka guarantees ordering within a partition.”") == ""


def test_a_specific_claim_is_never_supported_by_a_source_that_states_none_of_its_details() -> None:
    source = "The service answers requests quickly and scales with load on every cluster."
    assert specifics_unstated("The service answers 1,500 requests a second [2].", source) == [
        "1500"
    ]
    assert specifics_unstated("The Corvath service answers requests quickly.", source) == [
        "Corvath"
    ]
    assert specifics_unstated("The service answers requests quickly.", source) == []
    stated = "The service answers 1,500 requests a second on every cluster."
    assert specifics_unstated("The service answers 1,500 requests a second at most.", stated) == []


def test_a_rewrite_is_one_new_paragraph_of_text() -> None:
    before = "Brevik serves 300 requests per second [1]."
    assert rewrite_of("Brevik serves 150 requests per second [1].", before, [1]) == (
        "Brevik serves 150 requests per second [1]."
    )
    for junk in (
        "## Findings - Brevik serves 300 requests per second [1].",
        "## Findings\n\nBrevik serves 150 requests per second [1].",
        "- Brevik serves 150 requests per second [1].",
        "> Brevik serves 150 requests per second [1].",
        "Brevik serves 150\n-----",
        "```\nBrevik serves 150 requests per second [1].\n```",
        "brevik serves 300 requests per second.",  # the same words, its marker aside
        "Brevik serves 150 requests per second [1], [verified](#claim-check).",
        "Brevik serves <b>150</b> requests per second [1].",
    ):
        assert rewrite_of(junk, before, [1]) is None, junk
