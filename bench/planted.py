"""Planted facts and fabrications, shared by the claim-check benches: ``bench/claims.py``
(a synthetic report) and ``bench/report.py`` (a full run of the engine, through
``bench/facts.py``).

- ``plant(count, seed)``: ``count`` facts, each a unique made-up name, a number and one of
  five sentence templates; 15 % of them fabricated in five kinds, one fifth each (a changed
  number, a flipped negation, a swapped entity: another fact's name, a citation moved to
  another fact's page, an unsupported clause added), 30 % of the true ones reworded, the
  rest stated as the research stated them. ``Fact.written`` is what a writer makes of it
  (a moved citation's words are the true ones: its marker is what moves).
- ``pairs(seed)``: 10 planted contradicting pairs (``PAIRS``: one subject, a conflicting
  number, date or polarity) and 10 pairs that only look alike (``LOOKALIKES``: the same
  subject another year, or another subject), each side a sentence about a made-up name
  (none of ``taken``). ``bench/claims.py`` gives them to the contradiction finder as
  evidence units; ``bench/report.py`` has research jobs state them (``bench/facts.py``).
- ``page_html``: the page a fact is cited to (the fact as stated, among filler);
  ``Pages``: those pages served on loopback (``/f<index>``; a pair's side at
  ``/c<pair>.<side>``), to be read through the page reader as any cited page is
  (``DEEP_RESEARCH_FETCH_ALLOW``'s address exemption).
Deterministic from the seed.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KINDS = ("number", "negation", "entity", "moved_citation", "added_clause")
FABRICATED = 0.15
REWORDED = 0.30

# --- the facts ------------------------------------------------------------------------------

SYLLABLES = ("ka", "lo", "mir", "vet", "sun", "dra", "pel", "quo", "tan", "zer", "bri", "om")


@dataclass(frozen=True)
class Template:
    stated: str
    """As the research job stated it: {name} and {n} filled in."""
    reworded: str
    negated: str
    clause: str
    """An unsupported clause to add (after a comma)."""


TEMPLATES = (
    Template(
        "The {name} index stores its vectors in {n} shards by default.",
        "By default, {n} shards hold the vectors of the {name} index.",
        "The {name} index does not store its vectors in {n} shards by default.",
        "which made it the fastest index measured by the Linux Foundation that year",
    ),
    Template(
        "The {name} scheduler retries a failed task {n} times before giving up.",
        "Before giving up on a failed task, the {name} scheduler retries it {n} times.",
        "The {name} scheduler never retries a failed task {n} times before giving up.",
        "a limit that Google adopted for its own internal batch systems",
    ),
    Template(
        "The {name} cache keeps each entry for {n} seconds after its last read.",
        "Each entry stays in the {name} cache for {n} seconds after it was last read.",
        "The {name} cache does not keep each entry for {n} seconds after its last read.",
        "which halved the memory use reported by its largest customers",
    ),
    Template(
        "The {name} parser was rewritten in Rust and now reads {n} megabytes per second.",
        "Rewritten in Rust, the {name} parser now reads {n} megabytes per second.",
        "The {name} parser was not rewritten in Rust and reads {n} megabytes per second.",
        "twice the speed of every other open-source parser",
    ),
    Template(
        "The {name} protocol sends a heartbeat to every peer each {n} milliseconds.",
        "Every {n} milliseconds, the {name} protocol sends each peer a heartbeat.",
        "The {name} protocol does not send a heartbeat to every peer each {n} milliseconds.",
        "as the IETF working group required in its final draft",
    ),
)
FILLER = (
    "This page describes the {name} project, its design and its defaults.",
    "The project is maintained by a small team of volunteers and documented in the open.",
    "Its configuration lives in a single file that the service reads when it starts.",
    "Operators can change most settings without restarting the service.",
)


@dataclass
class Fact:
    index: int
    name: str
    number: int
    template: Template
    kind: str = "true"
    """"true", "reworded" or a fabrication kind."""
    written: str = ""
    """What the report states."""
    cites: int = 0
    """The fact whose page the report cites for it."""

    @property
    def stated(self) -> str:
        return self.template.stated.format(name=self.name, n=f"{self.number:,}")

    @property
    def flagged_expected(self) -> bool:
        return self.kind in KINDS


def names(count: int, rng: random.Random, taken: Collection[str] = ()) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if name not in out and name not in taken:
            out.append(name)
    return out


def plant(count: int, seed: int = 7) -> list[Fact]:
    rng = random.Random(seed)
    facts = [
        Fact(i, name, rng.randrange(12, 9_000), TEMPLATES[i % len(TEMPLATES)], cites=i)
        for i, name in enumerate(names(count, rng))
    ]
    order = list(range(count))
    rng.shuffle(order)
    fabricated = order[: max(len(KINDS), round(FABRICATED * count))]
    for k, i in enumerate(fabricated):
        facts[i].kind = KINDS[k % len(KINDS)]
    true = [i for i in order if facts[i].kind == "true"]
    for i in true[: round(REWORDED * len(true))]:
        facts[i].kind = "reworded"
    for fact in facts:
        fact.written = write(fact, facts, rng)
    return facts


def write(fact: Fact, facts: list[Fact], rng: random.Random) -> str:
    t, n = fact.template, f"{fact.number:,}"
    other = facts[(fact.index + 1 + rng.randrange(len(facts) - 1)) % len(facts)]
    if fact.kind == "reworded":
        return t.reworded.format(name=fact.name, n=n)
    if fact.kind == "number":
        changed = fact.number + rng.choice((-1, 1)) * rng.randrange(3, max(4, fact.number // 2))
        return t.stated.format(name=fact.name, n=f"{max(2, changed):,}")
    if fact.kind == "negation":
        return t.negated.format(name=fact.name, n=n)
    if fact.kind == "entity":
        return t.stated.format(name=other.name, n=n)
    if fact.kind == "moved_citation":
        fact.cites = other.index
        return fact.stated
    if fact.kind == "added_clause":
        return fact.stated.rstrip(".") + ", " + t.clause + "."
    return fact.stated


# --- contradictions -------------------------------------------------------------------------

PAIRS = (
    ("The {a} plant employed {n} workers in 2021.", "The {a} plant employed {m} workers in 2021."),
    ("The {a} treaty was signed in {y}.", "The {a} treaty was signed in {z}."),
    (
        "The {a} service supports IPv6 on every region.",
        "The {a} service does not support IPv6 on every region.",
    ),
    ("The {a} dam is {n} metres high.", "The {a} dam is {m} metres high."),
    (
        "The {a} library dropped Python 2 support in {y}.",
        "The {a} library dropped Python 2 support in {z}.",
    ),
)
"""Two sentences that cannot both be true: one subject, a number, a date or a polarity."""
LOOKALIKES = (
    ("The {a} plant employed {n} workers in 2021.", "The {a} plant employed {m} workers in 2023."),
    ("The {a} dam is {n} metres high.", "The {b} bridge is {m} metres long."),
    (
        "The {a} service supports IPv6 on every region.",
        "The {b} service does not support IPv4 on every region.",
    ),
    (
        "The {a} company reported revenue of ${n} million in 2019.",
        "The {a} company reported revenue of ${m} million in 2022.",
    ),
    (
        "The {a} library dropped Python 2 support in {y}.",
        "The {b} library dropped Python 2 support in {z}.",
    ),
)
"""Two sentences that only look alike: the same subject another year, or another subject."""
PAIRS_PLANTED = 10
PAIRS_LOOKALIKE = 10


@dataclass(frozen=True)
class Pair:
    index: int
    sides: tuple[str, str]
    planted: bool
    """True: they contradict (``PAIRS``); False: they only look alike (``LOOKALIKES``)."""


def pairs(seed: int = 11, taken: Collection[str] = ()) -> list[Pair]:
    """``PAIRS_PLANTED`` planted pairs, then ``PAIRS_LOOKALIKE`` look-alike ones, the
    templates in turn, each pair's names and figures its own."""
    rng = random.Random(seed)
    total = PAIRS_PLANTED + PAIRS_LOOKALIKE
    pool = names(2 * total, rng, taken)
    out = []
    for k in range(total):
        planted = k < PAIRS_PLANTED
        templates = PAIRS if planted else LOOKALIKES
        first, second = templates[k % len(templates)]
        n = rng.randrange(100, 5000)
        y = rng.randrange(1960, 2015)
        values = {
            "a": pool[2 * k],
            "b": pool[2 * k + 1],
            "n": f"{n:,}",
            "m": f"{n + rng.randrange(50, 900):,}",
            "y": str(y),
            "z": str(y + rng.randrange(2, 9)),
        }
        out.append(Pair(k, (first.format(**values), second.format(**values)), planted))
    return out


