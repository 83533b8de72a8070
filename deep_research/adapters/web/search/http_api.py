"""The JSON search APIs' shared half: one request, its deadline, and what its answer means.

Every HTTP outcome is mapped in one place (`_outcome`), by status:

    2xx          the provider's parser reads the body; not JSON / another shape: bad_response
    429          `RetryAfter` (WebSearch waits once, or fails the search: rate_limited)
    401, 403     auth          (a provider may read its own refusals first: Brave, SearXNG)
    402,432,433  quota         (432/433 are Tavily's plan and pay-as-you-go limits)
    5xx          unavailable
    other        refused
    no answer    timeout (the deadline, or httpx's connect/read timeouts); network (refused
                 connection, reset, bad TLS, unresolvable name)

Secrets: the key travels only in a request header. A reason quotes at most one line of the
server's own message, with the key cut out and never for a refused key; no URL userinfo and
no httpx exception text is quoted; failures are raised ``from None`` so the request (and its
headers) is not chained onto the error either.
"""

from __future__ import annotations

import asyncio
import html
import re
from importlib import metadata
from typing import Any

import httpx
from pydantic import SecretStr

from deep_research.adapters.branches.protocols import SearchHit
from deep_research.adapters.web.retry_after import retry_after_seconds
from deep_research.adapters.web.search.base import FailKind, RetryAfter, SearchFailed
from deep_research.core import markdown as md
from deep_research.core.scope import WebScope

_DETAIL_CHARS = 160
_SNIPPET_CHARS = 500  # Exa may send a page's whole text where a snippet would do
USERINFO = re.compile(r"//[^/@\s]*@")
_TAGS = re.compile(r"<[^>]*>")


def user_agent() -> str:
    try:
        return f"deep-research/{metadata.version('deep-research')}"
    except metadata.PackageNotFoundError:
        return "deep-research/0"


def plain(text: object) -> str:
    """A JSON string field as one line of plain text (Brave marks matches with <strong>)."""
    if not isinstance(text, str):
        return ""
    return " ".join(html.unescape(_TAGS.sub("", text)).split())


