"""Planted facts and fabrications, shared by the claim-check benches: ``bench/claims.py``
(a synthetic report) and ``bench/report.py`` (a full run of the engine, through
``bench/facts.py``).

- ``plant(count, seed)``: ``count`` facts, each a unique made-up name, a number and one of
  five sentence templates; 15 % of them fabricated in five kinds, one fifth each (a changed
  number, a flipped negation, a swapped entity: another fact's name, a citation moved to
  another fact's page, an unsupported clause added), 30 % of the true ones reworded, the
  rest stated as the research stated them. ``Fact.written`` is what a writer makes of it
  (a moved citation's words are the true ones: its marker is what moves).
- ``page_html``: the page a fact is cited to (the fact as stated, among filler);
  ``Pages``: those pages served on loopback (``/f<index>``), to be read through the page
  reader as any cited page is (``DEEP_RESEARCH_FETCH_ALLOW``'s address exemption).
Deterministic from the seed.
"""

from __future__ import annotations

import random
import threading
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


def names(count: int, rng: random.Random) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if name not in out:
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


def page_html(fact: Fact) -> str:
    lines = [f.format(name=fact.name) for f in FILLER]
    lines.insert(2, fact.stated)
    body = "".join(f"<p>{line}</p>" for line in lines)
    return (
        f"<html><head><title>{fact.name}</title></head><body><article><h1>{fact.name}</h1>"
        f"{body}</article></body></html>"
    )


# --- the loopback pages ---------------------------------------------------------------------


class Pages:
    def __init__(self, facts: list[Fact]) -> None:
        pages = {f"/f{f.index}": page_html(f).encode() for f in facts}

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

    def close(self) -> None:
        self.server.shutdown()
