"""SearXNG, a self-hosted metasearch server: free, no key, its URL from
``DEEP_RESEARCH_SEARXNG_URL``.

Checked 2026-11-23 (docs.searxng.org, "Search API"): ``GET {base}/search?q=…&format=json``;
hits in ``results[]`` with ``url``, ``title``, ``content``. A server whose
``search.formats`` lacks ``json`` answers 403. No result count parameter: one page is
returned and cut here.

The web scope (checked 2026-11-26): no domain parameter; ``q`` is passed to its engines,
which read their own syntax (``site:`` for Google, Bing, DuckDuckGo), so the domains go in
the query as ``(site:a.com OR site:b.org) -site:x.com``. ``time_range`` is ``day``,
``month`` or ``year`` (engines that support it): the smallest that covers ``since`` (a week
becomes a month). What it cannot narrow is filtered afterwards (``base.WebSearch``).
"""

from __future__ import annotations

from datetime import date

import httpx

from deep_research.adapters.web.search import Provider
from deep_research.adapters.web.search.base import SearchFailed, scoped_query, window
from deep_research.adapters.web.search.http_api import HttpSearchApi
from deep_research.core.scope import WebScope

_RANGES = {"day": "day", "week": "month", "month": "month", "year": "year"}


class Searxng(HttpSearchApi):
    name = "searxng"

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        params = {"q": scoped_query(query, scope), "format": "json", "categories": "general"}
        if (past := window(scope.since, date.today())) is not None:
            params["time_range"] = _RANGES[past]
        return self._client.build_request("GET", self.url("/search"), params=params)

    def refusal(self, status: int, body: object) -> SearchFailed | None:
        if status == 403:
            return self.failed(
                "refused",
                "the server does not answer in JSON (HTTP 403): add json to search.formats "
                "in its settings.yml",
            )
        return None


PROVIDER = Provider(
    "searxng", price_usd=0.0, per_second=2.0, api=Searxng, url_env="DEEP_RESEARCH_SEARXNG_URL"
)
