"""Run presets: one choice (``--preset``, ``DEEP_RESEARCH_PRESET``, a run option) that sets
the defaults of the settings that shape how far a run goes.

``CHANGES`` is the one table every surface goes by (the CLI, the HTTP API, the MCP server,
``doctor``, the documentation's table): what each preset changes of the settings' own
defaults, which ``standard`` keeps as they are. A preset only fills in what nobody chose: any
of its settings given explicitly — a flag, an environment variable, a `.env` entry, a run
option over HTTP or MCP — wins (``apply``). A run's preset is saved in its ``RunSpec`` and
replayed by ``resume``, whatever preset the environment names then.
"""

from __future__ import annotations

from collections.abc import Mapping

from deep_research.app.config import Settings
from deep_research.app.setting_types import Preset

DEFAULT_PRESET: Preset = Settings.model_fields["preset"].default

CHANGES: Mapping[str, Mapping[str, object]] = {
    "quick": {
        "max_iterations": 1,
        "max_nodes_per_plan": 4,
        "web_effort": "low",
        "web_max_tool_calls": 8,
        "report_max_sections": 4,
        "report_section_words": 500,
    },
    "standard": {},
    "deep": {
        "max_iterations": 5,
        "max_nodes_per_plan": 12,
        "max_parallel": 6,
        "web_effort": "xhigh",
        "web_max_tool_calls": 32,
        "summary_max_tokens": 4000,
        "report_max_sections": 12,
        "report_section_words": 1200,
    },
}


def knobs() -> tuple[str, ...]:
    """The settings a preset sets (any preset changes), in the settings' own order."""
    changed = {name for change in CHANGES.values() for name in change}
    return tuple(name for name in Settings.model_fields if name in changed)


def values(preset: str) -> dict[str, object]:
    """``preset``'s value of each of ``knobs()``: its change, else the setting's default."""
    change = CHANGES[preset]
    return {k: change.get(k, Settings.model_fields[k].default) for k in knobs()}


def apply(settings: Settings, name: str | None = None) -> Settings:
    """``settings`` with preset ``name``'s values (default: ``settings.preset``) for every
    setting it sets that was not given explicitly — not in ``model_fields_set``, which holds
    what the environment, `.env`, a flag or an option set. The values it fills in stay
    unset, so applying another preset afterwards replaces them all."""
    preset = name or settings.preset
    given = set(settings.model_fields_set)
    chosen = {k: v for k, v in values(preset).items() if k not in given}
    applied = settings.with_overrides(preset=preset, **chosen)  # validated, like any value
    # Only the preset itself may count as given, and only if it was.
    object.__setattr__(applied, "__pydantic_fields_set__", given)
    return applied
