"""The page reader against a loopback web server (tests/fake_web.py): extraction quality on
real documentation pages, the SSRF guard, robots.txt, politeness, and every way a page is
skipped. No network: a fence fails the test on any connect off loopback, before it is made.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from deep_research.adapters.web import host_limits
from deep_research.adapters.web.fetch_guard import AllowList, refusal
from deep_research.adapters.web.passages import split_passages
from deep_research.adapters.web.reader import PageReader, PageSkipped, ReaderSettings
from deep_research.core.errors import BranchError
from tests.fake_web import FIXTURES, FakeWeb

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")

# --- fixtures -------------------------------------------------------------------------------


@dataclass
class Fence:
    """Connects off loopback (and to ``also_blocked``) fail before any packet leaves."""

    attempts: list[object] = field(default_factory=list)
    also_blocked: set[str] = field(default_factory=set)


@pytest.fixture(autouse=True)
def fence(monkeypatch: pytest.MonkeyPatch) -> Iterator[Fence]:
    state = Fence()
    real_connect = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        if isinstance(address, tuple):
            host = str(address[0]).partition("%")[0]
            if host in state.also_blocked or not ipaddress.ip_address(host).is_loopback:
                state.attempts.append(address)
                raise ConnectionRefusedError(f"test fence: no connection to {address}")
        real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    yield state
    assert not state.attempts, f"the reader tried to connect off loopback: {state.attempts}"


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake
    if fake.errors:
        pytest.fail("FakeWeb saw errors:\n" + "\n".join(fake.errors))


@pytest.fixture
def other_web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


@pytest.fixture
async def make_reader(web: FakeWeb) -> AsyncIterator[Callable[..., PageReader]]:
    """Readers allowed onto ``web`` (its port only), fast per-host rate unless told."""
    readers: list[PageReader] = []

    def make(resolve: Any = None, **settings: Any) -> PageReader:
        settings.setdefault("allow", (web.netloc,))
        settings.setdefault("per_host_rate", 100.0)
        options = {"resolve": resolve} if resolve is not None else {}
        readers.append(PageReader(ReaderSettings(**settings), **options))
        return readers[-1]

    yield make
    for reader in readers:
        await reader.aclose()


async def skipped(reader: PageReader, url: str) -> PageSkipped:
    with pytest.raises(PageSkipped) as caught:
        await reader.read(url)
    assert "\n" not in str(caught.value), "a reason is one line"
    assert caught.value.url == url
    return caught.value


# --- extraction on real pages -----------------------------------------------------------------

_ESCAPED = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|>~])")


def words(text: str) -> list[str]:
    return re.findall(r"\w+", _ESCAPED.sub(r"\1", text).lower())


def sentences(markdown: str) -> list[str]:
    """Sentences of prose, lines of code and tables: the units recall is counted in."""
    units: list[str] = []
    for block in re.split(r"\n\s*\n", markdown):
        if block.lstrip().startswith(("```", "|")):
            units += block.splitlines()
        else:
            units += re.split(r"(?<=[.!?:;])\s+|\n", block)
    return [unit for unit in units if words(unit)]


def inside(needle: list[str], haystack: list[str]) -> bool:
    return f" {' '.join(needle)} " in f" {' '.join(haystack)} "


def quality(extracted: str, expected: str) -> tuple[float, float]:
    """(recall of the expected sentences, share of extracted words not in the expected text)."""
    got, want = words(extracted), words(expected)
    expected_units = sentences(expected)
    kept = sum(inside(words(unit), got) for unit in expected_units)
    extra = sum(len(words(u)) for u in sentences(extracted) if not inside(words(u), want))
    return kept / len(expected_units), extra / max(1, len(got))


FIXTURE_PAGES = sorted(p.stem for p in FIXTURES.glob("*.html"))


def test_the_quality_measure_sees_missing_text_and_boilerplate() -> None:
    expected = (FIXTURES / "getpass.expected.md").read_text()
    assert quality(expected, expected) == (1.0, 0.0)
    banner = "We use cookies to personalise content. Accept all cookies?"
    recall, boilerplate = quality(expected + "\n\n" + banner, expected)
    assert recall == 1.0
    assert boilerplate > 0.02
    recall, _ = quality(expected[: len(expected) // 2], expected)
    assert recall < 0.6


def test_there_are_real_pages_with_hand_written_main_text() -> None:
    assert len(FIXTURE_PAGES) >= 3
    for name in FIXTURE_PAGES:
        html = (FIXTURES / f"{name}.html").read_text()
        assert 'class="footer"' in html, "pages come whole"
        assert 'role="navigation"' in html
        assert (FIXTURES / f"{name}.expected.md").is_file()


async def test_main_text_of_real_doc_pages_keeps_the_text_and_drops_the_rest(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    reader = make_reader()
    pages = [await reader.read(web.url(f"/docs/{name}.html")) for name in FIXTURE_PAGES]
    rows = []
    for name, page in zip(FIXTURE_PAGES, pages, strict=True):
        expected = (FIXTURES / f"{name}.expected.md").read_text()
        recall, boilerplate = quality(page.text, expected)
        rows.append((name, recall, boilerplate, len(words(expected))))
        assert "cookie" not in page.text.lower(), f"{name}: the cookie banner is boilerplate"
        assert "Please donate" not in page.text
        assert "Previous topic" not in page.text
    total = sum(n for *_, n in rows)
    recall = sum(r * n for _, r, _, n in rows) / total
    boilerplate = sum(b * n for _, _, b, n in rows) / total
    print("\npage        recall  boilerplate")
    for name, r, b, _ in rows:
        print(f"{name:<11} {r:6.3f}  {b:11.3f}")
    print(f"{'all':<11} {recall:6.3f}  {boilerplate:11.3f}  (weighted by expected words)")
    assert all(r >= 0.8 for _, r, _, _ in rows)
    assert all(b <= 0.1 for _, _, b, _ in rows)
    assert recall >= 0.85
    assert boilerplate <= 0.05


async def test_a_page_is_markdown_with_its_title_final_url_and_time(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    before = datetime.now(UTC)
    page = await make_reader().read(web.url("/docs/future.html#footnote"))
    assert page.url == web.url("/docs/future.html")
    assert page.title.startswith("__future__ — Future statement definitions")
    assert page.text.startswith("# `__future__` — Future statement definitions")
    assert "| feature | optional in | mandatory in | effect |" in page.text, "tables are kept"
    assert "| division | 2.2.0a2 | 3.0 |" in page.text
    assert "```\nFeatureName = _Feature(OptionalRelease, MandatoryRelease," in page.text
    assert before <= page.fetched_at <= datetime.now(UTC)
    assert page.fetched_at.tzinfo is UTC


async def test_plain_text_is_read_as_it_is(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    page = await make_reader().read(web.url("/plain.txt"))
    assert page.title == "Plain notes"
    assert page.text.startswith("Plain notes\n\nA plain text file is read as it is")


def test_trafilatura_downloads_nothing_at_import_or_while_extracting() -> None:
    script = """
