"""What every command shares: the --json option, how a run is summarised as JSON, and an
error as JSON (the HTTP API's codes)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from deep_research.core.errors import (
    ConfigError,
    DeepResearchError,
    KnowledgeBaseError,
    ProviderError,
    SessionError,
    SessionLocked,
    StorageError,
    UsageError,
)

if TYPE_CHECKING:
    from deep_research.core.models import SessionState
    from deep_research.kb.search import Hit

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON value on stdout, nothing else.")
]


def run_summary(state: SessionState) -> dict[str, Any]:
    from deep_research.core.budget import totals  # lazy: 8 ms of `--help`

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
        "evidence_units": state.evidence_units,
        "claims": state.claims.model_dump(mode="json") if state.claims else None,
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
        "title": hit.title,
        "tags": list(hit.tags),
        "lines": [hit.start_line, hit.end_line],
        "score": hit.score,
        "text": hit.text,
        "locator": hit.locator,
    }


ERROR_CODES: tuple[tuple[type[DeepResearchError], str], ...] = (
    (SessionLocked, "session_busy"),
    (SessionError, "unknown_session"),
    (UsageError, "bad_request"),
    (ConfigError, "invalid_settings"),
    (KnowledgeBaseError, "knowledge_base"),
    (ProviderError, "provider_failed"),
    (StorageError, "storage"),
    (DeepResearchError, "failed"),
)
"""Each error's stable code (most specific first): the HTTP API's, so a script reads one
set. Beyond these: ``interrupted`` (Ctrl-C) and ``internal`` (a bug)."""


def error_code(exc: DeepResearchError) -> str:
    return next(code for kind, code in ERROR_CODES if isinstance(exc, kind))


def error_json(code: str, message: str, exit_code: int) -> dict[str, Any]:
    """A failed ``--json`` command's one object: ``{"error": {code, message, exit_code}}``."""
    return {"error": {"code": code, "message": " ".join(message.split()), "exit_code": exit_code}}


def print_json(value: object) -> None:
    """The one JSON value a ``--json`` command prints on stdout, and nothing else there (a
    stream, ``sessions watch --json``, prints one a line): one line, UTF-8 text as it is
    (not ``\\u`` escapes), anything not JSON as its ``str``."""
    sys.stdout.write(json.dumps(value, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()  # ``sessions watch --json`` streams one per event
