"""The four JSON search APIs: how to ask, and where the hits are in the answer.

Request and response shapes checked 2026-11-23 against each provider's documentation:

- SearXNG (self-hosted): ``GET {base}/search?q=…&format=json``; hits in ``results[]`` with
  ``url``, ``title``, ``content``. A server whose ``search.formats`` lacks ``json``
  answers 403. No result count parameter: one page is returned and cut here.
- Tavily: ``POST https://api.tavily.com/search`` with ``Authorization: Bearer <key>`` and
  ``{"query", "max_results" (0-20), "search_depth": "basic", …}``; hits in ``results[]``
  with ``url``, ``title``, ``content``. Errors carry ``{"detail": {"error": …}}``: 401 bad
  key, 429 rate limit, 432 plan limit, 433 pay-as-you-go limit.
- Brave: ``GET https://api.search.brave.com/res/v1/web/search?q=…&count=…`` (count ≤ 20)
  with ``X-Subscription-Token``; hits in ``web.results[]`` with ``url``, ``title``,
  ``description`` (HTML: matches in ``<strong>``). ``web`` is absent when nothing matched.
  A bad key is a 422, not a 401: ``{"error": {"code": "SUBSCRIPTION_TOKEN_INVALID", …}}``.
- Exa: ``POST https://api.exa.ai/search`` with ``x-api-key`` and ``{"query", "numResults",
  "type": "auto", "contents": {"highlights": true}}``; hits in ``results[]`` with ``url``,
  ``title`` and ``highlights[]`` (or ``text``/``summary``). 401 bad key, 402 no credit.
  The per-request price covers up to 10 results, so at most 10 are asked for.

How each takes the run's web scope (checked 2026-11-26; where is said for each). What a
provider cannot narrow is filtered afterwards (``base.WebSearch``), so these only save
requests and results spent on pages the run may not read:

- SearXNG (docs.searxng.org, "Search API"): no domain parameter; ``q`` is passed to its
  engines, which read their own syntax (``site:`` for Google, Bing, DuckDuckGo), so the
  domains go in the query as ``(site:a.com OR site:b.org) -site:x.com``. ``time_range`` is
  ``day``, ``month`` or ``year`` (engines that support it): the smallest that covers
  ``since`` (a week becomes a month).
- Tavily (docs.tavily.com, API reference "Search"): ``include_domains``,
  ``exclude_domains`` and ``start_date`` (``YYYY-MM-DD``, results published on or after).
- Brave (api-dashboard.search.brave.com, "Web search" reference, and its search-operator
  help): no domain parameter, ``site:`` / ``-site:`` / ``OR`` in ``q``, which takes at most
  400 characters and 50 words (the operators are left out when they would not fit);
  ``freshness`` takes a range ``YYYY-MM-DDtoYYYY-MM-DD`` (``since`` to today).
- Exa (docs.exa.ai, "Search" reference): ``includeDomains``, ``excludeDomains`` and
  ``startPublishedDate`` (ISO 8601). Older docs said only one domain list per request: with
  allowed domains only they are sent, the excluded ones are then the filter's.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import httpx

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.search.base import SearchFailed, scoped_query, window
from deep_research.adapters.web.search.http_api import HttpSearchApi, hit, rows
from deep_research.core.scope import WebScope

_BRAVE_KEY_CODES = frozenset({"SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_TOKEN_MISSING"})
_BRAVE_MAX_CHARS = 400
_BRAVE_MAX_WORDS = 50
_SEARXNG_RANGES = {"day": "day", "week": "month", "month": "month", "year": "year"}


def _kept(found: list[SearchHit | None], max_results: int) -> list[SearchHit]:
    return [h for h in found if h is not None][:max_results]


class Searxng(HttpSearchApi):
    name = "searxng"

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        params = {"q": scoped_query(query, scope), "format": "json", "categories": "general"}
        if (past := window(scope.since, date.today())) is not None:
            params["time_range"] = _SEARXNG_RANGES[past]
        return self._client.build_request("GET", self.url("/search"), params=params)

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        found = [hit(r.get("url"), r.get("title"), r.get("content")) for r in rows(body, "results")]
        return _kept(found, max_results)

    def refusal(self, status: int, body: object) -> SearchFailed | None:
        if status == 403:
            return self.failed(
                "refused",
                "the server does not answer in JSON (HTTP 403): add json to search.formats "
                "in its settings.yml",
            )
        return None


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

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        found = [hit(r.get("url"), r.get("title"), r.get("content")) for r in rows(body, "results")]
        return _kept(found, max_results)


class Brave(HttpSearchApi):
    name = "brave"

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        narrowed = scoped_query(
            query, scope, max_chars=_BRAVE_MAX_CHARS, max_words=_BRAVE_MAX_WORDS
        )
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
        return _kept(found, max_results)

    def refusal(self, status: int, body: object) -> SearchFailed | None:
        error = body.get("error") if isinstance(body, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if code in _BRAVE_KEY_CODES:
            return self.failed("auth", f"the API key was refused (HTTP {status} {code})")
        return None


class Exa(HttpSearchApi):
    name = "exa"
    max_per_request = 10

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        body: dict[str, Any] = {
            "query": query,
            "numResults": max_results,
            "type": "auto",
            "contents": {"highlights": True},
        }
        if scope.domains:
            body["includeDomains"] = list(scope.domains)
        elif scope.exclude_domains:
            body["excludeDomains"] = list(scope.exclude_domains)
        if scope.since is not None:
            body["startPublishedDate"] = f"{scope.since.isoformat()}T00:00:00.000Z"
        headers = {"x-api-key": self.key()}
        return self._client.build_request("POST", self.url("/search"), json=body, headers=headers)

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        found = []
        for r in rows(body, "results"):
            highlights = r.get("highlights")
            if isinstance(highlights, list) and any(isinstance(h, str) for h in highlights):
                snippet: object = " … ".join(h for h in highlights if isinstance(h, str))
            else:
                snippet = r.get("text") or r.get("summary")
            found.append(hit(r.get("url"), r.get("title"), snippet))
        return _kept(found, max_results)
