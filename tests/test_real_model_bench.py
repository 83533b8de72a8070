"""bench/real_model.py's verdict on a scenario: a run that ends with no findings and no error
(exit 12) is flagged, so CI's ``--check`` fails on it, with why it stopped as its session
saved it. (Its ``--smoke`` run is tests/test_benches.py's.)"""

from __future__ import annotations

import json
from pathlib import Path

from bench.real_model import Outcome, figure_line, stop_detail

WHY = "smollm2 gave no valid BranchNotes after 3 attempts: confidence: not 8"


def saved_session(home: Path, state: dict[str, object]) -> str:
    folder = home / "sessions" / "abc123"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(state))
    return "abc123"


def test_a_run_with_no_findings_is_flagged_with_why_it_stopped(tmp_path: Path) -> None:
    session = saved_session(
        tmp_path,
        {
            "stop_reason": "nothing_to_do",
            "stop_detail": "no sub-question could be researched",
            "nodes": {
                "k1": {"status": "failed", "error": WHY},
                "k2": {"status": "failed", "error": "the knowledge base has no passages"},
            },
        },
    )
    why = stop_detail(tmp_path, session)
    assert why == f"no sub-question could be researched; 2 failed, first: {WHY}"
    outcome = Outcome(name="kb_run", label="kb-only run", exit_code=12)
    outcome.extra["stop_detail"] = why
    assert outcome.flagged == [f"no findings (exit 12: {why})"]
    assert f"FLAGGED: no findings (exit 12: {why})" in figure_line(outcome)


def test_a_stop_detail_that_names_the_shared_reason_is_not_repeated(tmp_path: Path) -> None:
    detail = f"no sub-question could be researched: {WHY}"
    session = saved_session(
        tmp_path, {"stop_detail": detail, "nodes": {"k1": {"status": "failed", "error": WHY}}}
    )
    assert stop_detail(tmp_path, session) == detail


def test_a_run_with_findings_or_a_clear_error_is_not_flagged() -> None:
    assert Outcome(name="kb_run", label="kb-only run", exit_code=0).flagged == []
    assert Outcome(name="kb_run", label="kb-only run", exit_code=6).flagged == []
