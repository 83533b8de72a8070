"""Why a run stops: each phase returns the next phase or a ``Stop``; a limit the guard
reports becomes a ``Stop`` with the detail a reader of the report needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from deep_research.core.guard import BudgetGuard
from deep_research.core.models import StopReason

Phase = Literal["plan", "execute", "replan", "finished"]


@dataclass(frozen=True)
class Stop:
    """Why the loop ends, and the detail a reader of the report needs."""

    reason: StopReason
    detail: str


Step: TypeAlias = Phase | Stop
"""What a phase returns: the phase to run next, or the stop."""


LIMIT_DETAIL: dict[StopReason, str] = {
    "time_limit": "the run reached max_runtime_seconds",
    "token_limit": "the run reached max_total_tokens",
    "cost_limit": "the run reached its cost limit",
}


def limit_stop(guard: BudgetGuard) -> Stop | None:
    """The limit the run has reached, as a stop; None while within every limit."""
    reason = guard.stop_reason()
    return Stop(reason, LIMIT_DETAIL[reason]) if reason is not None else None
