"""Run presets: one choice (``--preset``, ``DEEP_RESEARCH_PRESET``, a run option) that sets
the defaults of the settings that shape how far a run goes.

``PRESETS`` is the one table every surface goes by (the CLI, the HTTP API, the MCP server,
``doctor``). A preset only fills in what nobody chose: any of its settings given explicitly
— a flag, an environment variable, a `.env` entry, a run option over HTTP or MCP — wins
(``apply``). ``standard`` is the settings' own defaults, value for value. A run's preset is
saved in its ``RunSpec`` and replayed by ``resume``, whatever preset the environment names
then.

This module imports nothing of the application: ``config`` takes its ``Preset`` type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from deep_research.app.config import Settings

Preset = Literal["quick", "standard", "deep"]
DEFAULT_PRESET: Preset = "standard"

PRESETS: Mapping[str, Mapping[str, object]] = {
    "quick": {
        "max_iterations": 1,
        "max_nodes_per_plan": 4,
        "max_parallel_branches": 4,
        "web_reasoning_effort": "low",
        "web_max_tool_calls": 8,
        "summary_max_tokens": 2000,
        "report_max_sections": 4,
        "report_section_words": 500,
    },
    "standard": {
        "max_iterations": 3,
        "max_nodes_per_plan": 8,
        "max_parallel_branches": 4,
        "web_reasoning_effort": "high",
        "web_max_tool_calls": 16,
        "summary_max_tokens": 2000,
        "report_max_sections": 8,
        "report_section_words": 900,
    },
    "deep": {
        "max_iterations": 5,
        "max_nodes_per_plan": 12,
        "max_parallel_branches": 6,
        "web_reasoning_effort": "xhigh",
        "web_max_tool_calls": 32,
        "summary_max_tokens": 4000,
        "report_max_sections": 12,
        "report_section_words": 1200,
    },
}
"""Each preset's value of every setting a preset sets (the same settings in each)."""


def apply(settings: Settings, name: str | None = None) -> Settings:
    """``settings`` with preset ``name``'s values (default: ``settings.preset``) for every
    setting of the table not given explicitly — not in ``model_fields_set``, which holds
    what the environment, `.env`, a flag or an option set. The values it fills in stay
    unset, so applying another preset afterwards replaces them all."""
    preset = name or settings.preset
    given = set(settings.model_fields_set)
    chosen = {k: v for k, v in PRESETS[preset].items() if k not in given}
    applied = settings.with_overrides(preset=preset, **chosen)  # validated, like any value
    # Only the preset itself may count as given, and only if it was.
    object.__setattr__(applied, "__pydantic_fields_set__", given)
    return applied
