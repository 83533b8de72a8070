"""Words: the stop-word lists and the word rules that need no stemmer, one home for each.

The rules differ on purpose and keep their own names (their stemmed forms, which need
PyStemmer, are in ``kb.words``):

- `CLAIM_FUNCTION_WORDS`: what the claim verifier (``adapters.verifier.claim_words``)
  leaves out of a claim's content words. Negations stay: "not" must match "not".
- `QUESTION_STOPWORDS`: what ``kb.words.question_stems`` leaves out when the no-model mode
  matches a question to passages; negations and filler verbs ("get", "use") go too.
- `CITATION_STOPWORDS` and `prefix_words`: the report check's crude content words (cut to
  five letters; no stemmer, so that ``core`` stays free of it). Words of three letters or
  fewer are dropped by length, so the list holds only longer ones.
- `question_words` and `same_question`: how the research tree reads a planned question
  (too few words to research; the user's question, or another task's, asked again).
- The knowledge base's BM25 index uses bm25s' own English list (``kb.lexical``): an index
  on disk was built with it.
"""

from __future__ import annotations

import functools
import re
import unicodedata

CLAIM_FUNCTION_WORDS = frozenset(
    """
a about above after again all also am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers him his how i if in into is it its
itself just me more most my of off on once only or other our ours out over own same
she should so some such than that the their theirs them then there these they this
those through to too under until up very was we were what when where which while who
whom why will with would you your yours
""".split()  # noqa: SIM905
)
QUESTION_STOPWORDS = frozenset(
    """a an the and or but nor of to in on at by for with from into onto about as than
then is are was were be been being do does did doing have has had can could should would will
shall may might must how what why when where which who whom whose whether it its they them their
this that these those there here i we you our your my me us he she his her not no so if also very
more most some any each every all both such only own same just s t get gets use used using
between vs versus""".split()  # noqa: SIM905
)
CITATION_STOPWORDS = frozenset(
    """about above after again also among and any are because been before being between
    both but can could does doing down during each from further had has have having here
    how into its itself just more most much must not now off once only other our out
    over own same should some such than that the their them then there these they this
    those through too under until very was were what when where which while who whom why
    will with would your yours""".split()  # noqa: SIM905
)

ALNUM_RUN = re.compile(r"[a-z0-9]+")
"""A word of lower-cased text as the no-model mode splits it: a run of ASCII letters and
digits (the text is lower-cased first)."""
_CITATION_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]+|\d[\d.,%]*")


def prefix_words(text: str) -> frozenset[str]:
    """The report check's content words: lower-cased, longer than three letters, not in
    `CITATION_STOPWORDS`, cut to five letters (a stemmer's job, done crudely). Those of a
    text up to 4,000 characters are kept: a source's text is compared with every sentence
    that cites it."""
    return _kept_words(text) if len(text) <= 4_000 else _prefix_words(text)


def _prefix_words(text: str) -> frozenset[str]:
    return frozenset(
        w.lower().rstrip(".,%")[:5]
        for w in _CITATION_WORD.findall(text)
        if len(w) > 3 and w.lower() not in CITATION_STOPWORDS
    )


_kept_words = functools.lru_cache(maxsize=4096)(_prefix_words)


_OPENING, _CLOSING = "([{【〔（［<", ")]}】〕）］>"


def question_words(text: str) -> int:
    """How many words ``text`` holds: whitespace-separated tokens with a letter, neither
    wrapped in brackets nor a number ("GPT-4", "a" and "t3" are words; "[4]", "(S2)",
    "10/23", "1e+12" and "—" are not). In scripts written without spaces, each wide
    letter (a CJK character) counts as a word."""
    count = 0
    for token in text.split():
        if token[0] in _OPENING and token[-1] in _CLOSING:
            continue  # a marker: [4], (S2), 【1】
        if _is_number(token):
            continue  # 1.6e10, 1e+12
        letters = sum(c.isalpha() for c in token)
        wide = sum(c.isalpha() and unicodedata.east_asian_width(c) in "WF" for c in token)
        count += wide + (letters > wide)
    return count


def same_question(task: str, question: str) -> bool:
    """Whether ``task`` asks ``question`` again: the same words in the same order, whatever
    the case, punctuation and spacing, or the same words once stop words are left out ("How
    does X plan a run?" and "X: plan run"). Words are runs of letters and digits of any
    script; a text with none is never the same as anything."""
    words, asked = _words(task), _words(question)
    if not words or not asked:
        return False
    if words == asked:
        return True
    content = [w for w in words if w not in QUESTION_STOPWORDS]
    return bool(content) and content == [w for w in asked if w not in QUESTION_STOPWORDS]


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.casefold())


def _is_number(token: str) -> bool:
    bare = token.strip(".,;:!?%").replace(",", "")
    if not any(c.isdigit() for c in bare):
        return False  # "nan", "inf": words that float() would take
    try:
        float(bare)
    except ValueError:
        return False
    return True
