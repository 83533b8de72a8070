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
"""

from __future__ import annotations

import httpx

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.search.base import SearchFailed
from deep_research.adapters.web.search.http_api import HttpSearchApi, hit, rows

_BRAVE_KEY_CODES = frozenset({"SUBSCRIPTION_TOKEN_INVALID", "SUBSCRIPTION_TOKEN_MISSING"})


def _kept(found: list[SearchHit | None], max_results: int) -> list[SearchHit]:
    return [h for h in found if h is not None][:max_results]


class Searxng(HttpSearchApi):
    name = "searxng"

    def request(self, query: str, max_results: int) -> httpx.Request:
        params = {"q": query, "format": "json", "categories": "general"}
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

    def request(self, query: str, max_results: int) -> httpx.Request:
        body = {
            "query": query,
            "max_results": max_results,
            "search_depth": "basic",  # 1 credit; "advanced" costs 2
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        headers = {"Authorization": f"Bearer {self.key()}"}
        return self._client.build_request("POST", self.url("/search"), json=body, headers=headers)

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        found = [hit(r.get("url"), r.get("title"), r.get("content")) for r in rows(body, "results")]
        return _kept(found, max_results)


class Brave(HttpSearchApi):
    name = "brave"

    def request(self, query: str, max_results: int) -> httpx.Request:
        params = {"q": query, "count": str(max_results)}
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

    def request(self, query: str, max_results: int) -> httpx.Request:
        body = {
            "query": query,
            "numResults": max_results,
            "type": "auto",
            "contents": {"highlights": True},
        }
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
