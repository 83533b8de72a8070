"""Small scripted fakes of the orchestrator's ports: they record calls and refuse surprises.

A surprise either way fails the test: a call past the end of a script at once, a scripted
step never used at teardown. Every ``Rig`` registers itself with ``tracked_rigs`` (opened
for each test by an autouse fixture in ``conftest.py``), which then checks all of them; a
test that means to leave steps unused says so with ``rig.allow_leftovers(reason)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from deep_research.adapters.prices import PriceTable
from deep_research.core.authoring import (
    CondenseRequest,
    LeadRequest,
    OutlineRequest,
    PlannedSection,
    SectionRequest,
)
from deep_research.core.engine import Engine, RunConfig
from deep_research.core.errors import BranchError, ProviderError
from deep_research.core.guard import BudgetGuard
from deep_research.core.memory import estimate_tokens
from deep_research.core.models import (
    Citation,
    Limits,
    Plan,
    PlannedTask,
    Role,
    SessionState,
    Usage,
    Verdict,
    Writing,
)
from deep_research.core.orchestrator import ResearchOrchestrator
from deep_research.core.ports import (
    BranchResult,
    BranchTask,
    JobControl,
    JudgeRequest,
    Meter,
    NodeDigest,
    PlanRequest,
    RemoteJobHook,
)
from deep_research.core.report import Report, assemble
from deep_research.core.writing import SectionedWriter

T = TypeVar("T")


def task(tid: str, *deps: str, source: str = "web", **extra: object) -> PlannedTask:
    fields: dict[str, object] = {
        "id": tid,
        "question": f"What about {tid}?",
        "depends_on": list(deps),
        "parallelizable": True,
        "priority": 5,
        "source_hint": source,
        "parent_id": None,
    }
    fields.update(extra)
    return PlannedTask.model_validate(fields)


def plan(*tasks: PlannedTask) -> Plan:
    return Plan(rationale="scripted", tasks=list(tasks))


def verdict(complete: bool, *missing: str) -> Verdict:
    return Verdict(
        is_complete=complete,
        recommend_more_iterations=not complete,
        missing_aspects=list(missing),
        weak_evidence_areas=[],
        overall_confidence=0.9 if complete else 0.4,
    )


@dataclass
class RecordingMeter:
    """A ``Meter`` that records every call and holds a simple budget for reservations."""

    budget: float = 100.0
    reserved: float = 0.0
    token_budget: int = 10_000_000
    reserved_tokens: int = 0
    records: list[tuple[Role, str, Usage, bool]] = field(default_factory=list)
    unknown: int = 0
    tiers: list[str] = field(default_factory=list)
    """The service tier of each record, in order."""

    def record(
        self,
        role: Role,
        model: str,
        usage: Usage,
        *,
        cached: bool = False,
        usage_unknown: bool = False,
        tier: str = "default",
    ) -> None:
        self.records.append((role, model, usage, cached))
        self.unknown += usage_unknown
        self.tiers.append(tier)

    def remaining_usd(self) -> float:
        return self.budget - self.reserved

    def remaining_tokens(self) -> int:
        return self.token_budget - self.reserved_tokens

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        if amount_usd > self.remaining_usd() or tokens > self.remaining_tokens():
            return False
        self.reserved += amount_usd
        self.reserved_tokens += tokens
        return True

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        self.reserved -= amount_usd
        self.reserved_tokens -= tokens


class Script(Generic[T]):
    """A FIFO of scripted replies; popping past the end is a test failure."""

    def __init__(self, name: str, replies: list[T]) -> None:
        self.name = name
        self.replies = replies  # shared: popping consumes the script

    def pop(self) -> T:
        assert self.replies, f"unexpected extra call to the {self.name}"
        return self.replies.pop(0)

    def leftovers(self) -> list[str]:
        return [f"{self.name} reply never asked for: {reply!r}" for reply in self.replies]


@dataclass
class FakePlanner:
    plans: list[Plan | Exception]
    requests: list[PlanRequest] = field(default_factory=list)
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=100, output_tokens=50))

    async def plan(self, request: PlanRequest, meter: Meter) -> Plan:
        self.requests.append(request)
        meter.record("planner", "gpt-4.1", self.usage)
        reply = self.script().pop()
        if isinstance(reply, Exception):
            raise reply
        return reply

    def script(self) -> Script[Plan | Exception]:
        return Script("planner", self.plans)


@dataclass
class FakeExecutor:
    """Answers each node with notes citing one URL; ``fail`` / ``raise_for`` script errors.

    A scripted error or gate is a step: one whose node never ran is left over."""

    fail: dict[str, str] = field(default_factory=dict)
    raise_for: dict[str, BaseException] = field(default_factory=dict)
    gate: dict[str, asyncio.Event] = field(default_factory=dict)
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=1000, output_tokens=200))
    model: str = "gpt-4.1-mini"
    tasks: list[BranchTask] = field(default_factory=list)
    started: dict[str, asyncio.Event] = field(default_factory=dict)
    fired: set[str] = field(default_factory=set)

    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        self.tasks.append(task)
        self.started.setdefault(task.node_id, asyncio.Event()).set()
        if task.node_id in self.gate:
            await self.gate[task.node_id].wait()
        if task.node_id in self.raise_for:
            self.fired.add(task.node_id)
            raise self.raise_for[task.node_id]
        meter.record("branch", self.model, self.usage)
        if task.node_id in self.fail:
            self.fired.add(task.node_id)
            raise BranchError(self.fail[task.node_id])
        url = f"https://example.org/{task.node_id}"
        citation = Citation(kind="web", url=url, title=f"Page {task.node_id}", locator=url)
        return BranchResult(f"Finding about {task.node_id} [1].", (citation,), 0.8)

    def ran(self) -> list[str]:
        return [t.node_id for t in self.tasks]

    def leftovers(self) -> list[str]:
        errors: dict[str, object] = {**self.fail, **self.raise_for}
        left = [
            f"executor error for {n} never raised: {e!r}"
            for n, e in errors.items()
            if n not in self.fired
        ]
        return left + [
            f"executor gate for {n} never reached" for n in self.gate if n not in self.started
        ]


@dataclass
class FakeSummarizer:
    calls: list[list[NodeDigest]] = field(default_factory=list)

    async def merge(
        self, question: str, summary: str, digests: list[NodeDigest], cap_tokens: int, meter: Meter
    ) -> str:
        self.calls.append(digests)
        meter.record("summarizer", "gpt-4.1-mini", Usage(input_tokens=10, output_tokens=10))
        return "\n".join([summary, *(d.notes for d in digests)]).strip()


@dataclass
class FakeAuthor:
    """The report's author: no outline of its own (the writer groups the tree), a section
    that lists its evidence, a lead that lists the key points. Fails a section whose title
    is in ``fail_titles``, and waits ``section_seconds`` per section."""

    sections: list[SectionRequest] = field(default_factory=list)
    leads: list[LeadRequest] = field(default_factory=list)
    condensed: list[CondenseRequest] = field(default_factory=list)
    fail_titles: tuple[str, ...] = ()
    fail_condense: bool = False
    section_seconds: float = 0.0

    async def outline(self, request: OutlineRequest, meter: Meter) -> list[PlannedSection]:
        meter.record("synthesizer", "gpt-4.1", Usage(input_tokens=10, output_tokens=10))
        return []

    async def section(self, request: SectionRequest, meter: Meter) -> str:
        self.sections.append(request)
        if self.section_seconds:
            await asyncio.sleep(self.section_seconds)
        meter.record("synthesizer", "gpt-4.1", Usage(input_tokens=10, output_tokens=10))
        if request.section.title in self.fail_titles:
            raise ProviderError("the model failed")
        return "\n\n".join(request.evidence) or "Nothing was found."

    async def condense(self, request: CondenseRequest, meter: Meter) -> str:
        """Each line's facts (its figures) with its markers, in order, within the request's
        token limit: the words around them are what condensing drops."""
        self.condensed.append(request)
        meter.record("synthesizer", "gpt-4.1", Usage(input_tokens=10, output_tokens=10))
        if self.fail_condense:
            raise ProviderError("the model failed")
        kept: list[str] = []
        for line in request.evidence:
            facts = " ".join(w for w in line.split() if any(c.isdigit() for c in w))
            if estimate_tokens("\n".join([*kept, facts])) > request.max_tokens:
                break
            kept.append(facts)
        return "\n".join(kept)

    async def lead(self, request: LeadRequest, meter: Meter) -> str:
        self.leads.append(request)
        meter.record("synthesizer", "gpt-4.1", Usage(input_tokens=10, output_tokens=10))
        return " ".join(p for _t, points in request.sections for p in points) or "No answer."


@dataclass
class FakeJudge:
    verdicts: list[Verdict | Exception]
    requests: list[JudgeRequest] = field(default_factory=list)

    async def judge(self, request: JudgeRequest, meter: Meter) -> Verdict:
        self.requests.append(request)
        meter.record("judge", "gpt-4.1", Usage(input_tokens=10, output_tokens=10))
        reply = self.script().pop()
        if isinstance(reply, Exception):
            raise reply
        return reply

    def script(self) -> Script[Verdict | Exception]:
        return Script("judge", self.verdicts)


class MemorySaver:
    """A SessionSaver that keeps its snapshots, as JSON, like the real one writes, and a
    job journal as the real one's: a node's jobs as they stood, read over the snapshot
    taken before them (``persistence.jobs``), never a whole state."""

    def __init__(self) -> None:
        self.saved: list[str] = []
        self.saved_now = 0
        self.journal: list[tuple[int, str, dict[str, str], dict[str, datetime]]] = []
        """(snapshots taken before the line, node id, its remote jobs, its job intents)"""

    async def save(self, state: SessionState) -> None:
        self.saved.append(state.model_dump_json())

    def save_now(self, state: SessionState) -> None:
        self.saved_now += 1
        self.saved.append(state.model_dump_json())

    def save_jobs(self, state: SessionState, node_id: str) -> None:
        node = state.nodes[node_id]
        self.journal.append(
            (len(self.saved), node_id, dict(node.remote_jobs), dict(node.job_intents))
        )

    @property
    def saved_jobs(self) -> list[tuple[str, dict[str, str]]]:
        return [(node_id, jobs) for _, node_id, jobs, _ in self.journal]

    def last(self) -> SessionState:
        """The state a resume would read: the last snapshot, the lines after it replayed."""
        state = SessionState.model_validate_json(self.saved[-1])
        for after, node_id, jobs, intents in self.journal:
            if after == len(self.saved) and node_id in state.nodes:
                state.nodes[node_id].remote_jobs = dict(jobs)
                state.nodes[node_id].job_intents = dict(intents)
        return state


@dataclass
class Rig:
    planner: FakePlanner
    executor: FakeExecutor
    judge: FakeJudge
    summarizer: FakeSummarizer = field(default_factory=FakeSummarizer)
    author: FakeAuthor = field(default_factory=FakeAuthor)
    saver: MemorySaver = field(default_factory=MemorySaver)
    jobs: JobControl | None = None
    leftovers_allowed: str | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if _tracking:
            _tracking[-1].append(self)

    def orchestrator(
        self,
        state: SessionState,
        *,
        config: RunConfig | None = None,
        clock: Callable[[], float] | None = None,
        final_reserve_usd: float = 0.0,
    ) -> ResearchOrchestrator:
        engine = Engine(
            self.planner,
            self.executor,
            self.summarizer,
            self.judge,
            self.jobs,
            writer=SectionedWriter(self.author),
        )
        kwargs = {"clock": clock} if clock else {}
        guard = BudgetGuard(
            state,
            state.limits,
            prices=PriceTable(),
            final_reserve_usd=final_reserve_usd,
            **kwargs,
        )
        return ResearchOrchestrator(state, engine, self.saver, guard, config or RunConfig())

    def leftovers(self) -> list[str]:
        """Every scripted step nothing asked for."""
        left = self.planner.script().leftovers() + self.judge.script().leftovers()
        if isinstance(self.executor, FakeExecutor):
            left += self.executor.leftovers()
        return left

    def allow_leftovers(self, reason: str) -> None:
        """This test leaves steps unused on purpose; at least one must be left."""
        assert reason.strip(), "say why the script is not used up"
        self.leftovers_allowed = reason

    def assert_scripts_consumed(self) -> None:
        left = self.leftovers()
        assert not left, "scripted steps left over:\n" + "\n".join(left)

    def check_at_teardown(self) -> None:
        """What the autouse fixture asserts of every rig once its test has passed."""
        if self.leftovers_allowed is None:
            self.assert_scripts_consumed()
        else:
            assert self.leftovers(), (
                f"allow_leftovers({self.leftovers_allowed!r}), but every step was used"
            )


_tracking: list[list[Rig]] = []


@contextmanager
def tracked_rigs() -> Iterator[list[Rig]]:
    """Collects every ``Rig`` built inside the block (innermost block only)."""
    rigs: list[Rig] = []
    _tracking.append(rigs)
    try:
        yield rigs
    finally:
        _tracking.remove(rigs)


def new_state(question: str = "What is the question?", **limits: float) -> SessionState:
    return SessionState(session_id="abc123def456", question=question, limits=Limits(**limits))


def with_answer(state: SessionState, answer: str) -> SessionState:
    """``state`` as if its writer had written ``answer`` as the report's lead (no sections),
    for tests of the report's frame: sources, checks, escaping, status."""
    done = [n.id for n in state.nodes.values() if n.status == "done"]
    state.writing = Writing(covers=done, sections=[], lead=answer, lead_status="written")
    return state


def answer_report(state: SessionState, answer: str) -> str:
    """The report markdown of ``state`` with ``answer`` as its lead."""
    return assemble(with_answer(state, answer)).markdown


def answer_assembled(state: SessionState, answer: str) -> Report:
    """The report of ``state`` with ``answer`` as its lead, as data."""
    return assemble(with_answer(state, answer))
