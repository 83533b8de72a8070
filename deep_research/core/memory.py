"""Research memory in tokens: estimates, caps, and taking items within a budget (pure).

Citation markers and the session's source registry live in ``citations``."""

from __future__ import annotations

from collections.abc import Iterable

CHARS_PER_TOKEN = 4


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
    elif not text[limit].isspace() and " " in cut:  # never end on half a word
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip() + " …"


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
