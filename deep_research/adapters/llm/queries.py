"""The query chain: a sub-question (and what was tried) -> 1-3 web search queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deep_research.adapters.llm.llm import ChatModel, load_prompt
from deep_research.core.memory import cap_tokens
from deep_research.core.models import SearchQueries
from deep_research.core.ports import Finding, Meter


@dataclass(frozen=True)
class LLMQueryWriter:
    model: ChatModel

    async def queries(
        self,
        root_question: str,
        question: str,
        dependencies: Sequence[Finding],
        tried: Sequence[str],
        max_queries: int,
        meter: Meter,
    ) -> list[str]:
        deps = "\n\n".join(f"### {d.question}\n{cap_tokens(d.notes, 200)}" for d in dependencies)
        messages = load_prompt("queries").messages(
            max_queries=max_queries,
            root_question=root_question,
            question=question,
            dependencies=deps or "(none)",
            tried="\n".join(f"- {q}" for q in tried) or "(none yet)",
        )
        reply = await self.model.structured(
            SearchQueries, messages, meter, reply_tokens=60 * max_queries + 100
        )
        return reply.queries
