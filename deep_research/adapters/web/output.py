"""Reading a finished research job: the report text with ``[n]`` markers, its citations,
its usage (web searches included) and a confidence. Pure: SDK objects in, our data out.

Replies are parsed leniently by the SDK, so every field is checked before use; anything
malformed is skipped, never trusted.

A ``url_citation`` annotation in today's replies usually spans an inline link,
``... 10M vectors ([trychroma.com](https://docs.trychroma.com/scale)).``, not the claim.
So a citation's ``claim`` is the sentence around the span with its links taken out, and
the link itself gives way to the ``[n]`` marker: the Sources list carries the url. The
API returns no text of the page, so a web citation's ``quote`` stays empty.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from openai.types.responses import Response

from deep_research.core.citations import TRAILING, escape_literal, identity
from deep_research.core.errors import BranchError
from deep_research.core.models import Citation, Usage

MAX_CLAIM_CHARS = 500

_LINK = r"\[[^\]\n]*\]\([^)\s]*\)"
# `([site](url))`, also several links in one pair of parentheses: `([a](u); [b](v))`.
_PAREN_LINKS = re.compile(rf"\(\s*{_LINK}(?:\s*[,;]?\s*{_LINK})*\s*\)")
_BARE_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_ANY_LINK = re.compile(rf"{_PAREN_LINKS.pattern}|{_BARE_LINK.pattern}")
# A sentence ends at . ! ? (closing quotes or brackets may follow) before a space, or at a
# line break.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s|$)|\n")
_LINE_PREFIX = re.compile(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+|>\s*)+")


def _list(obj: object, attr: str) -> list[Any]:
    """A list field of a leniently parsed SDK object; anything else is treated as empty."""
    value = getattr(obj, attr, None)
    return value if isinstance(value, list) else []


def _int(obj: object, attr: str) -> int | None:
    value = getattr(obj, attr, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_of(response: Response) -> Usage:
    usage = getattr(response, "usage", None)
    return Usage(
        input_tokens=_int(usage, "input_tokens") or 0,
        cached_input_tokens=_int(getattr(usage, "input_tokens_details", None), "cached_tokens")
        or 0,
        output_tokens=_int(usage, "output_tokens") or 0,
        reasoning_tokens=_int(getattr(usage, "output_tokens_details", None), "reasoning_tokens")
        or 0,
        web_search_calls=web_searches(response),
    )


def web_searches(response: Response) -> int:
    """Billable searches: the response's own tool usage when it reports one, else counted.

    Counting: each ``search`` action bills one search per query it ran (at least one);
    opening a page or finding in it is not billed."""
    tool_usage = getattr(response, "tool_usage", None)
    billed = _int(getattr(tool_usage, "web_search", None), "num_requests")
    if billed is not None:
        return billed
    count = 0
    for item in _list(response, "output"):
        action = getattr(item, "action", None)
        if getattr(item, "type", None) == "web_search_call" and (
            getattr(action, "type", None) == "search"
        ):
            count += max(1, len(_list(action, "queries")))
    return count


def extract_report(response: Response) -> tuple[str, list[Citation]]:
    """The final message's text with ``[n]`` markers and its citations, one per distinct
    (url, claim): two claims citing one page are two citations, one claim cited twice by
    a page is one. A marker goes where its annotated span ended; a span that is only an
    inline link is replaced by the marker. Malformed annotations are skipped."""
    messages = [i for i in _list(response, "output") if getattr(i, "type", None) == "message"]
    content = _list(messages[-1], "content") if messages else []
    parts = [c for c in content if getattr(c, "type", None) == "output_text"]
    citations: dict[str, Citation] = {}
    marked: list[str] = []
    for part in parts:
        text = part.text if isinstance(getattr(part, "text", None), str) else ""
        marks: dict[int, list[int]] = {}  # end_index -> citation numbers, in annotation order
        links: set[tuple[int, int]] = set()
        for ann in _list(part, "annotations"):
            url, title = getattr(ann, "url", None), getattr(ann, "title", None)
            start, end = _int(ann, "start_index"), _int(ann, "end_index")
            if getattr(ann, "type", None) != "url_citation" or not isinstance(url, str) or not url:
                continue
            if start is None or end is None or not 0 <= start <= end <= len(text):
                continue
            citation = Citation(
                kind="web",
                url=url,
                title=title if isinstance(title, str) else "",
                locator=url,
                claim=claim_of(text, start, end),
            )
            key = identity(citation)
            citations.setdefault(key, citation)
            number = list(citations).index(key) + 1
            if number not in marks.setdefault(end, []):
                marks[end].append(number)
            if _ANY_LINK.fullmatch(text[start:end].strip()):
                links.add((start, end))
        marked.append(_apply(text, marks, links))
    report = "\n\n".join(t for t in marked if t.strip())
    if not report:
        raise BranchError("deep research returned no report text")
    return report, list(citations.values())


def claim_of(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` holding the span ``[start, end)``, without inline links.

    A span after the sentence's full stop (``claim. ([site](url))``) stands for the
    sentence before it. At most ~``MAX_CLAIM_CHARS``: of a longer sentence, the part that
    leads up to the span is kept."""
    # Links are blanked out while looking for sentence ends: urls are full of dots.
    masked = _ANY_LINK.sub(lambda m: "x" * len(m.group()), text)
    while True:
        first, last = _sentence_bounds(masked, start, end)
        clipped = first < end - MAX_CLAIM_CHARS
        if clipped:
            # Start at a word, never inside a (masked) link.
            space = masked.find(" ", end - MAX_CLAIM_CHARS, end)
            first = space + 1 if space >= 0 else end - MAX_CLAIM_CHARS
        claim = _plain(text[first:last])
        previous = len(text[:first].rstrip())
        if any(ch.isalnum() for ch in claim) or previous == 0:
            break
        start, end = previous - 1, previous
    if len(claim) > MAX_CLAIM_CHARS:
        claim = claim[:MAX_CLAIM_CHARS].rsplit(" ", 1)[0] + " …"
    return f"… {claim}" if clipped else claim


