"""The stemmed word rules (Snowball English, PyStemmer), one home for each; the stop-word
lists and the stemmer-free rule are in ``core.words``, which says why the rules differ.

- `english_stemmer`: the one stemmer, for these rules and the BM25 index (``kb.lexical``).
- `question_stems`: the no-model mode's terms of a question, a passage or a line.
"""

from __future__ import annotations

from typing import cast

import Stemmer

from deep_research.core.words import ALNUM_RUN, QUESTION_STOPWORDS


def english_stemmer() -> Stemmer.Stemmer:
    """A new English stemmer. One per call, never shared: PyStemmer objects are not safe to
    share between threads."""
    return Stemmer.Stemmer("english")


def question_stems(text: str) -> list[str]:
    """Lower-cased, stemmed words in order (repeats kept); `QUESTION_STOPWORDS` dropped."""
    words = [w for w in ALNUM_RUN.findall(text.lower()) if w not in QUESTION_STOPWORDS]
    return cast(list[str], english_stemmer().stemWords(words))
