"""Chunking: pure functions over markdown text."""

from __future__ import annotations

import itertools

from deep_research.kb.chunking import Chunk, chunk_markdown, estimate_tokens, split_front_matter

DOC = """---
title: The Guide
tags: [Ops, "#Install", ops]
date: 2024-05-01
author: Ada
---
Preamble line.

# Guide

Intro to the guide.

## Install

Run this:

```bash
# not a heading
pip install thing
```

| key | value |
|-----|-------|
| a   | 1     |

## Usage
### Advanced

Deep text.

Setext Heading
--------------
Under setext.
"""


def chunks_of(text: str, max_tokens: int = 400, overlap: int = 40) -> list[Chunk]:
    return chunk_markdown(text, "docs/guide.md", max_tokens=max_tokens, overlap_tokens=overlap)


def lines_of(text: str, chunk: Chunk) -> str:
    return "\n".join(text.split("\n")[chunk.start_line - 1 : chunk.end_line])


def test_front_matter_is_parsed_and_counted_in_line_numbers() -> None:
    front = split_front_matter(DOC)
    assert front.meta["title"] == "The Guide"
    assert front.meta["date"] == "2024-05-01"
    assert front.body_start_line == 7
    assert front.body.startswith("Preamble line.")

    chunks = chunks_of(DOC)
    assert chunks[0].heading == ""
    assert (chunks[0].start_line, chunks[0].end_line) == (7, 7)
    assert chunks[0].text == "Preamble line."
    assert all(c.title == "The Guide" for c in chunks)
    assert chunks[0].tags == ("ops", "install")
    assert dict(chunks[0].meta) == {"date": "2024-05-01", "author": "Ada"}


def test_malformed_or_unclosed_front_matter_stays_in_the_body() -> None:
    for text in ("---\ntitle: [unclosed\n---\nbody\n", "---\ntitle: x\nno closing\n"):
        front = split_front_matter(text)
        assert front.meta == {}
        assert front.body == text
        assert front.body_start_line == 1


def test_heading_paths_and_exact_line_ranges() -> None:
    chunks = chunks_of(DOC)
    headings = [c.heading for c in chunks]
    assert headings == [
        "",
        "Guide",
        "Guide > Install",
        "Guide > Usage > Advanced",
        "Guide > Setext Heading",  # a "---" underline is a level-2 heading
    ]
    for chunk in chunks:
        assert chunk.text == lines_of(DOC, chunk)
    advanced = chunks[3]
    # "## Usage" has no body of its own: it is carried into the next section's chunk.
    assert advanced.text.startswith("## Usage\n### Advanced")
    assert (
        advanced.locator
        == f"docs/guide.md#Guide > Usage > Advanced:{advanced.start_line}-{advanced.end_line}"
    )


def test_hash_lines_inside_a_code_fence_are_not_headings() -> None:
    chunks = chunks_of(DOC)
    install = next(c for c in chunks if c.heading == "Guide > Install")
    assert "# not a heading" in install.text
    assert not any("not a heading" in c.heading for c in chunks)


def test_oversized_code_block_and_table_are_chunks_of_their_own_and_never_cut() -> None:
    code = "```python\n" + "\n".join(f"# comment {i}\nx_{i} = {i}" for i in range(200)) + "\n```"
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i * i} |" for i in range(300))
    text = f"# Big\n\nBefore.\n\n{code}\n\nBetween.\n\n{table}\n\nAfter.\n"
    chunks = chunks_of(text, max_tokens=100, overlap=10)
    code_chunks = [c for c in chunks if "```python" in c.text]
    assert len(code_chunks) == 1
    assert code_chunks[0].text == code
    table_chunks = [c for c in chunks if "| 0 | 0 |" in c.text]
    assert len(table_chunks) == 1
    assert table_chunks[0].text == table
    assert all(c.heading == "Big" for c in chunks)
    for chunk in chunks:
        assert chunk.text == lines_of(text, chunk)
        assert chunk.text.count("```") in (0, 2)


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "# A\n\n```\n# inside\n\n# still inside\n"
    chunks = chunks_of(text)
    assert [c.heading for c in chunks] == ["A"]
    assert "# still inside" in chunks[0].text


def test_huge_section_is_split_under_the_cap_with_overlap() -> None:
    paragraph_lines = [f"Sentence number {i} talks about topic {i % 7}." for i in range(400)]
    text = "# Long\n\n" + "\n".join(paragraph_lines) + "\n"
    chunks = chunks_of(text, max_tokens=120, overlap=20)
    assert len(chunks) > 10
    for chunk in chunks:
        assert estimate_tokens(chunk.text) <= 120 + 5  # +newline slack
        assert chunk.text == lines_of(text, chunk)
    for first, second in itertools.pairwise(chunks):
        assert second.start_line <= first.end_line  # overlapping ranges
        assert second.end_line > first.end_line  # and progress
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    assert covered >= set(range(3, 403))


def test_over_long_single_line_is_cut_into_word_aligned_pieces() -> None:
    words = [f"w{i}" for i in range(3000)]
    text = "# L\n\n" + " ".join(words) + "\n"
    chunks = chunks_of(text, max_tokens=100, overlap=10)
    pieces = [c for c in chunks if c.start_line == c.end_line == 3]
    assert len(pieces) > 10
    line = text.split("\n")[2]
    for piece in pieces:
        assert piece.text in line
        assert estimate_tokens(piece.text) <= 100
    joined = set(" ".join(p.text for p in pieces).split())
    assert joined == set(words)
    # consecutive pieces overlap by a few words
    assert pieces[0].text.split()[-1] in pieces[1].text.split()


def test_ids_are_stable_and_survive_edits_elsewhere() -> None:
    first = chunks_of(DOC)
    again = chunks_of(DOC)
    assert [c.id for c in first] == [c.id for c in again]
    assert len({c.id for c in first}) == len(first)

    edited = chunks_of(DOC.replace("Deep text.", "Deep text, edited."))
    assert [c.id for c in edited] == [c.id for c in first]
    changed = [
        a.heading for a, b in zip(first, edited, strict=True) if a.content_hash != b.content_hash
    ]
    assert changed == ["Guide > Usage > Advanced"]


def test_duplicate_headings_get_distinct_ids() -> None:
    text = "# A\n## Example\none\n# B\n## Example\ntwo\n# A\n## Example\nthree\n"
    chunks = chunks_of(text)
    assert len({c.id for c in chunks}) == len(chunks) == 3


def test_crlf_empty_and_title_fallbacks() -> None:
    crlf = "# Title One\r\n\r\nBody text.\r\n"
    chunks = chunks_of(crlf)
    assert chunks[0].title == "Title One"
    assert chunks[0].text == "# Title One\n\nBody text."
    assert chunks_of("") == []
    assert chunks_of("---\ntitle: only meta\n---\n\n") == []
    no_heading = chunks_of("just text\n")
    assert no_heading[0].title == "guide"
    assert no_heading[0].locator == "docs/guide.md:1-1"


def test_indexed_text_carries_title_and_heading() -> None:
    chunk = next(c for c in chunks_of(DOC) if c.heading == "Guide > Install")
    assert chunk.indexed_text.startswith("The Guide\nGuide > Install\n")
    assert chunk.indexed_text.endswith(chunk.text)
