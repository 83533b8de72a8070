"""The servers' daily budget: one ledger that every server process (``serve``, ``mcp``)
admits against, kept in a ``Book``: the data directory's (``FileBook``), or a team's
database when the sessions are there (``postgres_db.DatabaseBook``), so every machine of
the team admits against one figure.

Layout of ``FileBook``::

    <home>/daily/ledger.json   open reservations, and the day's spend outside sessions
    <home>/daily/lock          flock'ed around every read-check-write of ledger.json

What a UTC day has committed is what every session spent that day (their ledger entries
dated that day: CLI runs included), plus what was booked outside sessions
(``verify_claim``'s judge), plus what each open reservation may still spend: its amount
less what its session has spent since it was made.

Invariants:
- Every change reads the ledger, decides and writes it back whole, with every other process
  kept out (``Book.update``: ``flock`` and an atomic file; a locked row in one transaction):
  two processes never admit against the same figure.
- ``reserve`` adds a reservation only when the day's committed figure plus its amount stays
  within the budget; a refusal is ``DayIsSpent``, naming the setting. So admissions never
  take the day over: only spend that no reservation covers can (a CLI run, which the
  servers' budget does not bind, or a call costing more than its worst case).
- A reservation counts on the UTC day it was made, and after that day only while its
  session is locked (its run goes on past midnight).
- ``release`` ends a reservation when its run has ended: what it spent is then in its
  session's ledger (saved before the release). A run that did not end (interrupted by
  Ctrl-C, a shutdown, kill -9) keeps its reservation until the end of its day, since its
  research jobs may still be running at the provider; ``attach`` of a resume's new
  reservation ends the session's earlier one.
- ``settle`` ends a reservation of a call outside any session and books what it cost.
- Reservations and bookings of past days are dropped whenever the file is written.
- A damaged or unreadable ledger refuses every change, naming where it is, rather than
  forget what was reserved; a ledger that cannot be written is a ``StorageError``.
"""

from __future__ import annotations

import fcntl
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, Field, ValidationError

from deep_research.core.errors import DeepResearchError, SessionError, StorageError, UsageError
from deep_research.core.models import utcnow
from deep_research.persistence.atomic import atomic_write_text
from deep_research.persistence.port import Sessions, team_extra

DIR = "daily"
FILE = "ledger.json"
LOCK = "lock"
SETTING = "DEEP_RESEARCH_SERVER_DAILY_BUDGET_USD"
SLACK_USD = 1e-9
"""Float sums of cents: a run that fits exactly is not refused by rounding."""

Kind = Literal["run", "call"]
T = TypeVar("T")


class Book(Protocol):
    """Where the ledger is kept."""

    where: str
    """As messages name it (a file; a database, no password)."""

    def update(self, step: Callable[[bytes | None], tuple[T, str | None]]) -> T:
        """``step`` on the ledger as kept (None: none yet), every other process kept out
        until the text it returns is written (None: nothing to write); its result."""


class FileBook:
    """The ledger as ``<directory>/ledger.json``, changed under a ``flock`` of ``lock``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.where = str(directory / FILE)

    def update(self, step: Callable[[bytes | None], tuple[T, str | None]]) -> T:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot use the daily budget's ledger: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # every holder is brief: wait for it
            try:
                raw: bytes | None = (self.directory / FILE).read_bytes()
            except FileNotFoundError:
                raw = None
            except OSError as exc:
                raise StorageError(
                    f"cannot read the daily budget's ledger {self.where}: {exc}"
                ) from None
            result, text = step(raw)
            if text is not None:
                try:
                    atomic_write_text(self.directory / FILE, text)
                except OSError as exc:  # the previous file stands: nothing half-written
                    raise StorageError(
                        f"cannot write the daily budget's ledger {self.where}: {exc}"
                    ) from None
            return result
        finally:
            os.close(fd)  # drops the lock


def open_book(directory: Path, database_url: str | None) -> Book:
    """The servers' ledger: in the team's database when the sessions are there."""
    if not database_url:
        return FileBook(directory)
    with team_extra():
        from deep_research.persistence.postgres_db import DatabaseBook  # psycopg: a team's

    return DatabaseBook(database_url)


class DayIsSpent(UsageError):
    """What is left of the day's budget cannot cover what was asked."""


