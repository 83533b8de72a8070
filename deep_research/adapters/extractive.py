"""The no-model mode: deterministic adapters for every port the orchestrator needs.

When no API key or base URL is configured, a run still goes through the same loop, on the
knowledge base only, with these in place of the LLM chains. They record no usage.

Invariants:
- determinism: every output is a pure function of the inputs (no clock, no randomness,
  ties broken by position), so the same KB and question give the same report;
- no fabrication: the writer only quotes. Each note line is one sentence, bullet or table
  row copied from a passage, verbatim modulo whitespace and markdown markup (heading and
  list markers, code fences, table pipes, which become " — "); a long one is cut at a word
  boundary and ends with " …". Every line ends with its passage marker ``[n]``. Later
  stages only select, de-duplicate and rearrange those lines, keeping markers intact.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import partial
from typing import cast

import Stemmer

from deep_research.adapters.llm.branch import Passage
from deep_research.core import memory
from deep_research.core.citations import TRAILING, has_session_marker, strip_trailing
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import BranchNotes, Plan, PlannedTask, Verdict
from deep_research.core.orchestrator import Engine
from deep_research.core.ports import (
    BranchExecutor,
    Finding,
    JudgeRequest,
    Meter,
    NodeDigest,
    PlanRequest,
    SynthesisRequest,
)

_STOP_TEXT = """a an the and or but nor of to in on at by for with from into onto about as than
then is are was were be been being do does did doing have has had can could should would will
shall may might must how what why when where which who whom whose whether it its they them their
this that these those there here i we you our your my me us he she his her not no so if also very
more most some any each every all both such only own same just s t get gets use used using
between vs versus"""
STOPWORDS = frozenset(_STOP_TEXT.split())
_WH = frozenset({"how", "what", "why", "when", "where", "which", "who", "whom", "whose"})
_AUX = frozenset(
    {"does", "do", "did", "is", "are", "was", "were", "can", "could", "should", "would", "will"}
)
_COPULA = frozenset({"is", "are", "was", "were"})
_DETERMINERS = frozenset({"the", "a", "an", "our", "your", "their", "its", "this", "these"})
_WORD = re.compile(r"[a-z0-9]+")
_CLAUSE = re.compile(
    r"\s*;\s*|(?:,\s*(?:and|or|but)?|\s(?:and|or|but))\s+(?=(?:how|what|why|when|where|which|who)\b)",
    re.I,
)
_CONJ = re.compile(r"\s(?:and|or|vs\.?|versus)\s", re.I)
_COMPARE = re.compile(r"^(?:compare(?:\s+and\s+contrast)?|contrast)\s+", re.I)
_PRONOUN = re.compile(r"\b(it|they|them|its|their)\b", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Za-z0-9`\"(\[*_])")
_ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|cf|approx|incl|no|fig)\.|\b[A-Z]\.)$", re.I)
_BULLET = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}")
ROOT_WEIGHT = 0.3
"""Weight of the root question's terms next to the facet's own (1.0) when scoring."""
NOTE_WORDS = 230
"""Words of quoted text per note (markers come on top): keeps notes under ~250 words."""
UNIT_WORDS = 60
MIN_RELATIVE_SCORE = 0.25
"""A quote scoring under this share of the best one is too loosely related to keep."""
ANSWER_SENTENCES = 5
NO_NEW = "_Answered by the passages quoted above._"
NO_EVIDENCE = "_No cited evidence._"


# --- text helpers -------------------------------------------------------------------


def stems(text: str) -> list[str]:
    """Lower-cased, stemmed content words (Snowball English); stopwords dropped."""
    words = [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]
    # A stemmer per call: PyStemmer objects are not safe to share between threads.
    return cast(list[str], Stemmer.Stemmer("english").stemWords(words))


def _idf(docs: Sequence[set[str]]) -> dict[str, float]:
    df = Counter(t for doc in docs for t in doc)
    n = len(docs)
    return {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}


def _coverage(query: Iterable[str], found: set[str], idf: dict[str, float], n: int) -> float:
    """The idf-weighted share of query terms in ``found``; terms no doc has weigh most."""
    weight = {t: idf.get(t, math.log(1 + (n + 0.5) / 0.5)) for t in query}
    total = sum(weight.values())
    return sum(w for t, w in weight.items() if t in found) / total if total else 0.0


def _key(line: str) -> str:
    """A line's identity for de-duplication: its words, without bullet or markers."""
    return " ".join(_WORD.findall(strip_trailing(line).lower()))


