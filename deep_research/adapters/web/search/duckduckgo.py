"""DuckDuckGo through the ``ddgs`` library (no key), ``backend="duckduckgo"`` only.

``DDGS().text(query, region=…, safesearch=…, max_results=…, backend=…)`` is synchronous,
so it runs in a worker thread under a deadline; it returns dicts with ``title``, ``href``
and ``body``. What it raises (ddgs 9.16, checked in its source 2026-11-23), and what that
becomes here:

    RatelimitException   rate_limited   (kept by ddgs for its rate-limit signal)
    TimeoutException     timeout        (a request timed out)
    DDGSException        "No results found." -> no hits; anything else -> network
                         (ddgs wraps every engine failure, connection errors included)

``backend="auto"`` would also query Bing, Google, Brave, Yandex and others; ``duckduckgo``
asks DuckDuckGo's HTML endpoint alone. ddgs 9.16 cannot tell "nothing matched" from
DuckDuckGo's rate-limit page (both give "No results found."), which is why empty results
are never cached.

The run's web scope, in DuckDuckGo's terms (checked 2026-11-26 in ddgs 9.16's
``engines/duckduckgo.py``, which posts ``q`` and ``df`` to html.duckduckgo.com, and
DuckDuckGo's search-syntax help page): domains as ``site:`` operators in the query,
``(site:a.com OR site:b.org) -site:x.com``; ``timelimit`` ``d``/``w``/``m``/``y`` (past
day, week, month, year): the smallest that covers ``since``. Hits are filtered afterwards
(``base.WebSearch``) whatever DuckDuckGo made of them.
"""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any, Protocol

import httpx
from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
from pydantic import SecretStr

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.search import Provider
from deep_research.adapters.web.search.base import SearchFailed, scoped_query, window
from deep_research.adapters.web.search.http_api import USERINFO, hit, kept
from deep_research.core import markdown as md
from deep_research.core.scope import WebScope

_NO_RESULTS = "No results found."


class DdgsClient(Protocol):
    """What is used of ``ddgs.DDGS``."""

    def text(self, query: str, **kwargs: Any) -> list[dict[str, Any]]: ...


class DuckDuckGo:
    name = "duckduckgo"
    max_per_request = 20

    def __init__(
        self,
        client: DdgsClient | None = None,
        *,
        timeout: float = 5.0,
        deadline: float = 15.0,
    ) -> None:
        self.timeout = timeout
        """ddgs' own timeout for one HTTP request."""
        self.deadline = deadline
        """The most one search may take here, ddgs' internal waits included."""
        self._client = client

    async def aclose(self) -> None:
        pass  # ddgs holds no connection between calls that needs closing

    async def fetch(self, query: str, max_results: int, scope: WebScope) -> list[SearchHit]:
        client = self._client or self._default_client()
        past = window(scope.since, date.today())
        try:
            # On expiry the worker thread runs on until ddgs' own timeout ends it: a thread
            # cannot be cancelled, only no longer waited for.
            async with asyncio.timeout(self.deadline):
                found = await asyncio.to_thread(
                    client.text,
                    scoped_query(query, scope),
                    region="us-en",
                    safesearch="moderate",
                    timelimit=past[0] if past else None,  # d, w, m, y
                    max_results=max_results,
                    backend="duckduckgo",
                )
        except TimeoutError:
            raise SearchFailed(
                self.name, "timeout", f"no answer within {self.deadline:g}s"
            ) from None
        except RatelimitException:
            raise SearchFailed(
                self.name, "rate_limited", "DuckDuckGo is rate limiting this address"
            ) from None
        except TimeoutException:
            raise SearchFailed(self.name, "timeout", "DuckDuckGo did not answer in time") from None
        except DDGSException as exc:
            if str(exc) == _NO_RESULTS:
                return []
            raise SearchFailed(self.name, "network", f"search failed ({_one_line(exc)})") from None
        if not isinstance(found, list):
            raise SearchFailed(self.name, "bad_response", "ddgs returned no list of results")
        rows = [row for row in found if isinstance(row, dict)]
        return kept([hit(r.get("href"), r.get("title"), r.get("body")) for r in rows], max_results)

    def _default_client(self) -> DdgsClient:
        from ddgs import DDGS  # loads ddgs' engines only when DuckDuckGo is really used

        self._client = DDGS(timeout=max(1, round(self.timeout)))
        return self._client


def _one_line(exc: BaseException) -> str:
    """One line of ``exc``, without a proxy URL's credentials (``DDGS_PROXY``)."""
    return md.clip(USERINFO.sub("//", str(exc)), 120) or type(exc).__name__


def _api(
    base_url: str, /, *, api_key: SecretStr | None, client: httpx.AsyncClient | None, timeout: float
) -> DuckDuckGo:
    # ddgs' own timeout is one request's; the deadline the whole search's.
    return DuckDuckGo(timeout=min(timeout, 10.0), deadline=timeout)


PROVIDER = Provider("duckduckgo", price_usd=0.0, per_second=1.0, api=_api)
"""Free; no rate is published and it blocks bursts, so one a second."""
