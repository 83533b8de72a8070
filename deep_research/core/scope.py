"""Where and when a run may read the web: its web scope (pure).

Not the ``SourcePolicy`` (which sources a run researches: auto, kb_only, web_only): the scope
narrows the web itself, for every way of researching it.

Invariants:
- A domain is a bare lower-case host name (``example.com``), in punycode where it is not
  ASCII, as every host it is compared with: a scheme, a port, a path, a leading ``*.`` or
  ``www.`` and a trailing dot are dropped as it is read. A domain covers its
  subdomains, as OpenAI's ``filters.allowed_domains`` does.
- A url is in scope when its host is under an allowed domain (any host, when none is given)
  and under no excluded one. A url with no host is never in scope.
- ``since`` is a date, never a relative window: ``90d`` is resolved against the day the run
  started (``parse_since``), and the resolved date is what a session saves, so a resume reads
  the same window. A page with no date is kept under ``since`` (and marked undated by its
  reader); a dated page before it is out of scope.
- The location is the user's approximate place, ``City, Region, CC`` with each part optional
  but the last a two-letter country code when there are two or more; one part is a country
  when it is a two-letter code, else a city (OpenAI's ``country`` is an ISO code). With none
  given the request says nothing of a place (``{"type": "approximate"}``), never silently
  the United States (what OpenAI's ``web_search`` assumes when ``user_location`` is left
  out).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

MAX_DOMAINS = 100
"""OpenAI's ``filters.allowed_domains`` takes at most 100 (checked 2026-11-26, web-search
guide); the same cap for excluded ones keeps a scope small enough to state in one line."""
MAX_LOCATION_CHARS = 120
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
_RELATIVE = re.compile(r"^(\d{1,5})\s*([dwmy])$")
_DAYS = {"d": 1, "w": 7, "m": 30, "y": 365}
_COUNTRY = re.compile(r"^[A-Za-z]{2}$")


def ascii_host(host: str) -> str:
    """``host`` lower-case, in its ASCII (punycode) form, as a client connects to it
    (``bücher.de`` -> ``xn--bcher-kva.de``), without a trailing dot; "" when it has none."""
    try:
        return host.strip().lower().encode("idna").decode("ascii").rstrip(".")
    except UnicodeError:
        return ""


def domain(text: str) -> str:
    """``text`` as a bare domain (``https://www.Example.com/a`` -> ``example.com``, in
    punycode where it is not ASCII); a ``ValueError`` naming it when it is no host name."""
    raw = text.strip()
    try:
        host = urlsplit(raw if "//" in raw else f"//{raw}").hostname or ""
    except ValueError:
        host = ""
    host = ascii_host(host.removeprefix("*.")).removeprefix("www.")
    labels = host.split(".")
    if len(labels) < 2 or not all(_LABEL.match(label) for label in labels):
        raise ValueError(f"{text.strip()!r} is not a domain (say example.com)")
    return host


def domains(values: str | Iterable[str]) -> tuple[str, ...]:
    """Domains from a comma-separated string or a list, each once, in order."""
    items = values.split(",") if isinstance(values, str) else list(values)
    found = tuple(dict.fromkeys(domain(item) for item in items if item.strip()))
    if len(found) > MAX_DOMAINS:
        raise ValueError(f"at most {MAX_DOMAINS} domains (got {len(found)})")
    return found


def parse_since(text: str, today: date) -> date:
    """``2025-01-01``, or a window back from ``today``: ``90d``, ``12w``, ``6m``, ``2y``
    (a month is 30 days, a year 365)."""
    value = text.strip().lower()
    if relative := _RELATIVE.match(value):
        days = int(relative.group(1)) * _DAYS[relative.group(2)]
        return today - timedelta(days=days)
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not a date (say 2025-01-01, or 90d)") from None


def location(text: str) -> str:
    """``text`` as a location, its parts trimmed; a ``ValueError`` when the last of two or
    more parts is not a two-letter country code."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if len(text) > MAX_LOCATION_CHARS or len(parts) > 3:
        raise ValueError(f"{text.strip()!r} is not a location (say 'Berlin, DE')")
    if len(parts) >= 2 and not _COUNTRY.match(parts[-1]):
        raise ValueError(
            f"{text.strip()!r}: end a location with a two-letter country code ('Berlin, DE')"
        )
    if len(parts) == 1 and _COUNTRY.match(parts[0]):
        parts[0] = parts[0].upper()
    elif len(parts) >= 2:
        parts[-1] = parts[-1].upper()
    return ", ".join(parts)