# --- planner ------------------------------------------------------------------------


def facets(question: str, max_facets: int) -> list[str]:
    """The question itself, then its parts (questions, clauses, list items), self-contained."""
    text = " ".join(question.split())
    found: list[str] = [text.rstrip(" ?.!")]
    subject: str | None = None
    for sentence in re.split(r"(?<=[?!.])\s+", text):
        for clause in _CLAUSE.split(sentence):
            clause = clause.strip(" ,;?.!")
            if not clause:
                continue
            if subject is None:
                subject = _subject(clause)
            elif subject:
                clause = _PRONOUN.sub(partial(_replace, subject), clause, 1)
            found += _expand(clause)
    kept: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for index, facet in enumerate(found):
        key = tuple(_WORD.findall(facet.lower()))
        if stems(facet) and key not in seen:
            seen.add(key)
            first = facet.split(" ", 1)[0].lower()
            fragment = index > 0 and first in _WH | _AUX
            kept.append(facet[:1].upper() + facet[1:] if fragment else facet)
    return kept[: max(0, max_facets)]


def _replace(subject: str, pronoun: re.Match[str]) -> str:
    return f"{subject}'s" if pronoun.group(1).lower() in ("its", "their") else subject


def _subject(clause: str) -> str:
    """The main subject of a 'how does X …' / 'what is X' clause, or '' if none is evident."""
    words = clause.split()
    start = 2 if len(words) > 2 and words[0].lower() in _WH and words[1].lower() in _AUX else 0
    if start == 0 and not (len(words) > 1 and words[0].lower() in _AUX):
        return ""
    start = max(start, 1)
    rest = words[start:]
    if words[start - 1].lower() in _COPULA and words[0].lower() in ("what", "which", "who"):
        return " ".join(rest[:6])
    take = 2 if len(rest) > 1 and rest[0].lower() in _DETERMINERS else 1
    while take < len(rest) and rest[take][:1].isupper():
        take += 1
    return " ".join(rest[:take]).strip(",")


def _expand(clause: str) -> list[str]:
    """Distribute a coordinated list: 'how does X plan, schedule and budget a run' gives
    'how does X plan a run', '… schedule a run', '… budget a run'. Otherwise the clause."""
    compare = _COMPARE.match(clause)
    body = clause[compare.end() :] if compare else clause
    conj = _CONJ.search(body)
    if conj is None:
        return [clause]
    left = body[: conj.start()].rstrip(", ")
    right = body[conj.end() :].split()
    parts = [p.split() for p in left.split(", ")]
    if not right or not parts[0] or any(not p or len(p) > 4 for p in parts[1:]):
        return [clause]
    head = parts[0]
    if "between" in (w.lower() for w in head[-4:]):
        return [clause]
    if len(parts) > 1:
        k = len(parts[-1])
    else:
        k = 2 if len(right) > 1 and right[0].lower() in _DETERMINERS else 1
    first = len(head) - k
    if k == 2 and right[0].lower() in _DETERMINERS:
        window = range(max(0, len(head) - 4), len(head))
        first = max((i for i in window if head[i].lower() in _DETERMINERS), default=first)
    if first < 0:
        return [clause]
    items = [head[first:], *parts[1:], right[:k]]
    prefix = head[:first] if not compare else []
    suffix = right[k:]
    return [" ".join([*prefix, *item, *suffix]) for item in items]


