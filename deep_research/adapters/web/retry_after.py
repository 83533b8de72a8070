"""The one reading of an HTTP ``Retry-After`` header, for every client that meets a 429:
the page reader, the search providers and the OpenAI background jobs."""

from __future__ import annotations

import email.utils
import math
from datetime import UTC, datetime


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A Retry-After header in seconds (delay-seconds or an HTTP date, a past date is 0);
    None when absent or unusable (empty, negative, not a number, not a date)."""
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
