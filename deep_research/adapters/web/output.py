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
from deep_research.core.scope import WebScope

MAX_CLAIM_CHARS = 500

_LINK = r"\[[^\]\n]*\]\([^)\s]*\)"
# `([site](url))`, also several links in one pair of parentheses: `([a](u); [b](v))`.
_PAREN_LINKS = re.compile(rf"\(\s*{_LINK}(?:\s*[,;]?\s*{_LINK})*\s*\)")
_BARE_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\s]*\)")
_ANY_LINK = re.compile(rf"{_PAREN_LINKS.pattern}|{_BARE_LINK.pattern}")
_OPENING_LINKS = re.compile(rf"\s*{_PAREN_LINKS.pattern}(?:\s*{_PAREN_LINKS.pattern})*")
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
    details_in = getattr(usage, "input_tokens_details", None)
    return Usage(
        input_tokens=_int(usage, "input_tokens") or 0,
        cached_input_tokens=_int(details_in, "cached_tokens") or 0,
        cache_write_tokens=_int(details_in, "cache_write_tokens") or 0,
        output_tokens=_int(usage, "output_tokens") or 0,
        reasoning_tokens=_int(getattr(usage, "output_tokens_details", None), "reasoning_tokens")
        or 0,
        web_search_calls=web_searches(response),
    )


def service_tier(response: Response) -> str:
    """The tier the provider says it served the job on ("flex" costs half): the reply's
    ``service_tier``, "default" when it names none."""
    tier = getattr(response, "service_tier", None)
    return tier if isinstance(tier, str) and tier not in ("", "auto") else "default"


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


def extract_report(
    response: Response, scope: WebScope | None = None
) -> tuple[str, list[Citation], list[str]]:
    """The final message's text with ``[n]`` markers, its citations, one per distinct
    (url, claim): two claims citing one page are two citations, one claim cited twice by
    a page is one; and the pages it cites outside ``scope``, each once, left out of both.

    A marker goes where its annotated span ended; a span that is only an inline link is
    replaced by the marker. Malformed annotations are skipped. A citation of a page outside
    ``scope`` gets no marker, its link is taken out, and so is the sentence it supports
    (``claim_of``'s sentence), unless that sentence also cites a page in scope: a claim
    whose only source is out of scope never reaches the findings."""
    messages = [i for i in _list(response, "output") if getattr(i, "type", None) == "message"]
    content = _list(messages[-1], "content") if messages else []
    parts = [c for c in content if getattr(c, "type", None) == "output_text"]
    citations: dict[str, Citation] = {}
    dropped: dict[str, None] = {}
    marked: list[str] = []
    for part in parts:
        text = part.text if isinstance(getattr(part, "text", None), str) else ""
        masked = _masked(text)
        marks: dict[int, list[int]] = {}  # end_index -> citation numbers, in annotation order
        links: set[tuple[int, int]] = set()
        kept: list[tuple[int, int]] = []  # the sentences citing a page in scope, and spans
        outside: list[tuple[int, int]] = []  # the spans citing a page outside it
        for ann in _list(part, "annotations"):
            url, title = getattr(ann, "url", None), getattr(ann, "title", None)
            start, end = _int(ann, "start_index"), _int(ann, "end_index")
            if getattr(ann, "type", None) != "url_citation" or not isinstance(url, str) or not url:
                continue
            if scope is not None and not scope.allows(url):
                dropped.setdefault(url)
            if start is None or end is None or not 0 <= start <= end <= len(text):
                continue
            if _ANY_LINK.fullmatch(text[start:end].strip()):
                links.add((start, end))
            if url in dropped:
                outside.append((start, end))
                continue
            kept += [_sentence_of(text, masked, start, end)[:2], (start, max(end, start + 1))]
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
        unsupported = {_sentence_of(text, masked, start, end)[:2] for start, end in outside}
        unsupported = {u for u in unsupported if not any(_overlap(u, k) for k in kept)}
        cuts = {_cut(text, first, last) for first, last in _runs(text, unsupported)}
        marked.append(_apply(text, marks, links, cuts))
    report = "\n\n".join(t for t in marked if t.strip())
    if not report:
        raise BranchError("deep research returned no report text")
    return report, list(citations.values()), list(dropped)


def sources_used(response: Response) -> list[str]:
    """Every url the job's searches used, each once, in order: the ``sources`` of its
    ``web_search_call`` items' ``search`` actions (openai SDK 3.57, ``types/responses/
    response_function_web_search.py``: ``ActionSearch.sources``, each ``{type: "url", url}``,
    checked 2026-11-26). The API sends them only when the request's ``include`` asks for
    ``web_search_call.action.sources``."""
    urls: dict[str, None] = {}
    for item in _list(response, "output"):
        action = getattr(item, "action", None)
        if getattr(item, "type", None) != "web_search_call":
            continue
        for source in _list(action, "sources"):
            url = getattr(source, "url", None)
            if getattr(source, "type", None) == "url" and isinstance(url, str) and url:
                urls.setdefault(url)
    return list(urls)


