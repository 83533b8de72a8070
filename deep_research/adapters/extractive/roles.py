"""The no-model mode: deterministic adapters for every port the orchestrator needs.

When no API key or base URL is configured, a run still goes through the same loop, on the
knowledge base only, with these in place of the LLM chains. They record no usage.

Invariants:
- determinism: every output is a pure function of the inputs (no clock, no randomness,
  ties broken by position), so the same KB and question give the same report;
- no fabrication: the writer only quotes. Each note line is one sentence (an enumeration,
  "First, … Second, …", whole), bullet or table body row copied from a passage, verbatim
  modulo whitespace and markdown markup (heading and list markers, code fences, table
  pipes, which become " — "); a long one is cut at a word boundary and ends with " …".
  Every line ends with its passage marker ``[n]``. Later stages only select, de-duplicate
  and rearrange those lines, keeping markers intact;
- relevance: a line is quoted only from a passage that clears `RELEVANCE_FLOOR`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.adapters.branches.protocols import Passage
from deep_research.adapters.extractive.text import (
    facets,
    idf_weights,
    line_key,
    lines_within,
    quotable_units,
    render_sections,
    sections,
    weighted_coverage,
)
from deep_research.core import memory
from deep_research.core.authoring import LeadRequest, OutlineRequest, PlannedSection, SectionRequest
from deep_research.core.citations import has_session_marker
from deep_research.core.errors import BranchError
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import BranchNotes, Plan, PlannedTask, SourceHint, Verdict
from deep_research.core.ports import (
    Finding,
    JudgeRequest,
    Meter,
    NodeDigest,
    PlanRequest,
)
from deep_research.kb.words import question_stems

ROOT_WEIGHT = 0.3
"""Weight of the root question's terms next to the facet's own (1.0) when scoring."""
NOTE_WORDS = 230
"""Words of quoted text per note (markers come on top): keeps notes under ~250 words."""
MIN_RELATIVE_SCORE = 0.25
"""A quote scoring under this share of the best one is too loosely related to keep."""
RELEVANCE_FLOOR = 0.25
"""A passage is evidence for a sub-question only when it holds at least this share of the
sub-question's terms, each weighted by its idf over the passages retrieved for it (a term
none of them holds weighs most): below it, nothing of the passage is quoted, and a
sub-question no passage clears fails with `NO_RELEVANT_PASSAGE`.

