"""The stemmed word rules (Snowball English, PyStemmer), one home for each; the stop-word
lists and the stemmer-free rule are in ``core.words``, which says why the rules differ.

- `english_stemmer`: the one stemmer, for these rules and the BM25 index (``kb.lexical``).
- `claim_words`: a claim's and a passage's content words, as ``verify`` compares them.
- `question_stems`: the no-model mode's terms of a question, a passage or a line.
"""

from __future__ import annotations

from typing import cast

import Stemmer

from deep_research.core.words import (
    ALNUM_RUN,
    CLAIM_FUNCTION_WORDS,
    CLAIM_WORD,
    QUESTION_STOPWORDS,
)


def english_stemmer() -> Stemmer.Stemmer:
    """A new English stemmer. One per call, never shared: PyStemmer objects are not safe to
    share between threads."""
    return Stemmer.Stemmer("english")


def claim_words(text: str) -> set[str]:
    """The stemmed words that carry a sentence's meaning: not function words, not single
    letters; numbers kept whole ("3.10"), any "n't" counted as "not"."""
    stemmer = english_stemmer()
    words: set[str] = set()
    for raw in CLAIM_WORD.findall(text.lower().replace("’", "'")):
        word = "not" if raw.endswith("n't") else raw
        if word in CLAIM_FUNCTION_WORDS or (len(word) < 2 and not word.isdigit()):
            continue
        words.add(stemmer.stemWord(word))
    return words


def question_stems(text: str) -> list[str]:
    """Lower-cased, stemmed words in order (repeats kept); `QUESTION_STOPWORDS` dropped."""
    words = [w for w in ALNUM_RUN.findall(text.lower()) if w not in QUESTION_STOPWORDS]
    return cast(list[str], english_stemmer().stemWords(words))
