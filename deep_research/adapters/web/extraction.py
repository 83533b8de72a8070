"""A fetched page's main text and title: what the page reader keeps of a page.

HTML goes through trafilatura (markdown, tables kept, no comments, links or images; it
downloads nothing); plain text is kept as it is, its first line for a title. The reader
calls it in a worker thread, off the event loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trafilatura

if TYPE_CHECKING:
    from deep_research.adapters.web.reader import Reply


def main_text(reply: Reply) -> tuple[str, str]:
    encoding = reply.encoding
    if reply.kind == "text":
        text = reply.body.decode(encoding or "utf-8", errors="replace").strip()
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return first[:200], text
    document = trafilatura.extract_with_metadata(
        reply.body.decode(encoding, errors="replace") if encoding else reply.body,
        url=str(reply.url),
        output_format="markdown",
        include_tables=True,
        include_comments=False,
        include_links=False,
        include_images=False,
    )
    if document is None or not document.text:
        return "", ""
    return (document.title or "").strip(), _without_front_matter(document.text)


def _without_front_matter(text: str) -> str:
    """trafilatura puts its metadata in a YAML header when asked for it: drop it."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 4)
        if end != -1:
            return text[end + 5 :].strip()
    return text.strip()
