"""Web search providers of search-and-read, behind one interface (``branches.protocols.Searcher``).

    limits = default_rate_limits()                # once per process, in the composition root
    search = make_provider("tavily", limits=limits, cache=result_cache, api_key=key)
    outcome = await search.search("chroma vs qdrant", max_results=5)
    outcome.hits, outcome.cached   # or SearchFailed("tavily: …"); search.price_usd a request

A provider is a ``Provider`` value in a module of its own, found the way a source is
(``app/sources.py``): the built-ins, ``duckduckgo`` (the default; no key, through ``ddgs``),
``searxng`` (a self-hosted server), ``tavily``, ``brave`` and ``exa`` (paid), are named in
``DEFAULT``; any other package adds one with an entry point of ``ENTRY_POINTS``. Each
module's docstring holds its list price, its rate and its request and response shapes,
with the date they were checked. `base.py` states the invariants (cache, rate limit,
Retry-After, fees), `http_api.py` the mapping of HTTP outcomes to `SearchFailed` kinds.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import httpx
from pydantic import SecretStr

from deep_research.adapters.web.search.base import RateLimits, ResultStore, SearchApi, WebSearch
from deep_research.core.errors import ConfigError
from deep_research.core.plugins import installed, load
from deep_research.core.scope import WebScope

if TYPE_CHECKING:
    from deep_research.adapters.web.search.duckduckgo import DdgsClient


log = logging.getLogger(__name__)

ENTRY_POINTS = "deep_research.search_providers"
DEFAULT = tuple(
    f"deep_research.adapters.web.search.{name}:PROVIDER"
    for name in ("duckduckgo", "searxng", "tavily", "brave", "exa")
)
"""The built-in providers, loaded as an entry point is: ``module:attribute``."""


class MakeApi(Protocol):
    """How a provider's API is made: its base URL (``""`` for none), key, client, timeout."""

    def __call__(
        self,
        base_url: str,
        /,
        *,
        api_key: SecretStr | None,
        client: httpx.AsyncClient | None,
        timeout: float,
    ) -> SearchApi: ...


@dataclass(frozen=True)
class Provider:
    name: str
    price_usd: float
    """List price of one request."""
    per_second: float
    """Requests a second, below the documented limit."""
    api: MakeApi
    key_env: str | None = None
    """Where its API key is read from; None: no key."""
    base_url: str | None = None
    """None: the user's own server (``url_env``) or none at all (ddgs)."""
    url_env: str | None = None
    """Where the URL of the user's own server is read from; None: not needed."""


@functools.cache
def _load(target: str) -> Provider:
    return load(target, Provider)


@functools.cache
def _catalog() -> tuple[dict[str, Provider], dict[str, str]]:
    found = {p.name: p for p in map(_load, DEFAULT)}
    plugins, broken = installed(ENTRY_POINTS, Provider)
    for name, why in broken.items():
        log.warning("search provider %s left out: %s", name, why)
    return found | {n: p for n, p in plugins.items() if n not in found}, broken


def providers() -> Mapping[str, Provider]:
    """Every provider there is: the built-ins, then each entry point of ``ENTRY_POINTS`` (one
    that fails to load is left out, and named when it is asked for)."""
    return _catalog()[0]


def provider(name: str) -> Provider:
    """The provider ``name``; a built-in one is loaded alone (its library with it)."""
    builtin = f"deep_research.adapters.web.search.{name}:PROVIDER"
    if builtin in DEFAULT:
        return _load(builtin)
    found, broken = _catalog()
    if name in broken:
        raise ConfigError(f"the search provider {name!r}: {broken[name]}")
    if name not in found:
        known = ", ".join(found)
        raise ConfigError(f"unknown search provider {name!r}: choose one of {known}")
    return found[name]


def default_rate_limits(per_second: Mapping[str, float] | None = None) -> RateLimits:
    """The process's rate limits: the providers' rates, with ``per_second`` overriding some."""
    rates = {name: p.per_second for name, p in providers().items()}
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
    ``ddgs.DDGS()`` (tests). ``timeout`` bounds one request, ``max_retry_after`` the one wait
    a 429 may ask for. ``scope`` (the run's web scope; None: the whole web) is asked of the
    provider in its own terms, and every hit outside it is dropped.
    """
    found = provider(name)
    if found.key_env is not None and (api_key is None or not api_key.get_secret_value().strip()):
        raise ConfigError(f"the {name} search provider needs an API key: set {found.key_env}")
    url = base_url or found.base_url
    if url is None and found.url_env is not None:
        raise ConfigError(f"the {name} search provider needs the base URL of its server")
    api: SearchApi
    if ddgs_client is not None:
        from deep_research.adapters.web.search.duckduckgo import DuckDuckGo

        api = DuckDuckGo(ddgs_client, timeout=min(timeout, 10.0), deadline=timeout)
    else:
        try:
            api = found.api(url or "", api_key=api_key, client=http_client, timeout=timeout)
        except (ValueError, httpx.InvalidURL):
            raise ConfigError(
                f"the {name} search provider's base URL is not an http(s) URL"
            ) from None
    return WebSearch(
        api,
        limits=limits,
        cache=cache,
        price_usd=found.price_usd if price_usd is None else price_usd,
        max_retry_after=max_retry_after,
        scope=scope,
    )
