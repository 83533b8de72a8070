"""Web search providers behind one interface (``branches.protocols.Searcher``).

    limits = default_rate_limits()                # once per process, in the composition root
    search = make_provider("tavily", limits=limits, cache=result_cache, api_key=key)
    outcome = await search.search("chroma vs qdrant", max_results=5)
    outcome.hits, outcome.cached, outcome.fee_usd  # or SearchFailed("tavily: …")

Providers: ``duckduckgo`` (the default; no key, through ``ddgs``), ``searxng`` (a
self-hosted server), ``tavily``, ``brave`` and ``exa`` (paid; keys from ``TAVILY_API_KEY``,
``BRAVE_API_KEY``, ``EXA_API_KEY``, read by Settings and passed in as ``SecretStr``).
`base.py` states the invariants (cache, rate limit, Retry-After, fees), `http_api.py` the
mapping of HTTP outcomes to `SearchFailed` kinds, `apis.py` the request/response shapes.

List prices per request (USD), checked 2026-11-23 on the providers' pricing pages:
- Tavily: $0.008 a credit pay-as-you-go (plans $0.0075-0.005); a basic search is 1 credit.
- Brave: Search plan $5.00 per 1,000 requests (50 requests/s).
- Exa: search $7 per 1,000 requests with contents for up to 10 results (since 2026-03-03;
  +$1 per 1,000 results beyond 10, which is why at most 10 are asked for).
- DuckDuckGo and SearXNG: free.
Rates per second are kept below the documented limits: Tavily 100 RPM on a development
key, Exa 10 QPS, Brave 1/s on its old free plan (50/s on Search); DuckDuckGo has none
published and blocks bursts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import httpx
from pydantic import SecretStr

from deep_research.adapters.web.search.apis import Brave, Exa, Searxng, Tavily
from deep_research.adapters.web.search.base import (
    FailKind,
    RateLimits,
    ResultStore,
    RetryAfter,
    SearchApi,
    SearchFailed,
    SearchOutcome,
    WebSearch,
    normalize,
)
from deep_research.adapters.web.search.duckduckgo import DdgsClient, DuckDuckGo
from deep_research.adapters.web.search.http_api import HttpSearchApi
from deep_research.core.errors import ConfigError
from deep_research.core.models import SEARCH_PROVIDERS
from deep_research.core.scope import WebScope

__all__ = [
    "DEFAULTS",
    "Brave",
    "DdgsClient",
    "DuckDuckGo",
    "Exa",
    "FailKind",
    "HttpSearchApi",
    "ProviderDefaults",
    "RateLimits",
    "ResultStore",
    "RetryAfter",
    "SearchApi",
    "SearchFailed",
    "SearchOutcome",
    "Searxng",
    "Tavily",
    "WebSearch",
    "default_rate_limits",
    "make_provider",
    "normalize",
]


@dataclass(frozen=True)
class ProviderDefaults:
    price_usd: float
    """List price of one request."""
    per_second: float
    key_env: str | None = None
    """Where Settings reads the API key from; None: no key."""
    base_url: str | None = None
    """None: the user's own server (SearXNG) or none at all (ddgs)."""
    url_env: str | None = None
    """Where Settings reads the URL of the user's own server from; None: not needed."""


DEFAULTS: Mapping[str, ProviderDefaults] = {
    "duckduckgo": ProviderDefaults(price_usd=0.0, per_second=1.0),
    "searxng": ProviderDefaults(price_usd=0.0, per_second=2.0, url_env="DEEP_RESEARCH_SEARXNG_URL"),
    "tavily": ProviderDefaults(0.008, 1.5, "TAVILY_API_KEY", "https://api.tavily.com"),
    "brave": ProviderDefaults(0.005, 1.0, "BRAVE_API_KEY", "https://api.search.brave.com"),
    "exa": ProviderDefaults(0.007, 5.0, "EXA_API_KEY", "https://api.exa.ai"),
}
_HTTP_APIS: Mapping[str, type[HttpSearchApi]] = {
    "searxng": Searxng,
    "tavily": Tavily,
    "brave": Brave,
    "exa": Exa,
}


def default_rate_limits(per_second: Mapping[str, float] | None = None) -> RateLimits:
    """The process's rate limits: `DEFAULTS`' rates, with ``per_second`` overriding some."""
    rates = {name: d.per_second for name, d in DEFAULTS.items()}
    return RateLimits({**rates, **(per_second or {})})


def make_provider(
    name: str,
    *,
    limits: RateLimits,
    cache: ResultStore | None = None,
    api_key: SecretStr | None = None,
    base_url: str | None = None,
    price_usd: float | None = None,
    timeout: float = 15.0,
    max_retry_after: float = 30.0,
    http_client: httpx.AsyncClient | None = None,
    ddgs_client: DdgsClient | None = None,
    scope: WebScope | None = None,
) -> WebSearch:
    """The provider called ``name``; `ConfigError` when it cannot be built as configured.

    ``limits`` is the process's one `RateLimits`. ``http_client`` is used, not owned (else
    the provider opens its own and ``aclose()`` closes it); ``ddgs_client`` stands in for
    ``ddgs.DDGS()``. ``timeout`` bounds one request, ``max_retry_after`` the one wait a 429
    may ask for. ``scope`` (the run's web scope; None: the whole web) is asked of the
    provider in its own terms, and every hit outside it is dropped.
    """
    if name not in DEFAULTS:
        raise ConfigError(
            f"unknown search provider {name!r}: choose one of {', '.join(SEARCH_PROVIDERS)}"
        )
    defaults = DEFAULTS[name]
    price = defaults.price_usd if price_usd is None else price_usd
    api: SearchApi
    if name == "duckduckgo":
        api = DuckDuckGo(ddgs_client, timeout=min(timeout, 10.0), deadline=timeout)
    else:
        if defaults.key_env is not None and (
            api_key is None or not api_key.get_secret_value().strip()
        ):
            raise ConfigError(
                f"the {name} search provider needs an API key: set {defaults.key_env}"
            )
        url = base_url or defaults.base_url
        if url is None:
            raise ConfigError(f"the {name} search provider needs the base URL of its server")
        try:
            api = _HTTP_APIS[name](url, api_key=api_key, client=http_client, timeout=timeout)
        except (ValueError, httpx.InvalidURL):
            raise ConfigError(
                f"the {name} search provider's base URL is not an http(s) URL"
            ) from None
    return WebSearch(
        api,
        limits=limits,
        cache=cache,
        price_usd=price,
        max_retry_after=max_retry_after,
        scope=scope,
    )