import socket, sys
def refuse(*args, **kwargs):
    raise SystemExit(f"network used: {args!r}")
socket.socket.connect = socket.socket.connect_ex = refuse
socket.create_connection = socket.getaddrinfo = refuse
import trafilatura
html = open(sys.argv[1], "rb").read()
document = trafilatura.extract_with_metadata(html, output_format="markdown", include_tables=True)
assert document is not None and "bisect" in document.text
"""
    done = subprocess.run(
        [sys.executable, "-c", script, str(FIXTURES / "bisect.html")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


# --- what is skipped, and why ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kind", "reason"),
    [
        ("/file.pdf", "not_text", "application/pdf is not HTML or text"),
        ("/blob", "not_text", "no Content-Type, and the body is not HTML"),
        ("/huge.html", "too_large", "over the 2,000,000-byte cap"),
        ("/huge-declared.html", "too_large", "3,000,000 bytes, over the 2,000,000-byte cap"),
        ("/boilerplate.html", "no_text", "no main text found"),
        ("/status/404", "http_status", "HTTP 404 Not Found"),
        ("/status/503", "http_status", "HTTP 503 Service Unavailable"),
        ("/redirect/chain/5", "too_many_redirects", "more than 5 redirects"),
        ("/429/long.html", "rate_limited", "Retry-After 120 s is over 30 s"),
    ],
)
async def test_pages_that_are_not_read_say_why_in_one_line(
    web: FakeWeb, make_reader: Callable[..., PageReader], path: str, kind: str, reason: str
) -> None:
    skip = await skipped(make_reader(), web.url(path))
    assert isinstance(skip, BranchError), "the search branch records it and goes on"
    assert skip.kind == kind
    assert reason in str(skip)


async def test_a_slow_page_times_out(web: FakeWeb, make_reader: Callable[..., PageReader]) -> None:
    started = time.monotonic()
    skip = await skipped(make_reader(read_timeout=0.3), web.url("/slow.html"))
    assert skip.kind == "timeout"
    assert str(skip) == "no data for 0.3 s"
    assert time.monotonic() - started < web.slow_seconds / 2


async def test_a_page_deadline_bounds_a_page_that_trickles(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    skip = await skipped(make_reader(page_timeout=0.3), web.url("/slow.html"))
    assert skip.kind == "timeout"
    assert str(skip) == "not read within 0.3 s"


async def test_the_size_cap_is_a_setting(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    skip = await skipped(make_reader(max_bytes=5_000), web.url("/docs/bisect.html"))
    assert skip.kind == "too_large"
    page = await make_reader(max_bytes=60_000).read(web.url("/docs/bisect.html"))
    assert "insertion point" in page.text


async def test_redirects_are_followed_up_to_five(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    page = await make_reader().read(web.url("/redirect/chain/4"))  # five redirects
    assert page.url == web.url("/docs/colorsys.html")
    assert "YIQ" in page.text


async def test_429_waits_as_asked_once_then_reads(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    page = await make_reader().read(web.url("/429/once.html"))
    assert "Paragraph 429.1" in page.text
    first, second = [hit for hit in web.hits if hit.path == "/429/once.html"]
    assert (first.status, second.status) == (429, 200)
    assert second.started - first.started >= 0.95, "Retry-After: 1 was honoured"


async def test_429_twice_is_skipped_after_one_wait(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    skip = await skipped(make_reader(), web.url("/429/always.html"))
    assert skip.kind == "rate_limited"
    assert "again after waiting" in str(skip)
    assert web.paths().count("/429/always.html") == 2


# --- robots.txt ---------------------------------------------------------------------------------


async def test_robots_txt_is_obeyed_and_fetched_once_per_host(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    reader = make_reader()
    skip = await skipped(reader, web.url("/private/notes.html"))
    assert skip.kind == "robots"
    await reader.read(web.url("/docs/getpass.html"))
    await reader.read(web.url("/docs/colorsys.html"))
    assert not any(path.startswith("/private/") for path in web.paths())
    assert web.paths().count("/robots.txt") == 1
    assert {hit.user_agent for hit in web.hits} == {ReaderSettings().user_agent}
    assert re.fullmatch(r"deep-research/\d+\S*", ReaderSettings().user_agent)


async def test_robots_rules_for_our_agent_apply_to_us(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    web.robots = "User-agent: somebot\nDisallow:\n\nUser-agent: deep-research\nDisallow: /docs/\n"
    skip = await skipped(make_reader(), web.url("/docs/getpass.html"))
    assert skip.kind == "robots"
    assert "/docs/getpass.html" not in web.paths()


async def test_no_robots_txt_allows_everything(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    web.robots = None
    page = await make_reader().read(web.url("/private/notes.html"))
    assert "Paragraph 0.1" in page.text


async def test_a_failing_robots_txt_puts_the_host_off_limits(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    web.robots_status = 503
    skip = await skipped(make_reader(), web.url("/docs/getpass.html"))
    assert skip.kind == "robots"
    assert "robots.txt answered HTTP 503" in str(skip)
    assert web.paths() == ["/robots.txt"]


# --- the address guard --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "127.0.0.1",
        "0.0.0.0",
        "169.254.169.254",
        "100.64.0.1",
        "224.0.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd00:ec2::254",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:169.254.169.254",
        "2002:a00:1::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    ],
)
def test_private_and_special_addresses_are_refused(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is None


def test_allow_list_entries_allow_a_host_or_one_port_of_it() -> None:
    allow = AllowList.parse(["Intranet.Example.", "localhost:8080", "[::1]:9000", "10.0.0.5"])
    assert allow.allows("intranet.example", 443)
    assert allow.allows("intranet.example", 80)
    assert allow.allows("localhost", 8080)
    assert not allow.allows("localhost", 8081)
    assert allow.allows("::1", 9000)
    assert not allow.allows("::1", 9001)
    assert allow.allows("10.0.0.5", 22)
    assert not allow.allows("127.0.0.1", 8080)


async def test_the_cloud_metadata_address_is_refused(
    make_reader: Callable[..., PageReader],
) -> None:
    reader = make_reader()
    skip = await skipped(reader, "http://169.254.169.254/")
    assert skip.kind == "refused"
    assert str(skip).startswith("169.254.169.254 is link-local")
    skip = await skipped(reader, "http://[fd00:ec2::254]/latest/meta-data/")
    assert skip.kind == "refused"
    assert str(skip) == "fd00:ec2::254 is private, and not on DEEP_RESEARCH_FETCH_ALLOW"
    skip = await skipped(reader, "http://metadata.google.internal/computeMetadata/v1/")
    assert skip.kind == "refused"
    assert "cloud metadata" in str(skip)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://localhost/file.txt",
        "gopher://localhost:70/",
        "data:text/html,hi",
    ],
)
async def test_only_http_and_https_are_fetched(
    make_reader: Callable[..., PageReader], url: str
) -> None:
    skip = await skipped(make_reader(allow=("localhost",)), url)
    assert skip.kind == "refused"
    assert "only http and https" in str(skip)


async def test_a_redirect_to_the_metadata_address_is_refused(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    skip = await skipped(make_reader(), web.url("/redirect/metadata"))
    assert skip.kind == "refused"
    assert str(skip).startswith("169.254.169.254 is link-local (cloud metadata lives here)")
    assert "DEEP_RESEARCH_FETCH_ALLOW" in str(skip), "the setting that allows a host, named"


async def test_a_redirect_to_another_loopback_port_is_refused_unless_listed(
    web: FakeWeb, other_web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    away = web.url("/redirect/to?url=" + other_web.url("/docs/getpass.html"))
    skip = await skipped(make_reader(allow=(web.netloc,)), away)
    assert skip.kind == "refused"
    assert "localhost (resolves to 127.0.0.1) is loopback" in str(skip)
    assert other_web.hits == [], "nothing reached the port left out of the list"
    page = await make_reader(allow=("localhost",)).read(away)  # a host alone: every port
    assert page.url == other_web.url("/docs/getpass.html")


async def test_a_host_that_resolves_to_loopback_is_refused_unless_listed(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    by_address = make_reader(allow=(f"127.0.0.1:{web.port}",))
    skip = await skipped(by_address, web.url("/docs/getpass.html", host="localhost"))
    assert skip.kind == "refused"
    skip = await skipped(make_reader(), web.url("/docs/getpass.html", host="127.0.0.1"))
    assert skip.kind == "refused"
    assert str(skip) == "127.0.0.1 is loopback, and not on DEEP_RESEARCH_FETCH_ALLOW"
    assert web.hits == []


async def test_every_resolved_address_is_checked(make_reader: Callable[..., PageReader]) -> None:
    async def rebinding(host: str, port: int) -> list[str]:
        return ["93.184.216.34", "10.0.0.7"]

    skip = await skipped(make_reader(resolve=rebinding), "http://docs.example.test/")
    assert str(skip).startswith("docs.example.test (resolves to 10.0.0.7) is private,")


async def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    lookups: list[str] = []

    async def resolve(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    name = f"docs.example.test:{web.port}"
    reader = make_reader(resolve=resolve, allow=(name,))
    page = await reader.read(f"http://{name}/docs/getpass.html")
    assert "getpass" in page.title
    assert page.url == f"http://{name}/docs/getpass.html"
    assert {hit.netloc for hit in web.hits} == {name}, "Host: the name, not the address"
    assert lookups == ["docs.example.test"] * 2, "resolved once per request (robots, page)"


async def test_https_goes_to_the_checked_address_and_tls_verifies_the_name(
    make_reader: Callable[..., PageReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(FIXTURES / "tls" / "ca.pem"))  # trust_env

    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    with FakeWeb(tls=True) as secure:
        reader = make_reader(resolve=resolve, allow=("docs.example.test", "other.example.test"))
        name = f"docs.example.test:{secure.port}"
        page = await reader.read(f"https://{name}/docs/getpass.html")
        assert "getpass" in page.title
        assert {hit.netloc for hit in secure.hits} == {name}
        wrong = f"https://other.example.test:{secure.port}/docs/getpass.html"
        skip = await skipped(reader, wrong)  # same address, a name the certificate lacks
        assert skip.kind == "network"
        assert "CERTIFICATE_VERIFY_FAILED" in str(skip)
        assert "other.example.test" in str(skip)


async def test_a_host_that_is_down_or_unknown_is_a_network_failure(
    make_reader: Callable[..., PageReader],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    skip = await skipped(make_reader(allow=("localhost",)), f"http://localhost:{closed}/")
    assert skip.kind == "network"

    async def unknown(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    skip = await skipped(make_reader(resolve=unknown), "http://nowhere.example.test/")
    assert skip.kind == "network"
    assert str(skip) == (
        "ConnectError: cannot resolve nowhere.example.test: [Errno -2] Name or service not known"
    )


async def test_a_host_that_could_not_be_reached_is_not_asked_again_for_a_while(
    make_reader: Callable[..., PageReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its other pages are skipped at once for the same reason (before, each waited a turn of
    the host's rate limit: 0.5 s a page cited by a run's claims); after a while it is asked
    again."""
    asked: list[str] = []

    async def unknown(host: str, port: int) -> list[str]:
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    reader = make_reader(resolve=unknown, per_host_rate=2.0)
    first = await skipped(reader, "http://nowhere.example.test/a")
    again = [await skipped(reader, f"http://nowhere.example.test/{p}") for p in "abc"]
    assert asked == ["nowhere.example.test"], "not asked again, so no turn was waited"
    assert {(s.kind, str(s)) for s in again} == {(first.kind, str(first))}
    monkeypatch.setattr(host_limits, "DOWN_SECONDS", 0.0)
    await skipped(reader, "http://nowhere.example.test/d")
    assert len(asked) == 2, "asked again once its while is over"