class Reservation(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    kind: Kind = "run"
    """A run (ended by ``release``) or one call outside any session (``settle``)."""
    day: date
    made_at: datetime
    amount_usd: float
    session_id: str | None = None
    """The run's session, once it is saved (``attach``)."""


class _Book(BaseModel):
    schema_version: int = 1
    reservations: list[Reservation] = Field(default_factory=list)
    booked_usd: dict[date, float] = Field(default_factory=dict)
    """Spend outside sessions by UTC day (verify_claim's judge)."""


@dataclass(frozen=True)
class Committed:
    """A day's figures, in USD."""

    spent: float
    """Every session's ledger entries of the day."""
    booked: float
    """Calls outside sessions."""
    reserved: float
    """What the open reservations may still spend."""

    @property
    def total(self) -> float:
        return self.spent + self.booked + self.reserved


class DailyLedger:
    def __init__(
        self,
        book: Book,
        sessions: Sessions,
        budget_usd: float,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.book = book
        self.sessions = sessions
        self.budget_usd = budget_usd
        self._clock = clock

    # --- reading ----------------------------------------------------------------------------

    def committed(self) -> Committed:
        """Today's figures (read under the lock: never a half-written state)."""
        return self._locked(lambda book: self._committed(book, self._clock()))

    def reservations(self) -> list[Reservation]:
        """The reservations that count today."""
        return self._locked(lambda book: self._live(book, self._clock()))

    # --- changing ---------------------------------------------------------------------------

    def reserve(
        self,
        wanted_usd: float,
        *,
        exact: bool,
        kind: Kind = "run",
        replacing: str | None = None,
        purpose: str = "this run",
    ) -> Reservation:
        """Reserve ``wanted_usd`` of today's budget, or (``exact=False``) as much of it as
        is left. ``replacing``: a session being resumed, whose earlier reservation is left
        out of the figure (``attach`` then ends it). Raises ``DayIsSpent``."""
        now = self._clock()

        def admit(book: _Book) -> Reservation:
            ignored = set()
            if replacing is not None and not self.sessions.is_locked(replacing):
                ignored = {r.id for r in book.reservations if r.session_id == replacing}
            left = self.budget_usd - self._committed(book, now, ignored).total
            if left <= SLACK_USD or (exact and wanted_usd > left + SLACK_USD):
                raise DayIsSpent(
                    f"today's server budget of ${self.budget_usd:.2f} has "
                    f"${max(0.0, left):.2f} left: not enough for {purpose} ({SETTING})"
                )
            amount = max(0.0, min(wanted_usd, left))
            held = Reservation(kind=kind, day=now.date(), made_at=now, amount_usd=amount)
            book.reservations.append(held)
            return held

        return self._locked(admit, write=True)

    def attach(self, reservation_id: str, session_id: str) -> None:
        """The run of ``reservation_id`` is saved as ``session_id``: its spend now counts
        against it, and the session's earlier reservation (a resumed run's) ends."""

        def tie(book: _Book) -> None:
            kept: list[Reservation] = []
            for held in book.reservations:
                if held.id == reservation_id:
                    held.session_id = session_id
                elif held.session_id == session_id:
                    continue
                kept.append(held)
            book.reservations = kept

        self._locked(tie, write=True)

    def release(self, reservation_id: str) -> None:
        """The run has ended; what it spent is in its session's ledger."""

        def end(book: _Book) -> None:
            book.reservations = [r for r in book.reservations if r.id != reservation_id]

        self._locked(end, write=True)

    def release_session(self, session_id: str) -> None:
        """The run of ``session_id`` has ended where its reservation's id is not known (a
        team's worker, for the server that queued it): its reservations end."""

        def end(book: _Book) -> None:
            book.reservations = [r for r in book.reservations if r.session_id != session_id]

        self._locked(end, write=True)

    def settle(self, reservation_id: str, cost_usd: float) -> None:
        """A call outside any session is done: book what it cost on today's account."""
        today = self._clock().date()

        def book_it(book: _Book) -> None:
            book.reservations = [r for r in book.reservations if r.id != reservation_id]
            book.booked_usd[today] = book.booked_usd.get(today, 0.0) + max(0.0, cost_usd)

        self._locked(book_it, write=True)

    # --- the figure -------------------------------------------------------------------------

    def _live(self, book: _Book, now: datetime) -> list[Reservation]:
        today = now.date()
        return [
            held
            for held in book.reservations
            if held.day == today
            or (held.session_id is not None and self.sessions.is_locked(held.session_id))
        ]

    def _committed(self, book: _Book, now: datetime, ignored: set[str] | None = None) -> Committed:
        live = [r for r in self._live(book, now) if r.id not in (ignored or set())]
        midnight = datetime.combine(now.date(), time.min, UTC)
        tracked = {r.session_id: r.made_at for r in live if r.session_id is not None}
        since = min([midnight, *tracked.values()])
        spent_today = 0.0
        spent_since: dict[str, float] = {}
        for session_id in self.sessions.changed_since(since):
            try:
                state = self.sessions.load(session_id)
            except SessionError:
                continue  # unreadable: its spend cannot be counted (nor can it grow)
            spent_today += sum(e.cost_usd for e in state.ledger if _utc(e.at) >= midnight)
            made = tracked.get(session_id)
            if made is not None:
                spent_since[session_id] = sum(
                    e.cost_usd for e in state.ledger if _utc(e.at) >= made
                )
        reserved = sum(
            max(0.0, held.amount_usd - spent_since.get(held.session_id or "", 0.0)) for held in live
        )
        return Committed(spent_today, book.booked_usd.get(now.date(), 0.0), reserved)

    # --- the book -------------------------------------------------------------------------

    def _locked(self, decide: Callable[[_Book], T], *, write: bool = False) -> T:
        """``decide`` on the ledger, every other process kept out; written back (past days
        dropped) when ``write`` and ``decide`` returns without an error."""

        def step(raw: bytes | None) -> tuple[T, str | None]:
            book = self._parsed(raw)
            result = decide(book)
            if not write:
                return result, None
            now = self._clock()
            book.reservations = self._live(book, now)
            book.booked_usd = {d: v for d, v in book.booked_usd.items() if d == now.date()}
            return result, book.model_dump_json()

        return self.book.update(step)

    def _parsed(self, raw: bytes | None) -> _Book:
        if raw is None:
            return _Book()
        try:
            return _Book.model_validate_json(raw)
        except ValidationError:
            raise DeepResearchError(
                f"the daily budget's ledger {self.book.where} is damaged: runs are refused "
                "until it is removed (what it reserved today is then forgotten)"
            ) from None


def _utc(moment: datetime) -> datetime:
    """Sessions write aware UTC times; a naive one (edited by hand) is taken as UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
