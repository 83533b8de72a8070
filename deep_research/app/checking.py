"""The claim check (``adapters.claim_check``): a run's own (``claim_checker``, built by
``wiring``), and ``deep-research check ID`` on any saved session (``check_session``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from deep_research.adapters.claim_check import ClaimChecker
from deep_research.adapters.claims import JUDGE_BATCH, RunSupportJudge, ToJudge, claims_text, prompt
from deep_research.adapters.llm.llm import ChatModel
from deep_research.adapters.llm.writing import LLMAuthor
from deep_research.app import reserves, run_spec
from deep_research.app.chat import chat_model, chat_server
from deep_research.app.clients import http_client, reader_settings
from deep_research.app.config import Settings
from deep_research.app.saved import sessions
from deep_research.core.authoring import Reviser, WritingLimits
from deep_research.core.guard import BudgetGuard
from deep_research.core.models import SessionState
from deep_research.core.ports import CheckJob, PriceBook, ReportChecker
from deep_research.core.report import assemble, footer
from deep_research.persistence.cache import ResultCache

if TYPE_CHECKING:
    from deep_research.adapters.branches.protocols import Page
    from deep_research.adapters.web.shared import SharedReader


@dataclass(frozen=True)
class Checked:
    state: SessionState
    report_path: str
    ledger_path: str | None


async def check_session(settings: Settings, session_id: str) -> Checked:
    """Check the claims of a saved session's report (``deep-research check ID``), inside its
    lock: the report as it stands is assembled from the session, checked (only what no
    earlier check settled), and written again with its marks; ``claims.json`` beside it.
    The judge is paid for out of what the session's cost limit has left."""
    store = sessions(settings)
    session_id = store.resolve(session_id)
    with store.lock(session_id):
        state = store.load(session_id)
        settings = run_spec.replay(settings, state.run_spec, max_parallel=None)
        report = assemble(state)
        claims = store.claims(session_id)
        async with AsyncExitStack() as resources:
            checker, guard = build_check(settings, state, resources)

            async def save() -> None:
                await asyncio.to_thread(store.save, state)

            report = await checker.check(
                CheckJob(
                    state=state,
                    report=report,
                    meter=guard.meter(),
                    save=save,
                    deadline=asyncio.get_running_loop().time() + state.limits.max_runtime_seconds,
                    money=guard.remaining_usd() + guard.final_reserve_usd,
                    store=claims,
                )
            )
        report = report.model_copy(update={"footer": footer(state)})  # the judge's spend too
        written = store.write_report(session_id, report.markdown, report.model_dump_json())
        state.report_path = str(written)
        store.save(state)
    return Checked(state, written, store.claims_location(session_id))


def section_author(settings: Settings, synthesizer: ChatModel) -> LLMAuthor:
    """The report's sections' writer, also the claim check's reviser."""
    return LLMAuthor(
        synthesizer.capped(settings.section_max_tokens, "DEEP_RESEARCH_SECTION_MAX_TOKENS")
    )


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
    reader = None
    if settings.check_fetch:
        reader = FirstReadReader(settings)
        resources.push_async_callback(reader.aclose)

    def worst(claims: Sequence[ToJudge]) -> float:
        batches = [claims[i : i + JUDGE_BATCH] for i in range(0, len(claims), JUDGE_BATCH)]
        return sum(
            reserves.judge_worst_usd(settings, prompt().messages(claims=claims_text(b)), prices)
            for b in batches
        )

    return ClaimChecker(
        reader=reader,
        judge=lambda meter: RunSupportJudge(judge, meter),
        judge_worst_usd=worst,
        reviser=reviser,
        revise_worst_usd=reserves.revision_worst_usd(settings, prices),
        max_revisions=WritingLimits().max_revisions,
        scope=settings.web_scope(),
    )


@dataclass
class FirstReadReader:
    """The process's shared page reader (``adapters/web/shared.py``), loaded on the first page
    read: a run that cites no page (``--kb-only``) never imports trafilatura and its HTML
    parsers (~0.25 s of start-up)."""

    settings: Settings
    _reader: SharedReader | None = field(default=None, init=False)

    async def read(self, url: str) -> Page:
        if self._reader is None:
            from deep_research.adapters.web.shared import SharedReader  # trafilatura

            made = reader_settings(self.settings)
            self._reader = SharedReader(made, self.settings.web_scope())
        return await self._reader.read(url)

    async def aclose(self) -> None:
        if self._reader is not None:
            await self._reader.aclose()


def build_check(
    settings: Settings, state: SessionState, resources: AsyncExitStack
) -> tuple[ReportChecker, BudgetGuard]:
    """What ``deep-research check ID`` runs on a saved session (``settings`` replayed from
    it): its claim check, with a judge and a reviser when the session was written by a
    model (else every claim is a quoted passage), and its budget guard. What the check
    opens is closed with ``resources``."""
    guard = reserves.guard_for(settings, state)
    if state.mode != "llm" or not settings.has_model:
        return ClaimChecker(), guard
    http = http_client()
    resources.push_async_callback(http.aclose)
    cache = ResultCache(settings.cache_dir)
    resources.callback(cache.close)
    server = chat_server(settings, cache)
    judge = chat_model(settings, "judge", http, server)
    author = section_author(settings, chat_model(settings, "synthesizer", http, server))
    prices = reserves.price_book(settings)
    return claim_checker(settings, judge, prices, resources, reviser=author), guard
