"""A branch's findings as evidence units: each sentence or bullet of its notes, with the
refs it cites and, for each ref, what the citation rests on (``EvidenceUnit``).

    units = units_of(node, state.sources, texts)

- ``findings``: the notes cut into findings, read as markdown — a list item is one, a
  table's body row is one, a paragraph's sentences are one each; headings, code and scraps
  of fewer than ``MIN_WORDS`` words are not findings.
- A citation with source text (a knowledge-base chunk, a search-and-read passage) gives
  its whole text (the branch's ``source_texts``, else its quote). A research job's citation
  has none: the job's own sentence (``Citation.claim``) is kept as what it *said*, apart,
  so nothing downstream can take a sentence for the source that supports it.
- Ids are ``<node id>.<n>``: a node rerun after a crash gets the same ids back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from deep_research.core import markdown as md
from deep_research.core.citations import cited_refs
from deep_research.core.models import Citation, EvidenceSource, EvidenceUnit, ResearchNode

MIN_WORDS = 4
_SENTENCE_END = re.compile(r"(?<=[.!?])(?:\s*\[S?\d+\])*\s+(?=[A-Z0-9\"'(])")
"""A sentence's end: its full stop and the markers after it (``[S#]`` in notes, ``[N]`` in a
report)."""


def findings(notes: str) -> list[str]:
    """The notes' findings, in order (see the module docstring), read from a markdown parse
    (``core.markdown.paragraphs``): a table row's cells are joined by " | "."""
    found: list[str] = []
    for paragraph in md.paragraphs(notes):
        whole = paragraph.kind != "paragraph"
        for sentence in [paragraph.text] if whole else _sentences(paragraph.text):
            if len(sentence.split()) >= MIN_WORDS:
                found.append(sentence)
    return found


def _sentences(text: str) -> list[str]:
    """Sentences, each keeping the markers that follow its full stop ("… true. [S1] Next")."""
    out, start = [], 0
    for cut in _SENTENCE_END.finditer(text):
        out.append(text[start : cut.start() + len(cut.group(0).rstrip())].strip())
        start = cut.end()
    out.append(text[start:].strip())
    return [sentence for sentence in out if sentence]


def units_of(
    node: ResearchNode, sources: Mapping[str, Citation], texts: Mapping[str, str]
) -> list[EvidenceUnit]:
    """The units of a finished node whose notes cite with session refs (``[S#]``).
    ``texts``: the whole source text of a ref, where the branch had more than the quote."""
    units: list[EvidenceUnit] = []
    for finding in findings(node.notes):
        refs = [ref for ref in cited_refs(finding) if ref in sources]
        units.append(
            EvidenceUnit(
                id=f"{node.id}.{len(units) + 1}",
                node_id=node.id,
                question=node.question,
                finding=finding,
                refs=refs,
                sources=[_source(ref, sources[ref], texts.get(ref, "")) for ref in refs],
            )
        )
    return units


def _source(ref: str, citation: Citation, text: str) -> EvidenceSource:
    own = text.strip() or citation.quote.strip()
    if own:
        return EvidenceSource(ref=ref, text=own)
    return EvidenceSource(ref=ref, said=citation.claim.strip())


def source_texts(refs: Sequence[Citation], texts: Sequence[str]) -> dict[str, str]:
    """A branch's ``source_texts`` by the refs its citations were registered under."""
    return {c.ref: t for c, t in zip(refs, texts, strict=False) if t.strip()}
