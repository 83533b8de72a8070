"""Throwaway PostgreSQL databases for the tests of ``persistence.postgres``.

``DEEP_RESEARCH_TEST_DATABASE_URL`` names a server on which the tests create and drop their
own databases (``.ci/run`` starts one on loopback). Without it the PostgreSQL tests skip,
except in CI, where they fail: CI must never pass by skipping them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

URL_VARIABLE = "DEEP_RESEARCH_TEST_DATABASE_URL"


def server_url() -> str:
    """The test server's URL, or the test skips (fails in CI)."""
    url = os.environ.get(URL_VARIABLE)
    if url:
        return url
    if os.environ.get("CI"):
        pytest.fail(f"{URL_VARIABLE} is not set (CI runs PostgreSQL)")
    pytest.skip(f"{URL_VARIABLE} is not set")


@contextlib.contextmanager
def fresh_database(*, upgraded: bool = True) -> Iterator[str]:
    """The conninfo of a new, empty database (at the current schema if ``upgraded``),
    dropped afterwards."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from deep_research.persistence.schema import upgrade

    url = server_url()
    dbname = f"test_{uuid.uuid4().hex[:12]}"
    name = sql.Identifier(dbname)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        conninfo = make_conninfo(url, dbname=dbname)
        if upgraded:
            upgrade(conninfo)
        yield conninfo
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(name))


def execute(conninfo: str, query: Any, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run one statement as a separate client would; its rows ([] for none)."""
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []
