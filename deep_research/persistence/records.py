"""What every ``Sessions`` implementation shares (``persistence.port``): a session's id, its
row in a listing, and reading a saved state back, with the one-line errors a user sees."""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from pydantic import BaseModel, ValidationError

from deep_research.core.errors import SessionError, SessionLocked
from deep_research.core.models import RunStatus, SessionState, StopReason

SCHEMA_VERSION: int = SessionState.model_fields["schema_version"].default

SESSION_ID = re.compile(r"^[0-9a-f]{4,32}$")


UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""C0 and C1 controls but newline and tab: what starts a terminal's escape sequences
(``cat report.md`` must not clear the screen, hide text or set the window's title)."""


def shown_status(
    state: SessionState, *, reported: Callable[[], bool], locked: Callable[[], bool]
) -> RunStatus:
    """The status to show: a run whose process is gone before it finished reads as
    interrupted (``resume`` finishes it), whether it was saved running (kill -9, a crash) or
    stopped with no report yet (killed while writing or checking the report, a full disk).
    A queued run reads as running once a worker holds it (it says so as it starts).
    ``reported`` and ``locked`` are asked only when the answer depends on them."""
    if state.status == "queued":
        return "running" if locked() else "queued"
    unfinished = state.status == "running" or (
        state.status in ("complete", "stopped") and not reported()
    )
    return "interrupted" if unfinished and not locked() else state.status


def summary(state: SessionState, status: RunStatus) -> SessionSummary:
    """A readable session's row in a listing, under the status to show."""
    return SessionSummary(
        session_id=state.session_id,
        question=state.question,
        status=status,
        stop_reason=state.stop_reason,
        created_at=state.created_at,
        updated_at=state.updated_at,
        cost_usd=sum(entry.cost_usd for entry in state.ledger),
        nodes_done=sum(1 for node in state.nodes.values() if node.status == "done"),
        nodes_total=len(state.nodes),
        report_path=state.report_path,
    )


def corrupt(session_id: str, when: datetime, exc: SessionError) -> SessionSummary:
    """An unreadable session's row, dated ``when`` (its last write)."""
    return SessionSummary(
        session_id=session_id,
        question="",
        status="corrupt",
        created_at=when,
        updated_at=when,
        error=str(exc),
    )


def new_session_id() -> str:
    """12 lowercase hex characters: 48 random bits, short enough to type."""
    return uuid.uuid4().hex[:12]


def check_id(session_id: str) -> str:
    """``session_id`` if it is shaped like one (or a prefix of one), else ``SessionError``:
    checked before it names a file or a row, so ``../x`` or a look-alike never does."""
    # fullmatch + ASCII-only pattern: `$` alone would accept a trailing newline.
    if not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id):
        raise SessionError(
            f"invalid session id {session_id!r}: expected 4-32 lowercase hex characters"
        )
    return session_id


class SessionSummary(BaseModel):
    """One row of ``deep-research sessions list``."""

    session_id: str
    question: str
    status: RunStatus | Literal["corrupt"]
    stop_reason: StopReason | None = None
    created_at: datetime
    updated_at: datetime
    cost_usd: float = 0.0
    nodes_done: int = 0
    nodes_total: int = 0
    report_path: str | None = None
    error: str | None = None
    """Why a corrupt session could not be read."""


def decode(session_id: str, raw: bytes, where: str) -> SessionState:
    """A saved state (``where``: the file or row it was read from, for the message), or a
    one-line ``SessionError``: not JSON, another schema version, not a state, another
    session's."""

    # Fast path: parse and validate straight from bytes (list() reads every session).
    # Only a failure takes the slow path below, whose job is a precise message.
    with contextlib.suppress(ValidationError):
        state = SessionState.model_validate_json(raw)
        if (
            "schema_version" in state.model_fields_set  # not the default: we always write it
            and state.schema_version == SCHEMA_VERSION
            and state.session_id == session_id
        ):
            return state
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SessionError(
            f"session {session_id} is corrupt: {where} is not valid JSON ({exc})"
        ) from None
    except RecursionError:
        raise SessionError(
            f"session {session_id} is corrupt: {where} is not valid JSON (nested too deeply)"
        ) from None
    if not isinstance(data, dict):
        raise SessionError(f"session {session_id} is corrupt: {where} is not a JSON object")
    version = data.get("schema_version")
    if type(version) is not int or version != SCHEMA_VERSION:
        saved = "none" if version is None else repr(version)
        raise SessionError(
            f"session {session_id} was saved by another version of deep-research "
            f"(schema {saved}, this one reads {SCHEMA_VERSION}): {where}"
        )
    try:
        state = SessionState.model_validate(data)
    except RecursionError:
        raise SessionError(
            f"session {session_id} is corrupt: {where} is nested too deeply"
        ) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "state"
        raise SessionError(
            f"session {session_id} is corrupt: {where}: {field}: {first['msg']}"
        ) from None
    if state.session_id != session_id:
        raise SessionError(
            f"session {session_id} is corrupt: {where} belongs to session {state.session_id}"
        )
    return state


class _Removable(Protocol):
    def list(self) -> list[SessionSummary]: ...

    def is_locked(self, session_id: str) -> bool: ...

    def remove(self, session_id_or_prefix: str) -> str: ...


def prune(
    store: _Removable, older_than: timedelta, *, now: datetime | None = None, dry_run: bool = False
) -> tuple[list[SessionSummary], list[str]]:
    """Remove ``store``'s sessions last changed more than ``older_than`` ago; (removed,
    skipped because someone runs them). ``dry_run`` removes nothing."""
    cutoff = (now or datetime.now(UTC)) - older_than
    removed: list[SessionSummary] = []
    running: list[str] = []
    for row in store.list():
        if row.updated_at >= cutoff:
            continue
        if store.is_locked(row.session_id):
            running.append(row.session_id)
            continue
        if not dry_run:
            try:
                store.remove(row.session_id)
            except SessionLocked:  # started between the check and the removal
                running.append(row.session_id)
                continue
        removed.append(row)
    return removed, running
