"""The page reader's address guard: no request reaches a private address (no SSRF).

Invariants:
- Only ``http`` and ``https`` URLs are fetched.
- A host name is resolved once (``loop.getaddrinfo``), *every* address it resolves to is
  checked, and the connection goes to a checked address: `GuardedTransport` sends the
  request to that IP while the ``Host`` header keeps the name and TLS sends and verifies the
  name (httpx's ``sni_hostname`` request extension). A DNS answer that changes between the
  check and the connect (rebinding) cannot move the request.
- Refused: private, loopback, link-local, unspecified, multicast, reserved and shared
  (100.64/10) addresses, IPv6 forms that embed one of those (mapped, 6to4, Teredo), and the
  cloud metadata endpoints (169.254.169.254 and fd00:ec2::254 fall in the ranges above;
  ``metadata.google.internal`` is refused by name before it is resolved).
- The one exception is the allow-list of ``host[:port]`` entries — an intranet, or a test
  server on loopback. A host alone allows every port; an entry with a port allows only that
  port. Entries match the host *as written in the URL*: allowing ``localhost`` does not
  allow ``127.0.0.1``, nor another name that resolves to it.
- The transport sits under the client, so every hop of a redirect passes through it.

Behind a proxy (``HTTP_PROXY``/``HTTPS_PROXY``/``ALL_PROXY`` minus ``NO_PROXY``, read when
``trust_env`` is on) the proxy makes the connection and resolves names itself. The guard
still refuses IP literals, the metadata names and any name that *it* can resolve to a
refused address, but a name it cannot resolve is handed to the proxy unchecked, and a name
may resolve differently at the proxy: behind a proxy the trust moves to the proxy, whose
own egress rules must keep it off private networks. The proxy's own address is configured
by the operator and is not checked.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.request
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import httpx

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) -> the addresses it resolves to; raises ``OSError`` when it does not."""

METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog"})
"""Cloud metadata services reached by name (the addresses are refused as link-local/ULA)."""

_IP = ipaddress.IPv4Address | ipaddress.IPv6Address
_SHARED = ipaddress.ip_network("100.64.0.0/10")


class AddressRefused(Exception):
    """The guard refused a URL before any connection was made; the message says why."""


def refusal(address: _IP) -> str | None:
    """Why an address must not be fetched, or None when it is a public unicast address."""
    if isinstance(address, ipaddress.IPv6Address):
        for embedded in (address.ipv4_mapped, address.sixtofour):
            if embedded is not None and (why := refusal(embedded)):
                return f"an IPv6 form of {embedded} ({why})"
        if address.teredo is not None:
            return "a Teredo tunnel address"
    checks = (
        (address.is_loopback, "loopback"),
        (address.is_unspecified, "unspecified"),
        (address.is_link_local, "link-local (cloud metadata lives here)"),
        (address.is_multicast, "multicast"),
        (address.is_private, "private"),
        (address.is_reserved, "reserved"),
        (isinstance(address, ipaddress.IPv4Address) and address in _SHARED, "shared (CGNAT)"),
        (not address.is_global, "not globally routable"),
    )
    return next((why for hit, why in checks if hit), None)


@dataclass(frozen=True)
class AllowList:
    """``host[:port]`` entries exempt from the address check."""

    entries: frozenset[tuple[str, int | None]] = frozenset()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        parsed: set[tuple[str, int | None]] = set()
        for raw in entries:
            entry = raw.strip().lower()
            host, port = entry, None
            if entry.startswith("["):  # [v6] or [v6]:port
                host, _, rest = entry[1:].partition("]")
                port = int(rest[1:]) if rest.startswith(":") else None
            elif entry.count(":") == 1:
                host, _, number = entry.partition(":")
                port = int(number)
            if not host:
                raise ValueError(f"allow-list entry {raw!r} names no host")
            parsed.add((_canonical(host), port))
        return cls(frozenset(parsed))

    def allows(self, host: str, port: int) -> bool:
        return (host, None) in self.entries or (host, port) in self.entries


