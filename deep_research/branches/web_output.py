"""Reading a finished research job: the report text with ``[n]`` markers, its citations,
its usage (web searches included) and a confidence. Pure: SDK objects in, our data out.

Replies are parsed leniently by the SDK, so every field is checked before use; anything
malformed is skipped, never trusted.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from openai.types.responses import Response

from deep_research.errors import BranchError
from deep_research.models import Citation, Usage


def _list(obj: object, attr: str) -> list[Any]:
    """A list field of a leniently parsed SDK object; anything else is treated as empty."""
    value = getattr(obj, attr, None)
    return value if isinstance(value, list) else []


def _int(obj: object, attr: str) -> int:
    value = getattr(obj, attr, None)
    return value if isinstance(value, int) else 0


def usage_of(response: Response) -> Usage:
    output = _list(response, "output")
    usage = getattr(response, "usage", None)
    return Usage(
        input_tokens=_int(usage, "input_tokens"),
        cached_input_tokens=_int(getattr(usage, "input_tokens_details", None), "cached_tokens"),
        output_tokens=_int(usage, "output_tokens"),
        reasoning_tokens=_int(getattr(usage, "output_tokens_details", None), "reasoning_tokens"),
        web_search_calls=sum(getattr(i, "type", None) == "web_search_call" for i in output),
    )


def extract_report(response: Response) -> tuple[str, list[Citation]]:
    """The final message's text with ``[n]`` markers at each citation's end, and the
    citations de-duplicated by URL (first span kept). Malformed annotations are skipped."""
    messages = [i for i in _list(response, "output") if getattr(i, "type", None) == "message"]
    content = _list(messages[-1], "content") if messages else []
    parts = [c for c in content if getattr(c, "type", None) == "output_text"]
    citations: dict[str, Citation] = {}
    marked: list[str] = []
    for part in parts:
        text = part.text if isinstance(getattr(part, "text", None), str) else ""
        marks: dict[int, list[int]] = {}  # end_index -> citation numbers, in annotation order
        for ann in _list(part, "annotations"):
            url, title = getattr(ann, "url", None), getattr(ann, "title", None)
            start, end = getattr(ann, "start_index", None), getattr(ann, "end_index", None)
            if getattr(ann, "type", None) != "url_citation" or not isinstance(url, str) or not url:
                continue
            if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end):
                continue
            if end > len(text):
                continue
            if url not in citations:
                title = title if isinstance(title, str) else ""
                span = text[start:end].strip()
                citations[url] = Citation(
                    kind="web", url=url, title=title, locator=url, snippet=span
                )
            number = list(citations).index(url) + 1
            if number not in marks.setdefault(end, []):
                marks[end].append(number)
        # Insert from the end backwards so earlier indices stay valid.
        for end in sorted(marks, reverse=True):
            text = text[:end] + "".join(f"[{n}]" for n in marks[end]) + text[end:]
        marked.append(text)
    report = "\n\n".join(t for t in marked if t.strip())
    if not report:
        raise BranchError("deep research returned no report text")
    return report, list(citations.values())


def confidence(citations: list[Citation]) -> float:
    """0.5 + 0.1 per distinct source site, at most 0.9; 0.3 for an uncited report.

    Sites, not URLs: five pages of one vendor's docs are one voice, not five."""
    hosts = {urlsplit(c.url or "").netloc.lower().removeprefix("www.") for c in citations}
    hosts.discard("")
    return 0.3 if not hosts else min(0.9, 0.5 + 0.1 * len(hosts))
