"""Showing a URL a user configured without the credentials it may carry."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def mask_url(url: str) -> str:
    """``url`` with ``user:pass@`` and every query value masked (``?key=…`` is often a
    secret); a value that is not a URL with a scheme comes back unchanged."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = urlencode([(k, "***") for k, _ in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit(parts._replace(netloc=netloc, query=query))
