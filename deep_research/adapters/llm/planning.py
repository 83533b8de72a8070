"""The planning chain: question + summary + judge's gaps -> a Plan of sub-questions."""

from __future__ import annotations

from dataclasses import dataclass

from deep_research.adapters.llm.llm import ChatModel, load_prompt
from deep_research.core.memory import cap_tokens
from deep_research.core.models import Plan
from deep_research.core.ports import Meter, PlanRequest


@dataclass(frozen=True)
class LLMPlanner:
    model: ChatModel

    async def plan(self, request: PlanRequest, meter: Meter) -> Plan:
        catalog = "\n".join(
            f"- {n.id} [{n.status}, {n.source_hint}] {cap_tokens(n.question, 50)}"
            for n in request.catalog
        )
        gaps = "none yet: this is the first plan"
        if request.gaps is not None:
            verdict = request.gaps
            gaps = "\n".join(
                [f"confidence {verdict.overall_confidence:.2f}"]
                + [f"- missing: {m}" for m in verdict.missing_aspects[:10]]
                + [f"- weak evidence: {w}" for w in verdict.weak_evidence_areas[:10]]
            )
        messages = load_prompt("planner").messages(
            max_tasks=request.max_tasks,
            max_depth=request.max_depth,
            allowed_sources=", ".join(request.allowed_sources),
            question=request.question,
            summary=request.summary or "(nothing yet)",
            catalog=catalog or "(none yet)",
            gaps=cap_tokens(gaps, 600),
        )
        return await self.model.structured(Plan, messages, meter)
