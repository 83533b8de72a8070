"""What the no-model mode may quote from a passage: statements that stand alone, never a
table's header row, a dangling list fragment, a sentence cut by a chunk's edge or raw JSON.

Passages are generated from a structured oracle: each block is drawn together with the units
it must give, so a test compares ``quotable_units`` with what the blocks say, in order."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from deep_research.adapters.extractive.text import quotable_units
from deep_research.kb.words import question_stems

_VOCABULARY = """planner scheduler budget ledger citation marker passage chunk embedding index
session checkpoint verdict section outline summary report source quote branch node limit token
provider retriever fusion ranking corpus facet lexicon"""
VOCABULARY = tuple(_VOCABULARY.split())
HEADER_WORDS = ("Criterion", "Stronger", "Weaker", "Property", "Meaning", "Default")


@dataclass(frozen=True)
class Block:
    markdown: str
    units: tuple[str, ...]
    """What the block gives, in order: the oracle."""


def words(low: int = 3, high: int = 8) -> st.SearchStrategy[list[str]]:
    return st.lists(st.sampled_from(VOCABULARY), min_size=low, max_size=high, unique=True)


sentence = words().map(lambda w: " ".join(w).capitalize() + ".")
statement = st.builds(lambda s: Block(s, (s,)), sentence)
prose = st.lists(sentence, min_size=1, max_size=3).map(lambda s: Block(" ".join(s), tuple(s)))
items = st.lists(sentence, min_size=1, max_size=3).map(
    lambda s: Block("\n".join(f"- {x}" for x in s), tuple(s))
)


@st.composite
def table(draw: st.DrawFn) -> Block:
    """A table: its header row (words no body cell holds) is never a unit; each body row is,
    its cells joined by " — "."""
    width = draw(st.integers(2, 3))
    header = draw(st.lists(st.sampled_from(HEADER_WORDS), min_size=width, max_size=width))
    rows = draw(st.lists(st.lists(words(2, 3), min_size=width, max_size=width), max_size=3))
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * width,
        *("| " + " | ".join(" ".join(c) for c in row) + " |" for row in rows),
    ]
    units = tuple(" — ".join(" ".join(c) for c in row) for row in rows)
    return Block("\n".join(lines), units)


@st.composite
def torn_table(draw: st.DrawFn) -> Block:
    """Rows of a table cut from its header and delimiter (a chunk that starts mid-table):
    nothing tells the header from the rows, so none is a unit."""
    rows = draw(st.lists(st.lists(words(1, 2), min_size=2, max_size=3), min_size=1, max_size=3))
    return Block("\n".join("| " + " | ".join(" ".join(c) for c in r) + " |" for r in rows), ())


@st.composite
def dangling_list(draw: st.DrawFn) -> Block:
    """'The tool promises:' then items that continue it ('- a report in which …;'): every item
    ends mid-enumeration or begins in lower case, so none stands alone."""
    parts = draw(st.lists(words(), min_size=1, max_size=4))
    ends = draw(st.lists(st.sampled_from([";", ",", ":", ", and", "; or"]), min_size=len(parts)))
    lines = [f"- {' '.join(p)}{e}" for p, e in zip(parts, ends, strict=False)]
    if draw(st.booleans()):
        lines.append("- the " + " ".join(draw(words())) + ".")
    intro = " ".join(draw(words())).capitalize() + ":"
    return Block(intro + "\n\n" + "\n".join(lines), ())


@st.composite
def enumeration(draw: st.DrawFn) -> Block:
    """An introduction and 'First, …' with, or without, a 'Second, …' after it: the whole
    enumeration is one unit; a 'First, …' alone is none (its introduction still stands)."""
    intro = draw(sentence)
    steps = [
        f"{ordinal}, {' '.join(draw(words()))}."
        for ordinal in ["First", "Second", "Third", "Finally"][: draw(st.integers(1, 4))]
    ]
    text = " ".join([intro, *steps])
    return Block(text, (text,) if len(steps) > 1 else (intro,))


@st.composite
def raw_json(draw: st.DrawFn) -> Block:
    """A plan a model wrote as JSON, not fenced (on one line or several): no unit."""
    tasks = [
        {"id": f"t{i}", "question": " ".join(draw(words())).capitalize() + "?", "priority": i}
        for i in range(draw(st.integers(1, 3)))
    ]
    plan = {"rationale": draw(sentence), "tasks": tasks}
    return Block(json.dumps(plan, indent=draw(st.sampled_from([None, 2]))), ())


@st.composite
def cut_sentence(draw: st.DrawFn) -> Block:
    """A paragraph a chunk's edges cut: it begins mid-sentence (in lower case) and stops
    mid-sentence (no full stop); only the whole sentences between are units."""
    head = "to " + " ".join(draw(words())) + "."
    whole = draw(st.lists(sentence, max_size=2))
    tail = " ".join(draw(words())).capitalize()
    return Block(" ".join([head, *whole, tail]), tuple(whole))


blocks = st.lists(
    st.one_of(
        statement,
        prose,
        items,
        table(),
        torn_table(),
        dangling_list(),
        enumeration(),
        raw_json(),
        cut_sentence(),
    ),
    min_size=1,
    max_size=6,
)


def test_the_vocabulary_has_one_stem_a_word() -> None:
    """The oracle relies on it: a sentence of three words has three distinct stems."""
    assert len({s for w in VOCABULARY for s in question_stems(w)}) == len(VOCABULARY)
    assert not {s for w in HEADER_WORDS for s in question_stems(w)} & {
        s for w in VOCABULARY for s in question_stems(w)
    }


@given(blocks)
def test_units_are_exactly_the_statements_that_stand_alone(drawn: list[Block]) -> None:
    passage = "\n\n".join(b.markdown for b in drawn)
    assert quotable_units(passage) == [u for b in drawn for u in b.units]


@given(blocks)
def test_no_unit_is_a_header_row_json_a_fragment_or_a_lone_first(drawn: list[Block]) -> None:
    """The same, said as the report's reader sees it."""
    for unit in quotable_units("\n\n".join(b.markdown for b in drawn)):
        assert not set(unit.split()) & set(HEADER_WORDS), unit
        assert not any(c in unit for c in '{}[]"|'), unit
        if " — " not in unit:  # a table's body row is cells, not a sentence
            assert unit[-1] in ".…", unit
            assert unit[0].isupper(), unit
        assert ("First," in unit) == ("Second," in unit), unit


def test_the_sample_kb_planning_steps_are_quoted_whole_with_their_introduction() -> None:
    passage = (
        "deep-research plans a research run in three steps. First, a planner reads the "
        "question. Second, the plan is validated. Third, the nodes are scheduled. After each "
        "round the judge's gaps feed a new plan.\n\n"
        "The tool promises five things:\n\n"
        "- a live view of what is running and what it costs;\n"
        "- a report in which every claim is traceable to a source the reader can open;\n"
        "- hard limits on money, tokens and wall-clock time."
    )
    assert quotable_units(passage) == [
        "deep-research plans a research run in three steps. First, a planner reads the "
        "question. Second, the plan is validated. Third, the nodes are scheduled.",
        "After each round the judge's gaps feed a new plan.",
    ]
