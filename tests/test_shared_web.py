"""The web tools every run in a process shares: one page reader and one set of search rate
limits per event loop, closed when the last run lets go."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from deep_research.adapters.web import shared
from deep_research.adapters.web.reader import ReaderSettings
from deep_research.adapters.web.shared import SharedRateLimits, SharedReader
from tests.fake_web import FakeWeb


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake


async def test_runs_on_one_loop_share_one_reader_and_the_last_closes_it(web: FakeWeb) -> None:
    settings = ReaderSettings(allow=(web.netloc,), per_host_rate=50)
    first, second = SharedReader(settings), SharedReader(settings)
    page = await first.read(web.url("/docs/bisect.html"))
    again = await second.read(web.url("/docs/bisect.html"))
    assert again == page
    assert web.paths().count("/docs/bisect.html") == 1, "the second run read the shared cache"
    assert len(shared.READERS) == 1
    await first.aclose()
    assert len(shared.READERS) == 1, "still used by the second run"
    await second.aclose()
    assert len(shared.READERS) == 0


async def test_other_settings_get_their_own_reader(web: FakeWeb) -> None:
    one = SharedReader(ReaderSettings(allow=(web.netloc,), per_host_rate=50))
    two = SharedReader(
        ReaderSettings(allow=(web.netloc,), per_host_rate=50, per_host_concurrency=3)
    )
    await asyncio.gather(
        one.read(web.url("/docs/colorsys.html")), two.read(web.url("/docs/colorsys.html"))
    )
    assert len(shared.READERS) == 2
    await one.aclose()
    await two.aclose()
    assert len(shared.READERS) == 0


async def test_a_run_that_never_read_lets_go_of_nothing() -> None:
    unused = SharedReader(ReaderSettings())
    await unused.aclose()
    assert len(shared.READERS) == 0


async def test_runs_share_a_providers_rate_limit() -> None:
    first, second = SharedRateLimits({"searxng": 4.0}), SharedRateLimits({"searxng": 4.0})
    assert first.rate("searxng") == 4.0
    assert first.rate("tavily") == 1.5, "the defaults for the rest"
    loop = asyncio.get_running_loop()
    start = loop.time()
    await asyncio.gather(*(limits.acquire("searxng") for limits in (first, second) * 3))
    # Six requests through one bucket at 4/s (no burst): at least 5 intervals of 0.25 s.
    assert loop.time() - start >= 1.2
    second.pause("searxng", 0.3)  # a 429 seen by one run holds the other too
    paused = loop.time()
    await first.acquire("searxng")
    assert loop.time() - paused >= 0.29
    assert len(shared.LIMITS) == 1
    first.release()
    second.release()
    first.release()  # twice is harmless
    assert len(shared.LIMITS) == 0
