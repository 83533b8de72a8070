"""What one run is built from: its ports (``Engine``), its configuration (``RunConfig``),
where it is saved (``SessionSaver``) and who hears what it does (``Listener``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from deep_research.core.models import SessionState, SourceHint
from deep_research.core.ports import (
    BUILTIN_SOURCES,
    BranchExecutor,
    JobControl,
    JobEvent,
    Judge,
    Planner,
    ReportChecker,
    ReportWriter,
    Summarizer,
)
from deep_research.core.report import AssembledReport


@dataclass(frozen=True)
class RunConfig:
    max_depth: int = 3
    max_parallel: int = 4
    max_nodes_per_plan: int = 8
    summary_cap_tokens: int = 2000
    allowed_sources: tuple[SourceHint, ...] = ("web", "internal", "mixed")
    source_descriptions: Mapping[SourceHint, str] = field(
        default_factory=lambda: dict(BUILTIN_SOURCES)
    )
    """What each source holds, as the planner reads it (built-ins and registered ones)."""
    finish_grace_seconds: float = 120.0
    write_allowance_seconds: float = 0.0
    """Time kept for writing the report: research starts nothing once less is left."""


@dataclass(frozen=True)
class Engine:
    """The ports one run talks to, built from Settings in ``wiring.py`` (or fakes in tests)."""

    planner: Planner
    executor: BranchExecutor
    summarizer: Summarizer
    judge: Judge
    jobs: JobControl | None = None
    """Cancels remote jobs left in flight by a time limit; None when there are none."""
    writer: ReportWriter = field(default_factory=AssembledReport)
    """Outlines what is done (the judge reads it), and writes the report after research."""
    checkers: tuple[ReportChecker, ...] = ()
    """The phases after the writer, in order: each checks the report and returns it."""


class SessionSaver(Protocol):
    """What the orchestrator needs from a session store (``checkpoints.Checkpointer`` fits)."""

    async def save(self, state: SessionState) -> None: ...

    def save_now(self, state: SessionState) -> None: ...

    def save_jobs(self, state: SessionState, node_id: str) -> None:
        """Node ``node_id``'s paid-job intents and ids durable before this returns."""


Listener = Callable[[str | JobEvent], None]
"""Receives what the run is doing: one-line messages, and each remote job's latest state."""
