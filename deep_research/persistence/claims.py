"""A session's claim ledger: ``claims.json`` beside ``state.json`` (``core.ledger``).

    store = sessions.claims(session_id)   # a SessionClaims, in the session's directory
    store.units()          # the evidence store's units (what the check reads)
    store.load()           # the last check's ledger, or None
    store.save(ledger)     # replaced atomically

A ledger that does not parse (a hand edit, a newer schema) reads as none, with a warning:
the next check writes a whole new one, and nothing else is lost.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import ValidationError

from deep_research.core.ledger import ClaimLedger
from deep_research.core.models import EvidenceUnit
from deep_research.persistence.atomic import atomic_write_text
from deep_research.persistence.evidence import read_units

log = logging.getLogger(__name__)

FILE_NAME = "claims.json"


class SessionClaims:
    """The ``ClaimStore`` of one session."""

    def __init__(self, session_dir: Path) -> None:
        self.directory = session_dir
        self.path = session_dir / FILE_NAME

    def units(self) -> list[EvidenceUnit]:
        return read_units(self.directory)

    def load(self) -> ClaimLedger | None:
        try:
            return ClaimLedger.model_validate_json(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, ValidationError) as exc:
            log.warning("%s: not read (%s); the next check writes it anew", self.path, exc)
            return None

    def save(self, ledger: ClaimLedger) -> None:
        atomic_write_text(self.path, ledger.model_dump_json(indent=1))
