"""Independent sources: which citations are one source, for corroboration.

- A web citation is its site: the registrable domain of its URL, by the public-suffix list
  the ``tld`` package ships (read from the installed snapshot, never fetched), so
  ``news.bbc.co.uk`` and ``www.bbc.co.uk`` are one source and ``a.github.io`` and
  ``b.github.io`` two. A host with no registrable domain (an IP address, ``localhost``, a
  name under no public suffix) is its own host and port.
- A knowledge-base citation is its KB root: the folder it was ingested from, the first
  part of its locator (``root/path#heading:start-end``; a ``kb://`` URL carries the same).
- A citation with neither is a source of its own (its ref).

`canonical_url` is a page's identity (what to read once per session): the URL without
its fragment and tracking parameters, scheme and host lower-cased, default port dropped.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from tld import get_fld

from deep_research.core.citations import identity
from deep_research.core.models import Citation

KB_SCHEME = "kb://"
TRACKING = frozenset(
    """fbclid gclid gclsrc dclid gbraid wbraid msclkid yclid twclid ttclid li_fat_id igshid
    mc_cid mc_eid _ga _gl _hsenc _hsmi mkt_tok oly_anon_id oly_enc_id vero_id rb_clickid
    s_cid ref ref_src ref_url referrer source cmpid spm""".split()  # noqa: SIM905
)
"""Query parameters that say how a reader arrived, not what page they read (with every
``utm_*``)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_OTHER_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?!\d)")
"""``mailto:``, ``urn:``: an address with a scheme that names no host (``host:8080`` does)."""


def _tracking(name: str) -> bool:
    low = name.lower()
    return low.startswith(("utm_", "pk_", "hsa_")) or low in TRACKING


def canonical_url(url: str) -> str:
    """``url`` as one page: no fragment, no tracking parameters (``utm_*``, ``gclid``,
    ``fbclid``, ``ref`` …), scheme and host lower-cased, no default port, no ``www.``
    and no trailing dot on the host. The other parameters keep their order."""
    url = url.strip()
    parts = urlsplit(url if "://" in url or _OTHER_SCHEME.match(url) else f"https://{url}")
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").removeprefix("www.")
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _tracking(k)]
    )
    return urlunsplit((scheme, netloc, parts.path or "/", query, ""))


def site(url: str) -> str | None:
    """The registrable domain of an http(s) ``url`` (``bbc.co.uk``), else its host and port
    (an IP address, ``localhost``); None for another scheme or no host."""
    canonical = canonical_url(url)
    if urlsplit(canonical).scheme not in ("http", "https"):
        return None
    found = get_fld(canonical, fail_silently=True)
    if isinstance(found, str) and found:
        return found.lower()
    return urlsplit(canonical).netloc or None


def kb_root(locator: str) -> str | None:
    """The KB root a locator (``root/path#heading:start-end``, or its ``kb://`` URL) names:
    "" for one that names no root (``notes.md#Intro:1-4``); None for no locator."""
    where = unquote(locator.removeprefix(KB_SCHEME)) if locator.startswith(KB_SCHEME) else locator
    if not where.strip():
        return None
    root, slash, _ = where.partition("/")
    # A root has no "/" and comes before the heading: "notes.md#I/O:1-4" names none.
    return root if slash and root and "#" not in root else ""


def source_key(citation: Citation) -> str:
    """The independent source a citation stands for (see the module docstring):
    ``site:bbc.co.uk``, ``kb:handbook``, else ``ref:S7``."""
    if citation.kind == "kb":
        for where in (citation.locator, citation.url or ""):
            if (root := kb_root(where)) is not None:
                return f"kb:{root}"
    elif found := site(citation.url or citation.locator):
        return f"site:{found}"
    return f"ref:{citation.ref or identity(citation)}"
