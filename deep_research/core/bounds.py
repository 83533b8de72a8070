"""What a number from outside may be (a model's reply, a flag, a setting, a request, a saved
session): one outside its bounds is refused, never clamped.

A limit is finite, positive and below a generous maximum on every surface (flags, settings,
HTTP, MCP, sessions): ``inf`` would be saved as JSON null (a session no one can load again),
NaN compares false with everything (no limit at all), and a figure past these is a typo, not
a budget.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field


def _unit_interval(value: float) -> float:
    if not 0.0 <= value <= 1.0:  # NaN too: it compares false with everything
        raise ValueError(f"must be a number from 0 to 1, not {value:g}")
    return value


UnitInterval = Annotated[
    float,
    AfterValidator(_unit_interval),
    Field(json_schema_extra={"minimum": 0, "maximum": 1}),
]
"""A model's 0-1 number (a confidence): a reply outside 0-1 is refused, never clamped
(1.6e10 is no confidence at all). The bounds are stated in the JSON schema too, for a server
that enforces them (OpenAI's strict structured outputs take ``minimum``/``maximum`` on
numbers, fine-tuned models excepted: their 400 names ``response_format``, and the next shape
is asked; checked 2026-11-27) and for a model that reads the schema in its prompt.
llama.cpp's grammars bound integers only (its json-schema-to-grammar.cpp), so there a model
may still write 8: this check refuses it after parsing, the structured path asks for a
repair (``adapters.llm.llm``), and the branch quotes its passages if none comes."""

MAX_COST_USD = 100_000.0
MAX_RUNTIME_SECONDS = 30 * 24 * 3600.0
MAX_TOTAL_TOKENS = 10_000_000_000
MAX_ITERATIONS = 50

CostUSD = Annotated[float, Field(gt=0, le=MAX_COST_USD, allow_inf_nan=False)]
"""A cost limit or budget in USD."""
RuntimeSeconds = Annotated[float, Field(gt=0, le=MAX_RUNTIME_SECONDS, allow_inf_nan=False)]
TokenBudget = Annotated[int, Field(ge=1000, le=MAX_TOTAL_TOKENS)]
Iterations = Annotated[int, Field(ge=1, le=MAX_ITERATIONS)]