async def test_the_fence_catches_connections_the_guard_lets_through(
    web: FakeWeb, make_reader: Callable[..., PageReader], fence: Fence
) -> None:
    fence.also_blocked.add("127.0.0.2")  # loopback, so nothing would leave if this failed
    reader = make_reader(allow=("127.0.0.2",))
    skip = await skipped(reader, f"http://127.0.0.2:{web.port}/docs/getpass.html")
    assert skip.kind == "network"
    assert str(skip) == "ConnectError: All connection attempts failed"
    assert fence.attempts == [("127.0.0.2", web.port)]
    fence.attempts.clear()


async def test_behind_a_proxy_names_go_to_the_proxy_and_the_guard_checks_what_it_can(
    web: FakeWeb, make_reader: Callable[..., PageReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{web.port}")

    async def resolve(host: str, port: int) -> list[str]:
        if host == "localhost":
            return ["127.0.0.1"]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    reader = make_reader(resolve=resolve, allow=())
    page = await reader.read("http://docs.example.test/docs/colorsys.html")
    assert "colorsys" in page.title
    assert {(hit.netloc, hit.proxied) for hit in web.hits} == {("docs.example.test", True)}
    for url in (web.url("/docs/getpass.html"), "http://10.0.0.1/", "http://169.254.169.254/"):
        assert (await skipped(reader, url)).kind == "refused"
    assert len(web.hits) == 2, "robots.txt and the page; nothing refused reached the proxy"


async def test_no_proxy_names_bypass_the_proxy(
    web: FakeWeb, make_reader: Callable[..., PageReader], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "example.org,localhost")
    page = await make_reader().read(web.url("/docs/getpass.html"))
    assert "getpass" in page.title
    assert not any(hit.proxied for hit in web.hits)


# --- politeness, caching, ownership -------------------------------------------------------------


async def test_at_most_two_requests_in_flight_per_host(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    web.page_delay = 0.2
    reader = make_reader()  # default concurrency, a rate that does not hold it back
    await asyncio.gather(*(reader.read(web.url(f"/page/{n}.html")) for n in range(8)))
    assert web.max_in_flight("localhost") == 2


async def test_the_rate_per_host_holds_across_runs_sharing_the_reader(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    reader = make_reader(per_host_rate=ReaderSettings().per_host_rate)  # the default: 2/s

    async def run(first: int) -> None:  # two research runs in one process
        await asyncio.gather(
            *(reader.read(web.url(f"/page/{n}.html")) for n in range(first, first + 4))
        )

    await asyncio.gather(run(0), run(4))
    hits = web.hits
    assert len(hits) == 9  # robots.txt once + 8 pages
    rate = ReaderSettings().per_host_rate
    # Counted by the server, on its own clock: never more than the rate in any second.
    assert web.max_in_window(1.0, "localhost") <= rate
    span = hits[-1].started - hits[0].started
    assert span >= (len(hits) - 1) / rate - 0.1, f"9 requests in {span:.2f} s"
    print(f"\n9 requests in {span:.2f} s; at most {web.max_in_window(1.0)} in any second")


async def test_pages_are_cached_for_the_session_and_read_once(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    reader = make_reader()
    url = web.url("/docs/getpass.html")
    first, *again = await asyncio.gather(*(reader.read(url) for _ in range(3)))
    assert all(page is first for page in again)
    assert await reader.read(url) is first
    assert web.paths().count("/docs/getpass.html") == 1


def test_a_reader_belongs_to_the_event_loop_that_first_used_it(web: FakeWeb) -> None:
    reader = PageReader(ReaderSettings(allow=(web.netloc,)))

    async def use_and_close() -> None:
        await reader.read(web.url("/docs/getpass.html"))
        await reader.aclose()

    asyncio.run(use_and_close())
    with pytest.raises(RuntimeError, match="event loop"):
        asyncio.run(reader.read(web.url("/docs/colorsys.html")))


# --- passages -----------------------------------------------------------------------------------

DOC = """# Title

Intro paragraph one has a few words. It has two sentences.

## Section A

Short para.

```
code line one

code line two after a blank line
```

## Section B

- item one
- item two

Last words here.
"""


def body_words(text: str) -> list[str]:
    """The words of everything but the headings."""
    lines = [line for line in text.splitlines() if not re.match(r"#{1,6}\s", line.strip())]
    return " ".join(lines).split()


def test_passages_are_verbatim_slices_within_the_limit_and_keep_every_word() -> None:
    for max_words in (1, 3, 7, 12, 40, 1000):
        passages = split_passages(DOC, max_words)
        position = 0
        for passage in passages:
            position = DOC.index(passage, position) + len(passage)
            assert len(passage.split()) <= max_words
            assert passage == passage.strip()
            assert body_words(passage)
        assert body_words("\n".join(passages)) == body_words(DOC), f"max_words={max_words}"


def test_headings_open_passages_and_sections_are_never_mixed() -> None:
    assert split_passages(DOC, 1000) == [
        "# Title\n\nIntro paragraph one has a few words. It has two sentences.",
        "## Section A\n\nShort para.\n\n"
        "```\ncode line one\n\ncode line two after a blank line\n```",
        "## Section B\n\n- item one\n- item two\n\nLast words here.",
    ]


def test_a_long_paragraph_is_cut_at_sentence_ends() -> None:
    text = "One two three four. Five six seven eight. Nine ten eleven twelve."
    assert split_passages(text, 8) == [
        "One two three four. Five six seven eight.",
        "Nine ten eleven twelve.",
    ]
    assert split_passages("word " * 10, 4) == ["word word word word"] * 2 + ["word word"]


async def test_passages_of_a_real_page_cover_its_text(
    web: FakeWeb, make_reader: Callable[..., PageReader]
) -> None:
    page = await make_reader().read(web.url("/docs/bisect.html"))
    passages = split_passages(page.text, 80)
    assert all(passage in page.text and len(passage.split()) <= 80 for passage in passages)
    assert body_words("\n".join(passages)) == body_words(page.text)
    assert any(p.startswith("## Performance Notes") for p in passages)
