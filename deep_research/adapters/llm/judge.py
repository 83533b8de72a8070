"""The judge chain: would the outlined report answer the question, and if not, what is
missing?"""

from __future__ import annotations

from dataclasses import dataclass

from deep_research.adapters.llm.llm import VERDICT_TOKENS, ChatModel, load_prompt
from deep_research.core.models import Verdict
from deep_research.core.ports import JudgeRequest, Meter


@dataclass(frozen=True)
class LLMJudge:
    model: ChatModel

    async def judge(self, request: JudgeRequest, meter: Meter) -> Verdict:
        messages = load_prompt("judge").messages(
            question=request.question,
            summary=(request.summary or "(empty)")
            + (
                f"\n\nFindings not yet merged into the summary:\n{request.unmerged}"
                if request.unmerged
                else ""
            ),
            outline=request.outline,
            overview=request.overview,
        )
        verdict = await self.model.structured(Verdict, messages, meter, reply_tokens=VERDICT_TOKENS)
        confidence = min(1.0, max(0.0, verdict.overall_confidence))
        return verdict.model_copy(update={"overall_confidence": confidence})
