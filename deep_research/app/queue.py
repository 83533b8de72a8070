"""A team's queue of runs (DBOS on PostgreSQL), as its clients use it: ``submit`` (the
CLI's) and ``RunQueue`` (a server's ``RunManager``) save a session as queued and put its
run on the queue; ``app.team``'s workers take them off and research them.

    session_id = submit(settings, question, options, on_info)   # saved and queued

A run's first workflow has the session's id (putting it twice queues it once); a resume
is a workflow of its own (``<session id>-<random>``). The session is saved ``queued``
before its run is put on the queue, and ``interrupted`` again should the queue refuse it.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dbos import DBOS, DBOSClient, EnqueueOptions
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import URL

from deep_research.app import lifecycle, preparation
from deep_research.app.config import Settings
from deep_research.app.options import RunOptions
from deep_research.app.saved import database_url, sessions
from deep_research.core.errors import BudgetTooSmall, ConfigError, DeepResearchError, StorageError
from deep_research.persistence.schema import first_line

if TYPE_CHECKING:
    from deep_research.app.preparation import Info


APP_NAME = "deep-research"
APP_VERSION = "team-1"
"""Changed only when a release's workflows can no longer resume an older release's."""
QUEUE = "runs"
WORKFLOW = "deep_research.run_session"


def dbos_url(conninfo: str) -> str:
    """``conninfo`` (a URL or ``key=value`` pairs) as the URL DBOS takes."""
    parts: dict[str, Any] = conninfo_to_dict(conninfo)
    known = {k: parts.pop(k, None) for k in ("user", "password", "host", "port", "dbname")}
    host, port = str(known["host"] or ""), str(known["port"] or "")
    if host.startswith("/") or "," in host + port:
        raise ConfigError(
            "workers need DEEP_RESEARCH_DATABASE_URL as one host and port (postgresql://"
            "user:password@host:5432/db), not a Unix socket or a list of hosts"
        )
    if secret := [k for k in parts if "password" in k]:
        raise ConfigError(
            f"workers cannot pass {', '.join(sorted(secret))} to DBOS without logging it: "
            "give the key's password to the database another way (a .pgpass file)"
        )
    url = URL.create(
        "postgresql",
        username=known["user"],
        password=known["password"],
        host=known["host"],
        port=int(known["port"]) if known["port"] else None,
        database=known["dbname"],
        query={k: str(v) for k, v in parts.items()},
    )
    return url.render_as_string(hide_password=False)


def submit(settings: Settings, question: str, options: RunOptions, on_info: Info) -> str:
    """Prepare and save a new session as ``lifecycle.start`` does, without running it, and
    queue its run (workflow id: the session id, so queueing it twice is once); its id."""
    database_url(settings)  # refused before anything is prepared
    prepared = preparation.prepare(settings, question, options)
    if not prepared.extractive:
        prepared = asyncio.run(preparation.choose_engine(prepared, on_info))
    refused = preparation.refusal(prepared, preparation.estimate(prepared))
    if refused is not None:
        raise BudgetTooSmall(refused)
    queue = RunQueue(settings)  # out of reach: nothing saved
    try:
        with lifecycle.start(prepared, on_info) as run:
            asyncio.run(lifecycle.hand_over(run))  # saved as queued; built only to save it
        queue.put(run.state.session_id)
    finally:
        queue.close()
    return run.state.session_id


class RunQueue:
    """The team's queue of runs, as its clients use it (``submit``, a server's
    ``RunManager``): put a saved session's run on it, or take it off."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._conninfo = conninfo = database_url(settings)
        url = dbos_url(conninfo)
        with _storage_errors("could not reach the team's queue", conninfo):
            DBOS.migrate(url)  # the queue's tables, before any worker made them
            self._client = DBOSClient(system_database_url=url, application_name=APP_NAME)

    def put(self, session_id: str, *, again: bool = False) -> str:
        """Queue the run of ``session_id``, saved as queued (``lifecycle.hand_over``): its
        first (workflow id: the session's, so putting it twice queues it once) or, ``again``,
        a resume. Should the queue refuse it, the session is saved as interrupted (``resume``
        queues it again) and the error raised. The workflow's id."""
        workflow_id = f"{session_id}-{secrets.token_hex(4)}" if again else session_id
        options: EnqueueOptions = {
            "workflow_name": WORKFLOW,
            "queue_name": QUEUE,
            "workflow_id": workflow_id,
            "app_version": APP_VERSION,
        }
        try:
            with _storage_errors(f"could not queue session {session_id}", self._conninfo):
                self._client.enqueue(options, session_id)
        except BaseException:
            lifecycle.unqueue(self._settings, session_id)
            raise
        return workflow_id

    def active(self, session_id: str) -> bool:
        """A worker runs the session's run or will: it is on the queue, or taken (a dead
        worker's too, until the next reap hands it on)."""
        with _storage_errors(f"could not read the queue for {session_id}", self._conninfo):
            return bool(self._active(session_id))

    def _active(self, session_id: str) -> list[str]:
        flows = self._client.list_workflows(
            workflow_id_prefix=session_id,
            status=["ENQUEUED", "PENDING"],
            load_input=False,
            load_output=False,
        )
        # Not a longer id's: a session's workflows are its id, or its id and "-<random>".
        return [f.workflow_id for f in flows if f.workflow_id.partition("-")[0] == session_id]

    def stop(self, session_id: str) -> bool:
        """Take the session's run off the queue, or stop it on the worker that holds it and
        wait (at most ``worker_timeout_seconds``) until that worker has let go: its jobs'
        cancels can then be recorded. Whether it was queued and never begun (saved as
        interrupted now). A queue out of reach raises ``StorageError``, nothing unqueued: its
        run may still be taken."""
        if self.cancel(session_id):
            store = sessions(self._settings)
            # A worker that took the run as it was cancelled takes its lease a moment later
            # (it then sees the cancel and lets go, nothing spent): waited for too.
            settled = time.monotonic() + 2.0
            deadline = time.monotonic() + self._settings.worker_timeout_seconds
            while time.monotonic() < settled or store.is_locked(session_id):
                if time.monotonic() > deadline:
                    break  # that worker records the cancels when it next polls the jobs
                time.sleep(0.2)
        return lifecycle.unqueue(self._settings, session_id)

    def cancel(self, session_id: str) -> bool:
        """Take the session's run off the queue, or stop it where a worker runs it (its step
        is preemptible: DBOS cancels it within a second; it saves the run as interrupted and
        lets go of the session). Whether it had a run queued or running."""
        with _storage_errors(f"could not cancel the run of {session_id}", self._conninfo):
            ids = self._active(session_id)
            if ids:
                self._client.cancel_workflows(ids)
        return bool(ids)

    def close(self) -> None:
        self._client.destroy()


@contextmanager
def _storage_errors(doing: str, conninfo: str) -> Iterator[None]:
    """DBOS's and SQLAlchemy's errors as one ``StorageError`` line, with no password."""
    try:
        yield
    except DeepResearchError:
        raise
    except Exception as exc:
        raise StorageError(f"{doing}: {first_line(exc, conninfo)}") from None