def hit(url: object, title: object, snippet: object) -> SearchHit | None:
    """A hit, or None when the result has no http(s) URL."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    return SearchHit(
        url=url.strip(), title=plain(title), snippet=md.clip(plain(snippet), _SNIPPET_CHARS)
    )


def kept(found: list[SearchHit | None], max_results: int) -> list[SearchHit]:
    """The hits read (None: a row that was no hit), at most ``max_results``."""
    return [h for h in found if h is not None][:max_results]


def rows(body: object, *path: str) -> list[dict[str, Any]]:
    """``body[path...]`` as a list of objects; `_BadShape` when it is not one."""
    node = body
    for step in path:
        if not isinstance(node, dict) or step not in node:
            raise _BadShape(f"the answer has no {'.'.join(path)} list")
        node = node[step]
    if not isinstance(node, list):
        raise _BadShape(f"the answer's {'.'.join(path)} is not a list")
    return [row for row in node if isinstance(row, dict)]


class _BadShape(Exception):
    pass


_NOT_JSON = object()


class HttpSearchApi:
    """Base of the JSON APIs: subclasses build the request and read a 2xx body."""

    name = ""
    max_per_request = 20

    def __init__(
        self,
        base_url: str,
        *,
        api_key: SecretStr | None = None,
        client: httpx.AsyncClient | None = None,
        timeout: float = 15.0,
    ) -> None:
        url = httpx.URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"{self.name}: not an http(s) base URL")
        self.base_url = url
        self.timeout = timeout
        self._key = api_key
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=min(5.0, timeout)),
            headers={"User-Agent": user_agent()},
            follow_redirects=False,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._where()})"

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.aclose()

    # --- what a subclass says --------------------------------------------------------
    def request(self, query: str, max_results: int, scope: WebScope) -> httpx.Request:
        """The request for ``query``, asking for ``scope`` in the API's own terms."""
        raise NotImplementedError

    def parse(self, body: object, max_results: int) -> list[SearchHit]:
        """The hits of a 2xx JSON body, by default ``results[]`` with ``url``, ``title`` and
        ``content`` (Tavily, SearXNG); raise `_BadShape` (via `rows`) when it is not one."""
        found = [hit(r.get("url"), r.get("title"), r.get("content")) for r in rows(body, "results")]
        return kept(found, max_results)

    def refusal(self, status: int, body: object) -> SearchFailed | None:
        """A provider's own reading of a non-2xx answer, before the shared table."""
        return None

    # --- shared ----------------------------------------------------------------------
    def key(self) -> str:
        """The API key, for a request header (never for a message)."""
        return self._key.get_secret_value() if self._key is not None else ""

    def url(self, path: str) -> httpx.URL:
        return self.base_url.copy_with(path=self.base_url.path.rstrip("/") + path)

    def failed(self, kind: FailKind, reason: str) -> SearchFailed:
        return SearchFailed(self.name, kind, self._scrub(reason))

    async def fetch(self, query: str, max_results: int, scope: WebScope) -> list[SearchHit]:
        request = self.request(query, max_results, scope)
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._client.send(request)
        except (TimeoutError, httpx.TimeoutException):
            raise self.failed("timeout", f"no answer within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise self.failed("network", self._network_reason(exc)) from None
        return self._outcome(response, max_results)

    def _outcome(self, response: httpx.Response, max_results: int) -> list[SearchHit]:
        status = response.status_code
        if status == 429:
            raise RetryAfter(retry_after_seconds(response.headers.get("retry-after")))
        try:
            body: object = response.json()
        except ValueError:  # JSONDecodeError and UnicodeDecodeError
            body = _NOT_JSON
        if 200 <= status < 300:
            if body is _NOT_JSON:
                raise self.failed("bad_response", f"the answer is not JSON (HTTP {status})")
            try:
                return self.parse(body, max_results)
            except _BadShape as exc:
                raise self.failed("bad_response", f"{exc} (HTTP {status})") from None
        if (own := self.refusal(status, body)) is not None:
            raise own
        if status in (401, 403):
            raise self.failed("auth", f"the API key was refused (HTTP {status})")
        detail = _detail(body)
        said = f": {detail}" if detail else ""
        if status in (402, 432, 433):
            raise self.failed("quota", f"out of credit or over the plan (HTTP {status}){said}")
        if status >= 500:
            raise self.failed("unavailable", f"the service is unavailable (HTTP {status})")
        raise self.failed("refused", f"the request was refused (HTTP {status}){said}")

    def _where(self) -> str:
        port = f":{self.base_url.port}" if self.base_url.port else ""
        return f"{self.base_url.host}{port}"

    def _network_reason(self, exc: httpx.TransportError) -> str:
        if isinstance(exc, httpx.ConnectError):
            return f"cannot connect to {self._where()}"
        if isinstance(exc, httpx.ProxyError):
            return f"the proxy refused the way to {self._where()}"
        if isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError):
            return f"the connection to {self._where()} broke off"
        return f"network error talking to {self._where()} ({type(exc).__name__})"

    def _scrub(self, text: str) -> str:
        text = USERINFO.sub("//", text)
        secret = self.key()
        if len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
        return text


def _detail(body: object) -> str:
    """One line of the server's own message, from the shapes these APIs use."""
    candidates: list[object] = []
    if isinstance(body, dict):
        detail, error = body.get("detail"), body.get("error")
        if isinstance(detail, dict):
            candidates.append(detail.get("error"))  # Tavily
        if isinstance(error, dict):
            candidates.append(error.get("detail"))  # Brave
        candidates += [detail, error, body.get("message")]  # Exa, generic
    for value in candidates:
        if isinstance(value, str) and value.strip():
            return md.clip(value, _DETAIL_CHARS)
    return ""
