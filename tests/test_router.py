"""Routing by source_hint, and merging KB + web evidence for mixed nodes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from deep_research.adapters.branches.router import Route, RoutingExecutor
from deep_research.core.errors import BranchError, BudgetExhausted
from deep_research.core.models import Citation
from deep_research.core.ports import (
    BranchExecutor,
    BranchResult,
    BranchTask,
    Meter,
    RemoteJobHook,
)


@dataclass(frozen=True)
class Unavailable:
    """An executor slot that explains why its source cannot be used."""

    reason: str

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        raise BranchError(self.reason)


@dataclass
class Answer:
    """A branch that answers with one citation, or raises what it is given."""

    label: str
    error: BaseException | None = None
    calls: int = 0

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        self.calls += 1
        if self.error is not None:
            raise self.error
        citation = Citation(kind="web", url=f"https://{self.label}.example", locator=self.label)
        by = "gpt-5.5 (effort high)" if self.label == "web" else ""
        return BranchResult(f"{self.label} says so [1].", (citation,), 0.6, by)


class NoMeter:
    def record(self, *args: object, **kwargs: object) -> None:
        raise AssertionError("routing records nothing itself")

    def remaining_usd(self) -> float:
        return 0.0

    def remaining_tokens(self) -> int:
        return 0

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        return False

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        pass


async def no_jobs(name: str, response_id: str | None) -> None:
    pass


def two(web: BranchExecutor, internal: BranchExecutor) -> RoutingExecutor:
    """The two built-in sources, as every run has them."""
    return RoutingExecutor(
        {"internal": Route(internal, "knowledge base"), "web": Route(web, "web")}
    )


def task(hint: str) -> BranchTask:
    return BranchTask("n1", "q?", "root?", hint)  # type: ignore[arg-type]


async def test_routes_by_source_hint() -> None:
    web, kb = Answer("web"), Answer("kb")
    router = two(web=web, internal=kb)
    assert (await router.run(task("web"), NoMeter(), no_jobs)).notes == "web says so [1]."
    assert (await router.run(task("internal"), NoMeter(), no_jobs)).notes == "kb says so [1]."
    assert (web.calls, kb.calls) == (1, 1)


async def test_mixed_merges_both_with_markers_shifted() -> None:
    router = two(web=Answer("web"), internal=Answer("kb"))
    result = await router.run(task("mixed"), NoMeter(), no_jobs)
    assert [c.locator for c in result.citations] == ["kb", "web"]
    assert "kb says so [1]." in result.notes
    assert "web says so [2]." in result.notes
    assert result.researched_by == "gpt-5.5 (effort high)", "the report names the web model"


async def test_mixed_keeps_the_half_that_worked_and_says_which_failed() -> None:
    router = two(web=Unavailable("web research is off"), internal=Answer("kb"))
    result = await router.run(task("mixed"), NoMeter(), no_jobs)
    assert result.notes.startswith("kb says so [1].")
    assert "web part failed: web research is off" in result.notes


async def test_mixed_fails_only_when_both_fail() -> None:
    router = two(web=Unavailable("no web"), internal=Unavailable("no kb"))
    with pytest.raises(BranchError, match="knowledge base: no kb; web: no web"):
        await router.run(task("mixed"), NoMeter(), no_jobs)


async def test_budget_stops_are_not_branch_failures() -> None:
    router = two(web=Answer("web", BudgetExhausted("no money")), internal=Answer("kb"))
    with pytest.raises(BudgetExhausted):
        await router.run(task("mixed"), NoMeter(), no_jobs)


async def test_unavailable_source_fails_the_node_with_its_reason() -> None:
    router = two(web=Answer("web"), internal=Unavailable("run `kb ingest` first"))
    with pytest.raises(BranchError, match="kb ingest"):
        await router.run(task("internal"), NoMeter(), no_jobs)


async def test_any_number_of_sources_route_by_name_and_merge_under_mixed() -> None:
    arxiv = Answer("arxiv")
    router = RoutingExecutor(
        {
            "internal": Route(Answer("kb"), "knowledge base"),
            "web": Route(Answer("web"), "web"),
            "arxiv": Route(arxiv, "arXiv preprints"),
        }
    )
    assert (await router.run(task("arxiv"), NoMeter(), no_jobs)).notes == "arxiv says so [1]."
    merged = await router.run(task("mixed"), NoMeter(), no_jobs)
    assert [c.locator for c in merged.citations] == ["kb", "web", "arxiv"]
    assert "**From the arXiv preprints**\n\narxiv says so [3]." in merged.notes
    assert merged.researched_by == "gpt-5.5 (effort high)"
    with pytest.raises(BranchError, match=r"unknown source 'wiki'.*internal, web, arxiv, mixed"):
        await router.run(task("wiki"), NoMeter(), no_jobs)


async def test_mixed_says_which_of_many_sources_failed() -> None:
    router = RoutingExecutor(
        {
            "internal": Route(Answer("kb"), "knowledge base"),
            "web": Route(Answer("web"), "web"),
            "arxiv": Route(Unavailable("arXiv is down"), "arXiv preprints"),
        }
    )
    merged = await router.run(task("mixed"), NoMeter(), no_jobs)
    assert [c.locator for c in merged.citations] == ["kb", "web"]
    assert merged.notes.endswith("_(arXiv preprints part failed: arXiv is down)_")
