"""The Sources list of a report, as a reader sees it, and sessions saved before claims."""

from __future__ import annotations

import json

from deep_research.core.citations import identity
from deep_research.core.models import Citation, SessionState
from deep_research.core.report import build_report

WEB = Citation(
    ref="S1",
    kind="web",
    url="https://docs.trychroma.com/scale",
    title="Chroma scale",
    locator="https://docs.trychroma.com/scale",
    claim="Chroma scales to 10M vectors.",
)
KB = Citation(
    ref="S2",
    kind="kb",
    title="budgets.md › Cost limits",
    locator="budgets.md#Cost limits:0-120",
    quote="A run stops once its spend reaches the cost limit.",
)


def sources_section(report: str) -> str:
    return report.split("## Sources\n\n", 1)[1].split("\n\n", 1)[0]


def test_web_sources_show_their_claim_and_say_no_text_was_captured() -> None:
    state = SessionState(session_id="a" * 12, question="q?", sources={"S1": WEB, "S2": KB})
    report = build_report(state, "Chroma handles 10M vectors [S1]; runs stop at the limit [S2].")
    assert sources_section(report) == (
        "1. [Chroma scale](https://docs.trychroma.com/scale)\n"
        "   cited for: “Chroma scales to 10M vectors.” — _source text not captured_\n"
        "2. `budgets.md#Cost limits:0-120` — budgets.md › Cost limits\n"
        "   > A run stops once its spend reaches the cost limit."
    )


def test_sessions_saved_with_snippets_still_load() -> None:
    saved = {
        "session_id": "b" * 12,
        "question": "q?",
        "sources": {
            "S1": {"ref": "S1", "kind": "kb", "locator": "a.md#A:0-9", "snippet": "Old text."},
            "S2": {"ref": "S2", "kind": "web", "url": "https://x.io", "snippet": "(x.io)"},
        },
    }
    state = SessionState.model_validate_json(json.dumps(saved))
    assert state.sources["S1"].quote == "Old text."
    assert state.sources["S2"].claim == ""
    # an old web citation kept its source text: it is identified by that passage
    assert identity(state.sources["S2"]).startswith("web:https://x.io#passage:")
    assert "snippet" not in json.loads(state.model_dump_json())["sources"]["S1"]
    assert "> Old text." in build_report(state, "It says so [S1].")


def test_the_footer_says_when_part_of_the_spend_is_unknown() -> None:
    from deep_research.adapters.prices import PriceTable
    from deep_research.core.budget import make_entry
    from deep_research.core.models import SessionState, Usage
    from deep_research.core.report import build_report

    state = SessionState(session_id="abcdabcdabcd", question="q?")
    state.ledger.append(
        make_entry("planner", "gpt-6-sol", Usage(input_tokens=10), prices=PriceTable())
    )
    assert "spend is unknown" not in build_report(state, "body")
    state.ledger.append(
        make_entry("deep_research", "gpt-5.5", Usage(), usage_unknown=True, prices=PriceTable())
    )
    assert "1 cancelled or failed research job(s) reported no usage" in build_report(state, "b")
