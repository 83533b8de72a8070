"""A fetched page's main text, title and publication date: what the page reader keeps.

HTML goes through trafilatura (markdown, tables kept, no comments, links or images; it
downloads nothing); plain text is kept as it is, its first line for a title, with no date.
The reader calls it in a worker thread, off the event loop.

The date is the page's original publication date as its markup states it (htmldate through
trafilatura's metadata: ``article:published_time`` and other meta tags, JSON-LD
``datePublished``, ``<time>`` elements, a date in the URL), never a guess from the text
(htmldate's ``extensive_search`` is off: "Copyright 2019" in a footer is no date).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

import trafilatura
from trafilatura.settings import set_date_params

if TYPE_CHECKING:
    from deep_research.adapters.web.reader import Reply


@dataclass(frozen=True)
class Extracted:
    title: str
    text: str
    published: date | None = None


def extract(reply: Reply) -> Extracted:
    """The page's title, main text and publication date."""
    encoding = reply.encoding
    if reply.kind == "text":
        text = reply.body.decode(encoding or "utf-8", errors="replace").strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return Extracted(first[:200], text)
    document = trafilatura.extract_with_metadata(
        reply.body.decode(encoding, errors="replace") if encoding else reply.body,
        url=str(reply.url),
        output_format="markdown",
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
        date_extraction_params=set_date_params(False),  # the markup's dates only
    )
    if document is None or not document.text:
        return Extracted("", "")
    title = (document.title or "").strip()
    return Extracted(title, _without_front_matter(document.text), _date(document.date))


def _date(text: str | None) -> date | None:
    """htmldate's ``YYYY-MM-DD``, or None."""
    try:
        return date.fromisoformat(text[:10]) if text else None
    except ValueError:
        return None


def _without_front_matter(text: str) -> str:
    """trafilatura puts its metadata in a YAML header when asked for it: drop it."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[end + 5 :].strip()
    return text.strip()
