"""``deep-research check ID``: the claim check (``adapters.claim_check``) run on any saved
session. A run's own check is built by ``wiring.claim_checker``."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from deep_research.app import run_spec, wiring
from deep_research.app.config import Settings
from deep_research.core.models import SessionState
from deep_research.core.ports import CheckJob
from deep_research.core.report import assemble, footer
from deep_research.persistence.claims import SessionClaims
from deep_research.persistence.sessions import SessionStore


@dataclass(frozen=True)
class Checked:
    state: SessionState
    report_path: Path
    ledger_path: Path


async def check_session(settings: Settings, session_id: str) -> Checked:
    """Check the claims of a saved session's report (``deep-research check ID``), inside its
    lock: the report as it stands is assembled from the session, checked (only what no
    earlier check settled), and written again with its marks; ``claims.json`` beside it.
    The judge is paid for out of what the session's cost limit has left."""
    store = SessionStore(settings.sessions_dir)
    session_id = store.resolve(session_id)
    with store.lock(session_id):
        state = store.load(session_id)
        settings = run_spec.replay(settings, state.run_spec, max_parallel=None)
        report = assemble(state)
        claims = SessionClaims(store.path(session_id))
        async with AsyncExitStack() as resources:
            checker, guard = wiring.build_check(settings, state, resources)

            async def save() -> None:
                await asyncio.to_thread(store.save, state)

            loop = asyncio.get_running_loop()
            report = await checker.check(
                CheckJob(
                    state=state,
                    report=report,
                    meter=guard.meter(),
                    save=save,
                    deadline=loop.time() + state.limits.max_runtime_seconds,
                    money=guard.remaining_usd() + guard.final_reserve_usd,
                    store=claims,
                )
            )
        report = report.model_copy(update={"footer": footer(state)})  # the judge's spend too
        written = store.write_report(session_id, report.markdown, report.model_dump_json())
        state.report_path = str(written)
        store.save(state)
    return Checked(state, written, claims.path)
