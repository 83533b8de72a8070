"""A session's evidence store: ``evidence.jsonl`` beside ``state.json``, append-only.

    evidence = store.evidence(session_id)   # a SessionEvidence, in the session's directory
    await evidence.keep("t3", units)         # when t3 finishes
    evidence.read()                          # every unit, in order; what was damaged

- One JSON line per unit (``EvidenceUnit`` plus ``batch``), written when its node finishes,
  flushed and fsynced before the session counts the units (``state.evidence_units``).
- A node rerun after a crash writes its units again under a new batch: reading keeps each
  node's latest batch only, so nothing is counted twice and the ids (``t3.1``…) stay.
- A line cut short by a crash, or one that does not parse, is skipped: the rest reads (the
  next batch starts on a line of its own), and the reader is told how many were skipped.
- Vectors for ranking (``vectors``/``save_vectors``) sit in ``evidence.vectors.npz``,
  keyed by the embedder's identity: another embedder's vectors are ignored, not mixed, and
  a damaged file (not a zip, arrays of the wrong shape) reads as none: they are made again.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from deep_research.core.models import EvidenceUnit

log = logging.getLogger(__name__)

FILE_NAME = "evidence.jsonl"
VECTORS_NAME = "evidence.vectors.npz"
_APPEND_LOCK = threading.Lock()


class SessionEvidence:
    """The store of one session (an ``EvidenceSink``)."""

    def __init__(self, session_dir: Path) -> None:
        self.directory = session_dir
        self.path = session_dir / FILE_NAME

    def read(self) -> tuple[list[EvidenceUnit], str]:
        return read_units_and_damage(self.directory)

    def vectors(self, embedder_id: str) -> dict[str, list[float]]:
        return read_vectors(self.directory, embedder_id)

    def save_vectors(self, embedder_id: str, vectors: Mapping[str, list[float]]) -> None:
        write_vectors(self.directory, embedder_id, vectors)

    async def keep(self, node_id: str, units: Sequence[EvidenceUnit]) -> None:
        import asyncio

        await asyncio.to_thread(self.append, node_id, units)

    def append(self, node_id: str, units: Sequence[EvidenceUnit]) -> None:
        """The node's units, as one batch; an empty batch still replaces an earlier one."""
        batch = uuid.uuid4().hex[:12]
        lines = [
            json.dumps({"batch": batch, **unit.model_dump(mode="json")}, ensure_ascii=False)
            for unit in units
        ] or [json.dumps({"batch": batch, "node_id": node_id, "empty": True})]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        with _APPEND_LOCK, self.path.open("ab") as out:
            if _torn(self.path):  # a line cut short by a crash: the batch starts its own
                payload = b"\n" + payload
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())


def _torn(path: Path) -> bool:
    """The file's last line has no end (a write cut short)."""
    try:
        with path.open("rb") as tail:
            tail.seek(-1, os.SEEK_END)
            return tail.read(1) != b"\n"
    except OSError:  # empty or missing
        return False


def read_units(session_dir: Path) -> list[EvidenceUnit]:
    """Every unit of the session, in the order the nodes finished (each node's latest batch)."""
    return read_units_and_damage(session_dir)[0]


def read_units_and_damage(session_dir: Path) -> tuple[list[EvidenceUnit], str]:
    """``read_units``, and what was wrong with the file ("" when nothing): damaged lines (a
    scalar, deep nesting, not a unit) are skipped and counted, an unreadable file (a
    directory) reads as no units. Never raises for what the file holds."""
    path = session_dir / FILE_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], ""
    except OSError as exc:
        log.warning("%s: not read (%s)", path, exc)
        return [], f"{FILE_NAME} could not be read ({exc.strerror or type(exc).__name__})"
    batches: dict[str, tuple[str, list[EvidenceUnit]]] = {}
    order: list[str] = []
    skipped = 0
    for number, line in enumerate(raw.splitlines(), 1):
        try:
            data = json.loads(line)
            if not isinstance(data, dict):
                raise TypeError(f"a {type(data).__name__}, not an object")
            batch, node_id = str(data.pop("batch")), str(data["node_id"])
            unit = None if data.get("empty") else EvidenceUnit.model_validate(data)
        except (ValueError, KeyError, TypeError, ValidationError, RecursionError):
            if line.strip():
                skipped += 1
                log.warning("%s: line %d skipped (cut short or not a unit)", path, number)
            continue
        if batches.get(node_id, ("", []))[0] != batch:
            batches[node_id] = (batch, [])
            if node_id in order:
                order.remove(node_id)
            order.append(node_id)
        if unit is not None:
            batches[node_id][1].append(unit)
    units = [unit for node_id in order for unit in batches[node_id][1]]
    return units, f"{skipped} damaged line(s) of {FILE_NAME} skipped" if skipped else ""


def read_vectors(session_dir: Path, embedder_id: str) -> dict[str, list[float]]:
    """The saved vectors of unit texts (keyed by text) under ``embedder_id``; {} for none
    or another embedder's."""
    import numpy as np

    path = session_dir / VECTORS_NAME
    try:
        with np.load(path, allow_pickle=False) as saved:
            texts, vectors = saved["texts"], saved["vectors"]
            if str(saved["embedder"]) != embedder_id:
                return {}
            if texts.ndim != 1 or vectors.ndim != 2 or len(texts) != len(vectors):
                raise ValueError(f"arrays of shapes {texts.shape} and {vectors.shape}")
            if not np.issubdtype(vectors.dtype, np.floating):
                raise ValueError(f"vectors of {vectors.dtype}")
            return dict(zip(texts.astype(str).tolist(), vectors.tolist(), strict=True))
    except FileNotFoundError:
        return {}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        log.warning("%s: not read (%s); the vectors are made again", path, exc)
        return {}


def write_vectors(session_dir: Path, embedder_id: str, vectors: Mapping[str, list[float]]) -> None:
    """Replace the saved vectors (atomically: a reader sees the old file or the new one)."""
    import numpy as np

    path = session_dir / VECTORS_NAME
    temporary = path.with_suffix(".tmp.npz")
    texts = list(vectors)
    np.savez(
        temporary,
        embedder=np.array(embedder_id),
        texts=np.array(texts, dtype=str),
        vectors=np.array([vectors[t] for t in texts], dtype=np.float32),
    )
    os.replace(temporary, path)
