"""The checks both servers (the HTTP API and the MCP server over HTTP) make at the door:
the ``Host`` names they answer to, the ``Origin`` values they accept, what counts as a
loopback bind, the bearer token; and the JSON of a refusal, the shape of every error of theirs.

A server that checks ``Host`` cannot be reached through DNS rebinding: a page on
``evil.example`` whose name an attacker points at this machine still sends
``Host: evil.example``. So every name below is one only this machine's user controls:

- a loopback bind answers to the loopback names (``localhost``, ``127.0.0.1``, ``[::1]``);
- a bind on every address (``0.0.0.0``, ``::``) answers to those and to the machine's own
  names and addresses: its host name (and ``.local``, its fully qualified name), what they
  resolve to, and the addresses of its network interfaces;
- any other bind answers to its own address;
- and every server to the names in ``DEEP_RESEARCH_PUBLIC_HOSTS`` (a reverse proxy's).

Each is accepted bare and with the server's port; names are compared in lower case.

With ``DEEP_RESEARCH_API_TOKEN`` set, a request must carry ``Authorization: Bearer <token>``,
compared in constant time (`bearer_token_matches`).
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import socket
import struct
import sys
from collections.abc import Collection, Iterable
from pathlib import Path

from starlette.responses import JSONResponse

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})


def bearer_token_matches(authorization: str | None, token: bytes) -> bool:
    """``authorization`` (an ``Authorization`` header) is ``Bearer <token>``; the scheme in
    any case, the token compared in constant time."""
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.encode(), token)


def error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    """``{"error": {"code", "message"}}``: every error the HTTP API (or the MCP server's door)
    answers."""
    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers or None)


def wrong_host(given: list[str], hosts: Collection[str]) -> bool:
    """Whether a request's ``Host`` headers (``given``) are not one of ``hosts`` (lower case):
    none, one not listed, or more than one. Of two, which one is meant is moot: a proxy, the
    MCP SDK or a framework may each read another, so a listed first one proves nothing."""
    return len(given) != 1 or given[0].lower() not in hosts


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_every_address(host: str) -> bool:
    """``0.0.0.0`` or ``::``: a bind on every interface of the machine."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def allowed_hosts(host: str, port: int, public: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` values a server bound to ``host``:``port`` answers to; ``public`` are
    more names (``host`` or ``host:port``) it is reached by."""
    names = {host.lower()}
    if is_loopback(host) or is_every_address(host):
        names |= LOOPBACK_NAMES
    if is_every_address(host):
        names |= machine_names()
    bracketed = {f"[{n}]" if ":" in n and not n.startswith("[") else n for n in names}
    given = {n.lower() for n in public}
    with_port = {f"{n}:{port}" for n in bracketed | {n for n in given if not _has_port(n)}}
    return frozenset(bracketed | given | with_port)


def allowed_origins(hosts: Iterable[str], port: int, public: Iterable[str] = ()) -> frozenset[str]:
    """The ``Origin`` of a page this server (or its proxy, over http or https) served."""
    served = {f"http://{h}" for h in hosts if h.endswith(f":{port}")}
    if port == 80:  # a browser leaves out the default port
        served |= {o.removesuffix(":80") for o in served}
    proxied = {f"{scheme}://{n.lower()}" for n in public for scheme in ("http", "https")}
    return frozenset(served | proxied)


def _has_port(name: str) -> bool:
    return name.rsplit("]", 1)[-1].count(":") == 1


@functools.cache
def machine_names() -> frozenset[str]:
    """This machine's names and addresses, as clients on its networks may call it."""
    name = socket.gethostname().lower()
    names = {name, f"{name}.local", socket.getfqdn().lower()}
    addresses: set[str] = set()
    for known in list(names):
        try:
            found = socket.getaddrinfo(known, None, type=socket.SOCK_STREAM)
        except OSError:  # a name no resolver knows: still the machine's name
            continue
        addresses |= {str(info[4][0]) for info in found}
    addresses |= interface_addresses()
    return frozenset(names | {a.split("%", 1)[0].lower() for a in addresses})


def interface_addresses() -> set[str]:
    """The addresses of the network interfaces, with the standard library alone: on Linux
    every interface's; elsewhere the ones the default routes leave from."""
    found = _routed_addresses()
    if sys.platform == "linux":
        found |= _linux_addresses()
    return found


def _routed_addresses() -> set[str]:
    """The source address of each default route (a UDP ``connect`` sends no packet)."""
    found: set[str] = set()
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:
            with socket.socket(family, socket.SOCK_DGRAM) as udp:
                udp.connect((probe, 9))
                found.add(str(udp.getsockname()[0]))
        except OSError:  # no route of that family
            continue
    return found


def _linux_addresses() -> set[str]:
    import fcntl

    found: set[str] = set()
    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        for _index, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                reply = fcntl.ioctl(udp.fileno(), siocgifaddr, request)
            except OSError:  # no IPv4 address on it
                continue
            found.add(socket.inet_ntoa(reply[20:24]))
    try:  # one line an address: hex address, index, prefix, scope, flags, interface
        lines = Path("/proc/net/if_inet6").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        fields = line.split()
        if fields:
            found.add(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    return found
