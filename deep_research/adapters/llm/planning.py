"""The planning chain: question + summary + judge's gaps -> a Plan of sub-questions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, create_model

from deep_research.adapters.llm.llm import ChatModel, load_prompt, plan_tokens
from deep_research.core.memory import cap_tokens
from deep_research.core.models import Plan, PlannedTask
from deep_research.core.ports import Meter, PlanRequest


def plan_schema(request: PlanRequest) -> type[Plan]:
    """``Plan`` whose ``source_hint`` may only name the sources this run offers, each
    described: the strict schema the model answers in, so a source registered by name
    reaches the planner with what it holds."""
    described = "; ".join(
        f"'{name}': {request.source_descriptions.get(name, name)}"
        for name in request.allowed_sources
    )
    allowed: Any = Literal[tuple(request.allowed_sources)]
    task = create_model(
        "PlannedTask",
        __base__=PlannedTask,
        source_hint=(allowed, Field(description=f"Where to research it. {described}.")),
    )
    tasks = Field(description=Plan.model_fields["tasks"].description)
    return create_model("Plan", __base__=Plan, tasks=(list[task], tasks))


@dataclass(frozen=True)
class LLMPlanner:
    model: ChatModel

    async def plan(self, request: PlanRequest, meter: Meter) -> Plan:
        catalog = "\n".join(
            f"- {n.id} [{n.status}, {n.source_hint}] {cap_tokens(n.question, 50)}"
            for n in request.catalog
        )
        gaps = "none yet: this is the first plan"
        if request.gaps is None and request.catalog:  # a replan whose judge gave no verdict
            gaps = "none: the judge gave no usable verdict; plan what the findings leave open"
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
            allowed_sources="\n".join(
                f"  - '{name}': {request.source_descriptions.get(name, name)}"
                for name in request.allowed_sources
            ),
            question=request.question,
            summary=request.summary or "(nothing yet)",
            catalog=catalog or "(none yet)",
            gaps=cap_tokens(gaps, 600),
        )
        return await self.model.structured(
            plan_schema(request), messages, meter, reply_tokens=plan_tokens(request.max_tasks)
        )
