"""The claim check (``adapters.claim_check``): built for a run from the settings
(``claim_checker``), and run on any saved session (``check_session``, ``deep-research check``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from deep_research.adapters.claim_check import ClaimChecker
from deep_research.adapters.claims import JUDGE_BATCH, RunSupportJudge, ToJudge, claims_text, prompt
from deep_research.adapters.llm.llm import ChatModel
from deep_research.app import engines
from deep_research.app.config import Settings
from deep_research.app.verify import judge_worst_usd
from deep_research.core.authoring import Reviser, WritingLimits
from deep_research.core.models import SessionState
from deep_research.core.ports import CheckJob, PriceBook


def claim_checker(
    settings: Settings,
    judge: ChatModel,
    prices: PriceBook,
    resources: AsyncExitStack,
    reviser: Reviser | None = None,
) -> ClaimChecker:
    """The claim check of a run with a model: cited pages read through the process's page
    reader (unless ``DEEP_RESEARCH_CHECK_FETCH=off``), uncertain verdicts settled by the judge
    model, and claims not supported sent back once to ``reviser`` (the sections' writer),
    out of what the run has left."""
    from deep_research.app.wiring import revision_worst_usd

    reader = None
    if settings.check_fetch:
        from deep_research.adapters.web.shared import SharedReader

        reader = SharedReader(engines.reader_settings(settings))
        resources.push_async_callback(reader.aclose)

    def worst(claims: Sequence[ToJudge]) -> float:
        batches = [claims[i : i + JUDGE_BATCH] for i in range(0, len(claims), JUDGE_BATCH)]
        return sum(
            judge_worst_usd(settings, prompt().messages(claims=claims_text(b)), prices)
            for b in batches
        )

    return ClaimChecker(
        reader=reader,
        judge=lambda meter: RunSupportJudge(judge, meter),
        judge_worst_usd=worst,
        reviser=reviser,
        revise_worst_usd=revision_worst_usd(settings, prices),
        max_revisions=WritingLimits().max_revisions,
    )


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
    from deep_research.adapters.llm.writing import LLMAuthor
    from deep_research.app import wiring
    from deep_research.app.clients import http_client
    from deep_research.core.report import assemble
    from deep_research.persistence.claims import SessionClaims
    from deep_research.persistence.sessions import SessionStore

    store = SessionStore(settings.sessions_dir)
    session_id = store.resolve(session_id)
    with store.lock(session_id):
        state = store.load(session_id)
        settings = wiring.replay(settings, state.run_spec, max_parallel=None)
        report = assemble(state)
        claims = SessionClaims(store.path(session_id))
        async with AsyncExitStack() as resources:
            if state.mode == "llm" and settings.has_model:
                http = http_client()
                resources.push_async_callback(http.aclose)
                judge = wiring.chat_model(settings, "judge", http)
                writer = wiring.chat_model(settings, "synthesizer", http)
                author = LLMAuthor(writer.capped(settings.section_max_tokens))
                prices = wiring.price_book(settings)
                checker = claim_checker(settings, judge, prices, resources, reviser=author)
            else:  # extractive: every claim is a quoted passage
                checker = ClaimChecker()
            guard = wiring.guard_for(settings, state)

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
        written = store.write_report(session_id, report.markdown, report.model_dump_json())
        state.report_path = str(written)
        store.save(state)
    return Checked(state, written, claims.path)
