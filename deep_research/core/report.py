"""The cited markdown report, assembled from a session (pure).

Every ``[N]`` in the report resolves to an entry of its numbered Sources list: the body is
renumbered from session refs, and markers that point nowhere are dropped. No finding is stated
twice: after the sources, the sub-questions are an index (how each was researched, the section
stating its findings), not their findings again. What was not researched, failed or was blocked is
listed under "Coverage and limitations", with the reason the run stopped (``core.coverage``).

What models and pages wrote cannot forge it (``core.markdown``): titles, quotes, questions and
errors are written as text, a source is a link only to an http(s) address, and the synthesis
defines no link reference. Only the builder writes headings, ids and links into the page: what a
model wrote is read with markdown-it and its headings (of any kind, at any depth), raw HTML and
links into the page are made text where they stand (``md.demoted``). The numbered sources are kept
as data next to the markdown (``Report``): the HTML report links each ``[N]`` to the entry N
written here, never to a list found under a "Sources" heading, which a synthesis may hold too.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from pydantic import BaseModel, Field

from deep_research.core import coverage
from deep_research.core import markdown as md
from deep_research.core.budget import totals
from deep_research.core.citations import check, cited_refs, renumber_all, untied, untied_note
from deep_research.core.models import Citation, ResearchNode, SessionState, Writing
from deep_research.core.ports import Meter, WriteJob
from deep_research.core.scope import WebScope, page_key


class ReportSection(BaseModel):
    title: str
    body: str
    """Markdown, citing with ``[N]`` (``Report.sources[N - 1]``)."""
    note: str = ""
    """Why the section quotes its evidence instead of being written (shown above it)."""


class ReportNote(BaseModel):
    """One sub-question in the index after the sources: how it was researched and the
    section its findings are stated in (never the findings again)."""

    node_id: str
    question: str
    meta: str
    section: int = 0
    """The section (1-based, of ``Report.sections``) that draws on it; 0: none."""


REPORT_VERSION = 3
"""The format of report.json: one of another version is rebuilt from its session."""


class Report(BaseModel):
    """The report as one value: every surface renders it (``markdown`` here, the HTML page
    in ``adapters.report_html``) and it is saved as ``report.json`` beside ``report.md``.
    ``[N]`` anywhere in it is ``sources[N - 1]``."""

    schema_version: int = REPORT_VERSION
    title: str
    status: str
    notice: str = ""
    lead: str = ""
    lead_note: str = ""
    sections: list[ReportSection] = Field(default_factory=list)
    limitations: list[str] = Field(default_factory=list)
    citation_check: str = ""
    """The lexical check of the citations (``core.citations.check``): until claims are checked."""
    contradictions: str = ""
    """The body of the "Contradictions" section: findings whose sources conflict."""
    claim_check: str = ""
    """The "Claim check" section (``core.ledger.marked``), once the claims are checked."""
    removed_markers: int = 0
    """Citation markers that pointed to no source (removed from the body)."""
    sources: list[Citation] = Field(default_factory=list)
    consulted: list[str] = Field(default_factory=list)
    """Pages the research jobs' searches used that the report does not cite (in the run's
    web scope, each once): listed after the sources, collapsed."""
    notes: list[ReportNote] = Field(default_factory=list)
    footer: str = ""

    @property
    def body(self) -> str:
        """The lead and the sections: what the report says (no bookkeeping, no notes)."""
        return "\n\n".join(f"## {title}\n\n{body}" for title, body in _body_parts(self))

    @property
    def markdown(self) -> str:
        made = self.parts()
        head = [f"# {md.text(self.title)}", self.status, self.notice, self.contents(made)]
        body = [f"## {p.title}\n\n{p.body}" if p.title else p.body for p in made]
        listed = "\n".join(source_item(n, s) for n, s in enumerate(self.sources, start=1))
        sources = f"## {SOURCES_TITLE}\n\n" + (listed or "_No sources were cited._")
        if self.consulted:
            sources += "\n\n" + consulted_line(self.consulted)
        notes = "\n\n".join(f"### {title}\n\n{text}" for title, text in self.note_parts(made))
        after = [f"## {FINDINGS}\n\n{notes}" if notes else "", self.footer]
        return "\n\n".join(p for p in [*head, *body, sources, *after] if p) + "\n"

    def parts(self) -> list[Part]:
        """What stands between the title and the Sources, in order: the answer, the
        sections, then the builder's own parts (contradictions, coverage, checks). Only
        these, the Sources and the findings by sub-question have headings (``md.demoted``)."""
        titled = [*_body_parts(self)]
        if self.contradictions:
            titled.append((CONTRADICTIONS, md.demoted(self.contradictions, _BUILDER_IDS)))
        if self.limitations:
            titled.append((COVERAGE, md.demoted("\n".join(self.limitations).strip(), _BUILDER_IDS)))
        for text in (self.citation_check, self.claim_check):
            # The builder's own text: a heading on its first line, or none (a clean check).
            head, _, rest = text.partition("\n")
            if head.startswith("## "):
                titled.append((head[3:].strip(), md.demoted(rest.strip(), _BUILDER_IDS)))
            elif text:
                titled.append(("", md.demoted(text, _BUILDER_IDS)))
        first = 1 if self.lead.strip() else 0
        ids = heading_ids([t for t, _ in titled], range(first, first + len(self.sections)))
        return [Part(t, i, b) for (t, b), i in zip(titled, ids, strict=True)]

    def contents(self, parts: list[Part] | None = None) -> str:
        """A numbered link to each part's heading (``parts``: ``self.parts()``, when already
        made), the Sources' and the findings'; "" for a report with fewer than
        ``TOC_SECTIONS`` sections."""
        if len(self.sections) < TOC_SECTIONS:
            return ""
        listed = [(p.title, p.id) for p in (parts or self.parts()) if p.title]
        findings = [(FINDINGS, anchor(FINDINGS))] if self.notes else []
        listed += [(SOURCES_TITLE, SOURCES_ID), *findings]
        return "**Contents**\n\n" + "\n".join(
            f"{n}. [{title}](#{id_})" for n, (title, id_) in enumerate(listed, start=1)
        )

    def note_parts(self, parts: list[Part] | None = None) -> list[tuple[str, str]]:
        """(heading, text) of each sub-question: the heading as markdown text, the text its
        meta line and a link to the section that states its findings (``parts``:
        ``self.parts()``, when already made)."""
        made = parts if parts is not None else self.parts()
        first = 1 if self.lead.strip() else 0
        out = []
        for n in self.notes:
            text = n.meta
            if 1 <= n.section <= len(self.sections):
                part = made[first + n.section - 1]
                text += f" · stated in [{part.title}](#{part.id})"
            out.append((f"{md.text(n.node_id)}: {md.text(n.question)}", text))
        return out


class Part(NamedTuple):
    """A part of the report under its own heading."""

    title: str
    """Its heading, as markdown inline text; "" for a part without one."""
    id: str
    """The id its heading has in the HTML page, that the contents link to."""
    body: str
    """Markdown with no heading, raw HTML or link into the page of its own (``md.demoted``)."""


CONTRADICTIONS = "Contradictions"
SOURCES_TITLE = "Sources"
SOURCES_ID = "sources"
SOURCE_ID = "source-{}"
"""The id of the Sources entry N in the HTML page (``[N]`` links to it)."""
FINDINGS = "Findings by sub-question"
TOC_SECTIONS = 4
"""A report with this many sections or more opens with a table of contents."""
ANSWER = "Answer"
COVERAGE = "Coverage and limitations"


def anchor(title: str) -> str:
    """The id a heading gets (GitHub's rule, roughly: lower case, words joined by -)."""
    return "-".join(re.findall(r"[\w]+", title.lower()))


_BUILDER_IDS = frozenset(
    map(anchor, [ANSWER, CONTRADICTIONS, COVERAGE, "Citation check", "Claim check", FINDINGS])
) | {SOURCES_ID}
"""The ids of the builder's own headings: a section's heading never has one."""


def _body_parts(report: Report) -> list[tuple[str, str]]:
    """(heading, text) of the answer and of each section: the heading as markdown text, the
    text with no heading, raw HTML or link into the page of its own (``md.demoted``; the
    builder's marks, which link to its "Claim check", are kept)."""
    lead = [(ANSWER, report.lead, report.lead_note)] if report.lead.strip() else []
    sections = [(md.text(s.title), s.body, s.note) for s in report.sections]
    return [
        (title, (f"_{md.text(note)}_\n\n" if note else "") + md.demoted(text.strip(), _BUILDER_IDS))
        for title, text, note in lead + sections
    ]


def heading_ids(titles: list[str], sections: range) -> list[str]:
    """The id of each heading titled ``titles`` ("": none). The builder's own headings have
    their ``anchor`` (``claim-check``, ``sources``…); a section's (``sections``: their
    positions in ``titles``) has its own unless that is taken, is the builder's or is a
    source's (``source-N``): then ``section-K-`` before it, K its position. So a section a
    model titled "Claim check" or "Source 1" is never where the builder's links go."""
    used: set[str] = set()
    ids = []
    for position, title in enumerate(titles):
        found = base = anchor(title) or "section"
        k = position + 1
        while position in sections and (
            found in used or found in _BUILDER_IDS or re.fullmatch(r"source-\d+", found)
        ):
            found, k = f"section-{k}-{base}", k + len(titles)
        used.add(found)
        ids.append(found if title else "")
    return ids


class AssembledReport:
    """A writer that writes nothing (``ReportWriter``): the report assembled from the session
    as it stands (its written sections, else its findings so far). No model call."""

    async def outline(self, state: SessionState, meter: Meter) -> Writing | None:
        return None

    async def write(self, job: WriteJob) -> Report:
        return assemble(job.state)


def assemble(state: SessionState) -> Report:
    """The report, as one value, from the session: its written sections and lead; for one
    not yet written, each finished sub-question's findings."""
    nodes = sorted(state.nodes.values(), key=lambda n: (n.iteration, n.created_at))
    done = [n for n in nodes if n.status == "done"]
    lead, lead_note, parts = "", "", []
    home: dict[str, int] = {}  # node id -> the section drawing on it (1-based)
    writing = state.writing
    written = writing is not None and not writing.stale(n.id for n in done)
    if writing is not None and written:
        lead = writing.lead if writing.lead_status != "pending" else ""
        lead_note = _quoted_note(writing.lead_status, writing.lead_note)
        for k, s in enumerate(writing.sections, start=1):
            home.update((i, k) for i in s.node_ids if i not in home)
            if s.status != "pending":
                parts.append((s.title, s.text, _quoted_note(s.status, s.note)))
                continue
            found = [state.nodes[i].notes.strip() for i in s.node_ids if i in state.nodes]
            note = "Not written yet: the findings it draws on follow."
            parts.append((s.title, "\n\n".join(found) or "_no notes_", note))
        if len(parts) == 1 and anchor(parts[0][0]) == anchor(state.question):
            parts = _lone(lead, *parts[0], state.mode == "extractive")
    elif done:
        note = "Not written yet: the findings of this sub-question so far."
        parts = [(n.question, n.notes.strip() or "_no notes_", note) for n in done]
    else:
        parts = [(ANSWER, state.summary or "_No findings were produced._", "")]
    notice: list[str] = []
    if (not written and done) or state.status == "running":
        notice.append(
            f"> _No report yet: the run is {state.status} ({len(done)} of {len(nodes)} "
            "sub-questions done). Below are the findings so far._"
        )
    if state.mode == "extractive":
        passages = "of the knowledge base and of the web pages read, quoted with citations."
        if not state.run_spec.web_research:  # only a model-free engine ran
            passages = "of the knowledge base, quoted with citations. Web research was skipped."
        notice.append(
            "> **Extractive mode:** no language model was configured, so this report is built "
            f"from the best passages {passages}"
        )
    texts = [lead] + [body for _t, body, _n in parts]
    clean = [md.demoted(md.no_definitions(md.no_forged_markers(t))) for t in texts]
    unknown = sum(1 for t in texts for ref in cited_refs(t) if ref not in state.sources)
    renumbered, sources = renumber_all(clean, state.sources)
    lead_text, bodies = renumbered[0], renumbered[1:]
    checked = check("\n\n".join([lead_text, *bodies]), sources, unknown=unknown)
    # Why sentences cite nothing although a marker follows them, said once, of the parts a
    # model wrote (a quoted part's ``\[12\]`` is its page's own footnote, written as text).
    by_model = ([] if lead_note else [lead]) + [body for _t, body, note in parts if not note]
    limitations = coverage.limitations(state, nodes)
    if untied_line := untied_note(untied(by_model)):
        limitations.append(f"- {md.text(untied_line)}")
    return Report(
        title=state.question,
        status=coverage.status_line(state),
        notice="\n\n".join(notice),
        lead=lead_text,
        lead_note=lead_note,
        sections=[
            ReportSection(title=title, body=body, note=note)
            for (title, _b, note), body in zip(parts, bodies, strict=True)
        ],
        limitations=limitations,
        citation_check=coverage.citation_check(checked),
        removed_markers=unknown,
        sources=sources,
        consulted=_consulted(done, sources, state.run_spec.scope),
        notes=[_note(n, home.get(n.id, 0)) for n in done if written],
        footer=footer(state),
    )


def _lone(lead: str, title: str, text: str, note: str, quoted: bool) -> list[tuple[str, str, str]]:
    """A one-facet run's section titled with the question, less the Answer's lines; titled "In
    detail" when its claims are only quoted (never revised, so never found by their title)."""
    said = {line.strip() for line in lead.splitlines()} - {""}
    rest = "\n".join(line for line in text.splitlines() if line.strip() not in said).strip()
    return [("In detail" if quoted or note else title, rest, note)] if rest else []


def _quoted_note(status: str, why: str) -> str:
    return f"Not written ({why}): its best evidence, quoted verbatim." if status == "quoted" else ""


def _note(node: ResearchNode, section: int) -> ReportNote:
    by = f" · researched by {md.text(node.researched_by)}" if node.researched_by else ""
    meta = f"_{node.source_hint}{by} · confidence {node.confidence:.2f}_"
    return ReportNote(node_id=node.id, question=node.question, meta=meta, section=section)


CONSULTED_TITLE = "Consulted, not cited"
CONSULTED_SHOWN = 20
"""Consulted pages the markdown names (the rest are counted; the HTML page lists them all)."""


def consulted_link(url: str) -> str:
    """A consulted page as a short link: its host and path."""
    parts = url.split("://", 1)[-1].removeprefix("www.")
    return md.link(md.clip(parts.rstrip("/"), 60), url)


def consulted_line(urls: list[str]) -> str:
    """The consulted pages in one paragraph after the sources (markdown has no collapsed
    block without raw HTML, which the report's markdown never holds)."""
    more = len(urls) - CONSULTED_SHOWN
    shown = " · ".join(consulted_link(u) for u in urls[:CONSULTED_SHOWN])
    rest = f" · and {more} more" if more > 0 else ""
    return f"_{CONSULTED_TITLE} ({len(urls)}):_ {shown}{rest}"


def _consulted(nodes: list[ResearchNode], sources: list[Citation], scope: WebScope) -> list[str]:
    """The pages the nodes' searches used, in scope, that no source of the report is."""
    cited = {page_key(s.url or "") for s in sources if s.kind == "web"}
    found: dict[str, str] = {}
    for url in (u for node in nodes for u in node.consulted):
        if scope.allows(url) and page_key(url) not in cited:
            found.setdefault(page_key(url), url)
    return list(found.values())


def source_item(number: int, source: Citation) -> str:
    """Entry ``number`` of the Sources list (its continuation lines indented under it)."""
    prefix = f"{number}. "
    return prefix + source_entry(source).replace("\n", "\n" + " " * len(prefix))


def source_entry(source: Citation) -> str:
    """A source as markdown: its link (or KB locator), then its quote or what it was cited
    for. Every string in it is the source's or a model's, so each is written as text."""
    if source.kind == "web":
        entry = md.link(source.title or source.url or "untitled", source.url or "")
        entry += " _(undated)_" if source.undated else ""
    else:
        entry = md.code(source.locator) + (f" — {md.text(source.title)}" if source.title else "")
        entry += "".join(f" {md.code('#' + tag)}" for tag in source.tags)
    quote = " ".join(source.quote.split())
    claim = " ".join(source.claim.split())
    if quote:
        return entry + f"\n> {md.text(md.clip(quote, 300))}"
    # Without the page's words, say what it was cited for, and that we have no more.
    cited_for = f"cited for: “{md.text(md.clip(claim, 300))}” — " if claim else ""
    return entry + f"\n{cited_for}_source text not captured_"


def footer(state: SessionState) -> str:
    """The spend line of the session as it stands (after every booking: made again once the
    claim check has paid its judge)."""
    spend = totals(state.ledger)
    usage = spend.usage
    roles = ", ".join(f"{role} ${cost:.4f}" for role, cost in sorted(spend.by_role.items()))
    writes = usage.cache_write_tokens
    line = (
        f"_Spend: ${spend.cost_usd:.4f} · {usage.input_tokens:,} input tokens "
        f"({usage.cached_input_tokens:,} cached"
        + (f", {writes:,} written to the cache" if writes else "")
        + f") · {usage.output_tokens:,} output tokens · {usage.web_search_calls} web searches"
        + (f" · by role: {roles}" if roles else "")
    )
    if unknown := sum(1 for entry in state.ledger if entry.usage_unknown):
        line += (
            f" · **{unknown} cancelled or failed research job(s) reported no usage: their spend "
            "is unknown and not included** (see the provider's usage page)"
        )
    engine = state.run_spec.web_research
    scope = state.run_spec.scope.describe()
    engine += f"; web scope: {md.text(scope)}" if engine and scope else ""
    web = f"_Web research: {engine}._\n\n" if engine else ""
    return f"---\n\n{web}{line}_"
