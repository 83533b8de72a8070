"""What a report says of how its run ended and what it left out, from the session (pure):
the status line, the judge's last verdict, the "Coverage and limitations" lines (failed,
blocked and unresearched sub-questions, pages not read or dropped, a refused verdict, the
judge's gaps) and the lexical citation check. ``core.report`` places them in the report.
"""

from __future__ import annotations

from datetime import date

from deep_research.core import markdown as md
from deep_research.core.citations import CheckResult
from deep_research.core.markers import as_shown
from deep_research.core.models import (
    COMPLETE_CONFIDENCE,
    IterationRecord,
    ResearchNode,
    SessionState,
    Verdict,
)
from deep_research.core.scope import page_key
from deep_research.core.tree import UNDONE

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


def last_verdict(state: SessionState) -> Verdict | None:
    """The judge's latest verdict: a later iteration whose replan added nothing (or that
    stopped before its review) has none of its own, and must not hide the gaps found."""
    return next((it.verdict for it in reversed(state.iterations) if it.verdict), None)


def refused_verdict(state: SessionState) -> IterationRecord | None:
    """The last iteration the judge was asked about, if its reply was refused (no verdict)."""
    judged = [it for it in state.iterations if it.verdict is not None or it.verdict_refused]
    return judged[-1] if judged and judged[-1].verdict is None else None


def status_line(state: SessionState) -> str:
    done = sum(1 for n in state.nodes.values() if n.status == "done")
    confidence = ""
    verdict = last_verdict(state)
    extractive = state.mode == "extractive"
    if refused_verdict(state) is not None:  # an earlier verdict is not the last word
        confidence = " · no judge verdict (refused)"
    elif verdict is not None:
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


def limitations(state: SessionState, nodes: list[ResearchNode]) -> list[str]:
    lines: list[str] = []
    if state.stop_reason and state.stop_reason != "complete":
        detail = f" ({md.text(state.stop_detail)})" if state.stop_detail else ""
        lines.append(f"- The run {STOP_TEXT[state.stop_reason]}{detail}.")
    for node in nodes:
        question, error = md.text(node.question), md.text(node.error or "")
        if node.status in UNDONE:
            lines.append(f"- **{node.status.capitalize()}:** {question} — {error}")
        elif node.status in ("pending", "running"):
            why = (
                "skipped: no model configured"
                if state.mode == "extractive"
                and node.source_hint == "web"
                and not state.run_spec.web_research
                else "not researched before the run stopped"
            )
            lines.append(f"- **Not researched:** {question} — {why}")
    lines += skipped_pages([s for node in nodes for s in node.skipped_pages])
    lines += dropped(nodes)
    if (refused := refused_verdict(state)) is not None:
        why = md.text(md.clip(refused.verdict_refused, 240))
        lines.append(
            f"- **No verdict:** the judge's reply in iteration {refused.number} was refused "
            f"({why}); the run went on as if it gave none."
        )
    verdict = last_verdict(state)
    if verdict is None:
        return lines
    score = verdict.overall_confidence
    called_complete = verdict.is_complete and not verdict.recommend_more_iterations
    below = score < COMPLETE_CONFIDENCE and state.mode != "extractive"
    if called_complete and below and state.stop_reason != "complete":
        lines.append(
            f"- The judge called the research complete at confidence {score:.2f}, below "
            f"the {COMPLETE_CONFIDENCE:.2f} needed to end it: not taken as complete."
        )
    # The judge's gaps, whatever it concluded: a "complete" beside a gap is the judge's
    # doubt, and the reader's to weigh.
    for label, items in (
        ("Missing", verdict.missing_aspects),
        ("Weak evidence", verdict.weak_evidence_areas),
    ):
        shown = dict.fromkeys(t for item in items if (t := md.text(item)))
        lines += [f"- **{label}:** {t}" for t in shown]
    return lines


def dropped(nodes: list[ResearchNode]) -> list[str]:
    """A line counting the cited pages taken out for being outside the run's web scope (an
    excluded domain, or none of the allowed ones), each page once however many nodes cited
    it."""
    count = len({page_key(url) for node in nodes for url in node.dropped_citations})
    if not count:
        return []
    said = (
        "1 cited page outside the web scope was dropped (its searches were still paid for)"
        if count == 1
        else f"{count} cited pages outside the web scope were dropped (their searches were "
        "still paid for)"
    )
    return [f"- **Out of scope:** {said}."]


def before_since(count: int, since: date | None) -> list[str]:
    """A line counting the cited pages the claim check found published before ``since``
    (OpenAI takes no date: the research jobs cite them, and were paid for)."""
    if not count or since is None:
        return []
    when = f"published before the run's since {since.isoformat()}"
    said = (
        f"1 cited page was {when}: what it is cited for is marked unsupported (its research "
        "job was still paid for)"
        if count == 1
        else f"{count} cited pages were {when}: what they are cited for is marked unsupported "
        "(their research jobs were still paid for)"
    )
    return [f"- **Out of scope:** {said}."]


SKIPPED_SHOWN = 5
"""Skipped pages the limitations name, each with its reason (the rest are counted)."""


def skipped_pages(skipped: list[str]) -> list[str]:
    """A line saying how many pages the searches found were not read, then why, a line each
    (the reader's reason, naming the setting that would change it)."""
    if not skipped:
        return []
    more = len(skipped) - SKIPPED_SHOWN
    return [
        f"- **Pages not read:** {len(skipped)} page(s) the searches found were skipped:",
        *(f"  - {md.text(md.clip(s, 240))}" for s in skipped[:SKIPPED_SHOWN]),
        *([f"  - and {more} more"] if more > 0 else []),
    ]


def citation_check(result: CheckResult) -> str:
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
        lines += [f"  - “{md.text(md.clip(as_shown(s), 200))}”" for s in result.uncited[:5]]
    if result.unsupported:
        lines.append(
            f"- {len(result.unsupported)} citation(s) share no content word with their source:"
        )
        shown = [(n, md.text(md.clip(as_shown(s), 200))) for s, n in result.unsupported[:5]]
        lines += [f"  - [{n}] “{s}”" for n, s in shown]
    if unchecked:
        lines.append(f"- {unchecked}.")
    return "\n".join(lines)
