"""The run's web scope in the claim check (``adapters.claim_check``): why a cited page
outside it supports nothing, and what the report says of the pages the check found so.

Invariants:
- A cited page outside the scope is ``unsupported``, with a note starting ``OUTSIDE``: its
  host or a redirect's is out (``OUT_OF_SCOPE``), or it was published before ``since``
  (``DATED``). OpenAI's ``web_search`` takes no date, so a research job may cite an older
  page: the report's limitations count those pages, each once, as paid for all the same.
- A page read under ``since`` with no date is marked undated in the report's sources (and
  in the session's, by the check: a later check takes the ledger's verdict and reads no
  page).
"""

from __future__ import annotations

from datetime import date

from deep_research.core.coverage import before_since
from deep_research.core.ledger import ClaimLedger
from deep_research.core.report import Report
from deep_research.core.scope import WebScope, page_key

OUTSIDE = "outside the run's web scope"
OUT_OF_SCOPE = OUTSIDE + " ({scope}): not read, and it supports nothing"
DATED = OUTSIDE + " (published {published}, before its since {since}): it supports nothing"
_DATED_LEAD = DATED.split("{")[0]


def out_of_scope(scope: WebScope, published: date | None = None) -> str:
    """Why a cited page supports nothing: it is outside ``scope`` (described without its
    location), or was ``published`` before its ``since``."""
    if published is not None and scope.since is not None:
        return DATED.format(published=published.isoformat(), since=scope.since.isoformat())
    return OUT_OF_SCOPE.format(scope=scope.model_copy(update={"location": ""}).describe())


def scoped(report: Report, ledger: ClaimLedger, undated: set[str], scope: WebScope) -> Report:
    """``report`` with the pages read undated (by session ref) marked so in its sources, and
    a line in its limitations counting the cited pages published before ``scope.since``."""
    checks = (s for claim in ledger.claims for s in claim.sources)
    dated = {page_key(s.url or "") for s in checks if s.note.startswith(_DATED_LEAD)}
    added = [x for x in before_since(len(dated), scope.since) if x not in report.limitations]
    sources = [
        s.model_copy(update={"undated": s.undated or s.ref in undated}) for s in report.sources
    ]
    return report.model_copy(update={"sources": sources, "limitations": report.limitations + added})
