"""A facts-mode world for the fake OpenAI server: every research job states facts that can
be followed, one by one, from the job's reply to the report, and the writers plant
fabrications in some of them, as a model may.

- The facts: ``branches x facts_per_job`` of them, from ``bench.planted.plant`` (the
  templates, names and fabrication kinds of ``bench/claims.py``): each a sentence about a
  unique made-up name and a number, cited to its own page (``page_url(index)``: served on
  loopback by ``bench.planted.Pages`` in ``bench/report.py``).
- With ``contradictions``, the 20 pairs of ``bench.planted.pairs`` too (10 contradicting,
  10 look-alike), each side a sentence stated by one research job after its facts, cited
  to its own page (``side_url``): a pair's two sides by two jobs half the plan apart. They
  are not among ``facts`` or ``gathered``. The compressor copies them with the facts (they
  reach the notes, hence the evidence store); no other role copies them.
- The plan: ``branches`` independent web sub-questions, once; the judge then says complete.
- The outline (a structured call) puts about three catalog lines in a section, as many
  sections as the prompt allows at most (``tests.world.outline_of``), and plans a point per
  line naming what it found (the first words of its gist's first fact, never a whole
  fact), as the outline prompt asks a model to: points share words with the facts of
  every branch written from the same template, so a section's related evidence is not
  empty for want of a word in common.
- Each research job (the Responses API, through the real OpenAI-research executor) writes a
  report of its branch's facts, each stated as the page states it, with its own cited URL
  (a ``url_citation`` on an inline link, as real replies do), among filler.
- Every chat call is a *faithful copier* (``copy_facts``): it finds the facts of its
  prompt — any form a fact is written in here (``FactsWorld.forms``) and the citation
  marker(s) right after it, in the prompt's own form (``[S12]`` or ``[3]``) — and writes
  one sentence per fact, in prompt order, stopping before the reply would pass the
  request's token cap (four characters a token) or a limit its system prompt states ("at
  most N words", "a hard limit of N tokens (about M words)"). It never writes a fact its
  prompt did not hold, and never invents a marker.
- The writers plant (``plant=True``: a section's writer, the lead's): a fact found as the
  research stated it is written as ``Fact.written`` — reworded (30 % of the true facts) or
  fabricated (15 % of all, five kinds); a moved citation takes the markers of the next
  fact of the same prompt whose markers differ. A fact found already written (the lead
  reads the sections' key points) is copied as it stands. Deterministic from the seed:
  the same fact is altered the same way wherever it is written.
- The claim check's judge abstains (an empty ``Judgements``: the text verifier's verdicts
  stand, as in ``bench/claims.py``); asked to correct a sentence (the claim check's
  repair), the writer restates the first fact the passages it is given state, as stated
  there, with the sentence's markers. Other structured calls get a valid object of their
  schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from bench.planted import KINDS, Fact, Pair, judge_quote, pairs, plant
from tests.fake_openai import ChatReply, ChatRequest, Citation, ResearchReport, ResearchRequest
from tests.fake_openai_payloads import inline_link
from tests.world import FILLER, outline_of, plan_task, verdict

CHARS_PER_TOKEN = 4
MARKER = re.compile(r"(?<!\\)\[(S?\d{1,5})\]")
_MARKERS = r"(?P<markers>(?:[ \t]*(?<!\\)\[S?\d{1,5}\])*)"
_QUESTION = re.compile(r"What is known about aspect (\d+)\?")
_LIMITS = (
    re.compile(r"\bat most ([\d,]+) (words|tokens)\b", re.IGNORECASE),
    re.compile(r"\blimit of ([\d,]+) (tokens|words)\b", re.IGNORECASE),
    re.compile(r"\babout ([\d,]+) (words)\b", re.IGNORECASE),
)
"""Limits a system prompt may state (grep ``deep_research/prompts/*.md``: the summarizer's
"a hard limit of N tokens (about M words)", the compressor's "At most N words")."""
_GIST = re.compile(r"^- ([\w.+-]+): .*? — found: (.*)$", re.MULTILINE)
POINT_WORDS = 5
"""A planned point's words: a fact's subject and verb ("The Zorblax index stores its")."""
STATED = "stated"
REWORDED = "reworded"
"""Forms of a true fact; the fabricated forms are named by their kind (``planted.KINDS``)."""


@dataclass(frozen=True)
class Stated:
    """A fact as a text states it: which fact, in which form, with which markers."""

    fact: Fact
    form: str
    """``STATED``, ``REWORDED`` or a fabrication kind."""
    words: str
    """The sentence without its markers and final period."""
    markers: tuple[str, ...]
    """As written in the text it was read from: ``("[S12]",)`` or ``("[3]",)``."""
    at: int = field(default=0, compare=False)
    """Where the text states it."""

    def sentence(self, words: str | None = None, markers: tuple[str, ...] | None = None) -> str:
        cited = "".join(self.markers if markers is None else markers)
        return (words or self.words) + (f" {cited}." if cited else ".")


def forms_of(fact: Fact) -> dict[str, str]:
    """A fact's forms: the words of each way it is written here (no final period)."""
    n = f"{fact.number:,}"
    out = {
        STATED: fact.stated,
        REWORDED: fact.template.reworded.format(name=fact.name, n=n),
    }
    if fact.kind in KINDS and fact.kind != "moved_citation":
        out[fact.kind] = fact.written
    return {form: words.rstrip(".") for form, words in out.items()}


@dataclass(frozen=True)
class Limits:
    chars: int | None = None
    words: int | None = None


def one_of(words: Iterable[str]) -> str:
    """A pattern matching any of ``words``, the longest where several start alike, as a
    prefix tree: ``re`` tries an alternation of a thousand sentences one by one at every
    position of a prompt (~3 ms a prompt, while the engine waits on replies), a tree a
    character at a time."""
    root: dict[str, dict[str, Any]] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _branches(root)


def _branches(node: dict[str, dict[str, Any]]) -> str:
    alternatives = [re.escape(char) + _branches(child) for char, child in node.items() if char]
    if not alternatives:
        return ""
    body = alternatives[0] if len(alternatives) == 1 else f"(?:{'|'.join(alternatives)})"
    return f"(?:{body})?" if "" in node else body  # greedy: the longer word first


def stated_limits(system: str, max_tokens: int | None) -> Limits:
    """The reply's limits: the request's token cap and those the system prompt states."""
    chars = [max_tokens * CHARS_PER_TOKEN] if max_tokens else []
    words: list[int] = []
    for pattern in _LIMITS:
        for number, unit in pattern.findall(system):
            value = int(number.replace(",", ""))
            if unit.lower() == "tokens":
                chars.append(value * CHARS_PER_TOKEN)
            else:
                words.append(value)
    return Limits(min(chars) if chars else None, min(words) if words else None)


def system_text(req: ChatRequest) -> str:
    content = req.messages[0].get("content") if req.messages else ""
    return content if isinstance(content, str) else str(content)


def default_url(index: int) -> str:
    return f"https://facts.example/f{index}"


def default_side_url(pair: int, side: int) -> str:
    return f"https://facts.example/c{pair}.{side}"


@dataclass(frozen=True)
class Side:
    """One side of a contradiction pair (``bench.planted.pairs``)."""

    pair: Pair
    side: int
    words: str
    """The sentence without its final period."""
    branch: int
    """The research job that states it."""


@dataclass
class FactsWorld:
    branches: int
    facts_per_job: int = 5
    seed: int = 7
    page_url: Callable[[int], str] = default_url
    """The page fact ``index`` is cited to."""
    contradictions: bool = False
    """Whether research jobs state the pairs of ``bench.planted.pairs`` too."""
    side_url: Callable[[int, int], str] = default_side_url
    """The page side ``side`` of pair ``pair`` is cited to."""
    facts: list[Fact] = field(init=False)
    """Every fact, the research jobs' and the writers' (``bench.planted.plant``)."""
    pairs: list[Pair] = field(init=False)
    """The contradiction pairs the research jobs state (none unless ``contradictions``)."""
    sides: dict[str, Side] = field(init=False)
    """Each side of a pair, by its words."""
    gathered: dict[int, str] = field(default_factory=dict)
    """The facts a research job stated (by index), and the page it cited each to."""
    calls: dict[str, int] = field(default_factory=dict)
    prompts: dict[str, int] = field(default_factory=dict)
    """Each role's largest prompt: characters of its system and user text."""
    plans_left: int = 1
    judge: str = "abstain"
    """The claims' judge: abstains (the text verifier decides), or a fake of
    ``bench.planted.JUDGES`` that calls every claim supported."""

    def __post_init__(self) -> None:
        self.facts = plant(self.branches * self.facts_per_job, self.seed)
        self.forms: dict[str, tuple[Fact, str]] = {}
        for fact in self.facts:
            for form, words in forms_of(fact).items():
                assert words not in self.forms, f"two facts written alike: {words!r}"
                self.forms[words] = (fact, form)
        alternatives = one_of(self.forms)
        self._stated = re.compile(
            rf"(?<![\w-])(?P<words>{alternatives}){_MARKERS}(?=[ \t]*(?:[.\n]|\\\[|$))"
        )
        self.pairs, self.sides = [], {}
        if self.contradictions:
            assert self.branches >= 2, "a pair's sides are stated by two research jobs"
            self.pairs = pairs(taken={f.name for f in self.facts})
            half = self.branches // 2
            for pair in self.pairs:
                for side, sentence in enumerate(pair.sides):
                    words = sentence.rstrip(".")
                    assert words not in self.forms, words
                    assert words not in self.sides, words
                    branch = (pair.index + side * half) % self.branches + 1
                    self.sides[words] = Side(pair, side, words, branch)
        said = one_of(self.sides) or "(?!)"
        self._said = re.compile(rf"(?<![\w-])(?P<words>{said}){_MARKERS}(?=[ \t]*(?:[.\n]|\\\[|$))")

    def install(self, fake: Any) -> None:
        fake.chat_handler = self.chat
        fake.research_handler = self.research

    # --- reading and writing facts --------------------------------------------------------

    def statements(self, text: str) -> list[Stated]:
        """Every statement of a fact in ``text``, in order."""
        out = []
        for match in self._stated.finditer(text):
            fact, form = self.forms[match.group("words")]
            markers = tuple(f"[{m}]" for m in MARKER.findall(match.group("markers")))
            out.append(Stated(fact, form, match.group("words"), markers, match.start()))
        return out

    def said_in(self, text: str) -> list[tuple[Side, tuple[str, ...], int]]:
        """Each side of a pair ``text`` states, once (its first statement), in order: with
        its markers, and where."""
        seen: dict[str, tuple[Side, tuple[str, ...], int]] = {}
        for match in self._said.finditer(text):
            markers = tuple(f"[{m}]" for m in MARKER.findall(match.group("markers")))
            side = self.sides[match.group("words")]
            seen.setdefault(side.words, (side, markers, match.start()))
        return list(seen.values())

    def facts_in(self, text: str) -> list[Stated]:
        """The facts ``text`` states, in order, each once (its first statement)."""
        seen: dict[int, Stated] = {}
        for one in self.statements(text):
            seen.setdefault(one.fact.index, one)
        return list(seen.values())

    def written(self, found: list[Stated], at: int) -> str:
        """The sentence a writer makes of ``found[at]``: a fact as stated is written as the
        plant has it; one already written elsewhere is copied."""
        one = found[at]
        if one.form != STATED:
            return one.sentence()
        fact = one.fact
        if fact.kind == "moved_citation":
            for other in found[at + 1 :] + found[:at]:
                if other.markers and other.markers != one.markers:
                    return one.sentence(markers=other.markers)
            return one.sentence()
        return one.sentence(words=fact.written.rstrip("."))

    def copy_facts(
        self,
        prompt: str,
        limits: Limits,
        head: str = "",
        plant: bool = False,
        sides: bool = False,
    ) -> str:
        """Prose keeping every fact of ``prompt`` in order, within ``limits`` (``head``
        first, e.g. a heading, counted too), planted when ``plant``; the sides of pairs
        among them too when ``sides``, as stated. Five sentences a paragraph."""
        out = head
        sentences = 0
        found = self.facts_in(prompt)
        ordered = [
            (one.at, self.written(found, at) if plant else one.sentence())
            for at, one in enumerate(found)
        ]
        if sides:
            ordered += [
                (at, side.words + (f" {''.join(markers)}." if markers else "."))
                for side, markers, at in self.said_in(prompt)
            ]
            ordered.sort(key=lambda item: item[0])
        words = len(out.split())
        for _, sentence in ordered:
            joint = "" if not sentences else ("\n\n" if sentences % 5 == 0 else " ")
            candidate = out + joint + sentence
            if limits.chars is not None and len(candidate) > limits.chars:
                break
            # Counted as ``len(candidate.split())``, without splitting it all each time: a
            # blank joint adds the sentence's words; none (the first) may join two words.
            more = len(candidate.split()) if not joint else words + len(sentence.split())
            if limits.words is not None and more > limits.words:
                break
            out, sentences, words = candidate, sentences + 1, more
        return out if sentences else (head + "No facts were given.")

    def corrected(self, prompt: str) -> str:
        """The repair's rewrite: the first fact the passages state, as stated there, with
        the sentence's own markers (the writer's reply to ``prompts/revise.md``)."""
        sentence = prompt.split("The sentence:", 1)[-1].split("What the check found:", 1)[0]
        passages = prompt.split("The sources' passages:", 1)[-1]
        markers = tuple(f"[{m}]" for m in MARKER.findall(sentence))
        for one in self.facts_in(passages):
            if one.form == STATED:
                return one.sentence(markers=markers)
        return sentence.strip()

    # --- the model ------------------------------------------------------------------------

    def plan(self) -> list[dict[str, Any]]:
        return [
            plan_task(f"t{i:02d}", question=f"What is known about aspect {i:02d}?")
            for i in range(1, self.branches + 1)
        ]

    def _count(self, role: str, req: ChatRequest | None = None) -> None:
        self.calls[role] = self.calls.get(role, 0) + 1
        if req is not None:
            size = len(system_text(req)) + len(req.text)
            self.prompts[role] = max(self.prompts.get(role, 0), size)

    def chat(self, req: ChatRequest) -> ChatReply | str | dict[str, Any] | None:
        system = system_text(req)
        limits = stated_limits(system, req.max_tokens)
        if req.schema_name == "Plan":
            self._count("planner", req)
            tasks = self.plan() if self.plans_left > 0 else []
            self.plans_left -= 1
            return {"rationale": self.copy_facts(req.text, limits), "tasks": tasks}
        if req.schema_name == "Verdict":
            self._count("judge", req)
            return verdict(True)
        if req.schema_name == "Outline":
            self._count("outline", req)
            return self.outline(req.text, system)
        if req.schema_name == "Judgements":
            self._count("claim_judge", req)
            return {"judgements": [] if self.judge == "abstain" else self.judgements(req.text)}
        if req.schema_name is not None:
            raise AssertionError(f"facts world: no reply for schema {req.schema_name!r}")
        role = (
            "summarizer"
            if "rolling summary" in system
            else "compressor"
            if "compress a long web research report" in system
            else "condenser"
            if "You condense part of the evidence" in system
            else "section"
            if "one section of a research report" in system
            else "lead"
            if "opening of a research report" in system
            else "reviser"
            if "You correct one sentence" in system
            else "other"
        )
        self._count(role, req)
        if role == "reviser":
            return self.corrected(req.text)
        return self.copy_facts(
            req.text, limits, plant=role in ("section", "lead"), sides=role == "compressor"
        )

    def outline(self, prompt: str, system: str) -> dict[str, Any]:
        """``tests.world.outline_of``'s sections, each planning a point per catalog line that
        names what the line found, as the outline prompt asks a model to: the subject of its
        gist's first fact (its first ``POINT_WORDS`` words, never a whole fact). The points
        share words with the facts of every branch written from the same template, as a
        model's points share words with findings across the tree."""
        outline = outline_of(prompt, system)
        found = {
            ids: self.facts_in(gist) for ids, gist in _GIST.findall(prompt.split("Catalog:", 1)[-1])
        }
        for section in outline["sections"]:
            points = [
                " ".join(facts[0].words.split()[:POINT_WORDS])
                for ids in section["node_ids"]
                if (facts := found.get(ids))
            ]
            section["points"] = points[:3] or section["points"]
        return outline

    def judgements(self, prompt: str) -> list[dict[str, Any]]:
        """The judge fake's answer to the claims listed in ``prompt``
        (``adapters.claims.claims_text``): each supported, with its quote."""
        out = []
        for block in re.split(r"(?m)^(?=Claim \d+: )", prompt):
            head, _, listed = block.partition("\nPassages:\n")
            found = re.match(r"Claim (\d+): (.*)", head)
            if found is None:
                continue
            passages = [line.removeprefix("> ") for line in listed.splitlines() if line]
            quote = judge_quote(self.judge, found[2], passages)
            out.append(
                {"claim": int(found[1]), "verdict": "supported", "explanation": "", "quote": quote}
            )
        return out

    def research(self, req: ResearchRequest) -> ResearchReport:
        self._count("deep_research")
        found = _QUESTION.search(req.input_text.split("It is part of", 1)[0])
        assert found, "facts world: a research job for an unknown sub-question"
        return self.report(int(found.group(1)))

    def report(self, branch: int) -> ResearchReport:
        """The branch's facts, each stated once as its page states it, with its own
        inline-linked page, among filler."""
        text, citations = "# Findings\n\n", []
        first = (branch - 1) * self.facts_per_job
        for j, fact in enumerate(self.facts[first : first + self.facts_per_job], start=1):
            url = self.page_url(fact.index)
            link = inline_link(url)
            sentence = fact.stated.rstrip(".")
            start = len(text) + len(sentence) + 1
            text += f"{sentence} {link}. {FILLER}\n\n"
            citations.append(Citation(url, f"Page {j} of aspect {branch}", link, start=start))
            self.gathered[fact.index] = url
        for side in self.sides.values():
            if side.branch != branch:
                continue
            url = self.side_url(side.pair.index, side.side)
            link = inline_link(url)
            start = len(text) + len(side.words) + 1
            text += f"{side.words} {link}. {FILLER}\n\n"
            title = f"Pair {side.pair.index}, side {side.side}"
            citations.append(Citation(url, title, link, start=start))
        return ResearchReport(text=text.rstrip() + "\n", citations=tuple(citations))
