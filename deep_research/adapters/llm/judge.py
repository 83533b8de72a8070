"""The judge chain: would the outlined report answer the question, and if not, what is
missing?"""

from __future__ import annotations

from dataclasses import dataclass, replace

from deep_research.adapters.llm.llm import VERDICT_TOKENS, ChatModel, load_prompt
from deep_research.core.models import Verdict
from deep_research.core.ports import JudgeRequest, Meter


@dataclass(frozen=True)
class LLMJudge:
    model: ChatModel

    async def judge(self, request: JudgeRequest, meter: Meter) -> Verdict:
        unmerged = f"\n\nFindings not yet merged into the summary:\n{request.unmerged}"
        messages = load_prompt("judge").messages(
            question=request.question,
            summary=(request.summary or "(empty)") + (unmerged if request.unmerged else ""),
            outline=request.outline,
            overview=request.overview,
        )
        # A verdict off its schema (a confidence outside 0-1 included: refused, never
        # clamped) is asked again once; then the step fails and the run has no verdict.
        model = replace(self.model, structured_retries=min(1, self.model.structured_retries))
        return await model.structured(Verdict, messages, meter, reply_tokens=VERDICT_TOKENS)
