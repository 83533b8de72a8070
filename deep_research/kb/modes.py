"""The rankers ``kb search`` can use, and what the score of a hit means (a module of its own:
the CLI reads it on every start, and the search module imports numpy and Chroma)."""

from typing import Literal

Mode = Literal["hybrid", "dense", "bm25"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "bm25")

SCORE_MEANING = (
    "A hit's score is in [0, 1], higher is better, on one scale in every mode: each ranker's "
    "scores for the query are scaled so that its best candidate is 1 and its weakest 0 (a "
    "lone match is 1); hybrid averages the two rankers' scaled scores (1 when both put the "
    "chunk first). Scores compare the hits of one search, not hits of different queries."
)
"""Said by ``kb search --help``, the servers' KB search and ``search.search``."""
