"""OpenAI research jobs: each web branch is a background Responses job of a reasoning
model with the ``web_search`` tool (``adapters/web/openai_jobs.py``), its report
compressed into notes by the summarizer model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deep_research.adapters.prices import PriceTable
from deep_research.app.clients import openai_client
from deep_research.app.config import Settings
from deep_research.app.sources import Executor, Source, SourceRun, WorstCase, job_spec
from deep_research.core.budget import web_job_worst_case
from deep_research.persistence.slots import job_slots

if TYPE_CHECKING:
    from deep_research.adapters.branches.slots import JobSlots
    from deep_research.adapters.web.openai_jobs import JobSpec


def _build(run: SourceRun) -> Executor:
    # Lazy: openai and LangChain load when a run builds the source, not with a server.
    from deep_research.adapters.branches.openai_research import DeepResearchExecutor
    from deep_research.adapters.llm.compress import LLMCompressor
    from deep_research.adapters.web.openai_jobs import ResponsesJobs

    assert run.chat is not None, "resolve() uses this source only with a model"
    settings = run.settings
    client = openai_client(settings, "jobs", run.http)
    executor = DeepResearchExecutor(
        client,
        spec=run.spec or job_spec(settings),
        prices=run.prices,
        max_wait_seconds=settings.web_max_wait_seconds,
        poll_seconds=settings.web_poll_seconds,
        compressor=LLMCompressor(run.chat("summarizer")),
        cache=run.cache,
        kb_tool=run.kb_tool,
        slots=_team_slots(settings),
    )
    return Executor(executor, ResponsesJobs(client))


def _team_slots(settings: Settings) -> JobSlots | None:
    """The team's cap on research jobs in flight, when there is a team and a cap."""
    limit = settings.team_max_research_jobs
    if settings.database_url is None or limit is None:
        return None
    return job_slots(settings.database_url.get_secret_value(), limit)


def _worst_case(
    settings: Settings, prices: PriceTable, chat_usd: float, spec: JobSpec | None
) -> WorstCase:
    spec = spec or job_spec(settings)
    per_job = web_job_worst_case(  # at the default tier, as the reservation (flex or not)
        prices,
        spec.model,
        max_tool_calls=spec.max_tool_calls,
        max_output_tokens=spec.max_output_tokens,
    )
    return WorstCase(per_job, spec.describe(), "web research job")


SOURCE = Source(
    name="openai",
    serves="web",
    title="web",
    build=_build,
    needs_model=True,
    worst_case=_worst_case,
    describe=lambda settings, spec: f"OpenAI research jobs ({(spec or job_spec(settings)).model})",
    runs_jobs=True,
    warm_modules=(
        "deep_research.adapters.branches.openai_research",
        "deep_research.adapters.llm.compress",
    ),
)
