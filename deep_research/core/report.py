"""The cited markdown report, assembled from a session (pure).

Every ``[N]`` in the report resolves to an entry of its numbered Sources list: the body and
the per-question findings are renumbered together from session refs, and markers that
point nowhere are dropped. What was not researched, failed or was blocked is listed under
"Coverage and limitations", with the reason the run stopped.

What models and pages wrote cannot forge it (``core.markdown``): titles, quotes, questions
and errors are written as text, a source is a link only to an http(s) address, and the
synthesis defines no link reference. The numbered sources are kept as data next to the
markdown (``Report``): the HTML report links each ``[N]`` to the entry N written here, never
to a list found under a "Sources" heading, which a synthesis may hold too.
"""

from __future__ import annotations

from pydantic import BaseModel

from deep_research.core import markdown as md
from deep_research.core.budget import totals
from deep_research.core.citations import CheckResult, check, cited_refs, renumber
from deep_research.core.models import Citation, ResearchNode, SessionState, Verdict
from deep_research.core.ports import Meter

STOP_TEXT = {
    "complete": "complete: the judge found the answer complete",
    "max_iterations": "stopped: the iteration limit was reached",
    "time_limit": "stopped: the time limit was reached",
    "token_limit": "stopped: the token budget was used up",
    "cost_limit": "stopped: the cost limit was reached",
    "nothing_to_do": "stopped: nothing left to research",
    "interrupted": "interrupted by the user",
    "error": "stopped by an error",
}
EXTRACTIVE_COMPLETE = "complete: every sub-question was answered from quoted passages"


class Report(BaseModel):
    """A report as its builder wrote it: the markdown before and after its numbered
    sources, and those sources as data (``[N]`` is ``sources[N - 1]``). Saved as
    ``report.json`` next to ``report.md``; the HTML report is rendered from it."""

    schema_version: int = 1
    before: str
    sources: list[Citation]
    after: str

    @property
    def markdown(self) -> str:
        listed = "\n".join(source_item(n, s) for n, s in enumerate(self.sources, start=1))
        parts = [self.before, "## Sources\n\n" + (listed or "_No sources were cited._"), self.after]
        return "\n\n".join(p for p in parts if p) + "\n"


class AssembledReport:
    """The report writer of every run today (``ReportWriter``): the synthesis as the body,
    the per-question findings as the appendix, the sources numbered. No model call."""

    async def write(self, state: SessionState, final_text: str | None, meter: Meter) -> Report:
        return assemble(state, final_text)


def build_report(state: SessionState, body: str | None) -> str:
    """The report markdown. ``body`` is the synthesis (with ``[S#]`` refs) or None."""
    return assemble(state, body).markdown


def assemble(state: SessionState, body: str | None) -> Report:
    """The report, as data. ``body`` is the synthesis (with ``[S#]`` refs) or None."""
    nodes = sorted(state.nodes.values(), key=lambda n: (n.iteration, n.created_at))
    if body is None or not body.strip():
        body = state.summary or "_No findings were produced._"
        body = (
            "_The synthesis step did not run; these are the research notes as summarized._\n\n"
            + body
        )
    appendix = "\n\n".join(_node_section(n) for n in nodes if n.status == "done")
    unknown = sum(1 for ref in cited_refs(body) if ref not in state.sources)
    # NUL splits the body from the appendix below: none may come from a model.
    joined = body.replace("\x00", "\ufffd") + "\n\n\x00\n\n" + appendix.replace("\x00", "\ufffd")
    text, sources = renumber(md.no_definitions(md.no_forged_markers(joined)), state.sources)
    body_text, appendix_text = text.split("\x00", 1)
    checked = check(body_text, sources, unknown=unknown)

    parts = [f"# {md.text(state.question)}", _status_line(state)]
    if state.mode == "extractive":
        searched = bool(state.run_spec.web_research)  # only a model-free engine ran
        parts.append(
            "> **Extractive mode:** no language model was configured, so this report is built "
            "from the best passages "
            + (
                "of the knowledge base and of the web pages read, quoted with citations."
                if searched
                else "of the knowledge base, quoted with citations. Web research was skipped."
            )
        )
    parts.append(body_text.strip())
    parts.append(_limitations(state, nodes))
    parts.append(_citation_check(checked))
    after = []
    # The extractive synthesis already lists its findings facet by facet.
    if appendix_text.strip() and state.mode != "extractive":
        after.append("## Findings by sub-question\n\n" + appendix_text.strip())
    after.append(_footer(state))
    return Report(
        before="\n\n".join(p for p in parts if p),
        sources=sources,
        after="\n\n".join(p for p in after if p),
    )


def last_verdict(state: SessionState) -> Verdict | None:
    """The judge's latest verdict: a later iteration whose replan added nothing (or that
    stopped before its review) has none of its own, and must not hide the gaps found."""
    return next((it.verdict for it in reversed(state.iterations) if it.verdict), None)


