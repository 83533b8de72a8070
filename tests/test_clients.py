"""One builder for OpenAI SDK clients, with an explicit policy per purpose."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from deep_research.adapters.web.openai_jobs import ResponsesJobs
from deep_research.app import clients
from deep_research.app.config import Settings


async def test_each_purpose_has_its_own_retry_and_timeout_policy(tmp_path: Path) -> None:
    settings = Settings(
        home=tmp_path,
        openai_api_key=SecretStr("sk-test"),
        max_retries=7,
        request_timeout_seconds=90.0,
        _env_file=None,  # type: ignore[call-arg]
    )
    async with clients.openai_client(settings, "jobs") as jobs:
        assert (jobs.max_retries, jobs.timeout) == (7, 90.0)
        # A research job's create is never resent, whatever the client's policy.
        assert ResponsesJobs(jobs)._create_client.max_retries == 0
    async with clients.openai_client(settings, "lookup") as lookup:
        assert (lookup.max_retries, lookup.timeout) == (1, 30.0)
    async with clients.openai_client(settings, "probe") as probe:
        assert (probe.max_retries, probe.timeout) == (0, 30.0)
    quick = settings.model_copy(update={"request_timeout_seconds": 5.0})
    async with clients.openai_client(quick, "lookup") as lookup:
        assert lookup.timeout == 5.0
