"""End to end: `--web-engine search` through the real CLI, against the loopback fake search
API (SearXNG's JSON), the loopback web server with real documentation pages, and the fake
model (or none). Every web citation must rest on a passage found verbatim in the page it
names, and its claim must come from that passage."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from deep_research.adapters.web.reader import PageReader, ReaderSettings
from tests.clirun import cli, run_json, session_state
from tests.fake_openai import FakeOpenAI
from tests.fake_search import Doc, FakeSearch
from tests.fake_web import FIXTURES, FakeWeb
from tests.world import ResearchWorld, plan_task, verdict

QUESTION = "How do Python's bisect and colorsys modules work?"
BISECT = "How does bisect find the insertion point in a sorted list?"
COLORSYS = "Which colour systems does colorsys convert between?"
QUERIES = {BISECT: ["python bisect insertion point"], COLORSYS: ["python colorsys conversions"]}


@pytest.fixture
def web() -> Iterator[FakeWeb]:
    with FakeWeb() as fake:
        yield fake
    if fake.errors:
        pytest.fail("FakeWeb saw errors:\n" + "\n".join(fake.errors))


@pytest.fixture
def outside() -> Iterator[FakeWeb]:
    """A server on another port, left out of DEEP_RESEARCH_FETCH_ALLOW."""
    with FakeWeb() as fake:
        yield fake


@pytest.fixture
def search(web: FakeWeb, outside: FakeWeb) -> Iterator[FakeSearch]:
    with FakeSearch() as fake:
        fake.corpus = {
            "python bisect insertion point": [
                Doc(web.url("/docs/bisect.html"), "bisect — Array bisection algorithm", "…"),
                Doc(web.url("/redirect/metadata"), "Instance metadata", "…"),
                Doc(
                    web.url("/redirect/to?url=" + quote(outside.url("/docs/getpass.html"))),
                    "getpass, moved",
                    "…",
                ),
            ],
            "python colorsys conversions": [
                Doc(web.url("/docs/colorsys.html"), "colorsys — Conversions", "…"),
            ],
        }
        for question in (BISECT, COLORSYS):  # the no-model run searches the question
            key = " ".join(question.casefold().rstrip("?").split())
            fake.corpus[key] = fake.corpus[QUERIES[question][0]]
        yield fake
    if fake.errors:
        pytest.fail("FakeSearch saw errors:\n" + "\n".join(fake.errors))


@pytest.fixture
def search_env(env: dict[str, str], web: FakeWeb, search: FakeSearch) -> dict[str, str]:
    return env | {
        "DEEP_RESEARCH_SEARCH_PROVIDER": "searxng",
        "DEEP_RESEARCH_SEARXNG_URL": search.url(),
        "DEEP_RESEARCH_FETCH_ALLOW": web.netloc,  # this port only: not `outside`
        "DEEP_RESEARCH_EMBEDDING_PROVIDER": "local-fast",
        "DEEP_RESEARCH_SEARCH_RATE_PER_SECOND": '{"searxng": 100}',
    }


def words(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", re.sub(r"\\(.)", r"\1", text).lower())) + " "


async def main_texts(urls: set[str], allow: str) -> dict[str, str]:
    async with PageReader(ReaderSettings(allow=(allow,), per_host_rate=50)) as reader:
        return {url: (await reader.read(url)).text for url in urls}


def web_citations(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for node in state["nodes"].values() for c in node["citations"] if c["kind"] == "web"]


def check_quotes(citations: list[dict[str, Any]], web: FakeWeb) -> None:
    """Every quote is verbatim in the reader's main text of its page, and its words are in
    the page's hand-written main text (so it is no navigation or footer)."""
    pages = asyncio.run(main_texts({c["url"] for c in citations}, web.netloc))
    for citation in citations:
        assert citation["quote"] in pages[citation["url"]]
        name = citation["url"].rsplit("/", 1)[-1].removesuffix(".html")
        expected = (FIXTURES / f"{name}.expected.md").read_text()
        assert words(citation["quote"]) in words(expected), citation["quote"]
        assert citation["accessed_at"]
        assert citation["title"]


