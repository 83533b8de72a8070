"""Token estimates and caps without a tokenizer (pure): the one home of both rules.

There are two estimates, on purpose, and each must stay as it is:

- `estimate_tokens` (a token per four characters, rounded up) sizes research memory: notes,
  summaries, prompt parts and the budgets a run reserves for them. Changing it would change
  how much a run reserves.
- `estimate_line_tokens` (a token per four characters plus a line break, one per CJK
  character) sizes knowledge-base chunks when the embedder has no tokenizer of its own.
  Changing it would chunk existing knowledge bases differently.

Citation markers and the session's source registry live in ``citations``."""

from __future__ import annotations

import re

CHARS_PER_TOKEN = 4

# Scripts written without spaces, where a tokenizer spends about a token per character:
# Hangul Jamo, CJK radicals to ideographs (kana included), Hangul syllables, CJK
# compatibility ideographs, fullwidth forms, and the supplementary ideograph planes.
_WIDE = re.compile(
    "[\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)


def estimate_tokens(text: str) -> int:
    """Research memory's estimate (~4 chars per token for English, rounded up): what budgets
    and caps count in. Tokenizer-free: tiktoken needs a download."""
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


def estimate_line_tokens(text: str) -> int:
    """The knowledge-base chunker's offline guess, for embedders without a local tokenizer:
    a token per four characters of alphabetic text or code, one per CJK character. Counts
    the text plus a line break, so the estimates of some lines add up to at least the
    estimate of their join."""
    wide = len(_WIDE.findall(text))
    return (len(text) - wide + CHARS_PER_TOKEN) // CHARS_PER_TOKEN + wide


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