Chosen between the off-topic and on-topic scores of two measurements (/tmp scripts, issue
33). On the sample ``kb/`` (hybrid search, k=8): the best passage of each facet of the
README's main question holds 1.00 of its terms, 0.46 for the whole question (six of its
eight passages clear 0.25); the best passage of ten unrelated questions ("Where do puffins
nest?", "Which Malbec suits Camembert?", "How are sourdough costs capped at a bakery?", …)
0.00-0.24. On BEIR SciFact (the first 100 test claims, the top 8 abstracts by BM25 plus the
relevant ones): a relevant abstract clears 0.25 for 73 claims of 100 (0.30: 62), a passage
retrieved for another claim for 5 (0.30: 1). 0.30 also failed a two-note KB on "How are
costs capped?" (its one note on cost reservations: 0.28)."""
NO_RELEVANT_PASSAGE = (
    f"no passage in the knowledge base was relevant (relevance floor {RELEVANCE_FLOOR:.2f})"
)
ANSWER_SENTENCES = 5
NO_NEW = "_Answered by the passages quoted above._"
NO_EVIDENCE = "_No cited evidence._"


@dataclass(frozen=True)
class ExtractivePlanner:
    """One plan of independent facets, each researched at ``source_hint`` (the KB, the web by
    search-and-read, or both); no replanning (extractive runs one iteration)."""

    source_hint: SourceHint = "internal"

    async def plan(self, request: PlanRequest, meter: Meter) -> Plan:
        if request.gaps is not None:
            return Plan(rationale="Extractive mode runs a single iteration.", tasks=[])
        found = facets(request.question, request.max_tasks)
        tasks = [
            PlannedTask(
                id=f"f{i}",
                question=q,
                depends_on=[],
                parallelizable=True,
                priority=max(0, 11 - i),
                source_hint=self.source_hint,
                parent_id=None,
            )
            for i, q in enumerate(found, start=1)
        ]
        where = {"internal": "the KB", "web": "the web", "mixed": "the KB and the web"}
        return Plan(
            rationale=f"The question and its parts, each searched in {where[self.source_hint]}.",
            tasks=tasks,
        )


class ExtractiveWriter:
    """Quotes the passage sentences that best match the question (BM25-like, passages as corpus),
    from the passages that clear `RELEVANCE_FLOOR` only; with none, or nothing in them to quote,
    the branch fails (``BranchError``) rather than quote anything else.

    Confidence is the idf-weighted share of the question's content terms that the quoted
    sentences contain, mapped to 0.1-0.9: quotes that mention every distinctive term of the
    question score high; terms no passage contains weigh most, so they pull it down.
    Dependencies are ignored: there is no model to reason over them.
    """

    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes:
        own = set(question_stems(question))
        query = dict.fromkeys(question_stems(root_question), ROOT_WEIGHT) | dict.fromkeys(own, 1.0)
        docs = [set(question_stems(p.text)) for p in passages]
        idf, n = idf_weights(docs), len(docs)
        relevant = [weighted_coverage(own, doc, idf, n) >= RELEVANCE_FLOOR for doc in docs]
        if not any(relevant):
            raise BranchError(NO_RELEVANT_PASSAGE)
        units = [
            (p, i, u, question_stems(u))
            for p, passage in enumerate(passages)
            if relevant[p]
            for i, u in enumerate(quotable_units(passage.text))
        ]
        avg = sum(len(s) for *_, s in units) / len(units) if units else 1.0
        scored: list[tuple[float, int, int, str, set[str]]] = []
        for p, i, unit, terms in units:
            tf = Counter(terms)
            norm = 1.2 * (0.25 + 0.75 * len(terms) / avg)  # BM25 with k1=1.2, b=0.75
            score = sum(
                weight * idf.get(t, 0.0) * tf[t] * 2.2 / (tf[t] + norm)
                for t, weight in query.items()
                if t in tf
            )
            if score > 0 and own & tf.keys():
                scored.append((score * (1 + 0.3 / (1 + p)), p, i, unit, set(terms)))
        scored.sort(key=lambda s: (-s[0], s[1], s[2]))
        floor = MIN_RELATIVE_SCORE * scored[0][0] if scored else 0.0
        chosen: list[tuple[int, int, str]] = []
        covered: set[str] = set()
        seen: set[str] = set()
        per_passage: Counter[int] = Counter()
        words = 0
        for score, p, i, unit, unit_terms in scored:
            size = len(unit.split())
            if score < floor or line_key(unit) in seen or per_passage[p] >= 3:
                continue
            if words + size > NOTE_WORDS:
                continue
            seen.add(line_key(unit))
            per_passage[p] += 1
            words += size
            covered |= unit_terms
            chosen.append((p, i, unit))
            if len(chosen) >= 8:
                break
        if not chosen:  # never the passages verbatim instead: they may be code or data
            raise BranchError("the relevant passages hold no sentence on this question to quote")
        chosen.sort()
        notes = "\n".join(f"- {unit} [{p + 1}]" for p, _i, unit in chosen)
        coverage = weighted_coverage(question_stems(question), covered, idf, n)
        return BranchNotes(
            notes=notes,
            confidence=round(0.1 + 0.8 * coverage, 2),
            used_evidence=sorted({p + 1 for p, _i, _u in chosen}),
        )


class ExtractiveSummarizer:
    """Appends one section per digest, drops sentences already quoted, trims to the cap."""

    async def merge(
        self, question: str, summary: str, digests: list[NodeDigest], cap_tokens: int, meter: Meter
    ) -> str:
        parts = sections(summary)
        seen = {line_key(line) for _h, lines in parts for line in lines}
        for digest in digests:
            # A line without its marker (cut by a cap) would be a quote nobody can trace.
            cited = [ln.rstrip() for ln in digest.notes.splitlines() if has_session_marker(ln)]
            fresh = [ln for ln in cited if line_key(ln) not in seen]
            seen.update(line_key(ln) for ln in fresh)
            body = fresh or ([NO_NEW] if cited else [NO_EVIDENCE])
            parts.append((" ".join(digest.question.split()), body))
        merged = render_sections(parts)
        if estimate_tokens(merged) > cap_tokens:
            share = max(20, cap_tokens // max(1, len(parts)) - 10)
            parts = [(h, lines_within(lines, share)) for h, lines in parts]
            merged = render_sections(parts)
        return memory.cap_tokens(merged, cap_tokens)


class ExtractiveAuthor:
    """The report's parts by quoting: the outline is the writer's grouping of the tree (no
    model plans it), a section quotes its evidence lines best first, the lead quotes the
    sections' key points that best match the question."""

    async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]:
        return []  # the writer groups the nodes itself

    async def section(self, request: SectionRequest, meter: Meter) -> str:
        lines = _best(request.section.question, list(request.evidence), request.max_words)
        return "\n".join(f"- {line}" for line in lines) or NO_EVIDENCE

    async def lead(self, request: LeadRequest, meter: Meter) -> str:
        points = [p for _title, ps in request.sections for p in ps]
        note = "_Extractive answer: sentences quoted verbatim from the sources, no model._"
        if not points:
            return f"{note}\n\nNo passage matched the question."
        best = _best(request.question, points, request.max_words, most=ANSWER_SENTENCES)
        return note + "\n\n" + "\n".join(f"- {line}" for line in best)


def _best(question: str, lines: list[str], max_words: int, most: int = 10**6) -> list[str]:
    """The cited lines that best match ``question``, each once, within ``max_words``, in
    their own order."""
    lines = list({line_key(ln): ln for ln in lines if has_session_marker(ln)}.values())
    docs = [set(question_stems(ln)) for ln in lines]
    idf = idf_weights(docs)
    query = set(question_stems(question))
    score = [sum(idf[t] for t in query & doc) for doc in docs]
    chosen: list[int] = []
    words = 0
    for i in sorted(range(len(lines)), key=lambda i: (-score[i], i)):
        size = len(lines[i].split())
        if len(chosen) >= most or (chosen and words + size > max_words):
            break
        chosen.append(i)
        words += size
    return [lines[i] for i in sorted(chosen)]


_OVERVIEW_GAP = re.compile(r"^- \S+ \[(?:failed|blocked|pending)[^\]]*\] (.+)$")


class ExtractiveJudge:
    """Complete when nothing is missing; never asks for more rounds (one iteration). Missing:
    sections quoting nothing, and nodes the overview lists as failed (no passage cleared the
    relevance floor, say), blocked or pending. Confidence: the mean, over facets, of
    the share of a facet's content terms its quoted lines contain (all quoted lines for a
    facet answered by earlier quotes; 0 for a missing one)."""

    async def judge(self, request: JudgeRequest, meter: Meter) -> Verdict:
        missing: list[str] = []
        scores: list[float] = []
        parts = sections(request.summary)
        everything = " ".join(line for _h, lines in parts for line in lines)
        for heading, lines in parts:
            if not heading:
                continue
            body = everything if NO_NEW in lines else " ".join(lines)
            if has_session_marker(body):
                terms = set(question_stems(heading))
                scores.append(len(terms & set(question_stems(body))) / len(terms) if terms else 1.0)
            else:
                missing.append(heading)
                scores.append(0.0)
        for line in request.overview.splitlines():
            if match := _OVERVIEW_GAP.match(line.strip()):
                missing.append(match.group(1))
                scores.append(0.0)
        confidence = round(sum(scores) / len(scores), 2) if scores else 0.0
        return Verdict(
            is_complete=not missing,
            recommend_more_iterations=False,
            missing_aspects=missing,
            weak_evidence_areas=[],
            overall_confidence=confidence,
        )
