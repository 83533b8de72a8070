"""Run options are declared once (``app.options``): the HTTP API's bodies are those models,
the MCP tools' arguments are their fields, the CLI's ``run`` and ``resume`` take a flag for
each, and their bounds are the settings' own."""

from __future__ import annotations

import math
from typing import Any, Literal, get_args, get_origin

import pytest
import typer
from mcp import Client
from pydantic import BaseModel, ValidationError

from deep_research.app.config import Settings
from deep_research.app.options import (
    BudgetOverrides,
    ResearchRequest,
    ResumeRequest,
    RunOptions,
    option_settings,
)
from deep_research.core.errors import UsageError
from deep_research.frontends.cli import app
from deep_research.frontends.http.app import create_app
from deep_research.frontends.mcp.server import create_server
from deep_research.frontends.run_cli import CLI_ONLY
from deep_research.persistence.sessions import SessionStore

QUESTION = "When does a research node start?"
BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum")
STRING_BOUNDS = ("minLength", "maxLength", "pattern")


def value_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A property's schema without its ``null`` branch (an option's None: as configured)."""
    branches = [b for b in schema.get("anyOf", [schema]) if b.get("type") != "null"]
    assert len(branches) == 1, schema
    return branches[0]


def properties(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s fields as its JSON schema shows them (without the defaults, which
    FastAPI leaves out)."""
    shown = model.model_json_schema()["properties"]
    return {name: {k: v for k, v in s.items() if k != "default"} for name, s in shown.items()}


# --- the CLI ---------------------------------------------------------------------------


def cli_options(command: str) -> dict[str, Any]:
    """The run options ``command`` takes (its parameters but the CLI's own), by name."""
    group = typer.main.get_command(app)
    params = group.commands[command].params  # type: ignore[attr-defined]
    return {p.name: p for p in params if p.name not in CLI_ONLY}


CLI_TYPES: dict[Any, str] = {int: "integer", float: "number", bool: "boolean", str: "string"}
"""The type a flag reads -> the JSON schema type."""


@pytest.mark.parametrize(("command", "model"), [("run", RunOptions), ("resume", ResumeRequest)])
def test_every_option_is_a_flag_of_the_cli_and_every_flag_an_option(
    command: str, model: type[BaseModel]
) -> None:
    flags = cli_options(command)
    assert sorted(flags) == sorted(model.model_fields)
    for name, schema in properties(model).items():
        param, want = flags[name], value_schema(schema)
        reads = param.type_descriptor.annotation
        if get_origin(reads) is Literal:
            assert list(get_args(reads)) == want["enum"], name
        else:
            assert CLI_TYPES[reads] == want["type"], name
        # A flag may leave its bounds to the model (which names the flag, as the CLI's other
        # errors do); one that declares them declares the model's.
        if param.min is not None:
            assert param.min == want.get("minimum"), name
        if param.max is not None:
            assert param.max == want.get("maximum"), name
        if want["type"] == "boolean":
            assert param.is_flag, name
            assert param.default is False, name
        else:
            assert param.default is None, name  # not given: as configured (or as saved)
        # One text an option, one name: the flag says what the API and the tools say.
        assert param.help == model.model_fields[name].description, name
        assert param.opts[0].startswith("--"), name


def test_the_cli_names_the_flag_of_a_bad_value() -> None:
    with pytest.raises(UsageError, match=r"^--max-cost must be greater than 0 \(got -1\.0\)$"):
        RunOptions.parse({"max_cost_usd": -1.0}, {"max_cost_usd": "--max-cost"})
    with pytest.raises(UsageError, match=r"^--kb must be 1-63 letters.* \(got '\.\./notes'\)$"):
        RunOptions.parse({"kb_name": "../notes"}, {"kb_name": "--kb"})
    with pytest.raises(UsageError, match=r"^max_parallel must be .* \(got 65\)$"):
        ResumeRequest.parse({"max_parallel": 65})


# --- the settings ----------------------------------------------------------------------


SETTINGS_SCHEMA = Settings.model_json_schema(by_alias=False)["properties"]
OVERRIDES = sorted(
    {
        (option, setting)
        for model in (RunOptions, ResumeRequest)
        for option, settings in option_settings(model).items()
        for setting in settings
    }
)


def test_every_option_but_the_source_switches_overrides_a_setting() -> None:
    sets = option_settings(RunOptions) | option_settings(ResumeRequest)
    assert set(RunOptions.model_fields) - set(sets) == {"kb_only", "web_only"}
    assert set(ResumeRequest.model_fields) - set(sets) == {"retry_cancelled", "resubmit_lost"}
    assert all(setting in Settings.model_fields for names in sets.values() for setting in names)
    assert list(option_settings(RunOptions))[:5] == [*BudgetOverrides.model_fields, "max_parallel"]
    chat = list(RunOptions.model_fields).index("chat_model")
    assert chat < list(RunOptions.model_fields).index("planner_model"), "a role's own wins"


@pytest.mark.parametrize(("option", "setting"), OVERRIDES)
def test_an_option_has_the_bounds_of_the_setting_it_overrides(option: str, setting: str) -> None:
    model = RunOptions if option in RunOptions.model_fields else ResumeRequest
    mine = value_schema(properties(model)[option])
    theirs = value_schema(SETTINGS_SCHEMA[setting])
    assert mine["type"] == theirs["type"]
    for bound in BOUNDS + STRING_BOUNDS:
        if bound in theirs:
            assert mine.get(bound) == theirs[bound], bound


