"""A run's choices as its session records them (``record``), and today's settings with a
saved session's choices on top (``replay``), so that a resume, from any front-end, repeats
them exactly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from deep_research.app import presets, sources
from deep_research.app.config import Settings
from deep_research.core.models import ChatRole, RunSpec, WebEngine
from deep_research.core.scope import WebScope

if TYPE_CHECKING:
    from deep_research.adapters.web.openai_jobs import JobSpec

CHAT_ROLES: tuple[ChatRole, ...] = ("planner", "synthesizer", "judge", "branch", "summarizer")


def record(settings: Settings, spec: JobSpec | None, engine: WebEngine | None) -> RunSpec:
    """What a session records of its run's choices, so a resume repeats them exactly."""
    web = (
        {
            "web_model": spec.model,
            "web_effort": spec.reasoning_effort,
            "web_max_tool_calls": spec.max_tool_calls,
            "web_max_output_tokens": spec.max_output_tokens,
            "web_tier": spec.service_tier,
        }
        if spec is not None
        else {}
    )
    kind = sources.source(engine) if engine else None
    return RunSpec(
        **web,
        web_research=kind.shown(settings, spec) if kind else "",
        models={role: getattr(settings, f"{role}_model") for role in CHAT_ROLES},
        efforts={role: getattr(settings, f"{role}_reasoning_effort") for role in CHAT_ROLES},
        kb_name=settings.kb_name,
        max_parallel=settings.max_parallel,
        web_engine=engine,
        search_provider=settings.search_provider if kind and kind.searches else "",
        preset=settings.preset,
        scope=settings.web_scope(),
    )


def scope_settings(scope: WebScope) -> dict[str, str]:
    """The settings that give ``scope`` (``Settings.web_scope`` reads it back)."""
    return {
        "domains": ",".join(scope.domains),
        "exclude_domains": ",".join(scope.exclude_domains),
        "since": scope.since.isoformat() if scope.since else "",
        "location": scope.location,
    }


def replay(settings: Settings, saved: RunSpec, *, max_parallel: int | None) -> Settings:
    """Today's settings with a session's saved choices on top (only the budget flags, given
    separately, and ``--max-parallel`` override them).

    The run's own preset first, never the one the environment names today; settings given
    explicitly today still win over it, as they did when the run started. The saved web
    scope is replayed as saved, an empty one too (its ``since`` a date: the window the run
    started with)."""
    settings = presets.apply(settings, saved.preset or presets.DEFAULT_PRESET)
    values: dict[str, object] = {
        f"{role}_model": model for role, model in saved.models.items() if model
    }
    values |= {f"{role}_reasoning_effort": effort for role, effort in saved.efforts.items()}
    recorded = ("kb_name", "max_parallel", "web_engine", "search_provider", "web_tier")
    values |= {name: value for name in recorded if (value := getattr(saved, name))}  # 0, "": none
    values |= scope_settings(saved.scope)
    if saved.web_model:
        values |= {
            "web_model": saved.web_model,
            "web_effort": saved.web_effort or None,
            "web_max_tool_calls": saved.web_max_tool_calls or None,
            "web_max_output_tokens": saved.web_max_output_tokens or None,
        }
    replayed = settings.with_overrides(**values)
    if saved.efforts:
        # with_overrides skips None ("not given"); a saved "model default" effort is a choice.
        replayed = replayed.model_copy(
            update={f"{role}_reasoning_effort": e for role, e in saved.efforts.items()}
        )
    return replayed.with_overrides(max_parallel=max_parallel)
