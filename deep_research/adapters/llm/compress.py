"""The compress chain: a long Deep Research report -> notes that keep its markers."""

from __future__ import annotations

from dataclasses import dataclass

from deep_research.adapters.llm.llm import ChatModel, load_prompt, words_tokens
from deep_research.core.memory import cap_tokens
from deep_research.core.ports import Meter

# Deep Research reports run to tens of thousands of tokens; the summarizer model reads at
# most this much of one (the report's structure puts the substance first).
MAX_REPORT_TOKENS = 60_000


@dataclass(frozen=True)
class LLMCompressor:
    model: ChatModel
    max_words: int = 700

    async def compress(self, question: str, report: str, meter: Meter) -> str:
        messages = load_prompt("compress").messages(
            max_words=self.max_words,
            question=question,
            report=cap_tokens(report, MAX_REPORT_TOKENS),
        )
        return await self.model.text(messages, meter, reply_tokens=words_tokens(self.max_words))
