"""The rankers ``kb search`` can use (a module of its own: the CLI reads it on every start,
and the search module imports numpy and Chroma)."""

from typing import Literal

Mode = Literal["hybrid", "dense", "bm25"]
MODES: tuple[Mode, ...] = ("hybrid", "dense", "bm25")
