"""A scripted research world for the fake OpenAI server: every role answers plausibly.

Chat requests are told apart by their structured-output schema (Plan, Verdict,
BranchNotes) or, for plain-text roles, by a phrase of their system prompt. Replies
echo the citation markers they were given, like a well-behaved model would, so the
whole citation chain (report span -> [n] -> [S#] -> [N]) can be checked end to end.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tests.fake_openai import ChatReply, ChatRequest, Citation, ResearchReport, ResearchRequest

_LOCAL = re.compile(r"\[(\d{1,3})\]")
_SESSION = re.compile(r"\[S\d+\]")
FILLER = (
    "Independent measurements agree on the main effect while differing on its size, "
    "and the primary sources describe the mechanism in detail. "
)


def plan_task(
    tid: str, *deps: str, source: str = "web", question: str | None = None
) -> dict[str, Any]:
    return {
        "id": tid,
        "question": question or f"What is known about aspect {tid}?",
        "depends_on": list(deps),
        "parallelizable": True,
        "priority": 5,
        "source_hint": source,
        "parent_id": None,
    }


def verdict(complete: bool, *missing: str) -> dict[str, Any]:
    return {
        "is_complete": complete,
        "recommend_more_iterations": not complete,
        "missing_aspects": list(missing),
        "weak_evidence_areas": [],
        "overall_confidence": 0.85 if complete else 0.4,
    }


@dataclass
class ResearchWorld:
    plans: list[list[dict[str, Any]]]
    verdicts: list[dict[str, Any]] = field(default_factory=lambda: [verdict(True)])
    report_words: int = 400
    summary_tokens: int = 1500
    notes_words: int = 300
    queries: dict[str, list[str]] = field(default_factory=dict)
    """Search queries by sub-question (the search-and-read engine); else the question."""
    calls: dict[str, int] = field(default_factory=dict)

    def install(self, fake: Any) -> None:
        fake.chat_handler = self.chat
        fake.research_handler = self.research

    def _count(self, role: str) -> None:
        self.calls[role] = self.calls.get(role, 0) + 1

    def chat(self, req: ChatRequest) -> ChatReply | str | dict[str, Any] | None:
        system = req.messages[0]["content"] if req.messages else ""
        system = system if isinstance(system, str) else str(system)
        if req.schema_name == "Plan":
            self._count("planner")
            tasks = self.plans.pop(0) if self.plans else []
            return {"rationale": "scripted plan", "tasks": tasks}
        if req.schema_name == "Verdict":
            self._count("judge")
            return self.verdicts.pop(0) if self.verdicts else verdict(True)
        if req.schema_name == "Judgements":  # the claims' judge: all a claim's words said?
            self._count("verifier")
            blocks = re.split(r"(?m)^(?=Claim \d+: )", req.text)
            return {"judgements": [judged(b) for b in blocks if b.startswith("Claim ")]}
        if req.schema_name == "SearchQueries":
            self._count("queries")
            question = req.text.split("Sub-question:", 1)[1].split("Findings", 1)[0].strip()
            return {"queries": self.queries.get(question, [question])}
        if req.schema_name == "BranchNotes" and "excerpts of web pages" in system:
            self._count("branch")
            return self._web_notes(req.text)
        if req.schema_name == "BranchNotes":
            self._count("branch")
            return {
                "notes": "The knowledge base says so [1].",
                "confidence": 0.7,
                "used_evidence": [1],
            }
        if "rolling summary" in system:
            self._count("summarizer")
            return self._echo(req.text, _SESSION, self.summary_tokens * 4)
        if "compress a long web research report" in system:
            self._count("compressor")
            return self._echo(req.text.split("Report:", 1)[-1], _LOCAL, self.notes_words * 6)
        if req.schema_name == "Outline":
            self._count("outline")
            return outline_of(req.text, system)
        if "one section of a research report" in system:
            self._count("section")
            own = req.text.split("Evidence for this section:", 1)[1].split("Related evidence:")[0]
            return self._echo(own, _SESSION, 600)
        if "You condense part of the evidence" in system:
            self._count("condenser")
            return self._echo(req.text.split("Evidence to condense:", 1)[1], _SESSION, 600)
        if "opening of a research report" in system:
            self._count("lead")
            return self._echo(req.text, _SESSION, 400)
        if "You correct one sentence of a research report" in system:
            self._count("reviser")  # the first passage's first sentence, citing it
            passage = req.text.split("The sources' passages:", 1)[1].strip()
            number, _, text = passage.partition("] ")
            sentence = text.split(". ")[0].rstrip(".")
            return f"{sentence} {number}]." if number.startswith("[") else None
        return None

    @staticmethod
    def _web_notes(text: str) -> dict[str, Any]:
        """Notes on the first two passages, each claim made of its passage's own words."""
        evidence = text.split("Evidence passages:", 1)[1]
        blocks = re.split(r"^\[(\d+)\] .*$", evidence, flags=re.MULTILINE)[1:]
        passages = dict(zip(blocks[::2], blocks[1::2], strict=True))
        claims = []
        for number in list(passages)[:2]:
            plain = re.sub(r"\\(.)", r"\1", passages[number])  # markdown escapes
            words = re.findall(r"\w+", plain)[:8]
            claims.append(f"The page says that {' '.join(words)} [{number}].")
        return {
            "notes": " ".join(claims) or "The pages say nothing on this.",
            "confidence": 0.8 if claims else 0.1,
            "used_evidence": [int(n) for n in list(passages)[:2]],
        }

    @staticmethod
    def _echo(text: str, marker: re.Pattern[str], max_chars: int) -> str:
        """Prose carrying every marker of the input once, padded/capped to ``max_chars``."""
        seen = list(dict.fromkeys(m.group(0) for m in marker.finditer(text)))
        sentences = [f"A finding that rests on evidence {m}." for m in seen]
        out = " ".join(sentences)
        while len(out) < max_chars:
            out += " " + FILLER
        return out[: max(max_chars, len(" ".join(sentences)))]

    def research(self, req: ResearchRequest) -> ResearchReport:
        self._count("deep_research")
        claims = [f"Claim number {i} about the topic is supported." for i in range(1, 6)]
        body = " ".join(claims) + " " + (FILLER * (self.report_words // 30 + 1))
        return ResearchReport(
            text=f"# Findings\n\n{body}",
            citations=tuple(
                Citation(f"https://source{i}.example/page", f"Source {i}", claims[i - 1])
                for i in range(1, 6)
            ),
            searches=("search one", "search two"),
        )


def judged(block: str) -> dict[str, Any]:
    """A scripted judgement of one claim as ``adapters.claims.claims_text`` lists it:
    supported when every word of the claim is in its passages."""
    head, _, passages = block.partition("Passages:")
    number, _, claim = head.partition(":")
    claim = claim.split("\nIt answers:")[0]
    said = set(re.findall(r"\w+", passages.lower()))
    wanted = set(re.findall(r"\w+", claim.lower()))
    supported = wanted <= said
    listed = [line.removeprefix("> ") for line in passages.splitlines() if line.startswith("> ")]
    best = max(listed, key=lambda p: len(wanted & set(re.findall(r"\w+", p.lower()))), default="")
    return {
        "claim": int(number.removeprefix("Claim ")),
        "verdict": "supported" if supported else "unsupported",
        "explanation": "Scripted: every word of the claim is in the passages."
        if supported
        else "Scripted: the passages lack some of the claim's words.",
        "quote": best if supported else "",  # the passage that holds most of its words
    }


_CATALOG_LINE = re.compile(r"^- ([\w.+-]+): (.*?)(?: — found: .*)?$", re.MULTILINE)
_MAX_SECTIONS = re.compile(r"at most (\d+) sections")


def outline_of(text: str, system: str) -> dict[str, Any]:
    """An ``Outline`` reply: the catalog's lines in order, about three to a section, within
    the number of sections the prompt allows."""
    lines = _CATALOG_LINE.findall(text.split("Catalog:", 1)[-1])
    found = _MAX_SECTIONS.search(system)
    most = int(found.group(1)) if found else 8
    count = max(1, min(most, -(-len(lines) // 3)))
    size = -(-len(lines) // count) if lines else 1
    sections = []
    for k in range(0, len(lines), size):
        group = lines[k : k + size]
        sections.append(
            {
                "title": f"Part {len(sections) + 1}: {group[0][1][:60]}",
                "question": group[0][1],
                "node_ids": [i for ids, _q in group for i in ids.split("+")],
                "points": [q for _ids, q in group][:3],
            }
        )
    return {"sections": sections}