class ExtractivePlanner:
    """One plan of independent KB facets; no replanning (extractive runs one iteration)."""

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
                source_hint="internal",
                parent_id=None,
            )
            for i, q in enumerate(found, start=1)
        ]
        return Plan(rationale="The question and its parts, each searched in the KB.", tasks=tasks)


# --- writer -------------------------------------------------------------------------


def quotable_units(text: str) -> list[str]:
    """Sentences, bullets and table rows of a markdown passage, markup stripped."""
    units: list[str] = []
    para: list[str] = []
    fenced = False

    def flush() -> None:
        pieces: list[str] = []
        for piece in _SENTENCE.split(" ".join(para)) if para else []:
            if pieces and _ABBREVIATION.search(pieces[-1]):
                pieces[-1] += " " + piece  # "e.g. foo" does not end a sentence
            else:
                pieces.append(piece)
        units.extend(pieces)
        para.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith(("```", "~~~")):
            flush()
            fenced = not fenced
        elif fenced or not line or line.startswith("#") or _TABLE_RULE.match(line):
            flush()
        elif line.startswith("|"):
            flush()
            units.append(" — ".join(c.strip() for c in line.strip("|").split("|") if c.strip()))
        elif bullet := _BULLET.match(line):
            flush()
            para.append(line[bullet.end() :])
        else:
            para.append(line.lstrip("> ").strip())
    flush()
    # Too few distinct words (a table row like "x — yes — yes") says nothing quotable.
    return [_clip(" ".join(u.split())) for u in units if len(set(stems(u))) > 2 and u[-1] != ":"]


def _clip(unit: str) -> str:
    words = unit.split()
    return unit if len(words) <= UNIT_WORDS else " ".join(words[:UNIT_WORDS]) + " …"


class ExtractiveWriter:
    """Quotes the passage sentences that best match the question (BM25-like, passages as corpus).

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
        own = set(stems(question))
        query = dict.fromkeys(stems(root_question), ROOT_WEIGHT) | dict.fromkeys(own, 1.0)
        docs = [set(stems(p.text)) for p in passages]
        idf, n = _idf(docs), len(docs)
        units = [
            (p, i, u, stems(u))
            for p, passage in enumerate(passages)
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
            if score < floor or _key(unit) in seen or per_passage[p] >= 3:
                continue
            if words + size > NOTE_WORDS:
                continue
            seen.add(_key(unit))
            per_passage[p] += 1
            words += size
            covered |= unit_terms
            chosen.append((p, i, unit))
            if len(chosen) >= 8:
                break
        chosen.sort()
        notes = "\n".join(f"- {unit} [{p + 1}]" for p, _i, unit in chosen)
        coverage = _coverage(stems(question), covered, idf, n)
        return BranchNotes(
            notes=notes,
            confidence=round(0.1 + 0.8 * coverage, 2) if chosen else 0.0,
            used_evidence=sorted({p + 1 for p, _i, _u in chosen}),
        )


# --- summary, synthesis, judge -----------------------------------------------------------


def sections(summary: str) -> list[tuple[str, list[str]]]:
    """``### heading`` sections of a summary with their non-blank lines ('' heads a preamble)."""
    found: list[tuple[str, list[str]]] = []
    for line in summary.splitlines():
        if line.startswith("### "):
            found.append((line[4:].strip(), []))
        elif line.strip():
            if not found:
                found.append(("", []))
            found[-1][1].append(line.rstrip())
    return found


def _render(parts: Sequence[tuple[str, list[str]]]) -> str:
    return "\n\n".join("\n".join(([f"### {h}"] if h else []) + lines) for h, lines in parts).strip()


