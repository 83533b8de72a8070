"""The Sources list after the claim check: a page the check read is quoted, never said to be
"not captured"; a page it could not read still is."""

from __future__ import annotations

from pathlib import Path

from deep_research.adapters.claim_check import ClaimChecker
from deep_research.core.report import source_entry
from tests.test_claim_check import JOB_RAFT, RAFT, Pages, Store, job, report_of, units_for


async def test_a_page_the_check_read_is_quoted_under_its_source(tmp_path: Path) -> None:
    assert not JOB_RAFT.quote, "a research job's citation: the address, not the text"
    assert "source text not captured" in source_entry(JOB_RAFT)
    report = report_of("Raft elects a leader by majority vote [1].", JOB_RAFT)
    pages = Pages({JOB_RAFT.url or "": RAFT})
    out = await ClaimChecker(reader=pages).check(job(report, Store(tmp_path, units_for(JOB_RAFT))))
    assert pages.reads == [JOB_RAFT.url]
    assert "not captured" not in out.markdown
    (source,) = out.sources
    assert source.quote in RAFT, "the passage the check read, verbatim"
    assert "majority vote" in source.quote


async def test_a_page_the_check_could_not_read_is_still_said_not_captured(tmp_path: Path) -> None:
    report = report_of("Raft elects a leader by majority vote [1].", JOB_RAFT)
    out = await ClaimChecker(reader=Pages({})).check(
        job(report, Store(tmp_path, units_for(JOB_RAFT)))
    )
    assert "source text not captured" in out.markdown
    assert out.sources[0].quote == ""