def host_of(url: str) -> str:
    """The host of ``url`` as ``ascii_host`` writes it; "" when it has none."""
    try:
        return ascii_host(urlsplit(url.strip()).hostname or "")
    except ValueError:
        return ""


def page_key(url: str) -> str:
    """``url`` as a page, to tell one page written two ways: host without ``www.``, path
    without a trailing slash, query without ``utm_`` tags (OpenAI's citations add
    ``utm_source=openai``); no scheme, no fragment."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    host = (parts.hostname or "").removeprefix("www.")
    query = "&".join(q for q in parts.query.split("&") if q and not q.startswith("utm_"))
    return f"{host}{parts.path.rstrip('/')}" + (f"?{query}" if query else "")


def under(host: str, names: Iterable[str]) -> bool:
    """``host`` is one of ``names`` or a subdomain of one."""
    return any(host == name or host.endswith(f".{name}") for name in names)


class WebScope(BaseModel):
    """Where and when a run may read the web; the empty scope allows all of it."""

    model_config = ConfigDict(frozen=True)

    domains: tuple[str, ...] = ()
    """Allowed domains (subdomains included); empty: any."""
    exclude_domains: tuple[str, ...] = ()
    since: date | None = None
    """Pages dated before this are out of scope; undated pages are kept."""
    location: str = ""
    """``City, Region, CC`` (parts optional); "": no place is sent."""

    @field_validator("domains", "exclude_domains", mode="before")
    @classmethod
    def _domains(cls, value: Any) -> Any:
        return domains(value) if isinstance(value, str | list | tuple) else value

    @field_validator("location")
    @classmethod
    def _location(cls, value: str) -> str:
        return location(value) if value.strip() else ""

    def allows(self, url: str) -> bool:
        """``url``'s host is in scope (its date is ``dated_in``'s to judge)."""
        host = host_of(url)
        if not host:
            return False
        if self.domains and not under(host, self.domains):
            return False
        return not under(host, self.exclude_domains)

    def refusal(self, url: str) -> str | None:
        """Why ``url`` is outside the scope's domains, in a line; None when it is inside."""
        if self.allows(url):
            return None
        said = self.model_copy(update={"since": None, "location": ""}).describe()
        return f"{host_of(url) or 'the address'} is outside the run's web scope ({said})"

    def dated_in(self, published: date | None) -> bool:
        """A page published on ``published`` (None: undated, kept) is in the window."""
        return self.since is None or published is None or published >= self.since

    def user_location(self) -> dict[str, str]:
        """OpenAI's ``web_search`` ``user_location``: approximate, with what is known."""
        found: dict[str, str] = {"type": "approximate"}
        parts = [part.strip() for part in self.location.split(",") if part.strip()]
        if len(parts) == 1:
            found["country" if _COUNTRY.match(parts[0]) else "city"] = parts[0]
        elif parts:
            found["city"] = parts[0]
            found["country"] = parts[-1]
            if len(parts) == 3:
                found["region"] = parts[1]
        return found

    def describe(self) -> str:
        """One line for the report and the screen; "" for the empty scope."""
        said = []
        if self.domains:
            said.append("only " + ", ".join(self.domains))
        if self.exclude_domains:
            said.append("not " + ", ".join(self.exclude_domains))
        if self.since:
            said.append(f"since {self.since.isoformat()}")
        if self.location:
            said.append(f"near {self.location}")
        return "; ".join(said)
