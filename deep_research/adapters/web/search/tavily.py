"""Tavily: $0.008 a credit pay-as-you-go (plans $0.0075-0.005), a basic search is 1 credit
(checked 2026-11-23 on its pricing page); 100 requests a minute on a development key, so
1.5 a second here. The key from ``TAVILY_API_KEY``.

Checked 2026-11-23 (docs.tavily.com): ``POST https://api.tavily.com/search`` with
``Authorization: Bearer <key>`` and ``{"query", "max_results" (0-20), "search_depth":
"basic", …}``; hits in ``results[]`` with ``url``, ``title``, ``content``. Errors carry
``{"detail": {"error": …}}``: 401 bad key, 429 rate limit, 432 plan limit, 433
pay-as-you-go limit. The web scope (API reference "Search", checked 2026-11-26):
``include_domains``, ``exclude_domains`` and ``start_date`` (``YYYY-MM-DD``, results
published on or after).
"""

from __future__ import annotations

from typing import Any

import httpx

from deep_research.adapters.web.search import Provider
from deep_research.adapters.web.search.http_api import HttpSearchApi
from deep_research.core.scope import WebScope


class Tavily(HttpSearchApi):
    name = "tavily"

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        body: dict[str, Any] = {
            "query": query,
            "max_results": max_results,
            "search_depth": "basic",  # 1 credit; "advanced" costs 2
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        if scope.domains:
            body["include_domains"] = list(scope.domains)
        if scope.exclude_domains:
            body["exclude_domains"] = list(scope.exclude_domains)
        if scope.since is not None:
            body["start_date"] = scope.since.isoformat()
        headers = {"Authorization": f"Bearer {self.key()}"}
        return self._client.build_request("POST", self.url("/search"), json=body, headers=headers)


PROVIDER = Provider(
    "tavily",
    price_usd=0.008,
    per_second=1.5,
    api=Tavily,
    key_env="TAVILY_API_KEY",
    base_url="https://api.tavily.com",
)
