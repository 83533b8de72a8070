"""The markers a model writes, read where they sit in its markdown (``core.markers``) and tied
to a source only when beyond doubt (``citations.read_notes``, ``read_reply``, ``keep_cited``).

Replies are generated from an oracle (findings, each with the evidence it rests on), rendered
in the shapes and marker styles models write, and checked against the oracle: no marker is
invented, none moves to another finding, a doubtful one is tied to nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from deep_research.core.citations import (
    cited_refs,
    keep_cited,
    read_notes,
    read_reply,
    register,
    renumber_all,
    untied,
    untied_note,
)
from deep_research.core.markers import markers
from deep_research.core.models import Citation


@dataclass(frozen=True)
class Finding:
    key: str
    """A word no other finding has: where the finding is found again in the reply."""
    cites: tuple[str, ...]
    """What it rests on, in order: ``"3"`` (a passage number) or ``"S3"`` (a session ref)."""
    code: bool = False
    """Its words hold a code span and a link, each with a fake marker."""


SHAPES = ("bullets", "numbered", "paragraph", "heading, bullets", "setext", "quote", "table")
FENCE = "```\nx = d[1] + d[S2]  # [3] (S4) 【5】\n```"
LINK = "[the page [2]](https://x.example/[S1])"


def marked(cites: tuple[str, ...], style: str) -> str:
    """``cites`` written in one of the styles models write them."""
    if not cites:
        return ""
    if style == "adjacent":
        return "".join(f"[{c}]" for c in cites)
    if style == "comma":
        return "[" + ", ".join(cites) + "]"
    if style == "lenticular":
        return "".join(f"【{c}】" for c in cites)
    assert style == "parens"  # only for session refs: ``(3)`` is prose, not a marker
    return "".join(f"({c})" for c in cites)


def render(found: list[Finding], shape: str, style: str, fence_at: int | None) -> str:
    lines = []
    for finding in found:
        code = f" with `d[1]` in code and {LINK}" if finding.code else ""
        sentence = f"Finding {finding.key} measured something{code}"
        end = marked(finding.cites, style)
        lines.append(f"{sentence} {end}." if end else f"{sentence}.")
    if shape == "table":
        lines = [f"| {line} | ok |" for line in lines]
        body = "| finding | state |\n|---|---|\n" + "\n".join(lines)
    elif shape == "paragraph":
        body = " ".join(lines)
    elif shape == "quote":
        body = "\n>\n".join(f"> {line}" for line in lines)
    elif shape == "setext":
        body = "Findings\n--------\n\n" + "\n\n".join(lines)
    elif shape == "numbered":
        body = "\n".join(f"{i}. {line}" for i, line in enumerate(lines, start=1))
    else:
        body = "\n".join(f"- {line}" for line in lines)
        if shape == "heading, bullets":
            body = "## Findings\n" + body
    if fence_at is None or not found:
        return body
    # A fence of its own between blocks: before the whole body, or after it.
    return f"{FENCE}\n\n{body}" if fence_at == 0 else f"{body}\n\n{FENCE}\n"


_CANONICAL = re.compile(r"(?<!\\)\[(S?\d+)\]")


def tied_per_finding(text: str, found: list[Finding]) -> dict[str, list[str]]:
    """The canonical markers after each finding's key, up to the next finding, outside code:
    read with a plain pattern, since every tied marker comes out in its one form."""
    places = sorted((text.index(f"Finding {f.key} "), f.key) for f in found)
    ends = [start for start, _key in places[1:]] + [len(text)] * bool(places)
    out: dict[str, list[str]] = {}
    for (start, key), end in zip(places, ends, strict=True):
        segment = re.sub(r"`[^`]*`", "", text[start:end].split("```")[0].replace(LINK, ""))
        out[key] = _CANONICAL.findall(segment)
    return out


keys = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=5, max_size=8),
    min_size=0,
    max_size=7,
    unique=True,
)


@st.composite
def notes_oracle(draw: st.DrawFn) -> tuple[list[Finding], int, frozenset[str], str, bool]:
    """Findings citing passages ``1..items`` (and, sometimes, a ref an earlier finding
    showed); ``doubtful``: one also cites a ref the prompt never showed."""
    items = draw(st.integers(1, 8))
    shown = frozenset(draw(st.sets(st.sampled_from(["S4", "S7", "S12"]), max_size=2)))
    names = [str(n) for n in range(1, items + 1)] + sorted(shown)
    found = [
        Finding(
            k,
            tuple(draw(st.lists(st.sampled_from(names), max_size=3, unique=True))),
            draw(st.booleans()),
        )
        for k in draw(keys)
    ]
    doubtful = bool(found) and draw(st.booleans())
    if doubtful:
        found[0] = Finding(found[0].key, (*found[0].cites, "S99"), found[0].code)
    style = draw(st.sampled_from(["adjacent", "comma", "lenticular"]))
    return found, items, shown, style, doubtful


@settings(max_examples=400)
@given(
    oracle=notes_oracle(),
    shape=st.sampled_from(SHAPES),
    fence_at=st.sampled_from([None, 0, 1]),
    beyond=st.integers(0, 3),
)
def test_a_branchs_markers_are_tied_to_exactly_the_passages_they_name(
    oracle: tuple[list[Finding], int, frozenset[str], str, bool],
    shape: str,
    fence_at: int | None,
    beyond: int,
) -> None:
    found, items, shown, style, doubtful = oracle
    if found and beyond:  # a number past the list: never tied, the others unaffected
        found[-1] = Finding(found[-1].key, (*found[-1].cites, str(items + beyond)), False)
    reply = render(found, shape, style, fence_at)
    text, used = keep_cited(reply, items, shown)

    assert len(set(used)) == len(used)
    assert all(0 <= i < items for i in used)
    if fence_at is not None and found:
        assert FENCE in text, "code is left as it was written"
    ties = tied_per_finding(text, found)
    wrong = 0
    for finding in found:
        expected = set()
        for name in finding.cites:
            if name.startswith("S"):
                expected |= {name} if name in shown else set()
            elif not doubtful and int(name) <= items:
                expected.add(name)
        wrong += len(finding.cites) - len(expected)
        got = {n if n.startswith("S") else str(used[int(n) - 1] + 1) for n in ties[finding.key]}
        assert got == expected, (finding, text)
    assert len(untied([text])) == wrong, "every marker left untied is literal text"


def section_oracle(
    draw: st.DrawFn,
) -> tuple[list[list[str]], list[Finding], list[Finding], dict[str, str]]:
    """Evidence lists as a section prompt shows them (unnumbered entries citing refs), and
    the same findings cited with refs and with bare numbers: the refs' own numbers, or the
    places of their entries (a model counting entries). ``meant``: each bare number and the
    ref it stands for, when every one of them can mean only that (else empty)."""
    layout = draw(st.sampled_from(["aligned", "offset", "scrambled"]))
    count = draw(st.integers(1, 6))
    if layout == "aligned":  # the n-th entry cites S<n>: both readings agree
        numbers = list(range(1, count + 1))
    elif layout == "offset":  # refs past the entries: a ref's number and a place differ
        numbers = list(range(11, 11 + count))
    else:  # the n-th entry cites another ref: [n] could mean either
        numbers = draw(st.permutations(list(range(1, count + 1))))
    evidence = [f"Entry {i} says a thing [S{n}]." for i, n in enumerate(numbers, start=1)]
    # The related list's one entry: none, one that agrees with the evidence's first entry,
    # or one that does not (then a [1] could mean either first entry).
    related_to = draw(st.sampled_from([None, numbers[0], numbers[-1]]))
    related = [] if related_to is None else [f"Related says more [S{related_to}]."]
    counted = draw(st.booleans())
    findings = []
    for key in draw(keys):
        places = draw(st.lists(st.integers(1, count), max_size=3, unique=True))
        findings.append((key, places, draw(st.booleans())))
    with_refs = [Finding(k, tuple(f"S{numbers[p - 1]}" for p in ps), c) for k, ps, c in findings]
    written = {p: p if counted else numbers[p - 1] for _k, ps, _c in findings for p in ps}
    bare = [Finding(k, tuple(str(written[p]) for p in ps), c) for k, ps, c in findings]
    # A written k means one ref unless S<k> is shown and is not the k-th entry's (only in
    # the scrambled layout), or the related list's first entry is another ref than the
    # evidence's (for k = 1).
    related_doubt = related_to is not None and related_to != numbers[0]
    doubtful = any(
        (layout == "scrambled" and numbers[k - 1] != k) or (k == 1 and related_doubt)
        for k in written.values()
    )
    meant = {} if doubtful else {str(k): f"S{numbers[p - 1]}" for p, k in written.items()}
    return [evidence, related], with_refs, bare, meant


@settings(max_examples=400)
@given(
    data=st.data(),
    shape=st.sampled_from(SHAPES),
    fence_at=st.sampled_from([None, 0, 1]),
    bare=st.booleans(),
    invented=st.booleans(),
)
def test_a_section_is_tied_to_the_refs_it_was_shown_and_nothing_doubtful(
    data: st.DataObject, shape: str, fence_at: int | None, bare: bool, invented: bool
) -> None:
    lists, with_refs, bare_found, meant = data.draw(st.composite(section_oracle)())
    found = bare_found if bare else with_refs
    if found and invented:  # a ref (or number) the prompt never showed: no bare one is tied
        found[0] = Finding(found[0].key, (*found[0].cites, "99" if bare else "S99"), False)
        meant = {}
    styles = ["adjacent", "comma", "lenticular"] + ([] if bare else ["parens"])
    reply = render(found, shape, data.draw(st.sampled_from(styles)), fence_at)
    reading = read_reply(reply, *lists)

    shown = {ref for entries in lists for entry in entries for ref in cited_refs(entry)}
    ties = tied_per_finding(reading.text, found)
    for finding in found:
        if bare:
            expected = {meant[n] for n in finding.cites} if meant else set()
        else:
            expected = {ref for ref in finding.cites if ref in shown}
        assert set(ties[finding.key]) == expected, (finding, reading.text)
        assert len(ties[finding.key]) == len(expected), "each once, where it was written"
    assert set(cited_refs(reading.text)) <= shown, "nothing the prompt did not show"
    assert len(reading.untied) == sum(len(f.cites) for f in found) - sum(
        len(ties[f.key]) for f in found
    )
    if fence_at is not None and found:
        assert FENCE in reading.text


@settings(max_examples=300)
@given(text=st.text(alphabet=st.sampled_from(list("ab [](){}【】S12,;-–`>#|*\n\\!:"))))
def test_any_text_is_read_without_raising_and_ties_only_what_was_shown(text: str) -> None:
    reply = read_reply(text, ["A thing [S1]."])
    assert set(cited_refs(reply.text)) <= {"S1"}
    notes, used = keep_cited(text, 2, ["S4"])
    assert all(0 <= i < 2 for i in used)
    assert set(cited_refs(notes)) <= {"S4"}
    assert [m.start for m in markers(text)] == sorted(m.start for m in markers(text))
    for marker in markers(text):
        assert text[marker.start : marker.end].startswith(("[", "(", "【", "\\["))


def test_the_empty_reply() -> None:
    assert read_reply("", ["A thing [S1]."]).text == ""
    assert keep_cited("", 3) == ("", [])
    assert markers("") == []


# --- what is not a marker, and what a reader is told ------------------------------------------


def test_code_links_images_and_counting_parentheses_are_not_markers() -> None:
    text = (
        "See `d[1]`, [the page [2]](https://x.example), ![chart [3]](c.png), "
        "step (1) and (2), a defined [4], [5](https://y.example) and [6].\n\n"
        "```\nfenced [7]\n```\n\n    indented [8]\n\n<div>[9]</div>\n\n[4]: https://z.example\n"
    )
    assert [m.names for m in markers(text)] == [("6",)]


def test_the_forms_a_small_model_writes_are_tied_to_the_refs_they_name() -> None:
    shown = ["Raft elects a leader [S1].", "Paxos needs a quorum [S2]."]
    for reply in (
        "Raft elects [S1]. Paxos [S2].",
        "Raft elects (S1). Paxos (S2).",
        "Raft elects 【S1】. Paxos 【S2】.",
        "Raft elects [1]. Paxos [2].",
        "Raft elects 【1】. Paxos 【2】.",
    ):
        assert read_reply(reply, shown).text == "Raft elects [S1]. Paxos [S2].", reply
    assert read_reply("Both [S1, S2].", shown).text == "Both [S1][S2]."
    assert read_reply("Both [1, 2].", shown).text == "Both [S1][S2]."


def test_a_doubtful_bare_number_is_left_literal_and_said_once() -> None:
    shown = ["Raft elects a leader [S1].", "Paxos needs a quorum [S2]."]
    mixed = read_reply("Raft elects [S1]. Paxos [2].", shown)
    assert mixed.text == r"Raft elects [S1]. Paxos \[2\]."
    assert mixed.untied == ("[2]",)
    past = read_reply("Raft elects [1]. Paxos [3].", shown)
    assert past.text == r"Raft elects \[1\]. Paxos \[3\].", "one reading for the whole reply"
    swapped = read_reply("Raft [1].", ["Paxos [S2].", "Raft [S1]."])
    assert swapped.untied == ("[1]",), "the first entry cites S2: [1] could mean either"
    span = read_reply("Both [S1–S2].", shown)
    assert (span.text, span.untied) == (r"Both \[S1–S2\].", ("[S1–S2]",))
    assert untied([past.text, mixed.text]) == ["[1]", "[3]", "[2]"]
    assert untied_note(["[1]", "[3]", "[2]"]) == (
        "3 citation markers like [1] could not be tied to a source (a number the evidence "
        "did not list, or one that could mean more than one source), so the sentences "
        "carrying them count as uncited."
    )
    assert untied_note([]) == ""


def test_branch_notes_tie_passages_and_the_refs_of_earlier_findings() -> None:
    assert read_notes("A [1]. B 【2】. C [1, 3]. D [S4].", 3, ["S4"]).text == (
        "A [1]. B [2]. C [1][3]. D [S4]."
    )
    doubtful = read_notes("A [1]. B [S1].", 3)
    assert doubtful.text == r"A \[1\]. B \[S1\]."
    assert untied_note(doubtful.untied).startswith("2 citation markers like [1] could not be tied")


def test_a_literal_marker_stays_literal_through_registration_and_the_report() -> None:
    sources: dict[str, Citation] = {}
    kb = Citation(kind="kb", title="a", locator="a.md#x:1-3", quote="A thing.")
    notes, _ = register(sources, r"A \[2\] thing [1] and `code [1]`.", [kb])
    assert notes == r"A \[2\] thing [S1] and `code [1]`."
    (body,), cited = renumber_all([notes + " More (S1)."], sources)
    assert body == r"A \[2\] thing [1] and `code [1]`. More [1]."
    assert cited == [sources["S1"]]
