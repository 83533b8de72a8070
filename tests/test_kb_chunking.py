"""Chunking and markdown structure: pure functions over markdown text."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from deep_research.core.memory import estimate_line_tokens
from deep_research.core.memory import estimate_tokens as memory_estimate_tokens
from deep_research.kb.chunking import Chunk, chunk_markdown, estimate_token_counts
from deep_research.kb.markdown import split_front_matter

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


def words(texts: Sequence[str]) -> list[int]:
    """A token counter of one token per word: easy to check by eye."""
    return [len(text.split()) for text in texts]


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


def test_code_blocks_and_tables_within_the_cap_are_never_cut() -> None:
    code = "```python\n" + "\n".join(f"x_{i} = {i}" for i in range(20)) + "\n```"
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i * i} |" for i in range(20))
    text = f"# Big\n\n{'Before. ' * 40}\n\n{code}\n\nBetween.\n\n{table}\n\nAfter.\n"
    chunks = chunks_of(text, max_tokens=100, overlap=10)
    assert [c for c in chunks if code in c.text]
    assert [c for c in chunks if table in c.text]
    for chunk in chunks:
        assert chunk.text == lines_of(text, chunk)
        assert chunk.text.count("```") in (0, 2)


def test_oversized_code_block_and_table_are_cut_between_lines_within_the_cap() -> None:
    code = "```python\n" + "\n".join(f"# comment {i}\nx_{i} = {i}" for i in range(200)) + "\n```"
    table = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i * i} |" for i in range(300))
    text = f"# Big\n\nBefore.\n\n{code}\n\nBetween.\n\n{table}\n\nAfter.\n"
    chunks = chunks_of(text, max_tokens=100, overlap=10)
    for chunk in chunks:
        assert chunk.text == lines_of(text, chunk)
        assert estimate_line_tokens(chunk.indexed_text) <= 100
        assert chunk.heading == "Big"
    # Together the parts are the whole block, each line exactly once, in order.
    code_lines = code.split("\n")
    code_parts = [c for c in chunks if set(c.text.split("\n")) & set(code_lines[1:-1])]
    assert len(code_parts) > 5
    seen = [line for c in code_parts for line in c.text.split("\n") if line in code_lines]
    assert seen == code_lines
    table_rows = table.split("\n")
    table_parts = [c for c in chunks if "| 0 | 0 |" in c.text or "| 299 |" in c.text]
    assert table_parts[0].start_line < table_parts[-1].start_line
    all_rows = [line for c in chunks for line in c.text.split("\n") if line in table_rows]
    assert all_rows == table_rows


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
        assert estimate_line_tokens(chunk.indexed_text) <= 120
        assert chunk.text == lines_of(text, chunk)
    for first, second in itertools.pairwise(chunks):
        assert second.start_line <= first.end_line  # overlapping ranges
        assert second.end_line > first.end_line  # and progress
    covered = set()
    for chunk in chunks:
        covered.update(range(chunk.start_line, chunk.end_line + 1))
    assert covered >= set(range(3, 403))


def test_sizes_are_counted_by_the_counter_passed_in() -> None:
    text = "# T\n\n" + "\n".join("a b c d" for i in range(30)) + "\n"
    chunks = chunk_markdown(text, "t.md", max_tokens=20, overlap_tokens=4, count_tokens=words)
    assert len(chunks) > 5
    for chunk in chunks:
        assert words([chunk.indexed_text])[0] <= 20
    # title "T" and heading path "T" leave 18 words: four lines of four (and no fifth)
    assert max(len(c.text.split("\n")) for c in chunks[1:]) == 4
    # The estimate (about four characters a token) packs twice as many lines a chunk.
    assert len(chunk_markdown(text, "t.md", max_tokens=20, overlap_tokens=4)) < len(chunks)


def test_the_title_and_heading_path_count_against_the_cap() -> None:
    body = "\n".join("one two three four" for _ in range(10))
    text = f"---\ntitle: w x y z\n---\n# a b c d\n\n{body}\n"
    chunks = chunk_markdown(text, "t.md", max_tokens=24, overlap_tokens=0, count_tokens=words)
    assert all(words([c.indexed_text])[0] <= 24 for c in chunks)
    # Title and heading path take 8 of the 24: four lines of four words, not six.
    assert [len(c.text.split("\n")) for c in chunks[1:]] == [4, 4]


def test_a_title_the_heading_path_starts_with_is_said_once() -> None:
    text = "# Guide\n\nIntro.\n\n## Install\n\nRun it.\n"
    intro, install = chunks_of(text)
    assert intro.indexed_text == "Guide\n# Guide\n\nIntro."
    assert install.indexed_text == "Guide > Install\n## Install\n\nRun it."
    other = chunks_of("---\ntitle: Handbook\n---\n# Guide\n\nIntro.\n")
    assert other[0].indexed_text.startswith("Handbook\nGuide\n")


def test_over_long_single_line_is_cut_into_word_aligned_pieces() -> None:
    words_ = [f"w{i}" for i in range(3000)]
    text = "# L\n\n" + " ".join(words_) + "\n"
    chunks = chunks_of(text, max_tokens=100, overlap=10)
    pieces = [c for c in chunks if c.start_line == c.end_line == 3]
    assert len(pieces) > 10
    assert all(p.piece for p in pieces)
    line = text.split("\n")[2]
    for piece in pieces:
        assert line[piece.column : piece.column + len(piece.text)] == piece.text
        assert estimate_line_tokens(piece.indexed_text) <= 100
    joined = set(" ".join(p.text for p in pieces).split())
    assert joined == set(words_)
    # consecutive pieces overlap by a few words
    assert pieces[0].text.split()[-1] in pieces[1].text.split()


def test_pieces_cover_their_line_whitespace_and_all() -> None:
    line = "\t  " + "  ".join(f"w{i}" for i in range(400)) + "   "
    pieces = [c for c in chunks_of(f"# L\n\n{line}\n", max_tokens=60, overlap=8) if c.piece]
    assert pieces[0].column == 0
    assert pieces[-1].column + len(pieces[-1].text) == len(line)
    covered = ""
    for piece in pieces:
        assert piece.column <= len(covered)  # overlapping: no gap
        covered = covered[: piece.column] + piece.text
    assert covered == line


def test_pieces_of_a_line_are_as_few_as_the_cap_allows_and_even() -> None:
    line = " ".join(f"w{i}" for i in range(250))
    chunks = chunk_markdown(line, "t.md", max_tokens=101, overlap_tokens=10, count_tokens=words)
    sizes = [len(c.text.split()) for c in chunks]
    assert len(sizes) == 3  # 250 words, 10 repeated at each cut: three windows of 100
    assert max(sizes) - min(sizes) <= 2  # not 100, 100 and a tail of 70
    assert all(words([c.indexed_text])[0] <= 101 for c in chunks)  # "t" is the title


def test_text_without_spaces_is_cut_between_characters() -> None:
    line = "".join(chr(0x4E00 + i) for i in range(1400))  # 1,400 ideographs, no space
    text = f"# 分块\n\n{line}\n"
    chunks = chunks_of(text, max_tokens=100, overlap=10)
    pieces = [c for c in chunks if c.piece]
    assert len(pieces) >= 14  # four characters a token would have made four pieces
    spans = [(line.index(p.text), line.index(p.text) + len(p.text)) for p in pieces]
    for piece in pieces:
        assert estimate_line_tokens(piece.indexed_text) <= 100
    assert spans[0][0] == 0
    assert spans[-1][1] == len(line)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start < end  # they overlap, so no character is lost


def test_estimates_count_cjk_characters_as_tokens() -> None:
    assert estimate_line_tokens("東京は日本の首都です") >= 10
    assert estimate_line_tokens("a" * 400) == 101  # four characters a token, plus the line break
    assert estimate_token_counts(["", "abc"]) == [1, 1]


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


def test_the_root_is_part_of_ids_and_locators() -> None:
    text = "# Readme\n\nHello.\n"
    docs = chunk_markdown(text, "README.md", max_tokens=400, overlap_tokens=40, root="docs")
    notes = chunk_markdown(text, "README.md", max_tokens=400, overlap_tokens=40, root="notes")
    assert docs[0].id != notes[0].id
    assert docs[0].locator == "docs/README.md#Readme:1-3"
    assert notes[0].locator == "notes/README.md#Readme:1-3"
    # Without a root (a file chunked outside a KB): the bare path.
    bare = chunk_markdown(text, "README.md", max_tokens=400, overlap_tokens=40)
    assert bare[0].locator == "README.md#Readme:1-3"


def test_indexed_text_carries_title_and_heading() -> None:
    chunk = next(c for c in chunks_of(DOC) if c.heading == "Guide > Install")
    assert chunk.indexed_text.startswith("The Guide\nGuide > Install\n")
    assert chunk.indexed_text.endswith(chunk.text)


def test_the_two_token_estimates_keep_their_own_rules() -> None:
    """Chunks (existing knowledge bases) and budgets (reservations) count differently, on
    purpose; both rules live in ``core.memory`` and neither may drift."""
    assert [estimate_line_tokens(t) for t in ("", "abc", "a" * 8, "東京")] == [1, 1, 3, 3]
    assert [memory_estimate_tokens(t) for t in ("", "abc", "a" * 8, "東京")] == [0, 1, 2, 1]
    assert estimate_token_counts(["a" * 8, "東京"]) == [3, 3]
