"""The rolling summary: finished nodes' notes folded in, a bounded batch per call, never
past its cap; a failed merge falls back to appending the newest notes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from deep_research.core import context
from deep_research.core.engine import Listener
from deep_research.core.errors import ProviderError
from deep_research.core.guard import BudgetGuard
from deep_research.core.memory import cap_tokens, estimate_tokens
from deep_research.core.models import SessionState
from deep_research.core.ports import NodeDigest, Summarizer


async def fold_summary(
    state: SessionState,
    summarizer: Summarizer,
    guard: BudgetGuard,
    cap: int,
    save: Callable[[], Awaitable[None]],
    on_event: Listener,
) -> None:
    """Merge finished nodes' notes into the rolling summary, a bounded batch per call."""
    while True:
        folded = set(state.summarized)
        todo = [n for n in state.nodes.values() if n.status == "done" and n.id not in folded]
        if not todo or guard.stop_reason() in ("token_limit", "cost_limit"):
            return
        batch = context.take_batch(todo, cap // 2)
        digests = [NodeDigest(n.id, n.question, cap_tokens(n.notes, cap // 2)) for n in batch]
        try:
            merged = await summarizer.merge(
                state.question, state.summary, digests, cap, guard.meter()
            )
        except ProviderError as exc:
            # Keep going on a plain merge: losing the summary would blind the judge.
            # The newest findings go in whole; the old summary gives up the room.
            on_event(f"summarizer failed ({exc}); appending notes instead")
            new = "\n\n".join(d.notes for d in digests)
            room = cap - estimate_tokens(new)
            old = cap_tokens(state.summary, room) if room > 0 else ""
            merged = "\n\n".join(part for part in (old, new) if part).strip()
        state.summary = cap_tokens(merged, cap)
        state.summarized.extend(n.id for n in batch)
        await save()