def _status_line(state: SessionState) -> str:
    done = sum(1 for n in state.nodes.values() if n.status == "done")
    confidence = ""
    verdict = last_verdict(state)
    extractive = state.mode == "extractive"
    if verdict is not None:
        # No model judges an extractive run: its score is how much of each sub-question's
        # wording the quoted passages hold, and is called that.
        label = "passage coverage" if extractive else "judge confidence"
        confidence = f" · {label} {verdict.overall_confidence:.2f}"
    stop = STOP_TEXT.get(state.stop_reason or "", state.status)
    if extractive and state.stop_reason == "complete":
        stop = EXTRACTIVE_COMPLETE
    return (
        f"> Session `{state.session_id}` · {stop} · iteration {state.iteration} · "
        f"{done}/{len(state.nodes)} sub-questions researched{confidence}"
    )


def _node_section(node: ResearchNode) -> str:
    head = f"### {md.text(node.id)}: {md.text(node.question)}"
    by = f" · researched by {md.text(node.researched_by)}" if node.researched_by else ""
    meta = f"_{node.source_hint}{by} · confidence {node.confidence:.2f}_"
    return f"{head}\n\n{meta}\n\n{node.notes.strip() or '_no notes_'}"


def _limitations(state: SessionState, nodes: list[ResearchNode]) -> str:
    lines: list[str] = []
    if state.stop_reason and state.stop_reason != "complete":
        detail = f" ({md.text(state.stop_detail)})" if state.stop_detail else ""
        lines.append(f"- The run {STOP_TEXT[state.stop_reason]}{detail}.")
    for node in nodes:
        question, error = md.text(node.question), md.text(node.error or "")
        if node.status == "failed":
            lines.append(f"- **Failed:** {question} — {error}")
        elif node.status == "blocked":
            lines.append(f"- **Blocked:** {question} — {error}")
        elif node.status == "cancelled":
            lines.append(f"- **Cancelled:** {question} — {error}")
        elif node.status in ("pending", "running"):
            why = (
                "skipped: no model configured"
                if state.mode == "extractive"
                and node.source_hint == "web"
                and not state.run_spec.web_research
                else "not researched before the run stopped"
            )
            lines.append(f"- **Not researched:** {question} — {why}")
    verdict = last_verdict(state)
    if verdict is not None and state.stop_reason != "complete":
        lines += [f"- **Missing:** {md.text(m)}" for m in verdict.missing_aspects]
    if verdict is not None:
        lines += [f"- **Weak evidence:** {md.text(w)}" for w in verdict.weak_evidence_areas]
    if not lines:
        return ""
    return "## Coverage and limitations\n\n" + "\n".join(lines)


def _citation_check(result: CheckResult) -> str:
    unchecked = ""
    if result.no_source_text:
        unchecked = (
            f"{result.no_source_text} of the {result.cited} citations could not be checked "
            "against source text: the web research provider returns the page's address, "
            "not its text"
        )
    if result.clean:
        cites = f"{result.cited} citation" + ("s" if result.cited != 1 else "")
        count = len(result.cited_sources)
        sources = f"{count} source" + ("s" if count != 1 else "")
        return (
            f"_Citation check: the body cites {sources} ({cites}), each of them listed "
            "below; no uncited factual sentence found"
            + (f". {unchecked}" if unchecked else "")
            + "._"
        )
    lines = ["## Citation check", ""]
    if result.unknown:
        lines.append(f"- {result.unknown} citation(s) pointed to no source and were removed.")
    if result.uncited:
        lines.append(f"- {len(result.uncited)} factual sentence(s) carry no citation:")
        lines += [f"  - “{md.text(md.clip(s, 200))}”" for s in result.uncited[:5]]
    if result.unsupported:
        lines.append(
            f"- {len(result.unsupported)} citation(s) share no content word with their source:"
        )
        lines += [f"  - [{n}] “{md.text(md.clip(s, 200))}”" for s, n in result.unsupported[:5]]
    if unchecked:
        lines.append(f"- {unchecked}.")
    return "\n".join(lines)


def source_item(number: int, source: Citation) -> str:
    """Entry ``number`` of the Sources list (its continuation lines indented under it)."""
    prefix = f"{number}. "
    return prefix + source_entry(source).replace("\n", "\n" + " " * len(prefix))


def source_entry(source: Citation) -> str:
    """A source as markdown: its link (or KB locator), then its quote or what it was cited
    for. Every string in it is the source's or a model's, so each is written as text."""
    if source.kind == "web":
        entry = md.link(source.title or source.url or "untitled", source.url or "")
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


def _footer(state: SessionState) -> str:
    spend = totals(state.ledger)
    usage = spend.usage
    roles = ", ".join(f"{role} ${cost:.4f}" for role, cost in sorted(spend.by_role.items()))
    unknown = sum(1 for entry in state.ledger if entry.usage_unknown)
    unknown_note = (
        f" · **{unknown} cancelled or failed research job(s) reported no usage: their spend "
        "is unknown and not included** (see the provider's usage page)"
        if unknown
        else ""
    )
    engine = state.run_spec.web_research
    return (
        "---\n\n"
        + (f"_Web research: {engine}._\n\n" if engine else "")
        + f"_Spend: ${spend.cost_usd:.4f} · {usage.input_tokens:,} input tokens "
        f"({usage.cached_input_tokens:,} cached) · {usage.output_tokens:,} output tokens · "
        f"{usage.web_search_calls} web searches"
        + (f" · by role: {roles}" if roles else "")
        + unknown_note
        + "_"
    )