def claim_of(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` holding the span ``[start, end)``, without inline links.

    A span after the sentence's full stop (``claim. ([site](url))``) stands for the
    sentence before it. At most ~``MAX_CLAIM_CHARS``: of a longer sentence, the part that
    leads up to the span is kept."""
    masked = _masked(text)
    first, last, end = _sentence_of(text, masked, start, end)
    clipped = first < end - MAX_CLAIM_CHARS
    if clipped:
        # Start at a word, never inside a (masked) link.
        space = masked.find(" ", end - MAX_CLAIM_CHARS, end)
        first = space + 1 if space >= 0 else end - MAX_CLAIM_CHARS
    claim = _plain(text[first:last])
    if len(claim) > MAX_CLAIM_CHARS:
        claim = claim[:MAX_CLAIM_CHARS].rsplit(" ", 1)[0] + " …"
    return f"… {claim}" if clipped else claim


def _masked(text: str) -> str:
    """``text`` with its links blanked out, as long as it: urls are full of dots, which
    must not end sentences."""
    return _ANY_LINK.sub(lambda m: "x" * len(m.group()), text)


def _sentence_of(text: str, masked: str, start: int, end: int) -> tuple[int, int, int]:
    """The sentence the span ``[start, end)`` stands for: the one holding it or, when that
    one says nothing but links or the span is links in parentheses opening it
    (``claim. ([site](url)) Next claim.``), the one before. As its bounds in ``text`` and
    where the span stands in it (the end of the sentence before, when moved)."""
    while True:
        first, last = _sentence_bounds(masked, start, end)
        previous = len(text[:first].rstrip())
        opens = not text[first:start].strip() and _PAREN_LINKS.fullmatch(text[start:end].strip())
        if previous == 0 or (not opens and any(ch.isalnum() for ch in _plain(text[first:last]))):
            closing = _OPENING_LINKS.match(text, first, last)  # they close the sentence before
            if previous and closing and closing.end() <= start:
                first = closing.end()
            return first, last, end
        start, end = previous - 1, previous


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _runs(text: str, sentences: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """``sentences`` (bounds), those of one line with nothing but links and spaces between
    them joined."""
    runs: list[tuple[int, int]] = []
    for first, last in sorted(sentences):
        gap = text[runs[-1][1] : first] if runs else "\n"
        if "\n" not in gap and not any(ch.isalnum() for ch in _plain(gap)):
            runs[-1] = (runs[-1][0], max(last, runs[-1][1]))
        else:
            runs.append((first, last))
    return runs


def _cut(text: str, first: int, last: int) -> tuple[int, int]:
    """What to take out of ``text`` for the sentences ``[first, last)``: within a line,
    them and the space before; the whole line when nothing but links follows them on it;
    else, at a line's start, them after the line's markdown prefix (a bullet, a heading's
    hashes) and the space after."""
    if text[last - 1 : last] == "\n":
        last -= 1
    if first > 0 and text[first - 1] != "\n":
        return first, last
    line_end = text.find("\n", last)
    line_end = len(text) if line_end < 0 else line_end
    if not any(ch.isalnum() for ch in _plain(text[last:line_end])):
        return (first, line_end + 1) if line_end < len(text) else (max(0, first - 1), line_end)
    space = len(text[last:]) - len(text[last:].lstrip(" \t"))
    prefix = _LINE_PREFIX.match(text[first:last])
    return first + (prefix.end() if prefix else 0), last + space


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


def _apply(
    text: str,
    marks: dict[int, list[int]],
    links: set[tuple[int, int]],
    cuts: set[tuple[int, int]],
) -> str:
    """``text`` with ``cuts`` taken out (``_cut``), cited links replaced (a bare link by its
    words, parenthesised ones by nothing) and each end's markers inserted where the span
    ended. No marker ends inside a cut (``extract_report`` cuts no sentence citing a page)."""
    edits: list[tuple[int, int, str]] = []
    for start, end in sorted(links):
        if any(a <= start and end <= b for a, b in cuts):
            continue  # taken out with its sentence
        if edits and start < edits[-1][1]:
            continue  # overlapping link spans: keep the first, leave the other as written
        span = text[start:end]
        bare = _BARE_LINK.fullmatch(span.strip())
        replacement = bare.group(1) if bare else ""
        if not replacement:
            # `vectors ([site](url)).` reads `vectors[1].`, not `vectors [1].`
            start = len(text[:start].rstrip(" \t"))
            start = max([start, *(b for a, b in cuts if a < start < b)])
        edits.append((start, end, replacement))
    pieces: list[str] = []
    done = -1  # a zero-width span at 0 still gets its marker
    for start, end, replacement in sorted([*edits, *((a, b, "") for a, b in cuts)]):
        if (start, end) in cuts:
            pieces.append(_marked(text, done, start, marks))
            done = end
            continue
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