class ExtractiveSummarizer:
    """Appends one section per digest, drops sentences already quoted, trims to the cap."""

    async def merge(
        self, question: str, summary: str, digests: list[NodeDigest], cap_tokens: int, meter: Meter
    ) -> str:
        parts = sections(summary)
        seen = {_key(line) for _h, lines in parts for line in lines}
        for digest in digests:
            # A line without its marker (cut by a cap) would be a quote nobody can trace.
            cited = [ln.rstrip() for ln in digest.notes.splitlines() if has_session_marker(ln)]
            fresh = [ln for ln in cited if _key(ln) not in seen]
            seen.update(_key(ln) for ln in fresh)
            body = fresh or ([NO_NEW] if cited else [NO_EVIDENCE])
            parts.append((" ".join(digest.question.split()), body))
        merged = _render(parts)
        if estimate_tokens(merged) > cap_tokens:
            share = max(20, cap_tokens // max(1, len(parts)) - 10)
            parts = [(h, _within(lines, share)) for h, lines in parts]
            merged = _render(parts)
        return memory.cap_tokens(merged, cap_tokens)


def _within(lines: list[str], max_tokens: int) -> list[str]:
    """Whole lines while they fit; at least the first, clipped between words, markers kept."""
    kept: list[str] = []
    used = 0
    for line in lines:
        used += estimate_tokens(line) + 1
        if used <= max_tokens:
            kept.append(line)
        elif not kept:
            markers = TRAILING.search(line)
            tail = markers.group(0) if markers else ""
            words = line[: len(line) - len(tail)].split()
            while len(words) > 3 and estimate_tokens(" ".join(words) + tail) + 2 > max_tokens:
                words.pop()
            kept.append(" ".join(words).removesuffix(" …") + " …" + tail)
        else:
            break
    return kept


class ExtractiveSynthesizer:
    """A short answer of the best-matching quoted lines, then the summary's sections."""

    async def synthesize(self, request: SynthesisRequest, meter: Meter) -> str:
        parts = [(h, [ln for ln in ls if ln != NO_NEW]) for h, ls in sections(request.summary)]
        quoted = (ln for _h, ls in parts for ln in ls if has_session_marker(ln))
        lines = list(dict.fromkeys(quoted))
        note = "_Extractive answer: sentences quoted verbatim from the knowledge base, no model._"
        if not lines:
            return f"## Answer\n\n{note}\n\nNo knowledge-base passage matched the question."
        docs = [set(stems(ln)) for ln in lines]
        idf = _idf(docs)
        query = set(stems(request.question))
        score = [sum(idf[t] for t in query & doc) for doc in docs]
        top = sorted(range(len(lines)), key=lambda i: (-score[i], i))[:ANSWER_SENTENCES]
        answer = "\n".join(lines[i] for i in sorted(top))
        findings = _render([(h, ls) for h, ls in parts if ls])
        return f"## Answer\n\n{note}\n\n{answer}\n\n## Findings by facet\n\n{findings}"


_OVERVIEW_GAP = re.compile(r"^- \S+ \[(?:failed|blocked|pending)[^\]]*\] (.+)$")


class ExtractiveJudge:
    """Always complete (one iteration). Missing: sections quoting nothing, and nodes the
    overview lists as failed, blocked or pending. Confidence: the mean, over facets, of
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
                terms = set(stems(heading))
                scores.append(len(terms & set(stems(body))) / len(terms) if terms else 1.0)
            else:
                missing.append(heading)
                scores.append(0.0)
        for line in request.overview.splitlines():
            if match := _OVERVIEW_GAP.match(line.strip()):
                missing.append(match.group(1))
                scores.append(0.0)
        confidence = round(sum(scores) / len(scores), 2) if scores else 0.0
        return Verdict(
            is_complete=True,
            recommend_more_iterations=False,
            missing_aspects=missing,
            weak_evidence_areas=[],
            overall_confidence=confidence,
        )


def extractive_engine(executor: BranchExecutor) -> Engine:
    """The no-model engine; ``executor`` is the KB one (``KBExecutor(..., ExtractiveWriter())``)."""
    return Engine(
        planner=ExtractivePlanner(),
        executor=executor,
        summarizer=ExtractiveSummarizer(),
        synthesizer=ExtractiveSynthesizer(),
        judge=ExtractiveJudge(),
    )
