"""Why pages were skipped reaches the report: its limitations say how many pages the searches
found were not read, and why, naming the setting that would let a refused address be read."""

from __future__ import annotations

import json
from pathlib import Path

from tests.clirun import cli
from tests.fake_web import FakeWeb
from tests.test_cli_search_runs import BISECT, outside, search, search_env, web

__all__ = ["outside", "search", "search_env", "web"]  # the fixtures this module uses


def test_the_report_says_which_pages_were_skipped_and_why(
    search_env: dict[str, str], outside: FakeWeb
) -> None:
    # The search finds the bisect page, a redirect to a metadata address and a redirect to
    # a server left out of DEEP_RESEARCH_FETCH_ALLOW: the last two are not read.
    env = {k: v for k, v in search_env.items() if not k.startswith("OPENAI_")}
    code, out, err = cli(env, BISECT, "--web-engine", "search")
    assert code == 0, err
    assert outside.hits == []
    (session,) = (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    report = json.loads((session / "report.json").read_text())
    limits = "\n".join(report["limitations"])
    assert "**Pages not read:** 2 page(s) the searches found were skipped:" in limits
    assert "/redirect/metadata" in limits
    assert "DEEP\\_RESEARCH\\_FETCH\\_ALLOW" in limits, "the setting named, as markdown text"
    assert "Pages not read:" in out
