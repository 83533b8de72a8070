"""Housekeeping: remove or prune saved sessions, clear the result cache, bring a team's
database to this version's schema."""

from __future__ import annotations

from datetime import timedelta

from deep_research.app.config import Settings
from deep_research.app.saved import database_url, sessions
from deep_research.core.errors import StorageError
from deep_research.persistence.port import team_extra
from deep_research.persistence.records import SessionSummary, prune


def remove_session(settings: Settings, session_id: str) -> str:
    """Delete a session (refused while a process runs it); its full id."""
    return sessions(settings).remove(session_id)


def prune_sessions(
    settings: Settings, older_than: timedelta, *, dry_run: bool = False
) -> tuple[list[SessionSummary], list[str]]:
    """Delete the sessions unchanged for longer than ``older_than``; (removed, running)."""
    return prune(sessions(settings), older_than, dry_run=dry_run)


def upgrade_database(settings: Settings) -> tuple[str, list[int], int]:
    """Create or migrate the sessions schema in ``Settings.database_url``: (the database, as
    messages name it, the versions applied now, the version it is at)."""
    url = database_url(
        settings, "without it sessions are files, and there is no database to upgrade"
    )
    with team_extra():
        from deep_research.persistence import schema  # psycopg: a team's only
    return schema.redacted(url), schema.upgrade(url), schema.VERSION


def clear_cache(settings: Settings) -> int:
    """Empty the result and model-lookup cache; the bytes it held."""
    import shutil

    root = settings.cache_dir
    if not root.exists():
        return 0
    held = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    try:
        shutil.rmtree(root)
    except OSError as exc:  # rmtree names a file relative to its folder: name the cache
        raise StorageError(
            f"cannot clear the cache {root}: {exc.strerror or type(exc).__name__} "
            "(DEEP_RESEARCH_HOME chooses the data directory)"
        ) from None
    return held
