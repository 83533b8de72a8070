"""Largest prompt of any model call with 50 nodes vs 5: the real chains and Deep Research
executor, built by ``wiring.build`` from Settings, against the loopback fake OpenAI server.

Each plan has independent nodes, short chains, and one node depending on all the others
(the worst case for dependency context). Every chat message and Deep Research input the
server receives is measured in characters.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from deep_research.adapters.prices import PriceTable
from deep_research.app.config import Settings
from deep_research.app.preparation import Prepared
from deep_research.app.sources import resolve
from deep_research.app.wiring import build
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import Limits
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.persistence.sessions import SessionStore
from tests.fake_openai import FakeOpenAI
from tests.fake_openai_payloads import input_text, text_of
from tests.fakes import MemorySaver
from tests.world import ResearchWorld, plan_task


def growth_plan(n: int) -> list[dict[str, Any]]:
    tasks = []
    for i in range(1, n):
        deps = [f"t{i - 1}"] if i % 4 == 0 else []
        tasks.append(plan_task(f"t{i}", *deps))
    tasks.append(plan_task("all", *(f"t{i}" for i in range(1, n))))
    return tasks


def prompt_chars(body: Any) -> int:
    if not isinstance(body, dict):
        return 0
    if "messages" in body:
        return sum(len(text_of(m.get("content"))) for m in body["messages"])
    if "input" in body:
        return len(input_text(body["input"]))
    return 0


async def largest_prompt(n: int, home: Path) -> int:
    with FakeOpenAI(polls_to_complete=1) as fake:
        ResearchWorld(plans=[growth_plan(n)]).install(fake)
        settings = Settings(
            _env_file=None,
            openai_base_url=fake.base_url,
            openai_api_key="bench",
            home=home,
            max_nodes_per_plan=n,
            max_parallel=8,
            web_poll_seconds=0.01,
        )
        # What is measured is the Deep Research executor's input: its research jobs, named
        # here as the CLI's engine choice would name them (build leaves the web off without).
        limits = Limits(max_iterations=1, max_cost_usd=1000)
        prepared = Prepared(settings, "web_only", limits, None, "How do X and Y compare?", "openai")
        web = resolve(settings, "web_only", kb=False, web="openai")
        runtime = build(prepared, web, None, SessionStore(settings.sessions_dir))
        state = runtime.state
        orch = ResearchOrchestrator(
            state,
            runtime.engine,
            MemorySaver(),
            BudgetGuard(state, state.limits, prices=PriceTable()),
            runtime.config,
        )
        async with runtime.resources:
            await orch.run()
        done = sum(1 for node in state.nodes.values() if node.status == "done")
        assert done == n, f"only {done}/{n} nodes finished: {state.stop_reason} {state.stop_detail}"
        return max(prompt_chars(r.body) for r in fake.requests if r.method == "POST")


def bench_prompt_growth(few: int = 5, many: int = 50) -> dict[str, float]:
    """The figure keeps its name at other sizes (the smoke run's)."""
    with tempfile.TemporaryDirectory() as tmp:
        small = asyncio.run(largest_prompt(few, Path(tmp) / "few"))
        large = asyncio.run(largest_prompt(many, Path(tmp) / "many"))
    return {
        "largest_prompt_chars_5": small,
        "largest_prompt_chars_50": large,
        "max_prompt_growth_5_to_50": large / small,
    }
