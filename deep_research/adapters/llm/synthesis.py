"""The synthesis chain: the rolling summary and its sources -> the cited answer."""

from __future__ import annotations

from dataclasses import dataclass

from deep_research.adapters.llm.llm import ChatModel, load_prompt
from deep_research.core.ports import Meter, SynthesisRequest


@dataclass(frozen=True)
class LLMSynthesizer:
    model: ChatModel

    async def synthesize(self, request: SynthesisRequest, meter: Meter) -> str:
        sources = "\n".join(
            f"[{s.ref}] {s.title or s.locator} ({s.url or s.locator})" for s in request.sources
        )
        mode_note = (
            "This is the final report."
            if request.final
            else "This is a draft that a judge will review for gaps."
        )
        messages = load_prompt("synthesize").messages(
            mode_note=mode_note,
            question=request.question,
            summary=request.summary or "(no findings)",
            sources=sources or "(none)",
            gaps="\n".join(f"- {g}" for g in request.gaps) or "(none)",
        )
        return await self.model.text(messages, meter)
