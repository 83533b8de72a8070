"""The summary chain: fold new node notes into the capped rolling summary."""

from __future__ import annotations

from dataclasses import dataclass

from deep_research.adapters.llm.llm import ChatModel, load_prompt
from deep_research.core.ports import Meter, NodeDigest


@dataclass(frozen=True)
class LLMSummarizer:
    model: ChatModel

    async def merge(
        self, question: str, summary: str, digests: list[NodeDigest], cap_tokens: int, meter: Meter
    ) -> str:
        findings = "\n\n".join(f"### {d.question}\n{d.notes}" for d in digests)
        messages = load_prompt("summarize").messages(
            cap_tokens=cap_tokens,
            cap_words=int(cap_tokens * 0.75),
            question=question,
            summary=summary or "(empty)",
            findings=findings,
        )
        return await self.model.text(
            messages,
            meter,
            reply_tokens=cap_tokens + 200,
            sized_by="DEEP_RESEARCH_SUMMARY_MAX_TOKENS",
        )
