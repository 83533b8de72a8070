"""A section's key points (``core.packing.key_points``) read from what a model writes, in
the shapes models write it: generated from an oracle (a list of cited findings) rendered as
markdown in varied shapes, and checked against the oracle, not against the parser."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.core.authoring import KEY_POINTS
from deep_research.core.packing import key_points

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9)


@st.composite
def findings(draw: st.DrawFn) -> list[str]:
    """Cited findings: a sentence of plain words ending with its markers."""
    count = draw(st.integers(min_value=1, max_value=KEY_POINTS + 2))
    out = []
    for i in range(count):
        body = " ".join(draw(st.lists(words, min_size=3, max_size=10))).capitalize()
        markers = "".join(f"[S{n}]" for n in draw(st.sets(st.integers(1, 99), min_size=1)))
        out.append(f"{body} {markers}.".replace(" .", ".") if i % 2 else f"{body}. {markers}")
    return out


SHAPES = ("atx heading, bullets", "setext heading, paragraphs", "numbered", "quoted", "plain")


def render(shape: str, found: list[str], title: str) -> str:
    if shape == "atx heading, bullets":
        return f"## {title} [S7]\n\n" + "\n".join(f"- {f} More words here." for f in found)
    if shape == "setext heading, paragraphs":
        return f"{title} [S7]\n{'-' * len(title)}\n\n" + "\n\n".join(found)
    if shape == "numbered":
        return f"# {title}\n" + "\n".join(f"{i}. {f}" for i, f in enumerate(found, start=1))
    if shape == "quoted":
        return f"> ## {title} [S7]\n>\n" + "\n>\n".join(f"> {f}" for f in found)
    return "\n\n".join(found)


@settings(max_examples=150)
@given(found=findings(), shape=st.sampled_from(SHAPES), title=words)
def test_every_cited_finding_is_a_key_point_and_no_heading_is(
    found: list[str], shape: str, title: str
) -> None:
    # Each heading cites [S7] too: had one been read as a point, the lists would differ.
    assert key_points(render(shape, found, title.capitalize())) == found[:KEY_POINTS], shape


def test_a_section_that_opens_with_a_heading_still_answers() -> None:
    """The report that said "No measurement was reported." above 20 cited measurements."""
    section = (
        "## Findings\n"
        "- Raft elects a leader within 150–300 ms [S1].\n"
        "- Paxos needs two round trips [S2].\n"
    )
    assert key_points(section) == [
        "Raft elects a leader within 150–300 ms [S1].",
        "Paxos needs two round trips [S2].",
    ]


def test_tables_and_code_are_not_points() -> None:
    text = "| metric | value |\n|---|---|\n| latency [S1]. | 3 ms |\n\n```\nx = 1 [S2].\n```\n"
    assert key_points(text) == []
