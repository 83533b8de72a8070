"""robots.txt as RFC 9309 reads it: a 2xx answer is obeyed, a 4xx allows everything, and a
5xx, a 429 or a redirect of it that fails or never ends disallows everything (the host is off
limits). Its Crawl-delay is not read."""

from __future__ import annotations

from urllib.robotparser import RobotFileParser

MAX_BYTES = 512 * 1024
"""RFC 9309: parse at least the first 500 KiB."""

Rules = tuple[RobotFileParser, str]
"""An origin's rules, and why the whole host is off limits ("" when its answer is obeyed)."""


def rules_of(status: int, body: bytes) -> Rules:
    if 200 <= status < 300:
        return _parsed(body.decode("utf-8", errors="replace").splitlines()), ""
    if 400 <= status < 500 and status != 429:
        return _parsed([]), ""
    return off_limits(f"robots.txt answered HTTP {status}")


def off_limits(why: str) -> Rules:
    return _parsed(["User-agent: *", "Disallow: /"]), f"{why}: the host is off limits"


def _parsed(lines: list[str]) -> RobotFileParser:
    rules = RobotFileParser()
    rules.parse(lines)
    return rules
