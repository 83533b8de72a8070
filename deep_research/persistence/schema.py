"""The sessions' tables in PostgreSQL, versioned: ``MIGRATIONS`` in order, ``upgrade`` to
apply the missing ones (``deep-research db upgrade``), ``check`` to refuse any other version.

Tables (every one but ``sessions`` keyed by its session, deleted with it)::

    schema_migrations  the versions applied, one row each
    sessions           the state as ``Sessions.serialize`` made it (JSON text, never parsed
                       here) and the lease of the worker running it (``persistence.postgres``)
    session_jobs       the paid-jobs journal: a line per change, numbered 1, 2, … per session
    session_events     the event log: a ``RunEvent`` a row, numbered 1, 2, … per session
    session_evidence   each node's latest batch of evidence units, in the order kept
    session_vectors    the units' vectors under one embedder (float32, little-endian)
    session_claims     the claim check's ledger
    session_reports    the report's markdown, and the report as JSON
    daily_book         the servers' daily budget's ledger (``persistence.daily``): one row
    workers            each live worker's heartbeat (``persistence.workers``)

Payloads are JSON as ``text``, not ``jsonb``: ``jsonb`` refuses ``\\u0000``, which page text
can carry, and a state must read back byte for byte.

Invariants:
- A version's migration is never edited once released: a change is a new one.
- ``upgrade`` applies every missing version in one transaction, under a transaction-level
  advisory lock: two upgraders never race, and a failed one leaves the database as it was.
- ``check`` accepts exactly ``VERSION``: code never reads tables it does not know, and an
  older binary never writes into a newer layout.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import psycopg
from psycopg.conninfo import conninfo_to_dict

from deep_research.core.errors import StorageError

_V1 = """
CREATE TABLE sessions (
    session_id    text PRIMARY KEY CHECK (session_id ~ '^[0-9a-f]{4,32}$'),
    state         text NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    lease_owner   text,
    lease_epoch   bigint NOT NULL DEFAULT 0,
    lease_expires timestamptz
);
CREATE INDEX sessions_updated_at ON sessions (updated_at);
CREATE TABLE session_jobs (
    session_id text NOT NULL REFERENCES sessions ON DELETE CASCADE,
    seq        integer NOT NULL,
    line       text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE session_events (
    session_id text NOT NULL REFERENCES sessions ON DELETE CASCADE,
    id         integer NOT NULL,
    event      text NOT NULL,
    PRIMARY KEY (session_id, id)
);
CREATE TABLE session_evidence (
    session_id text NOT NULL REFERENCES sessions ON DELETE CASCADE,
    position   bigint GENERATED ALWAYS AS IDENTITY,
    node_id    text NOT NULL,
    unit       text NOT NULL,
    PRIMARY KEY (session_id, position)
);
CREATE INDEX session_evidence_node ON session_evidence (session_id, node_id);
CREATE TABLE session_vectors (
    session_id  text PRIMARY KEY REFERENCES sessions ON DELETE CASCADE,
    embedder_id text NOT NULL,
    texts       text NOT NULL,
    dimensions  integer NOT NULL,
    vectors     bytea NOT NULL
);
CREATE TABLE session_claims (
    session_id text PRIMARY KEY REFERENCES sessions ON DELETE CASCADE,
    ledger     text NOT NULL
);
CREATE TABLE session_reports (
    session_id text PRIMARY KEY REFERENCES sessions ON DELETE CASCADE,
    markdown   text NOT NULL,
    data       text,
    written_at timestamptz NOT NULL
);
"""

_V2 = """
CREATE TABLE daily_book (
    id   integer PRIMARY KEY CHECK (id = 1),
    book text
);
INSERT INTO daily_book VALUES (1, NULL);
CREATE TABLE workers (
    executor_id  text PRIMARY KEY,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2)
"""Version N is ``MIGRATIONS[N - 1]``."""
VERSION = len(MIGRATIONS)

_LOCK_KEY = 0x64726573  # "dres": the advisory lock every upgrader takes first
_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def redacted(conninfo: str) -> str:
    """``conninfo`` (a URL or ``key=value`` pairs) as a URL without its password, for
    messages: ``postgresql://user@host:port/dbname``."""
    try:
        parts: dict[str, Any] = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable address)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


def upgrade(conninfo: str) -> list[int]:
    """Bring the database to ``VERSION``; the versions applied now ([] when it was there).
    Refuses (``StorageError``) a database newer than this code."""
    where = redacted(conninfo)
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            conn.execute(_MIGRATIONS_TABLE)
            current = _applied(conn)
            _refuse_newer(current, where)
            for version in range(current + 1, VERSION + 1):
                conn.execute(MIGRATIONS[version - 1])
                conn.execute("INSERT INTO schema_migrations (version) VALUES (%s)", (version,))
            return list(range(current + 1, VERSION + 1))
    except psycopg.Error as exc:
        reason = first_line(exc, conninfo)
        raise StorageError(f"cannot upgrade the database at {where}: {reason}") from None


def check(conn: psycopg.Connection[Any], where: str) -> None:
    """Nothing when the database is at ``VERSION``, else a one-line ``StorageError``."""
    with conn.transaction():
        current = _applied(conn) if _has_migrations(conn) else 0
    _refuse_newer(current, where)
    if current < VERSION:
        raise StorageError(
            f"the database at {where} has sessions schema version {current}, this "
            f"deep-research needs {VERSION}: run `deep-research db upgrade`"
        )


def _has_migrations(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    return bool(row and row[0])


def _applied(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row else 0


def _refuse_newer(current: int, where: str) -> None:
    if current > VERSION:
        raise StorageError(
            f"the database at {where} has sessions schema version {current}, newer than this "
            f"deep-research knows ({VERSION}): upgrade deep-research "
            "(`deep-research db upgrade` never downgrades)"
        )


def first_line(exc: BaseException, conninfo: str) -> str:
    """The error's first line (psycopg's messages go on with DETAIL and HINT lines), never
    the password: libpq quotes the part of an address it cannot parse, so an address that
    does not parse is said to, in words of ours only."""
    try:
        password = str(conninfo_to_dict(conninfo).get("password") or "")
    except psycopg.ProgrammingError:
        return "the address does not parse (DEEP_RESEARCH_DATABASE_URL)"
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    for secret in filter(None, (conninfo, password, quote(password, safe=""))):
        line = line.replace(secret, "***")
    return line
