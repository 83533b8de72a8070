"""The seams the orchestrator talks through. It knows these Protocols, nothing else.

Concrete adapters (LangChain chains, OpenAI Deep Research, the KB, the extractive
no-model mode) are built for a run from ``Settings`` in ``app/wiring.py``; tests pass
small scripted fakes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from deep_research.core.models import (
    Citation,
    EvidenceUnit,
    Plan,
    ResearchNode,
    Role,
    SessionState,
    SourceHint,
    Usage,
    Verdict,
    Writing,
)

if TYPE_CHECKING:
    from deep_research.core.ledger import ClaimLedger
    from deep_research.core.report import Report


class Meter(Protocol):
    """Where a model call reports its usage. Bound to a node (or to none)."""

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
        """Book one call. ``tier``: the service tier its reply says it ran on ("flex")."""

    def remaining_usd(self) -> float:
        """What the cost budget has left, net of work already in flight."""

    def remaining_tokens(self) -> int:
        """What the token budget has left, net of work already in flight."""

    async def reserve(self, amount_usd: float, tokens: int = 0) -> bool:
        """Claim part of the budget (dollars and tokens) for a call about to start. Waits
        while reservations of work in flight could still free enough; False when it cannot
        fit even then."""

    def release(self, amount_usd: float, tokens: int = 0) -> None:
        """Give back a reservation once the call's real usage is recorded (or it failed)."""


@dataclass(frozen=True)
class Finding:
    """A dependency's results as handed to a dependent branch."""

    node_id: str
    question: str
    notes: str
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class JobEvent:
    """What a remote research job is doing, as last seen: emitted by the executor on every
    poll so a 20-minute job is visibly alive. Immutable: the view keeps the latest per node."""

    node_id: str
    job_id: str
    model: str
    status: str
    """queued | in_progress | completed | failed | incomplete | cancelled"""
    polls: int
    elapsed_seconds: float
    note: str = ""
    """A one-off remark worth showing (a refused option, a transient failure)."""


BUILTIN_SOURCES: Mapping[SourceHint, str] = {
    "web": "public information on the web",
    "internal": "the user's own knowledge base (their documents, decisions, designs)",
    "mixed": "all of the sources above at once, when more than one matters",
}
"""The hints every run knows; a source may serve one of its own (``app/sources.py``)."""


@dataclass(frozen=True)
class BranchTask:
    node_id: str
    question: str
    root_question: str
    source_hint: SourceHint
    dependencies: tuple[Finding, ...] = ()
    # Remote jobs started by an earlier process (name -> response id): re-attach, don't resubmit.
    remote_jobs: dict[str, str] = field(default_factory=dict)
    session_id: str = ""
    """Named in messages about jobs that may be running without us (a lost create reply)."""
    on_event: Callable[[JobEvent], None] | None = None


@dataclass(frozen=True)
class BranchResult:
    """Notes use the marker ``[n]`` for ``citations[n-1]``; the orchestrator renumbers them."""

    notes: str
    citations: tuple[Citation, ...]
    confidence: float
    researched_by: str = ""
    """Which model (and effort) did the research, for the report; empty when obvious."""
    source_texts: tuple[str, ...] = ()
    """Each citation's whole source text, when longer than its ``quote`` (a KB chunk), for
    the evidence store only (``state.json`` keeps the quote); missing or "": the quote."""
    skipped: tuple[str, ...] = ()
    """Pages the search found and the branch could not read: "<url>: <the reader's reason>"."""
    consulted: tuple[str, ...] = ()
    """Pages its searches used that it does not cite (urls in the run's web scope)."""
    dropped: tuple[str, ...] = ()
    """Pages it was given as citations outside the run's web scope, left out of ``citations``."""


RemoteJobHook = Callable[[str, str | None], Awaitable[None]]
"""Called with (job name, ``CREATE_INTENT``) just before a paid create is sent, with (job
name, response id) the moment the job exists, and with (job name, None) once the provider
refused the create, confirmed a terminal status or a cancel, so the session can forget it.
The intent and the id are on disk when the call returns."""

CREATE_INTENT = "create-intent"
"""What ``RemoteJobHook`` is given before a paid create is sent: no response id is ever
this (the provider's ids start ``resp_``)."""


@dataclass(frozen=True)
class CancelOutcome:
    """What asking the provider to cancel one job came to."""

    status: Literal["cancelled", "already_finished", "unreachable"]
    usage: Usage | None = None
    """The job's final usage, when the provider reported one."""
    detail: str = ""