@dataclass(frozen=True)
class Target:
    host: str
    """ASCII, lower case, no trailing dot: the name for the Host header and TLS."""
    port: int
    address: str | None
    """The checked address to connect to; None when a proxy resolves the name."""


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def check(
    url: httpx.URL, allow: AllowList, resolve: Resolver, *, via_proxy: bool = False
) -> Target:
    """Resolve once and check every address; raises `AddressRefused` or ``OSError`` (DNS)."""
    if url.scheme not in ("http", "https"):
        raise AddressRefused(f"only http and https are fetched, not {url.scheme or 'no'} URLs")
    host = _canonical(url.raw_host.decode("ascii"))
    if not host:
        raise AddressRefused("the URL names no host")
    port = url.port or (443 if url.scheme == "https" else 80)
    allowed = allow.allows(host, port)
    if not allowed and host in METADATA_NAMES:
        raise AddressRefused(f"{host} is a cloud metadata service")
    literal = _literal(host)
    if literal is not None:
        addresses = [host]
    else:
        try:
            addresses = await resolve(host, port)
        except OSError:
            if via_proxy:  # the proxy resolves it: see the module docstring
                return Target(host, port, None)
            raise
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    if not allowed:
        for address in addresses:
            why = refusal(ipaddress.ip_address(address.partition("%")[0]))
            if why is not None:
                where = host if literal is not None else f"{host} (resolves to {address})"
                raise AddressRefused(f"{where} is {why}")
    return Target(host, port, addresses[0])


class GuardedTransport(httpx.AsyncBaseTransport):
    """Checks every request with `check` and connects to the checked address.

    Plain http keeps connections alive; https does not, because a pooled connection is
    keyed by IP and could otherwise carry a request for another name on the same IP over
    a TLS session verified for the first one.
    """

    def __init__(self, allow: AllowList, resolve: Resolver, *, trust_env: bool) -> None:
        self._allow = allow
        self._resolve = resolve
        # trust_env here reads SSL_CERT_FILE / SSL_CERT_DIR (httpx's own rule).
        self._http = httpx.AsyncHTTPTransport(trust_env=trust_env)
        self._https = httpx.AsyncHTTPTransport(
            trust_env=trust_env, limits=httpx.Limits(max_keepalive_connections=0)
        )
        self._env = urllib.request.getproxies_environment() if trust_env else {}
        self._proxies: dict[str, httpx.AsyncHTTPTransport] = {}
        for scheme in ("http", "https", "all"):
            proxy = self._env.get(scheme)
            if proxy and proxy not in self._proxies:
                if httpx.URL(proxy).scheme not in ("http", "https"):
                    raise ValueError(f"unsupported proxy {proxy!r}: only http(s) proxies are")
                self._proxies[proxy] = httpx.AsyncHTTPTransport(proxy=proxy, trust_env=trust_env)

    def proxy_for(self, url: httpx.URL) -> str | None:
        proxy = self._env.get(url.scheme) or self._env.get("all")
        if not proxy or _bypassed(url, self._env.get("no", "")):
            return None
        return proxy

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        proxy = self.proxy_for(request.url)
        timeout = request.extensions.get("timeout", {}).get("connect")
        try:
            async with asyncio.timeout(timeout):
                target = await check(
                    request.url, self._allow, self._resolve, via_proxy=proxy is not None
                )
        except TimeoutError:
            raise httpx.ConnectTimeout("DNS lookup timed out", request=request) from None
        except OSError as exc:
            message = f"cannot resolve {request.url.host}: {exc}"
            raise httpx.ConnectError(message, request=request) from exc
        if proxy is not None:
            return await self._proxies[proxy].handle_async_request(request)
        assert target.address is not None
        extensions = dict(request.extensions)
        if request.url.scheme == "https" and _literal(target.host) is None:
            extensions["sni_hostname"] = target.host
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=target.address),
            headers=request.headers,  # keeps Host: the name, not the address
            stream=request.stream,
            extensions=extensions,
        )
        transport = self._https if request.url.scheme == "https" else self._http
        return await transport.handle_async_request(pinned)

    async def aclose(self) -> None:
        for transport in (self._http, self._https, *self._proxies.values()):
            await transport.aclose()


def _bypassed(url: httpx.URL, no_proxy: str) -> bool:
    """NO_PROXY as curl and urllib read it: ``*``, or names matching as a domain suffix."""
    host = _canonical(url.host)
    netloc = f"{host}:{url.port}" if url.port else host
    entries = {e.strip().lower().lstrip(".") for e in no_proxy.split(",")} - {""}
    names = (host, netloc)
    return "*" in entries or any(n == e or n.endswith("." + e) for e in entries for n in names)


def _canonical(host: str) -> str:
    return host.strip().lower().rstrip(".").removeprefix("[").removesuffix("]")


def _literal(host: str) -> _IP | None:
    try:
        return ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return None
