"""What every command shares: the --json option and how a run is summarised as JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from deep_research.core.models import SessionState

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON object on stdout, nothing else.")
]


def run_summary(state: SessionState) -> dict[str, Any]:
    from deep_research.core.budget import totals

    spend = totals(state.ledger)
    return {
        "session_id": state.session_id,
        "status": state.status,
        "stop_reason": state.stop_reason,
        "report_path": state.report_path,
        "usage": {
            **spend.usage.model_dump(),
            "total_tokens": spend.usage.total_tokens,
            "cost_usd": round(spend.cost_usd, 6),
        },
    }


def print_json(value: object) -> None:
    """The one JSON object a ``--json`` command prints on stdout (and nothing else there)."""
    sys.stdout.write(json.dumps(value, default=str) + "\n")