class JobControl(Protocol):
    """Cancels remote jobs by id: for a time limit (after the branches unwound) and for
    ``deep-research sessions cancel``."""

    async def cancel(self, job_id: str) -> CancelOutcome: ...


class BranchExecutor(Protocol):
    async def run(
        self, task: BranchTask, meter: Meter, on_remote_job: RemoteJobHook
    ) -> BranchResult:
        """Research one node. Raises ``BranchError`` for an expected failure."""


@dataclass(frozen=True)
class PlanRequest:
    question: str
    summary: str
    catalog: tuple[ResearchNode, ...]
    """A bounded window of existing nodes (ids the plan may depend on)."""
    gaps: Verdict | None
    max_tasks: int
    max_depth: int
    allowed_sources: tuple[SourceHint, ...]
    source_descriptions: Mapping[SourceHint, str] = field(
        default_factory=lambda: dict(BUILTIN_SOURCES)
    )
    """What each source holds, as the planner reads it."""


@dataclass
class WriteJob:
    """What the writing phase needs from the run."""

    state: SessionState
    meter: Meter
    save: Callable[[], Awaitable[None]]
    """Checkpoints the session (after each part written)."""
    deadline: float
    """Loop time by which every part must be written; one not written by then is quoted."""
    money: float
    """USD the phase may spend: the final reserve and whatever research left."""
    gaps: tuple[str, ...]
    """What the research did not cover, for the lead to say."""
    spare_usd: float = 0.0
    spare_tokens: int = 0
    """What research left beyond the final reserve: optional calls (condensing a section's
    evidence) spend only this, so they never cost research a job."""


class ReportWriter(Protocol):
    """The phase after research: outlines what is done (the judge reads the outline), then
    writes the report (``core.writing.SectionedWriter``)."""

    async def outline(self, state: SessionState, meter: Meter) -> Writing | None:
        """The outline of the done nodes (the saved one while current); None: no outline."""

    async def write(self, job: WriteJob) -> Report: ...


class EvidenceSink(Protocol):
    """The session's evidence store: a finished node's units are kept before the session
    counts them (``persistence.evidence``)."""

    async def keep(self, node_id: str, units: Sequence[EvidenceUnit]) -> None:
        """Keep ``units`` as the node's (replacing any it had: a rerun after a crash)."""


class ClaimStore(Protocol):
    """The session's evidence and claim ledger as the claim check reads and keeps them
    (``persistence.claims.SessionClaims``: ``evidence.jsonl`` and ``claims.json``)."""

    def units(self) -> list[EvidenceUnit]: ...

    def load(self) -> ClaimLedger | None:
        """The last check's ledger (None: none yet, or unreadable)."""

    def save(self, ledger: ClaimLedger) -> None: ...


@dataclass
class CheckJob:
    """What a phase after the writer needs from the run."""

    state: SessionState
    report: Report
    meter: Meter
    save: Callable[[], Awaitable[None]]
    """Checkpoints the session."""
    deadline: float
    """Loop time by which the check must end; what is not checked by then is said so."""
    money: float
    """USD the phase may spend (what the writer left of the final reserve and the run's)."""
    store: ClaimStore | None = None
    """Where the evidence is read and the ledger kept; None: nothing is saved."""


class ReportChecker(Protocol):
    """A phase after the writer: checks the report (its claims against their sources) and
    returns it with what it found."""

    async def check(self, job: CheckJob) -> Report: ...


class Planner(Protocol):
    async def plan(self, request: PlanRequest, meter: Meter) -> Plan: ...


@dataclass(frozen=True)
class NodeDigest:
    node_id: str
    question: str
    notes: str


class Summarizer(Protocol):
    async def merge(
        self, question: str, summary: str, digests: list[NodeDigest], cap_tokens: int, meter: Meter
    ) -> str:
        """Fold the digests into the rolling summary; the result must stay within the cap."""


@dataclass(frozen=True)
class JudgeRequest:
    question: str
    summary: str
    outline: str
    """The report's outline as planned from what is done (``writing.outline_text``)."""
    overview: str
    unmerged: str = ""
    """Done nodes' notes the summary does not hold yet (``context.unmerged``): the judge
    does not wait for the wave to be folded in."""


class Judge(Protocol):
    async def judge(self, request: JudgeRequest, meter: Meter) -> Verdict: ...


class PriceBook(Protocol):
    """What a call costs, in USD (``adapters.prices`` reads genai-prices and the user's
    overrides)."""

    def cost(self, model: str, usage: Usage, *, tier: str = "default") -> float:
        """``tier``: the service tier the call ran on, as its reply names it ("flex" costs
        half the tokens; web-search fees are the same on every tier)."""
