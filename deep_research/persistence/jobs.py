"""A session's paid-jobs journal: ``jobs.jsonl`` beside ``state.json``, append-only.

A paid create's intent must be on disk before the create leaves, and its id as the reply
arrives: each is a line appended here and fsync'ed (~1 ms), not a whole state (~200 KB at
50 nodes, whose serializing and fsync on the event loop made eight replies arriving
together wait for eight in a row).

- A line is a node's jobs as they stand (``remote_jobs``, ``job_intents``), so replaying
  it sets them, whatever it changed.
- ``state.json`` records how many lines it already holds (``SessionState.jobs_journaled``,
  stamped by ``SessionStore.serialize``); loading replays the lines after those, so an
  old line never undoes a newer snapshot.
- A line cut short by a crash, or by a failed write, does not parse and is skipped; the
  next writer (or the same one after the failure) ends it before appending (``length``),
  so the lines after it read. A journal that cannot be read is a ``SessionError``.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, ValidationError

from deep_research.core.errors import SessionError
from deep_research.core.models import SessionState

JOBS_FILE = "jobs.jsonl"


class Line(BaseModel):
    """One line of the journal (a row of PostgreSQL's): a node's intents and ids as they stand."""

    node: str
    remote_jobs: dict[str, str]
    job_intents: dict[str, datetime]


def append(directory: Path, state: SessionState, node_id: str) -> None:
    """Node ``node_id``'s jobs as a line of the journal, fsync'ed (raises ``OSError``)."""
    node = state.nodes[node_id]
    line = Line(node=node_id, remote_jobs=node.remote_jobs, job_intents=node.job_intents)
    with (directory / JOBS_FILE).open("a", encoding="utf-8") as journal:
        journal.write(line.model_dump_json() + "\n")
        journal.flush()
        os.fsync(journal.fileno())


def length(directory: Path) -> int:
    """The journal's lines, a line a crash tore ended first (by the writer only)."""
    file = directory / JOBS_FILE
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return 0
    if data and not data.endswith(b"\n"):
        with file.open("ab") as journal:
            journal.write(b"\n")
        data += b"\n"
    return data.count(b"\n")


def replay(directory: Path, state: SessionState) -> SessionState:
    """``state`` with the journal's lines it does not hold yet applied."""
    file = directory / JOBS_FILE
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        return state
    except OSError as exc:
        raise SessionError(f"session {state.session_id}: cannot read {file}: {exc}") from None
    lines = data.split(b"\n")[:-1]  # the last: "" or a line torn by a crash
    for raw in lines[state.jobs_journaled :]:
        with contextlib.suppress(ValidationError):
            line = Line.model_validate_json(raw)
            if node := state.nodes.get(line.node):
                node.remote_jobs, node.job_intents = line.remote_jobs, line.job_intents
    state.jobs_journaled = len(lines)  # this state holds them now, whoever saves it
    return state
