"""A search provider as a plugin package writes one (``adapters/web/search``): a JSON API
that answers ``GET /find?q=…`` with ``{"items": [{"link", "name", "text"}]}``."""

from __future__ import annotations

import httpx

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.search import Provider
from deep_research.adapters.web.search.http_api import HttpSearchApi, hit, kept, rows
from deep_research.core.scope import WebScope


class EchoSearch(HttpSearchApi):
    name = "echosearch"

    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        headers = {"X-Key": self.key()}
        params = {"q": query, "n": str(max_results)}
        return self._client.build_request("GET", self.url("/find"), params=params, headers=headers)

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        found = [hit(r.get("link"), r.get("name"), r.get("text")) for r in rows(body, "items")]
        return kept(found, max_results)


PROVIDER = Provider(
    "echosearch",
    price_usd=0.001,
    per_second=10.0,
    api=EchoSearch,
    key_env="ECHO_SEARCH_KEY",
    base_url="https://echo-search.example",
)
