"""Build bench/data/docs_detail.jsonl: a public "documentation detail" claim-verification set.

Each row is (claim, evidence, label): the evidence is one section of a third-party document
(markdown, as-is) and the claim is a sentence that is either taken verbatim from that section
(label 1), or altered in one detail (label 0), or taken from another section of the same
document (label 0). Kinds:

- ``verbatim``: a sentence of the section, unchanged;
- ``number``: one number of the sentence changed to another plausible value;
- ``negation``: one negation removed or added ("is not" -> "is", "can" -> "cannot", ...);
- ``identifier``: one code identifier swapped for another identifier of the same document;
- ``other_section``: a sentence of another section of the same document, absent here.

Sources: the README long descriptions (``*.dist-info/METADATA``, markdown only) of the
permissively licensed packages in SOURCES installed in this environment (the licence is read
from each package's metadata and checked: MIT, BSD, Apache-2.0, PSF, ISC and similar only),
and the Python documentation pages in tests/web_fixtures/*.expected.md (PSF-2.0).

Deterministic (fixed seed, standard library only, no network): two runs against the same
installed packages write byte-identical files. Run from the repository root with the
project's virtual environment active:

    python scripts/make_docs_detail.py            # writes bench/data/docs_detail.jsonl
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import cast

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "bench" / "data" / "docs_detail.jsonl"
FIXTURES = REPO / "tests" / "web_fixtures"
SEED = 20240611

TARGETS = {"verbatim": 160, "number": 60, "negation": 60, "identifier": 60, "other_section": 60}

# Installed distributions whose long description is markdown and worth reading (the licence
# of each is still checked against its metadata at run time).
SOURCES = (
    "aiohappyeyeballs",
    "aiohttp-retry",
    "aiolimiter",
    "annotated-types",
    "attrs",
    "bm25s",
    "build",
    "charset-normalizer",
    "chromadb",
    "click",
    "ddgs",
    "distro",
    "fastapi",
    "fsspec",
    "genai-prices",
    "hf-xet",
    "httpcore",
    "httptools",
    "httpx",
    "huggingface_hub",
    "idna",
    "jiter",
    "jsonpatch",
    "langchain-core",
    "langsmith",
    "markdown-it-py",
    "mcp",
    "mmh3",
    "numpy",
    "openai",
    "platformdirs",
    "primp",
    "pydantic",
    "pydantic-settings",
    "pydantic_core",
    "python-dotenv",
    "python-multipart",
    "requests",
    "rich",
    "ruff",
    "sse-starlette",
    "starlette",
    "tiktoken",
    "tokenizers",
    "trafilatura",
    "truststore",
    "typer",
    "typing_extensions",
    "urllib3",
    "uuid_utils",
    "uvicorn",
    "watchfiles",
)

PERMISSIVE = {
    "MIT",
    "MIT-0",
    "BSD-2-CLAUSE",
    "BSD-3-CLAUSE",
    "0BSD",
    "APACHE-2.0",
    "PSF-2.0",
    "ISC",
    "ZLIB",
    "CC0-1.0",
}
CLASSIFIER_LICENCES = {
    "MIT License": "MIT",
    "BSD License": "BSD",
    "Apache Software License": "Apache-2.0",
    "Python Software Foundation License": "PSF-2.0",
    "ISC License (ISCL)": "ISC",
}
SPDX_SPELLING = {
    "MIT": "MIT",
    "MIT-0": "MIT-0",
    "BSD-2-CLAUSE": "BSD-2-Clause",
    "BSD-3-CLAUSE": "BSD-3-Clause",
    "0BSD": "0BSD",
    "APACHE-2.0": "Apache-2.0",
    "PSF-2.0": "PSF-2.0",
    "ISC": "ISC",
    "ZLIB": "Zlib",
    "CC0-1.0": "CC0-1.0",
}


# --------------------------------------------------------------------------- licences


def spdx_licence(expr: str) -> str | None:
    """The expression, normalised, if every alternative needed is permissive; else None."""
    expr = expr.strip()
    if not expr or "\n" in expr or len(expr) > 120:
        return None
    alternatives = []
    for alt in re.split(r"\s+OR\s+", expr.replace("(", " ").replace(")", " ")):
        terms = [t.strip().upper() for t in re.split(r"\s+AND\s+", alt.strip()) if t.strip()]
        if terms and all(t in PERMISSIVE for t in terms):
            alternatives.append(" AND ".join(SPDX_SPELLING[t] for t in terms))
    return " OR ".join(alternatives) if alternatives else None


def package_licence(meta: Message) -> str | None:
    expression = meta.get("License-Expression")
    if expression:
        return spdx_licence(expression)
    field_ = (meta.get("License") or "").strip()
    short = spdx_licence(field_.replace("Apache 2.0", "Apache-2.0").replace("MIT License", "MIT"))
    if short:
        return short
    classifiers = [
        c.split("::")[-1].strip()
        for c in meta.get_all("Classifier") or []
        if c.startswith("License ::")
    ]
    known = [CLASSIFIER_LICENCES[c] for c in classifiers if c in CLASSIFIER_LICENCES]
    if classifiers and len(known) == len(classifiers):
        return " OR ".join(known)
    # A full licence text in the License field: accept only the MIT text, by its grant.
    if field_.startswith("MIT License") and "Permission is hereby granted" in field_:
        return "MIT"
    return None


# --------------------------------------------------------------------------- documents


@dataclass
class Section:
    doc: str
    index: int
    heading: str
    text: str  # the section's markdown, heading line included, as-is
    sentences: list[str] = field(default_factory=list)


@dataclass
class Document:
    name: str
    licence: str
    version: str
    text: str
    sections: list[Section] = field(default_factory=list)


def load_documents() -> tuple[list[Document], list[str]]:
    docs: list[Document] = []
    skipped: list[str] = []
    for name in SOURCES:
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            skipped.append(f"{name}: not installed")
            continue
        meta = cast(Message, dist.metadata)  # an email Message underneath
        ctype = (meta.get("Description-Content-Type") or "").lower()
        if not ctype.startswith("text/markdown"):
            skipped.append(f"{name}: long description is not markdown")
            continue
        licence = package_licence(meta)
        if licence is None:
            skipped.append(f"{name}: licence not on the permissive list")
            continue
        body = str(meta.get_payload() or meta.get("Description") or "")
        docs.append(Document(meta["Name"], licence, dist.version, body))
    for path in sorted(FIXTURES.glob("*.expected.md")):
        page = path.name.removesuffix(".expected.md")
        text = path.read_text(encoding="utf-8")
        docs.append(Document(f"python-docs/library/{page}", "PSF-2.0", "3.11.2", text))
    return docs, skipped


FENCE = re.compile(r"^\s*(```|~~~)")
ATX = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SETEXT = re.compile(r"^(=+|-+)\s*$")
CHANGELOG = re.compile(r"change\s*log|release notes|release history|^history$", re.I)


def split_sections(doc: Document) -> list[Section]:
    """Sections by ATX and setext headings outside code fences; stops at a changelog."""
    lines = doc.text.splitlines()
    starts: list[tuple[int, int, str]] = []  # (first line, line after heading, heading text)
    in_fence = False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        m = ATX.match(line)
        if m:
            starts.append((i, i + 1, m.group(2)))
            continue
        if (
            SETEXT.match(line)
            and i > 0
            and lines[i - 1].strip()
            and not lines[i - 1].lstrip().startswith(("-", "*", "|", "<", ">"))
            and (i < 2 or not lines[i - 2].strip())
        ):
            starts.append((i - 1, i + 1, lines[i - 1].strip()))
    sections: list[Section] = []
    bounds = [(0, 0, ""), *starts] if not starts or starts[0][0] > 0 else starts
    for k, (first, _body, heading) in enumerate(bounds):
        if heading and CHANGELOG.search(heading):
            break
        end = bounds[k + 1][0] if k + 1 < len(bounds) else len(lines)
        text = "\n".join(lines[first:end]).strip("\n")
        sections.append(Section(doc.name, len(sections), heading, text))
    return sections


# --------------------------------------------------------------------------- sentences

CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)")
URL = re.compile(r"https?://\S+")
HTML_TAG = re.compile(r"</?[A-Za-z][^>]*>")
LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?:\[[ xX]\]\s+)?")
WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
ABBREV = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "Mr.", "Dr.", "No.", "v.")


def prose_paragraphs(section_text: str) -> list[str]:
    """Paragraphs and list items of prose (no code, tables, HTML, headings), one line each."""
    out: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            out.append(" ".join(current))
            current.clear()

    in_fence = False
    lines = section_text.splitlines()
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        if FENCE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        stripped = line.strip()
        nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if (
            not stripped
            or ATX.match(stripped)
            or SETEXT.match(stripped)
            or (nxt and SETEXT.match(nxt) and not nxt.startswith("-"))
            or stripped.startswith(("|", "<", ">", "!["))
            or (raw.startswith(("    ", "\t")) and not current)  # an indented code block
        ):
            flush()
            continue
        if LIST_MARK.match(line):
            flush()
            current.append(LIST_MARK.sub("", line).strip())
            continue
        current.append(stripped)
    flush()
    return out


def mask(text: str) -> tuple[str, list[str]]:
    """Replace code spans, links and URLs by placeholders (\x00n\x00) that hold no spaces."""
    held: list[str] = []

    def keep(m: re.Match[str]) -> str:
        held.append(m.group(0))
        return f"\x00{len(held) - 1}\x00"

    text = CODE_SPAN.sub(keep, text)
    text = LINK.sub(keep, text)
    text = URL.sub(keep, text)
    return text, held


def unmask(text: str, held: list[str]) -> str:
    return re.sub(r"\x00(\d+)\x00", lambda m: held[int(m.group(1))], text)


SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*_\[\"(\x00])")


def split_sentences(paragraph: str) -> list[str]:
    masked, held = mask(paragraph)
    pieces = SENT_END.split(masked)
    merged: list[str] = []
    for piece in pieces:
        if merged and merged[-1].endswith(ABBREV):
            merged[-1] += " " + piece
        else:
            merged.append(piece)
    return [unmask(p.strip(), held) for p in merged if p.strip()]


def visible_words(sentence: str) -> list[str]:
    masked, held = mask(sentence)
    masked = re.sub(r"\x00(\d+)\x00", lambda m: " w " if held[int(m.group(1))] else "", masked)
    return masked.split()


def good_sentence(s: str) -> bool:
    if not 8 <= len(s.split()) <= 45 or not 8 <= len(visible_words(s)) <= 45:
        return False
    if not s.endswith((".", "!", "?")) or s.endswith(("..", ":")):
        return False
    if not re.match(r"[A-Z`*_\[\"(]", s) or s.startswith("[^"):
        return False
    if HTML_TAG.search(CODE_SPAN.sub("", s)) or "![" in s or "|" in CODE_SPAN.sub("", s):
        return False
    masked, _ = mask(s)
    prose = re.sub(r"\x00\d+\x00", "", masked)
    if len(WORD.findall(prose)) < 6:  # mostly links or code
        return False
    if s.count("**") % 2 or s.count("`") % 2 or s.count("[") != s.count("]"):
        return False
    for mark in ("_", "*"):  # emphasis opened here and closed in another sentence
        if s.startswith(mark) and not re.search(rf"\S{re.escape(mark)}(\W|$)", s[1:]):
            return False
    return not re.search(r"\x00|\ufffd", s)


def norm(text: str) -> str:
    return " ".join(text.split())


def section_prose_words(section_text: str) -> int:
    return sum(len(p.split()) for p in prose_paragraphs(section_text))


def prepare(doc: Document) -> None:
    for section in split_sections(doc):
        if section_prose_words(section.text) < 40 or len(section.text.split()) > 1500:
            continue
        seen: set[str] = set()
        for para in prose_paragraphs(section.text):
            for s in split_sentences(para):
                s = norm(s)
                if good_sentence(s) and s not in seen and s in norm(section.text):
                    seen.add(s)
                    section.sentences.append(s)
        doc.sections.append(section)


# --------------------------------------------------------------------------- alterations


def protected_spans(sentence: str, *, keep_code: bool) -> list[tuple[int, int]]:
    """Character ranges an alteration must not touch: links, URLs, HTML (and code spans)."""
    spans = [m.span() for m in LINK.finditer(sentence)]
    spans += [m.span() for m in URL.finditer(sentence)]
    spans += [m.span() for m in HTML_TAG.finditer(sentence)]
    spans += [m.span() for m in re.finditer(r"\[[^\]]*\]", sentence)]
    if not keep_code:
        spans += [m.span() for m in CODE_SPAN.finditer(sentence)]
    return spans


def inside(pos: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(a <= pos[0] < b or a < pos[1] <= b for a, b in spans)


NUMBER = re.compile(r"(?<![\w./#@$^~=:-])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)*)(?![\w/-]|\.\d|,\d)")


def altered_number(value: str, rng: random.Random) -> str | None:
    if "," in value:
        n = int(value.replace(",", ""))
        return f"{rng.choice([n * 2, n * 10, max(1, n // 2)]):,}" if n > 1 else None
    if "." in value:
        parts = value.split(".")
        if any(len(p) > 1 and p.startswith("0") for p in parts[1:]):
            return None  # a decimal such as 0.05: change the whole
        last = int(parts[-1])
        options = [last + 1] + ([last - 1] if last > 0 else [])
        parts[-1] = str(rng.choice(options))
        return ".".join(parts)
    if len(value) > 1 and value.startswith("0"):
        return None
    n = int(value)
    if 1900 <= n <= 2099:
        return str(n + rng.choice([-3, -2, -1, 1, 2]))
    if n <= 10:
        # never to 1 from a plural ("retried 2 times" -> "retried 1 times")
        options = [k for k in (n - 1, n + 1, n + 2, n * 2) if k >= 0 and k != n and k != 1]
        return str(rng.choice(options))
    if n % 10:  # 128, 409, 6902: a neighbour is the plausible slip
        return str(rng.choice([n - 1, n + 1, n + 2]))
    step = 10 ** (len(value) - 1)
    options = [n * 2, n + step] + ([n - step] if n - step > 0 else [])
    return str(rng.choice(sorted(set(options))))


def make_number(sentence: str, rng: random.Random) -> str | None:
    spans = protected_spans(sentence, keep_code=True)
    found = [m for m in NUMBER.finditer(sentence) if not inside(m.span(), spans)]
    if not found:
        return None
    present = {f.group(1) for f in found}
    rng.shuffle(found)
    for m in found:
        for _ in range(3):
            new = altered_number(m.group(1), rng)
            # not unchanged, and no "between 0 and 1" -> "between 1 and 1"
            if new is not None and new not in present:
                return sentence[: m.start()] + new + sentence[m.end() :]
    return None


MODALS_NEG = {
    "is not": "is",
    "are not": "are",
    "was not": "was",
    "were not": "were",
    "will not": "will",
    "cannot": "can",
    "can not": "can",
    "should not": "should",
    "must not": "must",
    "could not": "could",
    "would not": "would",
    "need not": "need",
    "isn't": "is",
    "aren't": "are",
    "wasn't": "was",
    "won't": "will",
    "can't": "can",
    "shouldn't": "should",
    "couldn't": "could",
    "wouldn't": "would",
    "never": "always",
    "no longer": "still",
}
ADD_NEG = {
    "is": "is not",
    "are": "are not",
    "can": "cannot",
    "will": "will not",
    "should": "should not",
    "must": "must not",
    "always": "never",
}
VERBS_3SG = {
    "accepts",
    "allows",
    "builds",
    "calls",
    "comes",
    "contains",
    "creates",
    "depends",
    "enables",
    "exposes",
    "gives",
    "handles",
    "implements",
    "includes",
    "keeps",
    "lets",
    "makes",
    "needs",
    "produces",
    "provides",
    "raises",
    "reads",
    "requires",
    "returns",
    "runs",
    "sends",
    "ships",
    "supports",
    "takes",
    "uses",
    "works",
    "writes",
}
NO_FOLLOW = {"also", "only", "just", "now", "still", "already", "even", "not", "always", "never"}
SKIP_AFTER_NEG = {"only", "just", "even", "also", "necessarily", "always"}


def third_person(verb: str) -> str | None:
    if verb == "have":
        return "has"
    if verb in {"be", "do"}:
        return None
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    return verb + "s"


def base_form(verb3: str) -> str:
    if verb3.endswith("ies"):
        return verb3[:-3] + "y"
    if verb3.endswith(("sses", "shes", "ches", "xes", "zes")):
        return verb3[:-2]
    return verb3[:-1]


def match_case(new: str, old: str) -> str:
    return new[0].upper() + new[1:] if old[:1].isupper() else new


def negation_candidates(sentence: str) -> list[tuple[int, int, str, bool]]:
    """(start, end, replacement, removes) for every flippable negation or verb."""
    spans = protected_spans(sentence, keep_code=False)
    out: list[tuple[int, int, str, bool]] = []
    words = list(re.finditer(r"[A-Za-z']+", sentence))

    def next_word(end: int) -> str:
        m = re.match(r"\s+([A-Za-z']+)", sentence[end:])
        return m.group(1).lower() if m else ""

    def ok(span: tuple[int, int]) -> bool:
        return not inside(span, spans)

    # Removing: do/does/did not VERB, don't/doesn't VERB.
    for m in re.finditer(
        r"\b(does not|doesn't|do not|don't|did not|didn't)\s+([a-z]+)\b", sentence, re.I
    ):
        aux, verb = m.group(1).lower(), m.group(2)
        if verb.lower() in SKIP_AFTER_NEG or not ok(m.span()):
            continue
        if aux in {"does not", "doesn't"}:
            new = third_person(verb)
            if new is None:
                continue
        elif aux in {"do not", "don't"}:
            new = verb
        else:
            new = "did " + verb
        out.append((m.start(), m.end(), match_case(new, m.group(1)), True))
    for neg, pos in MODALS_NEG.items():
        for m in re.finditer(rf"\b{re.escape(neg)}\b", sentence, re.I):
            if not ok(m.span()) or next_word(m.end()) in SKIP_AFTER_NEG:
                continue
            out.append((m.start(), m.end(), match_case(pos, m.group(0)), True))
    # Adding.
    for m in words:
        w = m.group(0)
        low = w.lower()
        nxt = next_word(m.end())
        if not ok(m.span()) or not nxt or nxt in NO_FOLLOW or nxt.endswith("n't"):
            continue
        if sentence[m.end() : m.end() + 1] not in {" "}:
            continue
        if low in ADD_NEG and not (low == "always" and m.start() == 0):
            out.append((m.start(), m.end(), match_case(ADD_NEG[low], w), False))
        elif low in VERBS_3SG and w == low:
            prev = sentence[: m.start()].rstrip().split()
            subject = prev[-1].lower() in {"it", "this", "that", "which"} if prev else False
            subject = subject or bool(prev and re.match(r"^[A-Z`*]", prev[-1]) and len(prev) <= 3)
            if subject:
                out.append((m.start(), m.end(), f"does not {base_form(low)}", False))
    return out


def make_negation(sentence: str, rng: random.Random) -> str | None:
    cands = negation_candidates(sentence)
    if not cands:
        return None
    removing = [c for c in cands if c[3]]
    if not removing and re.search(r"\b(not|no|never|none|nor)\b|n't\b", sentence, re.I):
        return None  # adding a second negation reads badly ("is not applied ... but not")
    start, end, new, _ = rng.choice(removing or cands)
    altered = sentence[:start] + new + sentence[end:]
    return altered[0].upper() + altered[1:] if altered else None


IDENT_BODY = r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*(?:\(\))?"
CODE_IDENT = re.compile(rf"^(?:{IDENT_BODY}|--?[a-z][a-z0-9-]*)$")
BARE_IDENT = re.compile(r"(?<![\w.`/-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\(\))?)(?![\w`/-])")


FILE_EXT = re.compile(r"\.(py|toml|txt|json|ya?ml|md|cfg|ini|env|lock|html|svg|rs|sh)$")


def looks_like_api(token: str) -> bool:
    core = token.removesuffix("()")
    if core.startswith("-"):
        return len(core) > 2
    if token.endswith("()") or "_" in core.strip("_") or "." in core:
        return len(core) > 2
    return bool(re.search(r"[a-z][A-Z]|^[A-Z][a-z]+[A-Z]", core))


def ident_class(token: str) -> str:
    core = token.removesuffix("()")
    if core.startswith("--"):
        return "flag"
    if core.startswith("-"):
        return "short-flag"
    if FILE_EXT.search(core):
        return "file"
    if token.endswith("()"):
        return "call-class" if core.split(".")[-1][:1].isupper() else "call"
    last = core.split(".")[-1]
    if last[:1].isupper() and not last.isupper():
        return "class"
    if last.isupper():
        return "const"
    return "name"


def ident_key(token: str) -> str:
    return token.removesuffix("()").split(".")[-1].lower().strip("_-")


def doc_identifiers(doc: Document) -> tuple[set[str], dict[int, set[str]]]:
    """Identifier-like code spans of the document, and of each section."""
    per_section: dict[int, set[str]] = {}
    for section in doc.sections:
        found = set()
        for m in CODE_SPAN.finditer(section.text):
            body = m.group(2).strip()
            if CODE_IDENT.match(body) and looks_like_api(body):
                found.add(body)
        per_section[section.index] = found
    every = set().union(*per_section.values()) if per_section else set()
    for m in CODE_SPAN.finditer(doc.text):
        body = m.group(2).strip()
        if CODE_IDENT.match(body) and looks_like_api(body):
            every.add(body)
    return every, per_section


def make_identifier(
    sentence: str, section: Section, every: set[str], local: set[str], rng: random.Random
) -> str | None:
    spots: list[tuple[int, int, str, str, str]] = []  # start, end, token, prefix, suffix
    for m in CODE_SPAN.finditer(sentence):
        body = m.group(2)
        if body.strip() == body and CODE_IDENT.match(body) and looks_like_api(body):
            spots.append((m.start(), m.end(), body, m.group(1), m.group(1)))
    spans = protected_spans(sentence, keep_code=False)
    for m in BARE_IDENT.finditer(sentence):
        tok = m.group(1).rstrip(".")
        span = (m.start(1), m.start(1) + len(tok))
        if inside(span, spans) or not looks_like_api(tok) or tok not in every:
            continue
        if not re.search(r"[_.]|\(\)$", tok):
            continue  # bare CamelCase is as often a product name ("OpenAI") as an API
        spots.append((span[0], span[1], tok, "", ""))
    rng.shuffle(spots)
    for start, end, tok, pre, suf in spots:
        key = ident_key(tok)
        kind = ident_class(tok)

        def fits(other: str, tok: str = tok, key: str = key, kind: str = kind) -> bool:
            ok = True
            ok = ok and other != tok and ident_key(other) != key
            ok = ok and ident_class(other) == kind and key not in other.lower()
            ok = ok and other not in sentence  # no "`log()` and `log()`"
            return ok and ident_key(other) not in tok.lower()

        near = sorted(o for o in local if fits(o))
        far = sorted(o for o in every if fits(o))
        dotted = "." in tok.removesuffix("()")
        pools = [[o for o in p if ("." in o.removesuffix("()")) == dotted] for p in (near, far)]
        pool = pools[0] or near or pools[1] or far
        if not pool:
            continue
        new = rng.choice(pool)
        return sentence[:start] + pre + new + suf + sentence[end:]
    return None


# --------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Row:
    kind: str
    claim: str
    original: str
    evidence: str
    label: int
    source: str
    licence: str
    section: str


def contains(evidence: str, claim: str) -> bool:
    return norm(claim) in norm(evidence)


def content_words(text: str) -> set[str]:
    return {w.lower() for w in WORD.findall(text) if len(w) > 3}


def build(docs: list[Document], rng: random.Random) -> list[Row]:
    # Every (doc, section, sentence) once, in a fixed order, shuffled per document.
    by_doc: dict[str, list[tuple[Document, Section, str]]] = {}
    for doc in docs:
        items = [(doc, sec, s) for sec in doc.sections for s in sec.sentences]
        rng.shuffle(items)
        if items:
            by_doc[doc.name] = items
    idents = {doc.name: doc_identifiers(doc) for doc in docs}
    used: set[tuple[str, str]] = set()  # (doc, sentence): each sentence serves one row
    rows: list[Row] = []

    def attempt(kind: str, doc: Document, sec: Section, s: str) -> Row | None:
        ev = sec.text
        if kind == "verbatim":
            return Row(kind, s, s, ev, 1, doc.name, doc.licence, sec.heading)
        if kind == "other_section":
            others = [o for o in doc.sections if o.index != sec.index and o.sentences]
            if not others:
                return None
            target = rng.choice(others)
            if contains(target.text, s):
                return None
            words = content_words(s)
            if words and len(words & content_words(target.text)) / len(words) >= 0.8:
                return None  # too close to something the target section may say
            return Row(kind, s, s, target.text, 0, doc.name, doc.licence, target.heading)
        if kind == "number":
            claim = make_number(s, rng)
        elif kind == "negation":
            claim = make_negation(s, rng)
        else:
            every, per_section = idents[doc.name]
            claim = make_identifier(s, sec, every, per_section.get(sec.index, set()), rng)
        if claim is None or contains(ev, claim) or norm(claim) == norm(s):
            return None
        return Row(kind, claim, s, ev, 0, doc.name, doc.licence, sec.heading)

    # Scarce kinds first; round-robin over documents so no README dominates.
    for kind in ("number", "identifier", "negation", "other_section", "verbatim"):
        want = TARGETS[kind]
        got = 0
        cursors = dict.fromkeys(by_doc, 0)
        per_doc: Counter[str] = Counter()
        cap = max(4, want // 12)
        active = sorted(by_doc)
        while got < want and active:
            if all(per_doc[name] >= cap for name in active):
                cap += 2  # every document still holding sentences is at its cap: relax it
            still = []
            for name in active:
                items = by_doc[name]
                row = None
                if per_doc[name] >= cap:
                    still.append(name)
                    continue
                while cursors[name] < len(items) and row is None:
                    doc, sec, s = items[cursors[name]]
                    cursors[name] += 1
                    if (name, s) in used:
                        continue
                    row = attempt(kind, doc, sec, s)
                if row is not None:
                    used.add((name, row.original))
                    rows.append(row)
                    got += 1
                    per_doc[name] += 1
                    if got >= want:
                        break
                if cursors[name] < len(items):
                    still.append(name)
            active = still
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--show-originals", action="store_true", help="print altered rows")
    args = parser.parse_args(argv)

    docs, skipped = load_documents()
    for doc in docs:
        prepare(doc)
    rng = random.Random(SEED)
    rows = build(docs, rng)
    order = list(range(len(rows)))
    random.Random(SEED + 1).shuffle(order)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8", newline="\n") as fh:
        for n, i in enumerate(order):
            r = rows[i]
            record = {
                "id": f"docs-{n}",
                "source_dataset": "docs",
                "kind": r.kind,
                "claim": r.claim,
                "evidence": r.evidence,
                "question": "",
                "label": r.label,
                "source": r.source,
                "licence": r.licence,
            }
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            if args.show_originals and r.kind != "verbatim":
                print(f"[{r.kind}] {r.source} / {r.section}\n  - {r.original}\n  + {r.claim}")
    counts = Counter(r.kind for r in rows)
    sources = Counter(r.source for r in rows)
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    print(f"wrote {len(rows)} rows to {args.out}", file=sys.stderr)
    print("kinds: " + ", ".join(f"{k}={counts[k]}" for k in TARGETS), file=sys.stderr)
    used_docs = {d.name: d for d in docs}
    for name in sorted(sources):
        d = used_docs[name]
        print(f"  {name} {d.version} ({d.licence}): {sources[name]} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
