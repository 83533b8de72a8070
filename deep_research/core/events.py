"""A run's events: what a follower (``sessions watch``, an SSE client, an MCP client) sees.

Pure: `RunObserver` turns what the orchestrator says (free-text progress and ``JobEvent``)
into typed `RunEvent`s, and diffs the session after each one, so every node's change of
status and every change of spend becomes an event even when nothing said it.

Invariants:
- Events are emitted in the order things happened; ``id`` is given by the log that stores
  them (``persistence.events``), increasing within a session across resumes.
- A node event carries the node's status as of the event; ``spend`` follows any event
  that changed the ledger; ``end`` is the last event of a run (finished, stopped,
  interrupted or failed), and a resume starts with ``start`` again.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from deep_research.core.budget import totals
from deep_research.core.models import SessionState, utcnow
from deep_research.core.ports import JobEvent

EventType = Literal["start", "message", "node", "job", "spend", "stop", "report", "end"]
TERMINAL: frozenset[EventType] = frozenset({"end"})


class RunEvent(BaseModel):
    id: int = 0
    """Increasing within the session; 0 until the log stores it."""
    at: datetime = Field(default_factory=utcnow)
    type: EventType
    node_id: str | None = None
    message: str = ""
    """One line a person reads: ``done t2``, ``t1: research job resp_… in progress``."""
    data: dict[str, Any] = Field(default_factory=dict)


class RunObserver:
    """Feeds ``emit`` the events of one run of ``state`` (a new run, or a resume)."""

    def __init__(self, state: SessionState, emit: Callable[[RunEvent], object]) -> None:
        self.state = state
        self._emit = emit
        self._statuses: dict[str, str] = {n.id: n.status for n in state.nodes.values()}
        self._spend = self._spent()

    def start(self, *, resumed: bool) -> None:
        word = "resumed" if resumed else "started"
        message = f"session {self.state.session_id} {word}"
        self._say("start", message, question=self.state.question, resumed=resumed)

    def __call__(self, message: str | JobEvent) -> None:
        """The orchestrator's listener: the message itself, then what it changed."""
        if isinstance(message, JobEvent):
            self._say(
                "job",
                message.note or f"{message.node_id}: {message.status}",
                message.node_id,
                job_id=message.job_id,
                model=message.model,
                status=message.status,
                polls=message.polls,
                elapsed_seconds=round(message.elapsed_seconds, 1),
                note=message.note,
            )
        else:
            self._say("message", message)
        self.changed()

    def changed(self) -> None:
        """Emit an event per node whose status changed, and the spend if it changed."""
        for node in sorted(self.state.nodes.values(), key=lambda n: n.created_at):
            if self._statuses.get(node.id) == node.status:
                continue
            self._statuses[node.id] = node.status
            detail = f": {node.error}" if node.error else ""
            self._say(
                "node",
                f"{node.id} {node.status}{detail}",
                node.id,
                status=node.status,
                question=node.question,
                source_hint=node.source_hint,
                depends_on=list(node.depends_on),
                error=node.error,
                cost_usd=round(node.cost_usd, 6),
                iteration=node.iteration,
            )
        spend = self._spent()
        if spend != self._spend:
            self._spend = spend
            cost, tokens = spend
            self._say("spend", f"${cost:.4f} · {tokens:,} tokens", cost_usd=cost, tokens=tokens)

    def end(self, *, report_path: str | None, failure: str = "") -> None:
        """The run is over (finished, stopped, interrupted, or ``failure``): the last event."""
        self.changed()
        state = self.state
        if state.stop_reason is not None:
            detail = f" ({state.stop_detail})" if state.stop_detail else ""
            message = f"stopped: {state.stop_reason}{detail}"
            self._say("stop", message, stop_reason=state.stop_reason, detail=state.stop_detail)
        if report_path:
            self._say("report", f"report: {report_path}", path=report_path)
        status = "failed" if failure else state.status
        message = f"session {state.session_id}: {status}" + (f" ({failure})" if failure else "")
        self._say("end", message, status=status, stop_reason=state.stop_reason, error=failure)

    def _say(self, type_: EventType, message: str, node_id: str | None = None, **data: Any) -> None:
        self._emit(RunEvent(type=type_, node_id=node_id, message=message, data=data))

    def _spent(self) -> tuple[float, int]:
        spend = totals(self.state.ledger)
        return round(spend.cost_usd, 6), spend.usage.total_tokens
