"""The branch chain: evidence passages (+ dependency findings) -> notes citing passages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.adapters.branches.protocols import Passage
from deep_research.adapters.llm.llm import ChatModel, load_prompt, words_tokens
from deep_research.core.memory import cap_tokens
from deep_research.core.models import BranchNotes
from deep_research.core.ports import Finding, Meter


@dataclass(frozen=True)
class LLMEvidenceWriter:
    model: ChatModel
    max_words: int = 400
    evidence_source: str = "the user's knowledge base"
    """What the passages are excerpts of, as the prompt tells the model."""

    async def write(
        self,
        root_question: str,
        question: str,
        passages: Sequence[Passage],
        dependencies: Sequence[Finding],
        meter: Meter,
    ) -> BranchNotes:
        evidence = "\n\n".join(
            f"[{i}] {p.label}\n{cap_tokens(p.text, 500)}" for i, p in enumerate(passages, start=1)
        )
        deps = "\n\n".join(f"### {d.question}\n{d.notes}" for d in dependencies)
        messages = load_prompt("branch").messages(
            max_words=self.max_words,
            evidence_source=self.evidence_source,
            root_question=root_question,
            question=question,
            dependencies=deps or "(none)",
            evidence=evidence or "(no passages found)",
        )
        return await self.model.structured(
            BranchNotes, messages, meter, reply_tokens=words_tokens(self.max_words) + 200
        )
