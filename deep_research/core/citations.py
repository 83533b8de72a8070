"""Citations, in one place: marker forms, identity, registration, renumbering and checking.

Markers are read where they sit in the markdown (``core.markers``: not in code, links or
images; the forms ``[S1]``, ``[1]``, ``(S1)``, ``【1】``, ``[S1, S2]`` are one grammar). Three
numbering spaces, from a branch to the report:
- ``[n]`` — a branch's notes cite the n-th evidence passage its prompt numbered (``LOCAL``);
- ``[S#]`` — the session registry's ref, used in notes, summary and drafts (``SESSION``);
- ``[n]`` again in the report, numbered by first use (``renumber_all``).

A model's text is read against what its prompt showed (``read_notes``, ``read_reply``): a
marker is tied to a source only when what it means is beyond doubt, and rewritten in its
one form; every other marker is *untied*: made literal (``\\[2\\]``, markdown shows
``[2]``) where it stands, so no later step can take it for a citation, and counted
(``untied``, ``untied_note``) so the report can say once why those sentences cite nothing.
No marker is ever invented, dropped silently or moved to another sentence.

- In a branch's notes, ``[n]`` is the prompt's own numbering: tied to passage n when
  1 <= n <= the passages listed. ``[S#]`` is tied only to a ref the prompt showed (an
  earlier finding's); an ``[S#]`` it never showed makes the notes' numbering doubtful
  (``[S1]`` may mean passage 1), so then no bare ``[n]`` of them is tied either.
- In a written part (a section, a condensing, the lead) the prompt showed unnumbered
  evidence citing ``[S#]`` refs, and a small model often writes ``[3]`` for ``[S3]``, or
  ``[1]`` for the first entry it was shown. The reply's bare numbers are tied, all of them,
  only if the reply writes no ``[S#]`` at all and each ``[n]`` has one meaning: of ``S<n>``
  (when shown) and the n-th entry of each evidence list shown (a model counting entries),
  exactly one ref. Otherwise none is. An ``[S#]`` the prompt did not show is untied.
- A span (``[1–3]``) is always untied: it names sources nobody named one by one.

A bracketed number we did not write — ``[2024]`` in a model's prose, a ``[2]`` in a draft
that cites with ``[S#]`` — is literal the same way, the moment it is seen.

Identity (``identity``): a knowledge-base chunk is its locator, whatever cites it; a web
source with its own text is (url, passage hash), so two passages of one page stay two
citations; a web source without text (OpenAI research jobs) is (url, claim), so a page
cited for two claims is two citations and one claim cited twice is one.

The checker (``check``) is plain Python, so it cannot hallucinate: unknown markers,
factual sentences without a marker, and citations whose source text shares no content
word with the sentence citing it. Support is judged only against what the source says —
its ``quote`` and title — never against ``Citation.claim``: that is our own sentence, and
a sentence always "supports" itself. Citations without source text are counted instead.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from deep_research.core import markdown as md
from deep_research.core.markers import Marker, markers
from deep_research.core.models import Citation
from deep_research.core.words import prefix_words

LOCAL = re.compile(r"(?<!\\)\[(\d{1,4})\](?!\()")
"""``[n]`` in text this package wrote (a report's renumbered body): for the claim readers."""
SESSION = re.compile(r"\[(S\d{1,5})\]")
"""``[S#]`` in text this package wrote; model text is read with ``markers``."""
TRAILING = re.compile(r"\s*(?:(?<!\\)\[S?\d{1,5}\])+\s*$")
"""Markers of either form at the end of a line."""


def identity(citation: Citation) -> str:
    """What makes two citations one source (see the module docstring)."""
    where = citation.url or citation.locator
    if citation.kind != "web":
        return f"{citation.kind}:{where}"
    if citation.quote.strip():
        passage = " ".join(citation.quote.split())
        return f"web:{where}#passage:{hashlib.sha256(passage.encode()).hexdigest()[:16]}"
    if citation.claim:
        return f"web:{where}#{' '.join(citation.claim.lower().split())}"
    return f"web:{where}"


@dataclass(frozen=True)
class Reading:
    """A model's text with its markers read against its prompt (the module docstring):
    each tied one in its one form, ``[n]`` or ``[S#]``, where it stood; each untied one
    literal where it stood, and listed in ``untied`` as a reader sees it (``[2]``)."""

    text: str
    untied: tuple[str, ...] = ()


def read_notes(notes: str, items: int, shown: Iterable[str] = ()) -> Reading:
    """A branch's ``notes``, written against passages numbered ``[1]..[items]`` and earlier
    findings citing the session refs ``shown``."""
    refs = set(shown)
    found = markers(notes)
    doubtful = any(
        name.startswith("S") and name not in refs for m in _live(found) for name in m.names
    )

    def tie(name: str) -> str | None:
        if name.startswith("S"):
            return f"[{name}]" if name in refs else None
        return f"[{int(name)}]" if not doubtful and 1 <= int(name) <= items else None

    return _tied(notes, found, tie)


def read_reply(text: str, *shown: Sequence[str]) -> Reading:
    """A written part (``text``), written against the evidence lists ``shown``: unnumbered
    entries, each citing its ``[S#]`` refs."""
    lists = [[tuple(cited_refs(entry)) for entry in entries] for entries in shown]
    refs = {ref for entries in lists for cites in entries for ref in cites}
    found = markers(text)
    names = [name for m in _live(found) for name in m.names]

    def meaning(number: int) -> str | None:
        """The one ref ``[number]`` can mean: ``S<number>`` shown, the number-th entry of
        a list; None when that is nothing, or more than one ref."""
        readings: set[tuple[str, ...]] = {(f"S{number}",)} if f"S{number}" in refs else set()
        readings |= {entries[number - 1] for entries in lists if len(entries) >= number >= 1}
        only = readings.pop() if len(readings) == 1 else ()
        return only[0] if len(only) == 1 else None

    meant = {n: meaning(int(n)) for n in names if not n.startswith("S")}
    bare = not any(n.startswith("S") for n in names) and None not in meant.values()

    def tie(name: str) -> str | None:
        if name.startswith("S"):
            return f"[{name}]" if name in refs else None
        return f"[{meant[name]}]" if bare else None

    return _tied(text, found, tie)


def untied(texts: Iterable[str]) -> list[str]:
    """Every untied (literal) marker of ``texts``, as a reader sees it, in order."""
    return [m.shown for text in texts for m in markers(text) if m.literal]


def untied_note(shown: Sequence[str]) -> str:
    """Why some sentences cite nothing although a marker follows them: said once."""
    if not shown:
        return ""
    count = len(shown)
    markers_like = f"{count} citation markers like {shown[0]}" if count > 1 else shown[0]
    return (
        f"{markers_like} could not be tied to a source (a number the evidence did not list, "
        "or one that could mean more than one source), so the "
        f"{'sentences carrying them count' if count > 1 else 'sentence carrying it counts'} "
        "as uncited."
    )


def _live(found: Iterable[Marker]) -> list[Marker]:
    return [m for m in found if not (m.literal or m.span)]


def _tied(text: str, found: Sequence[Marker], tie: Callable[[str], str | None]) -> Reading:
    """``text`` with each name of each marker tied (``tie``) or made literal."""
    left: list[str] = []

    def write(marker: Marker) -> str:
        if marker.literal:
            return text[marker.start : marker.end]
        if marker.span:
            left.append(marker.shown)
            return _literal(marker.body)
        out = []
        for name in marker.names:
            tied = tie(name)
            if tied is None:
                left.append(f"[{name}]")
            out.append(_literal(name) if tied is None else tied)
        return "".join(out)

    return Reading(_rewrite(text, found, write), tuple(left))


def _literal(body: str) -> str:
    return f"\\[{body}\\]"


def _rewrite(text: str, found: Sequence[Marker], write: Callable[[Marker], str]) -> str:
    """``text`` with each marker of ``found`` replaced by what ``write`` makes of it."""
    pieces: list[str] = []
    done = 0
    for marker in found:
        pieces += [text[done : marker.start], write(marker)]
        done = marker.end
    pieces.append(text[done:])
    return "".join(pieces)


def _renamed(text: str, name: Callable[[str], str]) -> str:
    """``text`` with each live marker written name by name (``name``), a span made literal,
    and a literal one left as it is."""
    return _tied(text, markers(text), name).text


def escape_literal(text: str) -> str:
    """``text`` (not ours: a source's words) with every marker in it made literal."""
    return _rewrite(text, markers(text), lambda m: _literal(m.body))


def keep_cited(notes: str, available: int, shown: Iterable[str] = ()) -> tuple[str, list[int]]:
    """A branch's ``notes`` read (``read_notes``) and their passage markers renumbered
    ``[1]..[k]`` by first use.

    Returns the text and the 0-based indexes (into a list of ``available`` items) of what
    was cited, in the new order; untied markers are left as literal text."""
    text = read_notes(notes, available, shown).text
    found = markers(text)
    renumbered: dict[int, int] = {}
    for marker in _live(found):
        for name in marker.names:
            if not name.startswith("S"):
                renumbered.setdefault(int(name), len(renumbered) + 1)

    text = _renamed(text, lambda n: f"[{n}]" if n.startswith("S") else f"[{renumbered[int(n)]}]")
    return text, [number - 1 for number in renumbered]


def shift(notes: str, offset: int) -> str:
    """Passage markers moved ``offset`` places on: notes whose list is appended to another."""
    return _renamed(notes, lambda n: f"[{n}]" if n.startswith("S") else f"[{int(n) + offset}]")


def strip_trailing(line: str) -> str:
    """``line`` without the markers it ends with."""
    return TRAILING.sub("", line)


def has_session_marker(text: str) -> bool:
    return bool(cited_refs(text))


_CLAIM_END = re.compile(r"(?<=[.!?])\s+|\n+")


def sentence_of(text: str, number: int) -> str:
    """The sentence of ``text`` that cites local marker ``[number]``, without its markers:
    the claim that citation supports. Empty when no sentence cites it."""
    for sentence in _CLAIM_END.split(text):
        if any(int(m.group(1)) == number for m in LOCAL.finditer(sentence)):
            claim = " ".join(LOCAL.sub("", sentence).split()).lstrip("-*> ").strip()
            return re.sub(r"\s+([.,;:!?])", r"\1", claim)
    return ""


def register(
    sources: dict[str, Citation], notes: str, citations: Sequence[Citation]
) -> tuple[str, list[Citation]]:
    """Add ``citations`` to the session registry and rewrite ``[n]`` markers to ``[S#]``.

    Citations are de-duplicated by ``identity`` across the whole session. A marker that
    points past the list stays in the notes as literal text."""
    by_identity = {identity(c): ref for ref, c in sources.items()}
    local_to_ref: dict[int, str] = {}
    registered: list[Citation] = []
    for index, citation in enumerate(citations, start=1):
        key = identity(citation)
        ref = by_identity.get(key)
        if ref is None:
            ref = f"S{len(sources) + 1}"
            sources[ref] = citation.model_copy(update={"ref": ref})
            by_identity[key] = ref
        local_to_ref[index] = ref
        registered.append(sources[ref])

    def name(n: str) -> str:
        if n.startswith("S"):
            return f"[{n}]"
        ref = local_to_ref.get(int(n))
        return f"[{ref}]" if ref else _literal(n)

    return _renamed(notes, name), registered


def cited_refs(text: str) -> list[str]:
    """Session refs cited in ``text``, in order of first use."""
    names = (n for m in _live(markers(text)) for n in m.names if n.startswith("S"))
    return list(dict.fromkeys(names))


def renumber_all(
    texts: Sequence[str], sources: Mapping[str, Citation]
) -> tuple[list[str], list[Citation]]:
    """Rewrite ``[S#]`` markers to ``[1]``, ``[2]`` … by first use across ``texts`` read in
    order (a report's parts): one numbering; unknown refs are removed. Bracketed numbers
    already in the texts are literal. Returns the texts and the cited sources in their new
    order (a report's numbered list)."""
    order: dict[str, int] = {}
    for text in texts:
        for ref in cited_refs(text):
            if ref in sources and ref not in order:
                order[ref] = len(order) + 1

    def name(n: str) -> str:
        if not n.startswith("S"):
            return _literal(n)
        number = order.get(n)
        return f"[{number}]" if number else ""

    return [_renamed(text, name) for text in texts], [sources[r] for r in order]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_COMPARISON = re.compile(
    r"\b(more|less|fewer|faster|slower|better|worse|higher|lower|larger|smaller|most|least)\b"
    r"|%|\bx\d|\d+x\b",
    re.IGNORECASE,
)
MIN_QUOTE_WORDS = 8


@dataclass
class CheckResult:
    cited: int = 0
    """Citation markers in the body (one source is often cited many times)."""
    cited_sources: set[int] = field(default_factory=set)
    """The distinct sources those markers point to."""
    unknown: int = 0
    no_source_text: int = 0
    """Citations whose source has no quote (web research): their support was not judged."""
    uncited: list[str] = field(default_factory=list)
    unsupported: list[tuple[str, int]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.unknown or self.uncited or self.unsupported)


def check(body: str, sources: Sequence[Citation], *, unknown: int = 0) -> CheckResult:
    """Check a renumbered body (``[1]`` = ``sources[0]``)."""
    result = CheckResult(unknown=unknown)
    for sentence in sentences(body):
        numbers = [int(n) for n in LOCAL.findall(sentence)]
        text = LOCAL.sub("", sentence).strip()
        if not numbers:
            if is_factual(text):
                result.uncited.append(text)
            continue
        result.cited += len(numbers)
        known = [n for n in numbers if 1 <= n <= len(sources)]
        result.cited_sources.update(known)
        result.no_source_text += sum(1 for n in known if not sources[n - 1].quote.strip())
        claim = prefix_words(text)
        evidence = [
            (n, prefix_words(_source_text(sources[n - 1])))
            for n in known
            if sources[n - 1].quote.strip()
        ]
        judged = [(n, words) for n, words in evidence if len(words) >= MIN_QUOTE_WORDS]
        if judged and all(not claim & words for _, words in judged):
            result.unsupported.append((text, judged[0][0]))
    return result


def sentences(body: str) -> list[str]:
    """Prose sentences of a markdown body, read from its parse (``md.paragraphs``): of its
    paragraphs and list items, in a quote too; headings of any kind (ATX, setext), tables,
    code and bits under six words are none."""
    texts = [p.text for p in md.paragraphs(body) if p.kind != "row"]
    pieces = [piece.strip() for text in texts for piece in _SENTENCE_END.split(text)]
    return [piece for piece in pieces if len(piece.split()) >= 6]


def is_factual(sentence: str) -> bool:
    """Numbers, dates, proper nouns past the first word, or comparisons: worth a citation."""
    words = sentence.split()
    if any(ch.isdigit() for ch in sentence) or _COMPARISON.search(sentence):
        return True
    return any(w[:1].isupper() and w.strip("(\"'").isalpha() for w in words[1:])


def _source_text(source: Citation) -> str:
    """What the source itself says; ``claim`` is ours and proves nothing."""
    return f"{source.title} {source.quote}"