JUDGES = ("yes", "yes_wrong_quote", "quoting")
"""Judge fakes that call every claim they are asked about supported: quoting nothing, quoting
a sentence of the claim's passage other than the one that states it, or quoting that one
(the sentence holding most of the claim's words), verbatim."""


def judge_quote(judge: str, claim: str, passages: Sequence[str]) -> str:
    """What judge fake ``judge`` quotes for ``claim`` (``JUDGES``)."""
    from deep_research.adapters.verifier import claim_words, sentence_spans

    if judge == "yes" or not passages:
        return ""
    sentences = [passages[0][a:b] for a, b in sentence_spans(passages[0])]
    wanted = claim_words(claim)
    ranked = sorted(sentences, key=lambda s: -len(wanted & claim_words(s)))
    return ranked[0] if judge == "quoting" or len(ranked) == 1 else ranked[1]


def side_path(pair: int, side: int) -> str:
    return f"/c{pair}.{side}"


# --- the pages ------------------------------------------------------------------------------


def page_html(fact: Fact) -> str:
    return _page(fact.name, fact.stated)


def _page(name: str, stated: str) -> str:
    lines = [f.format(name=name) for f in FILLER]
    lines.insert(2, stated)
    body = "".join(f"<p>{line}</p>" for line in lines)
    return (
        f"<html><head><title>{name}</title></head><body><article><h1>{name}</h1>"
        f"{body}</article></body></html>"
    )


# --- the loopback pages ---------------------------------------------------------------------


class Pages:
    def __init__(self, facts: list[Fact], said: Mapping[str, str] | None = None) -> None:
        """``said``: more pages, by path, each the sentence it states."""
        pages = {f"/f{f.index}": page_html(f).encode() for f in facts}
        for path, sentence in (said or {}).items():
            pages[path] = _page(sentence.split()[1], sentence).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                page = pages.get(self.path)
                self.send_response(200 if page else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(page or b"not found")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.port}/f{index}"

    def side_url(self, pair: int, side: int) -> str:
        return f"http://127.0.0.1:{self.port}{side_path(pair, side)}"

    def close(self) -> None:
        self.server.shutdown()
