"""The page (start runs, watch them live, read reports) and the API's description: files
with no data in them, served under a content security policy that allows nothing from
elsewhere. ``app.css`` is the one stylesheet of the page and of the HTML report."""

from __future__ import annotations

from functools import cache, partial
from pathlib import Path

from fastapi import APIRouter, Response

from deep_research.adapters.report_html import style_hash

router = APIRouter(include_in_schema=False)

WEB_DIR = Path(__file__).parent.parent / "page"


@cache
def stylesheet() -> str:
    """The page's stylesheet, which the HTML report inlines (a saved copy is styled too)."""
    return (WEB_DIR / "app.css").read_text(encoding="utf-8")


@cache
def page_policy() -> str:
    """Nothing from elsewhere, no inline script; of inline styles only the stylesheet's own
    (the page reads a report, which inlines it, and the browser checks it as it parses)."""
    return (
        "default-src 'none'; script-src 'self'; "
        f"style-src 'self' '{style_hash(stylesheet())}'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )


FILES = {
    "/": "index.html",
    "/app.js": "app.js",
    "/app.css": "app.css",
    "/docs": "docs.html",
    "/redoc": "docs.html",
}
"""The page's files by path: the page to watch runs (start one, follow its tree live, read
its report), and the API's description where Swagger UI and ReDoc would be (both load from
a CDN)."""
MEDIA_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}


def asset(name: str) -> Response:
    """One of the page's files (no build step, no external assets), under a
    content security policy that allows nothing from elsewhere and no inline script."""
    media_type = f"{MEDIA_TYPES[Path(name).suffix]}; charset=utf-8"
    policy = protected(page_policy())
    return Response((WEB_DIR / name).read_bytes(), media_type=media_type, headers=policy)


for path, name in FILES.items():
    router.add_api_route(path, partial(asset, name), methods=["GET"])


def protected(policy: str) -> dict[str, str]:
    """The headers of what the server shows a browser: the page's files and the reports."""
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
