"""A facts-mode world for the fake OpenAI server: every research job states facts that can
be followed, one by one, from the job's reply to the report.

- The plan: ``branches`` independent web sub-questions, once; the judge then says complete.
- The outline (a structured call) puts about three catalog lines in a section, as many
  sections as the prompt allows at most (``tests.world.outline_of``).
- Each research job (the Responses API, through the real OpenAI-research executor) writes a
  report of ``facts_per_job`` facts, each with a unique tag (``FACT-07-3``), a unique
  number and its own cited URL (a ``url_citation`` on an inline link, as real replies do).
- Every chat call is a *faithful copier* (``copy_facts``): it extracts the facts of its
  prompt — tag, number and the citation marker(s) right after them, in the prompt's own
  form (``[S12]`` or ``[3]``) — and writes one sentence per fact, reworded, in prompt
  order, stopping before the reply would pass the request's token cap (four characters a
  token) or a limit its system prompt states ("at most N words", "a hard limit of N
  tokens (about M words)"). It never writes a fact its prompt did not hold, and never
  changes a marker. Structured calls get a valid object of their schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.fake_openai import ChatReply, ChatRequest, Citation, ResearchReport, ResearchRequest
from tests.fake_openai_payloads import inline_link
from tests.world import FILLER, outline_of, plan_task, verdict

CHARS_PER_TOKEN = 4
FACT = re.compile(
    r"(?P<tag>FACT-\d{2,}-\d+)\b(?:(?!FACT-)[^\[\n])*?\b(?P<value>\d{4,})\b"
    r"(?P<markers>(?:[ \t]*(?<!\\)\[S?\d{1,5}\])*)"
)
"""A fact as any text here states it: its tag, then (on its line, before a marker or tag)
its number, then the markers that follow it."""
MARKER = re.compile(r"(?<!\\)\[(S?\d{1,5})\]")
_QUESTION = re.compile(r"What is known about aspect (\d+)\?")
_LIMITS = (
    re.compile(r"\bat most ([\d,]+) (words|tokens)\b", re.IGNORECASE),
    re.compile(r"\blimit of ([\d,]+) (tokens|words)\b", re.IGNORECASE),
    re.compile(r"\babout ([\d,]+) (words)\b", re.IGNORECASE),
)
"""Limits a system prompt may state (grep ``deep_research/prompts/*.md``: the summarizer's
"a hard limit of N tokens (about M words)", the compressor's "At most N words")."""


@dataclass(frozen=True)
class Fact:
    tag: str
    value: str
    markers: tuple[str, ...]
    """As written in the text it was read from: ``("[S12]",)`` or ``("[3]",)``."""

    def sentence(self) -> str:
        cited = "".join(self.markers)
        return f"The value of {self.tag} is {self.value}" + (f" {cited}." if cited else ".")


def facts_in(text: str) -> list[Fact]:
    """The facts ``text`` states, in order, each once (its first statement)."""
    seen: dict[str, Fact] = {}
    for match in FACT.finditer(text):
        tag = match.group("tag")
        if tag not in seen:
            markers = tuple(f"[{m}]" for m in MARKER.findall(match.group("markers")))
            seen[tag] = Fact(tag, match.group("value"), markers)
    return list(seen.values())


@dataclass(frozen=True)
class Limits:
    chars: int | None = None
    words: int | None = None


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


def copy_facts(prompt: str, limits: Limits, head: str = "") -> str:
    """Prose keeping every fact of ``prompt`` in order, within ``limits`` (``head`` first,
    e.g. a heading, counted too). Five sentences a paragraph."""
    out = head
    sentences = 0
    for fact in facts_in(prompt):
        sentence = fact.sentence()
        joint = "" if not sentences else ("\n\n" if sentences % 5 == 0 else " ")
        candidate = out + joint + sentence
        if limits.chars is not None and len(candidate) > limits.chars:
            break
        if limits.words is not None and len(candidate.split()) > limits.words:
            break
        out, sentences = candidate, sentences + 1
    return out if sentences else (head + "No facts were given.")


def system_text(req: ChatRequest) -> str:
    content = req.messages[0].get("content") if req.messages else ""
    return content if isinstance(content, str) else str(content)


@dataclass(frozen=True)
class Gathered:
    """A fact a research job stated, and the page it cited it to."""

    tag: str
    value: str
    url: str


@dataclass
class FactsWorld:
    branches: int
    facts_per_job: int = 5
    gathered: dict[str, Gathered] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    prompts: dict[str, int] = field(default_factory=dict)
    """Each role's largest prompt: characters of its system and user text."""
    plans_left: int = 1

    def install(self, fake: Any) -> None:
        fake.chat_handler = self.chat
        fake.research_handler = self.research

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
            return {"rationale": copy_facts(req.text, limits), "tasks": tasks}
        if req.schema_name == "Verdict":
            self._count("judge", req)
            return verdict(True)
        if req.schema_name == "Outline":
            self._count("outline", req)
            return outline_of(req.text, system)
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
            else "other"
        )
        self._count(role, req)
        return copy_facts(req.text, limits)

    def research(self, req: ResearchRequest) -> ResearchReport:
        self._count("deep_research")
        found = _QUESTION.search(req.input_text.split("It is part of", 1)[0])
        assert found, "facts world: a research job for an unknown sub-question"
        return self.report(int(found.group(1)))

    def report(self, branch: int) -> ResearchReport:
        """K facts, each stated once with its own inline-linked page, among filler."""
        text, citations = "# Findings\n\n", []
        for j in range(1, self.facts_per_job + 1):
            tag = f"FACT-{branch:02d}-{j}"
            value = str(10007 + 97 * ((branch - 1) * self.facts_per_job + j))
            url = f"https://facts{branch:02d}.example/page-{j}"
            link = inline_link(url)
            sentence = f"Measured directly, {tag} has the value {value}"
            start = len(text) + len(sentence) + 1
            text += f"{sentence} {link}. {FILLER}\n\n"
            citations.append(Citation(url, f"Page {j} of site {branch}", link, start=start))
            self.gathered[tag] = Gathered(tag, value, url)
        return ResearchReport(text=text.rstrip() + "\n", citations=tuple(citations))
