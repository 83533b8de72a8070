"""What a client may choose for a run, declared once: names, types, bounds, descriptions.

``RunOptions`` (a new run's choices) and ``BudgetOverrides`` (what a resume may change of a
run's limits) are what the use-cases in ``lifecycle`` take. ``ResearchRequest`` and
``ResumeRequest`` add what a client sends with them (the question; ``max_parallel`` and
``retry_cancelled``): they are the HTTP API's bodies and the MCP tools' arguments as they
are, so the OpenAPI description and the tools' input schemas show these bounds and
descriptions, and the CLI's ``run`` and ``resume`` take a flag for each field
(``tests/test_options.py`` holds them to it). An option sets the setting of its name.

The bounds are the settings' own (``config``: the same types and checks), so an option
accepts what the setting it overrides accepts. Server-side caps (``runs``) come on top.
None leaves a setting as configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from deep_research.app.config import Settings
from deep_research.app.flags import FLAGS
from deep_research.app.setting_types import (
    KB_NAME_PATTERN,
    MAX_MODEL_NAME,
    Domains,
    Location,
    ParallelBranches,
    Preset,
    ReasoningEffort,
    SearchProviderChoice,
    Since,
    WebEngineChoice,
    kb_name,
    model_name,
)
from deep_research.core.bounds import CostUSD, Iterations, RuntimeSeconds, TokenBudget
from deep_research.core.errors import UsageError

CHAT_MODELS = (
    "planner_model",
    "branch_model",
    "summarizer_model",
    "synthesizer_model",
    "judge_model",
)
MAX_QUESTION_CHARS = 4000
"""The longest question (spaces collapsed); a request may carry twice as many characters."""


# Checked as the settings check them (their messages); the schema says the same.
ModelName = Annotated[
    str,
    Field(json_schema_extra={"minLength": 1, "maxLength": MAX_MODEL_NAME, "pattern": r"^\S+$"}),
    AfterValidator(model_name),
]
KbName = Annotated[
    str, Field(json_schema_extra={"pattern": KB_NAME_PATTERN}), AfterValidator(kb_name)
]


class Options(BaseModel):
    """Options refuse names they do not know (a typo would otherwise run on the defaults)
    and, once made, do not change."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Each option's description is its flag's one text (``flags``), written once."""
        for name, field in cls.model_fields.items():
            field.description = field.description or FLAGS[name].help
        cls.model_rebuild(force=True)

    @classmethod
    def parse(cls, values: Mapping[str, Any], flags: Mapping[str, str] | None = None) -> Self:
        """``values`` validated; a bad one is a usage error naming its flag (``flags``:
        field -> flag) or its field, with the value given."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise UsageError(problem(exc, flags or {})) from None


def problem(exc: ValidationError, flags: Mapping[str, str]) -> str:
    """The first thing wrong, in one line: ``--max-cost must be greater than 0 (got -1.0)``."""
    first = exc.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    name = loc[0] if loc else ""
    where = flags.get(name, ".".join(loc) or "options")
    why = " ".join(str(first["msg"]).split()).removeprefix("Value error, ")
    why = why.replace("Input should be", "must be").replace("String should", "must")
    if first["type"] in ("missing", "extra_forbidden") or repr(first.get("input")) in why:
        return f"{where}: {why}"  # (a parser's message may name the value itself)
    return f"{where} {why} (got {first.get('input')!r})"


class BudgetOverrides(Options):
    """A run's limits (``Limits``): what a resume may change, and a new run may set."""

    max_cost_usd: CostUSD | None = None
    max_iterations: Iterations | None = None
    max_total_tokens: TokenBudget | None = None
    max_runtime_seconds: RuntimeSeconds | None = None

    def given(self) -> dict[str, Any]:
        """The limits given (not None), by name: what they change of a run's ``Limits``."""
        return {
            name: value
            for name in BudgetOverrides.model_fields
            if (value := getattr(self, name)) is not None
        }


class RunOptions(BudgetOverrides):
    """What a front-end may choose for a new run; None leaves the setting as configured."""

    max_parallel: ParallelBranches | None = None
    preset: Preset | None = None
    chat_model: ModelName | None = None
    planner_model: ModelName | None = None
    branch_model: ModelName | None = None
    web_model: ModelName | None = None
    web_effort: ReasoningEffort | None = None
    web_tier: Literal["default", "flex"] | None = None
    web_engine: WebEngineChoice | None = None
    search_provider: SearchProviderChoice | None = None
    domains: Domains | None = None
    exclude_domains: Domains | None = None
    since: Since | None = None
    location: Location | None = None
    kb_name: KbName | None = None
    kb_only: bool = False
    web_only: bool = False


def option_settings(model: type[BaseModel] = RunOptions) -> dict[str, tuple[str, ...]]:
    """The settings each option of ``model`` sets: the one of its name (``chat_model``: every
    role's model), in the fields' order (``chat_model`` before the roles' own models, which
    then win). ``preparation.prepare`` applies them."""
    return {
        name: CHAT_MODELS if name == "chat_model" else (name,)
        for name in model.model_fields
        if name == "chat_model" or name in Settings.model_fields
    }


OPTION_SETTINGS = option_settings()


class Question(Options):
    """What every new run is given."""

    question: Annotated[
        str,
        Field(
            max_length=MAX_QUESTION_CHARS * 2,
            description="The research question, self-contained: put the context in it.",
        ),
    ]


class ResearchRequest(RunOptions, Question):  # Question's field first: the bases' in reverse
    """A new run: the question and its options (None: as configured)."""

    @property
    def options(self) -> RunOptions:
        return RunOptions.model_construct(**self.model_dump(exclude={"question"}))


class ResumeRequest(BudgetOverrides):
    """Continue a run, with the choices it started with; it may get new limits (None: the
    session's own)."""

    max_parallel: ParallelBranches | None = None
    retry_cancelled: bool = False
    resubmit_lost: bool = False