SAMPLES: dict[str, list[Any]] = {
    "integer": [-1, 0, 1, 3, 50, 51, 64, 65, 999, 1000, 10**10, 10**10 + 1],
    "number": [-1.0, 0.0, 0.5, 20.0, 1e5, 1e5 + 1, 2592000.0, 3e6, math.inf, math.nan],
    "string": [
        *("", " ", "gpt-5", "gpt 5", "x" * 200, "x" * 201, "a\tb", "é"),
        *("../notes", "notes", "high", "extreme", "search", "auto", "exa", "bing"),
    ],
}


@pytest.mark.parametrize(("option", "setting"), OVERRIDES)
def test_an_option_accepts_what_its_setting_accepts(option: str, setting: str) -> None:
    """The same values are refused by both (model names and knowledge-base names are
    checked by validators, which no schema shows)."""
    model = RunOptions if option in RunOptions.model_fields else ResumeRequest
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    for value in SAMPLES[value_schema(properties(model)[option])["type"]]:
        try:
            model.model_validate({option: value})
            accepted = True
        except ValidationError:
            accepted = False
        try:
            settings.with_overrides(**{setting: value})
            allowed = True
        except Exception:
            allowed = False
        assert accepted == allowed, (option, setting, value)


# --- the HTTP API and the MCP server -------------------------------------------------------


def test_the_openapi_description_shows_the_options_bounds_and_descriptions(
    offline: Settings,
) -> None:
    api = create_app(offline).openapi()
    schemas = api["components"]["schemas"]
    bodies = {
        "/research": "ResearchRequest",
        "/research/{session_id}/resume": "ResumeRequest",
    }
    for path, name in bodies.items():
        body = api["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        assert body["schema"]["$ref"] == f"#/components/schemas/{name}"
    for model in (ResearchRequest, ResumeRequest):
        shown = schemas[model.__name__]
        assert {
            name: {k: v for k, v in s.items() if k != "default"}
            for name, s in shown["properties"].items()
        } == properties(model)
        assert shown["additionalProperties"] is False
        for name, schema in shown["properties"].items():
            assert schema["description"], name
    cost = value_schema(schemas["ResearchRequest"]["properties"]["max_cost_usd"])
    assert (cost["exclusiveMinimum"], cost["maximum"]) == (0, 100_000)
    assert value_schema(schemas["ResumeRequest"]["properties"]["max_parallel"])["maximum"] == 64


def mcp_shown(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool argument's schema as ``properties`` shows a field: without its default and
    with no title (the SDK's are the parameters')."""
    return {k: v for k, v in schema.items() if k != "default"} | {"title": None}


async def test_the_mcp_tools_take_the_api_bodies_fields(offline: Settings) -> None:
    async with Client(create_server(offline)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    start, resume = tools["research_start"].input_schema, tools["research_resume"].input_schema
    want = {name: schema | {"title": None} for name, schema in properties(ResearchRequest).items()}
    assert {name: mcp_shown(s) for name, s in start["properties"].items()} == want
    assert start["required"] == ["question"]
    want = {name: schema | {"title": None} for name, schema in properties(ResumeRequest).items()}
    shown = {name: mcp_shown(s) for name, s in resume["properties"].items()}
    assert shown.pop("session_id")["description"]
    assert shown == want
    assert resume["required"] == ["session_id"]
    for schema in (start, resume):
        assert schema["additionalProperties"] is False
        assert all(p["description"] for p in schema["properties"].values())


async def test_options_given_to_the_mcp_tools_reach_the_run(offline: Settings) -> None:
    """What the HTTP API took and the MCP tools did not (max_parallel, a resume's)."""
    store = SessionStore(offline.sessions_dir)
    async with Client(create_server(offline)) as client:
        refused = await client.call_tool(
            "research_start", {"question": QUESTION, "planner_model": "gpt 5"}
        )
        assert refused.is_error
        assert "planner_model" in " ".join(getattr(b, "text", "") for b in refused.content)
        given = {"question": QUESTION, "max_parallel": 2, "max_iterations": 1, "kb_only": True}
        started = await client.call_tool("research_start", given)
        assert not started.is_error, started.content
        assert started.structured_content is not None
        session_id = started.structured_content["session_id"]
        await client.call_tool("research_follow", {"session_id": session_id})
        state = store.load(session_id)
        assert (state.run_spec.max_parallel, state.limits.max_iterations) == (2, 1)
        assert state.source_policy == "kb_only"
        again = {"session_id": session_id, "max_parallel": 3, "max_iterations": 2}
        resumed = await client.call_tool("research_resume", again)
        assert not resumed.is_error, resumed.content
        await client.call_tool("research_follow", {"session_id": session_id})
    state = store.load(session_id)
    assert (state.run_spec.max_parallel, state.limits.max_iterations) == (3, 2)


def test_a_research_request_is_the_question_and_its_run_options() -> None:
    request = ResearchRequest(question=QUESTION, max_parallel=2, web_engine="search")
    assert request.options == RunOptions(max_parallel=2, web_engine="search")
    assert list(ResearchRequest.model_fields) == ["question", *RunOptions.model_fields]
    with pytest.raises(ValidationError, match="max_cost"):
        ResearchRequest.model_validate({"question": QUESTION, "max_cost": 1})
    resume = ResumeRequest(max_cost_usd=2.0, max_parallel=3, retry_cancelled=True)
    assert resume.given() == {"max_cost_usd": 2.0}, "only the limits: what a resume changes"
