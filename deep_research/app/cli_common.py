"""What every command shares: the --json option and how a run is summarised as JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from deep_research.core.models import SessionState
    from deep_research.kb.search import Hit

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


def session_detail(state: SessionState, report_path: str | None) -> dict[str, Any]:
    """``sessions show --json``, and the HTTP API's status of a run: the same object."""
    node_fields = {
        "id",
        "question",
        "status",
        "source_hint",
        "depends_on",
        "parent_id",
        "confidence",
        "cost_usd",
        "error",
        "remote_jobs",
        "researched_by",
    }
    return run_summary(state) | {
        "question": state.question,
        "created_at": state.created_at.isoformat(),
        "iteration": state.iteration,
        "report_path": report_path,
        "run_spec": state.run_spec.model_dump(),
        "nodes": [n.model_dump(mode="json", include=node_fields) for n in state.nodes.values()],
    }


def hit_json(hit: Hit) -> dict[str, object]:
    """A knowledge-base search hit, as ``kb search --json`` and the servers give it."""
    return {
        "chunk_id": hit.chunk_id,
        "root": hit.root,
        "source": hit.source,
        "heading": hit.heading,
        "lines": [hit.start_line, hit.end_line],
        "score": hit.score,
        "text": hit.text,
        "locator": hit.locator,
    }


def print_json(value: object) -> None:
    """The one JSON object a ``--json`` command prints on stdout (and nothing else there)."""
    sys.stdout.write(json.dumps(value, default=str) + "\n")
