"""Exa: search $7 per 1,000 requests with contents for up to 10 results (since
2026-03-03; +$1 per 1,000 results beyond 10, which is why at most 10 are asked for),
10 a second (5 here). Checked 2026-11-23 on its pricing page. The key from ``EXA_API_KEY``.

Checked 2026-11-23 (docs.exa.ai, "Search" reference): ``POST https://api.exa.ai/search``
with ``x-api-key`` and ``{"query", "numResults", "type": "auto", "contents":
{"highlights": true}}``; hits in ``results[]`` with ``url``, ``title`` and
``highlights[]`` (or ``text``/``summary``). 401 bad key, 402 no credit. The web scope
(checked 2026-11-26): ``includeDomains``, ``excludeDomains`` and ``startPublishedDate``
(ISO 8601). Older docs said only one domain list per request: with allowed domains only
they are sent, the excluded ones are then the filter's.
"""

from __future__ import annotations

from typing import Any

import httpx

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.search import Provider
from deep_research.adapters.web.search.http_api import HttpSearchApi, hit, kept, rows
from deep_research.core.scope import WebScope


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
        return kept(found, max_results)


PROVIDER = Provider(
    "exa",
    price_usd=0.007,
    per_second=5.0,
    api=Exa,
    key_env="EXA_API_KEY",
    base_url="https://api.exa.ai",
)