def test_a_search_run_cites_passages_found_verbatim_in_the_pages_they_name(
    search_env: dict[str, str],
    fake_openai: FakeOpenAI,
    web: FakeWeb,
    outside: FakeWeb,
    search: FakeSearch,
) -> None:
    world = ResearchWorld(
        plans=[[plan_task("w1", question=BISECT), plan_task("w2", question=COLORSYS)]],
        verdicts=[verdict(True)],
        queries=QUERIES,
    )
    world.install(fake_openai)
    data = run_json(search_env, QUESTION, "--web-engine", "search")

    assert data["status"] == "complete"
    assert data["usage"]["web_search_calls"] == 2
    assert world.calls["queries"] == 2
    assert "deep_research" not in world.calls, "no research job was started"
    assert not [r for r in fake_openai.requests if r.path.startswith("/v1/responses")]
    state = session_state(search_env, data["session_id"])
    assert state["run_spec"]["web_engine"] == "search"
    assert state["run_spec"]["search_provider"] == "searxng"
    searches = [e for e in state["ledger"] if e["role"] == "search"]
    assert [e["model"] for e in searches] == ["search:searxng"] * 2
    assert all(e["cost_usd"] == 0 for e in searches), "SearXNG is free"

    citations = web_citations(state)
    assert {c["url"] for c in citations} == {
        web.url("/docs/bisect.html"),
        web.url("/docs/colorsys.html"),
    }
    check_quotes(citations, web)
    for citation in citations:  # the claim was written from the very passage it cites
        claim = citation["claim"].split("The page says that", 1)[1].split("[")[0]
        assert words(claim) in words(citation["quote"]), (claim, citation["quote"])
    assert len({(c["url"], c["quote"]) for c in citations}) == len(citations)

    report = Path(data["report_path"]).read_text()
    assert web.url("/docs/bisect.html") in report
    assert "researched by search (searxng) + gpt-6-luna" in report
    assert "_Web research: search and read via searxng._" in report
    # Refused before any connection: the metadata address, and a port not allowed.
    assert outside.hits == []
    assert "/redirect/metadata" in web.paths()
    assert not any("169.254" in r.query for r in search.requests)


def test_with_no_model_search_quotes_the_pages_verbatim(
    search_env: dict[str, str], web: FakeWeb
) -> None:
    env = {k: v for k, v in search_env.items() if not k.startswith("OPENAI_")}
    code, out, err = cli(env, BISECT, "--web-engine", "search")
    assert code == 0, err
    assert "extractive mode" in err
    assert "web research: search and read via searxng (pages quoted verbatim)" in err
    assert "Extractive mode" in out
    assert "of the web pages read" in out
    assert "skipped https://example.com" not in err, "only the pages the search found"
    sessions = list((Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir())
    state = session_state(env, sessions[0].name)
    assert state["run_spec"]["web_engine"] == "search"
    citations = web_citations(state)
    assert citations, "the pages were quoted"
    check_quotes(citations, web)
    assert web.url("/docs/bisect.html") in out


def test_with_no_model_and_no_engine_asked_nothing_is_fetched(
    search_env: dict[str, str], web: FakeWeb, search: FakeSearch
) -> None:
    env = {k: v for k, v in search_env.items() if not k.startswith("OPENAI_")}
    env.pop("DEEP_RESEARCH_WEB_ENGINE")
    code, _, err = cli(env, BISECT)
    assert code != 0
    assert "no knowledge base" in err
    assert search.requests == []
    assert web.hits == []


def test_searxng_without_its_url_is_one_line_and_saves_nothing(
    search_env: dict[str, str],
) -> None:
    env = {k: v for k, v in search_env.items() if k != "DEEP_RESEARCH_SEARXNG_URL"}
    code, _, err = cli(env, BISECT, "--web-engine", "search")
    assert code == 3
    assert "DEEP_RESEARCH_SEARXNG_URL" in err
    assert len(err.strip().splitlines()) == 1
    assert not (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").exists() or not list(
        (Path(env["DEEP_RESEARCH_HOME"]) / "sessions").iterdir()
    )


def test_a_mixed_node_researches_the_knowledge_base_and_the_web(
    search_env: dict[str, str], fake_openai: FakeOpenAI, web: FakeWeb, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "sorting.md").write_text(
        "# Sorted lists\n\nOur services keep their price tables sorted and insert new rows "
        "with a binary search, never by sorting the whole table again.\n"
    )
    code, _, err = cli(search_env, "kb", "ingest", str(notes))
    assert code == 0, err
    world = ResearchWorld(
        plans=[[plan_task("m1", source="mixed", question=BISECT)]], queries=QUERIES
    )
    world.install(fake_openai)
    data = run_json(search_env, QUESTION, "--web-engine", "search")
    assert data["status"] == "complete"
    node = session_state(search_env, data["session_id"])["nodes"]["m1"]
    assert "**From the knowledge base**" in node["notes"]
    assert "**From the web**" in node["notes"]
    kinds = [c["kind"] for c in node["citations"]]
    assert "web" in kinds
    assert len(kinds) > kinds.count("web"), "and the knowledge base's"
    check_quotes([c for c in node["citations"] if c["kind"] == "web"], web)
