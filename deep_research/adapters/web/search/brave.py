"""Brave Search: $5.00 per 1,000 requests on its Search plan (50 a second; checked
2026-11-23 on its pricing page), 1 a second here (its old free plan's limit). The key
from ``BRAVE_API_KEY``.

Checked 2026-11-23: ``GET https://api.search.brave.com/res/v1/web/search?q=…&count=…``
(count ≤ 20) with ``X-Subscription-Token``; hits in ``web.results[]`` with ``url``,
``title``, ``description`` (HTML: matches in ``<strong>``). ``web`` is absent when nothing
matched. A bad key is a 422, not a 401: ``{"error": {"code":
"SUBSCRIPTION_TOKEN_INVALID", …}}``. The web scope (api-dashboard.search.brave.com, "Web
search" reference, and its search-operator help; checked 2026-11-26): no domain parameter,
``site:`` / ``-site:`` / ``OR`` in ``q``, which takes at most 400 characters and 50 words
(the operators are left out when they would not fit); ``freshness`` takes a range
``YYYY-MM-DDtoYYYY-MM-DD`` (``since`` to today).
"""

from __future__ import annotations

from datetime import date

import httpx

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.search import Provider
from deep_research.adapters.web.search.base import SearchFailed, scoped_query
from deep_research.adapters.web.search.http_api import HttpSearchApi, hit, kept, rows
from deep_research.core.scope import WebScope

_KEY_CODES = frozenset({"SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_TOKEN_MISSING"})


class Brave(HttpSearchApi):
    name = "brave"

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        narrowed = scoped_query(query, scope, max_chars=400, max_words=50)
        params = {"q": narrowed, "count": str(max_results)}
        if scope.since is not None:
            params["freshness"] = f"{scope.since.isoformat()}to{date.today().isoformat()}"
        headers = {"Accept": "application/json", "X-Subscription-Token": self.key()}
        return self._client.build_request(
            "GET", self.url("/res/v1/web/search"), params=params, headers=headers
        )

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        if isinstance(body, dict) and body.get("type") == "search" and "web" not in body:
            return []  # nothing on the web matched
        found = [
            hit(r.get("url"), r.get("title"), r.get("description"))
            for r in rows(body, "web", "results")
        ]
        return kept(found, max_results)

    def refusal(self, status: int, body: object) -> SearchFailed | None:
        error = body.get("error") if isinstance(body, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if code in _KEY_CODES:
            return self.failed("auth", f"the API key was refused (HTTP {status} {code})")
        return None


PROVIDER = Provider(
    "brave",
    price_usd=0.005,
    per_second=1.0,
    api=Brave,
    key_env="BRAVE_API_KEY",
    base_url="https://api.search.brave.com",
)