def _sentence_bounds(masked: str, start: int, end: int) -> tuple[int, int]:
    first = 0
    for match in _SENTENCE_END.finditer(masked, 0, start):
        first = match.end()
    # The span may itself end with the full stop, so look from its last character.
    after = _SENTENCE_END.search(masked, max(start, end - 1))
    return first, after.end() if after else len(masked)


def _plain(sentence: str) -> str:
    """A sentence as a reader would quote it: links out, markdown line prefixes off."""
    sentence = _PAREN_LINKS.sub("", sentence)
    sentence = _BARE_LINK.sub(lambda m: m.group(1), sentence)
    sentence = " ".join(_LINE_PREFIX.sub("", sentence).split())
    return re.sub(r"\s+([.,;:!?])", r"\1", sentence)


def _apply(text: str, marks: dict[int, list[int]], links: set[tuple[int, int]]) -> str:
    """``text`` with cited links replaced (a bare link by its words, parenthesised ones by
    nothing) and each end's markers inserted where the span ended."""
    edits: list[tuple[int, int, str]] = []
    for start, end in sorted(links):
        if edits and start < edits[-1][1]:
            continue  # overlapping link spans: keep the first, leave the other as written
        span = text[start:end]
        bare = _BARE_LINK.fullmatch(span.strip())
        replacement = bare.group(1) if bare else ""
        if not replacement:
            # `vectors ([site](url)).` reads `vectors[1].`, not `vectors [1].`
            start = len(text[:start].rstrip(" \t"))
        edits.append((start, end, replacement))
    pieces: list[str] = []
    done = -1  # a zero-width span at 0 still gets its marker
    for start, end, replacement in edits:
        pieces += [_marked(text, done, start, marks), replacement]
        # Two links citing one claim from one page, side by side, leave one marker.
        run = TRAILING.search("".join(pieces))
        before = set(re.findall(r"\d+", run.group())) if run else set()
        pieces += ["".join(f"[{n}]" for n in _numbers(marks, start, end) if str(n) not in before)]
        pieces.append(text[start:end][len(text[start:end].rstrip()) :])  # trailing space
        done = end
    pieces.append(_marked(text, done, len(text), marks))
    return "".join(pieces)


def _numbers(marks: dict[int, list[int]], low: int, high: int) -> list[int]:
    """The marker numbers of ends in ``(low, high]``, in order, each once."""
    numbers: dict[int, None] = {}
    for end in sorted(e for e in marks if low < e <= high):
        numbers.update(dict.fromkeys(marks[end]))
    return list(numbers)


def _marked(text: str, low: int, high: int, marks: dict[int, list[int]]) -> str:
    """``text[low:high]`` with markers inserted after their ends (ends at ``low`` belong
    to the piece before); the text's own bracketed numbers are escaped as literal."""
    pieces: list[str] = []
    done = max(low, 0)
    for end in sorted(e for e in marks if low < e <= high):
        pieces += [escape_literal(text[done:end]), "".join(f"[{n}]" for n in marks[end])]
        done = end
    pieces.append(escape_literal(text[done:high]))
    return "".join(pieces)


def confidence(citations: list[Citation]) -> float:
    """0.5 + 0.1 per distinct source site, at most 0.9; 0.3 for an uncited report.

    Sites, not URLs: five pages of one vendor's docs are one voice, not five."""
    hosts = {urlsplit(c.url or "").netloc.lower().removeprefix("www.") for c in citations}
    hosts.discard("")
    return 0.3 if not hosts else min(0.9, 0.5 + 0.1 * len(hosts))
