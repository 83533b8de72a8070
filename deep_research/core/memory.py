"""Research memory: token estimates and caps, the session's source registry, markers.

Notes and summaries cite sources with session-wide markers ``[S1]``, ``[S2]`` …; a
branch result cites its own list with ``[1]``, ``[2]`` …, which ``register_citations``
rewrites into session refs. Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from deep_research.core.models import Citation

CHARS_PER_TOKEN = 4
_LOCAL_MARKER = re.compile(r"\[(\d{1,4})\]")
SESSION_MARKER = re.compile(r"\[(S\d{1,5})\]")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (~4 chars per token for English); tiktoken needs a download."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def cap_tokens(text: str, max_tokens: int) -> str:
    """Cut ``text`` to at most ``max_tokens`` (estimated), preferring a sentence boundary."""
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    cut = text[:limit]
    boundary = max(cut.rfind(". "), cut.rfind("\n"))
    if boundary > limit // 2:
        cut = cut[: boundary + 1]
    return cut.rstrip() + " …"


def register_citations(
    sources: dict[str, Citation], notes: str, citations: Sequence[Citation]
) -> tuple[str, list[Citation]]:
    """Add ``citations`` to the session registry and rewrite ``[n]`` markers to ``[S#]``.

    Citations are de-duplicated by ``Citation.key`` across the whole session: a KB chunk is
    one source however often it is cited; a web page is one source per claim it is cited
    for. Markers that point past the list are dropped rather than left dangling.
    """
    by_key = {c.key: ref for ref, c in sources.items()}
    local_to_ref: dict[int, str] = {}
    registered: list[Citation] = []
    for index, citation in enumerate(citations, start=1):
        ref = by_key.get(citation.key)
        if ref is None:
            ref = f"S{len(sources) + 1}"
            sources[ref] = citation.model_copy(update={"ref": ref})
            by_key[citation.key] = ref
        local_to_ref[index] = ref
        registered.append(sources[ref])

    def rewrite(match: re.Match[str]) -> str:
        ref = local_to_ref.get(int(match.group(1)))
        return f"[{ref}]" if ref else ""

    return _LOCAL_MARKER.sub(rewrite, notes), registered


def cited_refs(text: str) -> list[str]:
    """Session refs cited in ``text``, in order of first use."""
    seen: dict[str, None] = {}
    for match in SESSION_MARKER.finditer(text):
        seen.setdefault(match.group(1), None)
    return list(seen)


def renumber(text: str, sources: Mapping[str, Citation]) -> tuple[str, list[Citation]]:
    """Rewrite ``[S#]`` markers to ``[1]``, ``[2]`` … by first use; unknown refs are removed.

    Returns the text and the cited sources in their new order (a report's numbered list).
    """
    order: dict[str, int] = {}
    for ref in cited_refs(text):
        if ref in sources:
            order[ref] = len(order) + 1

    def rewrite(match: re.Match[str]) -> str:
        number = order.get(match.group(1))
        return f"[{number}]" if number else ""

    return SESSION_MARKER.sub(rewrite, text), [sources[ref] for ref in order]


def take_within(items: Iterable[str], max_tokens: int) -> list[str]:
    """As many of ``items`` as fit in ``max_tokens``, in order; each is capped to fit alone."""
    taken: list[str] = []
    budget = max_tokens
    for item in items:
        if budget <= 0:
            break
        piece = cap_tokens(item, budget)
        taken.append(piece)
        budget -= estimate_tokens(piece)
    return taken
