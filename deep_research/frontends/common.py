"""What every command shares: the --json option, how a run is summarised as JSON, an error
as JSON (the HTTP API's codes) and how a report is printed."""

from __future__ import annotations

import json
import re
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
    from deep_research.core.report import Report
    from deep_research.frontends.remote import Remote
    from deep_research.kb.search import Hit

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON value on stdout, nothing else.")
]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--server",
        metavar="URL",
        help="Through a running service (`deep-research serve`), with DEEP_RESEARCH_API_TOKEN, "
        "instead of here (DEEP_RESEARCH_SERVER_URL).",
    ),
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
        "resume": resume_hint(state),
        "run_spec": state.run_spec.model_dump(),
        "nodes": [n.model_dump(mode="json", include=node_fields) for n in state.nodes.values()],
    }


def resume_hint(state: SessionState) -> str | None:
    """``deep-research resume ID`` for an interrupted run (its status as shown)."""
    return f"deep-research resume {state.session_id}" if state.status == "interrupted" else None


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


ERROR_CODES: tuple[tuple[type[DeepResearchError], str, int], ...] = (
    (SessionLocked, "session_busy", 409),
    (SessionError, "unknown_session", 404),
    (UsageError, "bad_request", 400),
    (ConfigError, "invalid_settings", 422),
    (KnowledgeBaseError, "knowledge_base", 422),
    (ProviderError, "provider_failed", 502),
    (StorageError, "storage", 507),
    (DeepResearchError, "failed", 500),
)
"""Each error's stable code (most specific first), one set for the CLI's ``--json`` and the
HTTP API, and its HTTP status there. Beyond these: ``interrupted`` (Ctrl-C) and
``internal`` (a bug)."""


def service(server: str | None) -> Remote | None:
    """The running service a command goes to: ``--server``, else DEEP_RESEARCH_SERVER_URL
    (read as ``sessions list`` reads the data directory, no other setting); None: the
    command runs here. Its HTTP client loads only then."""
    from deep_research.app.home import read_dotenv, setting

    dotenv = read_dotenv()
    url = server or setting("DEEP_RESEARCH_SERVER_URL", dotenv)
    if url is None:
        return None
    from deep_research.frontends.remote import connect

    return connect(url, setting("DEEP_RESEARCH_API_TOKEN", dotenv))


def error_code(exc: DeepResearchError) -> str:
    return next(code for kind, code, _ in ERROR_CODES if isinstance(exc, kind))


def error_json(code: str, message: str, exit_code: int) -> dict[str, Any]:
    """A failed ``--json`` command's one object: ``{"error": {code, message, exit_code}}``."""
    return {"error": {"code": code, "message": " ".join(message.split()), "exit_code": exit_code}}


C1 = re.compile("[\x80-\x9f]")
"""C1 controls, which ``json.dumps(ensure_ascii=False)`` leaves raw."""

USD_PLACES = 6
"""Decimals of a dollar amount in JSON: a spend's sub-cent calls still show, float noise
(``51.239999999999995``) never does. Estimates round to 4 where they are made."""


def usd_rounded(value: object) -> object:
    """``value`` with every float under a key ending in ``_usd`` rounded to ``USD_PLACES``,
    in mappings and lists at any depth."""
    if isinstance(value, dict):
        return {
            k: round(v, USD_PLACES)
            if isinstance(v, float) and str(k).endswith("_usd")
            else usd_rounded(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [usd_rounded(v) for v in value]
    return value


def print_json(value: object) -> None:
    """The one JSON value a ``--json`` command prints on stdout, and nothing else there (a
    stream, ``sessions watch --json``, prints one a line): one line, UTF-8 text as it is
    (not ``\\u`` escapes), anything not JSON as its ``str``, dollars ``usd_rounded``."""
    text = json.dumps(usd_rounded(value), ensure_ascii=False, default=str)
    # JSON escapes C0 controls itself; C1 controls (a terminal's 8-bit CSI, U+009B) too.
    sys.stdout.write(C1.sub(lambda m: f"\\u{ord(m[0]):04x}", text) + "\n")
    sys.stdout.flush()  # ``sessions watch --json`` streams one per event


def print_report(markdown: str, data: Report | str | None, *, full: bool) -> bool:
    """A report on stdout; whether only its first screen was shown. Piped: its markdown as
    written, whole. On a terminal: rendered and, unless ``full`` (or with no ``data`` to
    read its parts from), only its ``first_screen``: the whole would scroll the answer away."""
    from deep_research.core.report import Report
    from deep_research.frontends import render

    if render.out.is_terminal and not full and isinstance(data, Report):
        render.report(first_screen(data))
        return True
    render.report(markdown)
    return False


def first_screen(data: Report) -> str:
    """The report's title, status and notice, its answer (the Answer part, or its first
    part when it has none) and the headings of everything else, numbered: markdown made
    from ``Report.parts``, the builder's own structure, never re-parsed."""
    from deep_research.core import markdown as md
    from deep_research.core.report import FINDINGS, SOURCES_TITLE

    parts = data.parts()
    answer = next((p for p in parts if p.title), None)
    head = [f"# {md.text(data.title)}", data.status, data.notice]
    if answer is not None:
        head.append(f"## {answer.title}\n\n{answer.body}")
    rest = [p.title for p in parts if p.title and p is not answer]
    rest += [SOURCES_TITLE] + ([FINDINGS] if data.notes else [])
    listed = "\n".join(f"{n}. {title}" for n, title in enumerate(rest, start=1))
    return "\n\n".join(p for p in [*head, f"**Contents**\n\n{listed}"] if p)
