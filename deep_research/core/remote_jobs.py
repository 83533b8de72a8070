"""Remote jobs left running when a time limit unwinds the branches: cancelled by their
saved ids, their cost recorded, an id forgotten only when the provider confirms."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from deep_research.core.engine import Listener
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import ResearchNode, SessionState, Usage
from deep_research.core.ports import JobControl


async def cancel_remote_jobs(
    state: SessionState,
    jobs: JobControl | None,
    guard: BudgetGuard,
    on_event: Listener,
    save: Callable[[], Awaitable[None]],
) -> None:
    """After a time limit: cancel the jobs the unwound branches left running, by their
    saved ids. An id is forgotten only when the provider confirms; the node stays pending
    (``resume`` researches it anew, or re-attaches where the cancel was not confirmed)."""
    owned = [
        (node, name, jid) for node in state.nodes.values() for name, jid in node.remote_jobs.items()
    ]
    if jobs is None or not owned:
        return
    outcomes = await asyncio.gather(*(jobs.cancel(jid) for _, _, jid in owned))
    model = state.run_spec.web_model or "unknown"
    for (node, name, jid), outcome in zip(owned, outcomes, strict=True):
        on_event(f"{node.id}: research job {jid} {outcome.status.replace('_', ' ')}")
        if outcome.status != "cancelled":
            # Unreachable: the id stays. Already finished: it stays too, so that resume
            # reads (and records) the finished result instead of paying for it again.
            continue
        guard.record(
            "deep_research",
            model,
            outcome.usage or Usage(),
            node_id=node.id,
            usage_unknown=outcome.usage is None,
            tier=state.run_spec.web_tier or "default",  # the tier it was sent to
        )
        node.remote_jobs.pop(name, None)
    await save()


LOST_JOB = "a research job may be running at the provider without its id"
"""The start of a node's error when a paid create was sent and its id never reached disk."""


def lost_job_reason(node: ResearchNode, session_id: str) -> str:
    """Why ``node`` is not researched again: its create (sent at the time of its intent) may
    have started a job the session cannot re-attach, and a second create would pay twice."""
    sent = min(node.job_intents.values()).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (
        f"{LOST_JOB} (its create was sent at {sent} and the process stopped before the id "
        "was saved); check the provider's dashboard. `deep-research resume "
        f"{session_id} --resubmit-lost` submits it again, paying for a second job"
    )
