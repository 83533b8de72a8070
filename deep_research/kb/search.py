"""Retrieval over a KBStore: dense (Chroma), lexical (BM25) or both fused.

Fusion is weighted: score(d) = sum_r w_r * norm_r(d), each ranker's scores min-max scaled
over its own candidates; a candidate missing from a ranking gets that ranking's lowest
scaled score. On BEIR SciFact with the default embedder (bench/kb.py) this beat reciprocal
rank fusion and z-scores, and the weights below were the best measured.
MMR (optional) re-orders the fused candidates for diversity using the dense vectors.

A hit's score is on one scale in every mode: in [0, 1], relative to the query's
candidates. Each ranker's scores are min-max scaled (its best candidate 1.0, a lone or
tied candidate 1.0 too), so "dense" and "bm25" report that scaled score and "hybrid" the
weighted sum of both (1.0 when both rankers put the chunk first).

A hit's locator, ``root/path#heading:start-end``, names the folder it was ingested from,
the file in it, its heading path and its lines; `resolve_locator` turns one back into the
exact text. A locator resolves by its lines even after the file was chunked differently (a
new token cap), as long as the file itself did not change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from deep_research.core.errors import KnowledgeBaseError, UsageError
from deep_research.kb.chunking import Chunk, document_key, make_anchor
from deep_research.kb.embeddings import normalize_rows
from deep_research.kb.modes import MODES, Mode
from deep_research.kb.store import KBStore

DENSE_WEIGHT = 0.5
BM25_WEIGHT = 0.5
CANDIDATES = 50
"""Candidates taken from each ranker before fusion (at least k, 4k with MMR)."""
MMR_LAMBDA = 0.5
"""1.0 = pure relevance, 0.0 = pure diversity (0.5 is LangChain's default too)."""

Ranking = list[tuple[str, float]]
_LOCATOR = re.compile(r"^(?P<anchor>.*):(?P<start>\d+)-(?P<end>\d+)$")


@dataclass(frozen=True, kw_only=True)
class Hit(Chunk):
    score: float

    @property
    def chunk_id(self) -> str:
        return self.id


def fuse(rankings: Sequence[tuple[Ranking, float]]) -> Ranking:
    """Combine (ranking, weight) pairs into one ranking, best first."""
    fused: dict[str, float] = {}
    floors: list[tuple[dict[str, None], float]] = []
    for ranking, weight in rankings:
        if not ranking or weight == 0:
            continue
        scaled = _minmax([score for _, score in ranking])
        for (cid, _), value in zip(ranking, scaled, strict=True):
            fused[cid] = fused.get(cid, 0.0) + weight * value
        floors.append((dict.fromkeys(cid for cid, _ in ranking), weight * min(scaled)))
    # A candidate only one ranker found scores that ranker's floor for the others.
    for cid in fused:
        fused[cid] += sum(floor for found, floor in floors if cid not in found)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def _minmax(scores: list[float]) -> list[float]:
    values = np.asarray(scores, dtype=float) - min(scores)
    span = float(values.max())
    # A lone or tied candidate is as good as the best: 1.0, not 0.0.
    scaled: list[float] = (values / span if span else np.ones_like(values)).tolist()
    return scaled


def mmr_order(
    query: Sequence[float],
    candidates: Ranking,
    vectors: dict[str, list[float]],
    k: int,
) -> Ranking:
    """Maximal marginal relevance over the candidates' dense vectors.

    Relevance is the candidate's cosine similarity to the query blended with its
    scaled fused score, so lexical-only matches are not pushed out.
    """
    pool = [(cid, score) for cid, score in candidates if cid in vectors]
    if not pool:
        return candidates[:k]
    matrix = normalize_rows(np.array([vectors[cid] for cid, _ in pool], dtype=np.float32))
    q = normalize_rows(np.array([query], dtype=np.float32))[0]
    relevance = 0.5 * (matrix @ q) + 0.5 * np.array(_minmax([score for _, score in pool]))
    similarity = matrix @ matrix.T
    chosen: list[int] = []
    left = list(range(len(pool)))
    while left and len(chosen) < k:
        redundancy = np.zeros(len(left))
        if chosen:
            redundancy = similarity[np.ix_(left, chosen)].max(axis=1)
        marginal = MMR_LAMBDA * relevance[left] - (1 - MMR_LAMBDA) * redundancy
        best = left[int(np.argmax(marginal))]
        chosen.append(best)
        left.remove(best)
    return [pool[i] for i in chosen]


def search(
    store: KBStore,
    query: str,
    k: int = 8,
    mode: Mode = "hybrid",
    mmr: bool = False,
    path_glob: str | None = None,
    tags: Iterable[str] | None = None,
) -> list[Hit]:
    """The top ``k`` chunks for ``query``, best first, filtered by path glob and tags.

    Each hit's score is in [0, 1] in every mode (``modes.SCORE_MEANING``): the ranker's scores
    min-max scaled over its candidates for this query (hybrid: their weighted sum, the
    weights adding up to 1).
    """
    if not query.strip():
        raise UsageError("empty search query")
    if k < 1:
        raise UsageError(f"k must be at least 1 (got {k})")
    if mode not in MODES:
        raise UsageError(f"unknown search mode {mode!r}; use one of {', '.join(MODES)}")
    lexical = store.lexical()
    allowed = lexical.documents_matching(path_glob, tags)
    if allowed is not None and not allowed:
        return []
    allowed_ids = None if allowed is None else lexical.chunk_ids(allowed)
    n = max(CANDIDATES, k * 4 if mmr else k)
    vector = store.embeddings.embed_query(query) if mode != "bm25" or mmr else None
    dense = store.dense(vector, n, allowed_ids) if vector is not None and mode != "bm25" else []
    lexical_hits = lexical.search(query, n, allowed) if mode != "dense" else []
    # One ranker (the other's list is empty) is scaled as hybrid scales it: a score means
    # the same in every mode.
    weights = (DENSE_WEIGHT, BM25_WEIGHT) if mode == "hybrid" else (1.0, 1.0)
    ranked = fuse([(dense, weights[0]), (lexical_hits, weights[1])])
    if mmr and vector is not None:
        pool = ranked[:n]
        ranked = mmr_order(vector, pool, store.vectors([cid for cid, _ in pool]), k)
    hits: list[Hit] = []
    taken = 0
    while len(hits) < k and taken < len(ranked):
        # A chunk deleted since the lexical index was built, or not served (its file now
        # resolves outside its root: KBStore.get_chunks), gives its place to the next one.
        top, taken = ranked[taken : taken + k - len(hits)], taken + k - len(hits)
        chunks = store.get_chunks([cid for cid, _ in top])
        hits.extend(Hit(**vars(chunks[cid]), score=score) for cid, score in top if cid in chunks)
    return hits


def resolve_locator(store: KBStore, locator: str) -> str:
    """The exact text a locator (``root/path#heading:start-end``) points at."""
    match = _LOCATOR.match(locator)
    if match is None:
        raise UsageError(f"not a KB locator: {locator!r} (expected root/path#heading:start-end)")
    anchor, start, end = match["anchor"], int(match["start"]), int(match["end"])
    # The file part ends at some "#" (headings and file names may hold one too).
    keys = [anchor, *(anchor[:i] for i, char in enumerate(anchor) if char == "#")]
    overlapping = [{"start_line": {"$lte": end}}, {"end_line": {"$gte": start}}]
    found = store.find({"$and": [{"doc": {"$in": keys}}, *overlapping]})

    def named(chunk: Chunk) -> bool:
        return make_anchor(chunk.root, chunk.source, chunk.heading) == anchor

    documents = sorted({c.document for c in found if named(c)})
    if len(documents) > 1:  # "a/b#c" is file b's heading c, and file "b#c" too
        choices = ", ".join(document_key(root, source) for root, source in documents)
        raise KnowledgeBaseError(
            f"{locator!r} is ambiguous in knowledge base {store.name!r}: it names a heading "
            f"of one file and another file ({choices})"
        )
    if documents:
        chunks = [c for c in found if c.document == documents[0]]
        exact = [c for c in chunks if (c.start_line, c.end_line) == (start, end) and named(c)]
        if exact:
            # Several chunks share a locator only when one over-long line was cut in pieces.
            return "\n".join(c.text for c in sorted(exact, key=lambda c: c.ordinal))
        opening = any(c.start_line <= start and named(c) for c in chunks)
        text = _lines(chunks, start, end) if opening else None
        if text is not None:
            return text
    raise KnowledgeBaseError(
        f"{locator!r} is not in knowledge base {store.name!r} (re-ingested since?)"
    )


def _lines(chunks: Sequence[Chunk], start: int, end: int) -> str | None:
    """Lines ``start..end`` of one file rebuilt from the chunks that hold them: a chunk's
    text is exactly its lines, the pieces of a cut line cover it, and a line no chunk
    holds is blank. None when the range does not start and end on text, or a cut line
    cannot be joined back."""
    lines: dict[int, str] = {}
    cut: dict[int, list[Chunk]] = {}
    for chunk in chunks:
        if chunk.piece:
            cut.setdefault(chunk.start_line, []).append(chunk)
            continue
        for offset, line in enumerate(chunk.text.split("\n")):
            lines[chunk.start_line + offset] = line
    for number, pieces in cut.items():
        joined = _join_pieces(pieces)
        if joined is not None:
            lines[number] = joined
    if start not in lines or end not in lines:
        return None
    if any(start <= n <= end and n not in lines for n in cut):
        return None
    return "\n".join(lines.get(n, "") for n in range(start, end + 1))


def _join_pieces(pieces: Sequence[Chunk]) -> str | None:
    """The line that overlapping pieces cut from it cover, or None if they leave a gap."""
    line = ""
    for piece in sorted(pieces, key=lambda p: (p.column, p.ordinal)):
        if piece.column > len(line):
            return None
        if piece.column + len(piece.text) > len(line):
            line = line[: piece.column] + piece.text  # the overlap is the same text
    return line
