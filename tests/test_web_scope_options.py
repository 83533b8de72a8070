"""The web scope as a run option: declared once (``app.options``), a flag of ``run``, an
argument of the HTTP API and the MCP tools; a relative ``--since`` resolved to a date when
the run is prepared, saved in the run spec, and replayed by ``resume`` whatever today's
settings say."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest
from mcp import Client

from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.core.errors import UsageError
from deep_research.frontends.mcp.server import create_server
from deep_research.persistence.sessions import SessionStore
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI
from tests.world import ResearchWorld, plan_task, verdict

QUESTION = "Which vector databases compact deleted rows in the background?"
SCOPE_FLAGS = (
    *("--domains", "https://www.Example.com/docs, docs.example.org"),
    *("--exclude-domains", "spam.example.com"),
    *("--since", "90d"),
    *("--location", "Berlin, de"),
)
BERLIN = {"type": "approximate", "city": "Berlin", "country": "DE"}


def web_search_tools(fake: FakeOpenAI) -> list[dict[str, Any]]:
    """The web search tool of every research job the fake was asked to start, in order."""
    creates = [r.body for r in fake.requests if r.path == "/v1/responses"]
    return [tool for body in creates for tool in body["tools"] if tool["type"] == "web_search"]


def test_a_resume_reads_the_scope_the_run_started_with(
    env: dict[str, str], fake_openai: FakeOpenAI
) -> None:
    ResearchWorld(
        plans=[[plan_task("t1")], [plan_task("t2")]], verdicts=[verdict(False), verdict(True)]
    ).install(fake_openai)
    first = run_json(env, QUESTION, *SCOPE_FLAGS, "--max-iterations", "1")
    session_id = first["session_id"]
    since = (date.today() - timedelta(days=90)).isoformat()
    saved = session_state(env, session_id)["run_spec"]["scope"]
    assert saved == {
        "domains": ["example.com", "docs.example.org"],
        "exclude_domains": ["spam.example.com"],
        "since": since,  # a date, not "90d": the window the run started with
        "location": "Berlin, DE",
    }
    # Today's settings say otherwise: the session's own scope wins on resume.
    today = env | {
        "DEEP_RESEARCH_DOMAINS": "elsewhere.org",
        "DEEP_RESEARCH_SINCE": "7d",
        "DEEP_RESEARCH_LOCATION": "Lyon, FR",
    }
    resumed = run_json(today, "resume", session_id, "--max-iterations", "2")
    assert resumed["status"] == "complete"
    assert session_state(env, session_id)["run_spec"]["scope"] == saved
    before, after = web_search_tools(fake_openai)  # one job before the resume, one after
    assert before == after
    assert before == {
        "type": "web_search",
        "filters": {"allowed_domains": ["example.com", "docs.example.org"]},
        "user_location": BERLIN,
    }


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--since", "yesterday", "--since: 'yesterday' is not a date (say 2025-01-01, or 90d)"),
        ("--domains", "example.com, not a domain", "--domains 'not a domain' is not a domain"),
        ("--exclude-domains", "localhost", "--exclude-domains: 'localhost' is not a domain"),
        ("--location", "Berlin, Germany", "end a location with a two-letter country code"),
        ("--web-tier", "slow", "--web-tier must be 'default' or 'flex' (got 'slow')"),
    ],
)
def test_a_bad_scope_value_is_one_usage_line_naming_its_flag(
    env: dict[str, str], fake_openai: FakeOpenAI, flag: str, value: str, said: str
) -> None:
    code, _, err = cli(env, QUESTION, flag, value)
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert said in err
    assert flag in err
    assert not fake_openai.requests, "refused before anything is asked or spent"


def test_the_options_read_the_scope_as_its_settings_do() -> None:
    options = RunOptions.parse(
        {"domains": " Example.COM,www.example.com ", "since": " 12w ", "location": "paris, fr"}
    )
    assert (options.domains, options.since, options.location) == (
        "example.com",
        "12w",
        "paris, FR",
    )
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    for name in ("domains", "since"):
        for value in ("", "2025-01-01", "90d", "example.com", "x", "2025-13-01"):
            try:
                RunOptions.parse({name: value})
                accepted = True
            except UsageError:
                accepted = False
            try:
                settings.with_overrides(**{name: value})
                allowed = True
            except Exception:
                allowed = False
            assert accepted == allowed, (name, value)


async def test_the_mcp_tools_take_the_scope_and_the_run_saves_it(offline: Settings) -> None:
    given = {
        "question": QUESTION,
        "kb_only": True,
        "max_iterations": 1,
        "domains": "example.com",
        "exclude_domains": "spam.example.com",
        "since": "2025-01-01",
        "location": "DE",
        "web_tier": "flex",
    }
    async with Client(create_server(offline)) as client:
        refused = await client.call_tool("research_start", given | {"since": "soon"})
        assert refused.is_error
        assert "since" in " ".join(getattr(b, "text", "") for b in refused.content)
        started = await client.call_tool("research_start", given)
        assert not started.is_error, started.content
        assert started.structured_content is not None
        session_id = started.structured_content["session_id"]
        await client.call_tool("research_follow", {"session_id": session_id})
    scope = SessionStore(offline.sessions_dir).load(session_id).run_spec.scope
    assert scope.domains == ("example.com",)
    assert scope.exclude_domains == ("spam.example.com",)
    assert scope.since == date(2025, 1, 1)
    assert scope.user_location() == {"type": "approximate", "country": "DE"}
