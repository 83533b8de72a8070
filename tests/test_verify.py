"""verify_claim and kb_fetch: claims checked against a page (through the real page reader,
on the loopback fake web) or a knowledge-base chunk, with the local embedder; the judge is a
small scripted fake."""

from __future__ import annotations

import pytest
from langchain_core.embeddings import Embeddings

from deep_research.adapters import claims
from deep_research.adapters.claims import JudgeVerdict
from deep_research.adapters.web.reader import PageReader, ReaderSettings
from deep_research.app import knowledge
from deep_research.app.config import Settings
from deep_research.app.verify import kb_fetch, verify_claim
from deep_research.core.errors import KnowledgeBaseError, ProviderError, UsageError
from deep_research.kb.ingest import ingest
from deep_research.kb.store import open_kb
from tests.fake_web import FakeWeb


@pytest.fixture
def web() -> FakeWeb:
    with FakeWeb() as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def ingested(offline: Settings) -> Settings:
    ingest(open_kb(offline.kb, create=True), offline.kb_path)
    return offline


def allowing(settings: Settings, web: FakeWeb) -> Settings:
    return settings.with_overrides(fetch_allow=web.netloc)


# Stated by colorsys.html (some reworded), or not: the same topic, other words, or a figure
# changed.
STATED = [
    "The colorsys module defines bidirectional conversions of color values between RGB and "
    "three other coordinate systems.",
    "In the YIQ space, the I and Q coordinates can be positive or negative.",
    "colorsys converts colors between the RGB color space and HLS and HSV.",
]
NOT_STATED = [
    "The colorsys module renders images on the GPU with CUDA kernels.",
    "In the YIQ space, the Y coordinate is between 0 and 255.",
    "Python's bisect module keeps a list sorted without sorting it after each insertion.",
]


@pytest.mark.parametrize("claim", STATED)
async def test_a_claim_the_page_states_has_its_passage_found(
    offline: Settings, web: FakeWeb, claim: str
) -> None:
    checked = await verify_claim(allowing(offline, web), claim, web.url("/docs/colorsys.html"))
    assert checked.verdict == "passage_found", checked
    async with PageReader(ReaderSettings(allow=(web.netloc,))) as reader:
        page = await reader.read(web.url("/docs/colorsys.html"))
    assert checked.passage in page.text  # verbatim
    assert checked.score >= claims.PASSAGE_FOUND_SCORE
    assert checked.location == web.url("/docs/colorsys.html")
    assert checked.judge is None  # no model configured


@pytest.mark.parametrize("claim", NOT_STATED)
async def test_a_claim_the_page_does_not_state_has_none(
    offline: Settings, web: FakeWeb, claim: str
) -> None:
    checked = await verify_claim(allowing(offline, web), claim, web.url("/docs/colorsys.html"))
    assert checked.verdict == "no_matching_passage", checked
    assert checked.passage  # the best there is, to read


@pytest.mark.parametrize(
    ("path", "allowed", "reason"),
    [
        ("/status/404", True, "404"),
        ("/private/secret.html", True, "robots"),
        ("/docs/colorsys.html", False, "loopback"),
        ("/redirect/metadata", True, ""),
    ],
)
async def test_a_source_that_cannot_be_read_is_a_verdict_not_an_error(
    offline: Settings, web: FakeWeb, path: str, allowed: bool, reason: str
) -> None:
    settings = allowing(offline, web) if allowed else offline
    checked = await verify_claim(settings, STATED[0], web.url(path))
    assert checked.verdict == "source_unreachable"
    assert reason.lower() in checked.reason.lower()
    assert "\n" not in checked.reason
    assert "/latest/meta-data" not in web.paths()  # the redirect was never followed off-host


async def test_a_chunk_id_and_a_locator_are_sources(ingested: Settings) -> None:
    hit = knowledge.kb_search(ingested, "reservation released when the job's usage is recorded")[0]
    chunk = kb_fetch(ingested, hit.chunk_id)
    assert chunk.text == hit.text
    assert chunk.locator == hit.locator
    assert (chunk.root, chunk.source) == ("kb", "budgets.md")
    claim = "Each web job reserves its worst-case cost before it starts."
    by_id = await verify_claim(ingested, claim, hit.chunk_id)
    assert by_id.verdict == "passage_found", by_id
    assert by_id.location == hit.locator
    by_locator = await verify_claim(ingested, claim, hit.locator)
    assert by_locator.verdict == "passage_found"
    assert by_locator.passage == by_id.passage
    unstated = await verify_claim(ingested, "Each web job is retried three times.", hit.chunk_id)
    assert unstated.verdict == "no_matching_passage"


async def test_bad_sources_and_claims_are_usage_errors(ingested: Settings) -> None:
    with pytest.raises(UsageError, match="not a chunk id"):
        kb_fetch(ingested, "../../etc/passwd")
    with pytest.raises(KnowledgeBaseError, match="no chunk"):
        kb_fetch(ingested, "0" * 32)
    gone = await verify_claim(ingested, "Anything at all.", "0" * 32)
    assert gone.verdict == "source_unreachable"
    with pytest.raises(UsageError, match="must be a URL"):
        await verify_claim(ingested, "A claim.", "budgets.md")
    with pytest.raises(UsageError, match="empty"):
        await verify_claim(ingested, "  \n ", "0" * 32)
    with pytest.raises(UsageError, match="one at a time"):
        await verify_claim(ingested, "word " * 1000, "0" * 32)


class ScriptedJudge:
    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[tuple[str, str]] = []

    async def judge(self, claim: str, passage: str) -> JudgeVerdict:
        self.asked.append((claim, passage))
        if self.fail:
            raise ProviderError("judge-model: 503 Service Unavailable\nretry later")
        return JudgeVerdict(verdict="supported", explanation="It says so.", model="judge-model")


async def test_the_judge_reads_the_best_passage_and_its_failure_is_reported(
    offline: Settings, web: FakeWeb
) -> None:
    settings, url = allowing(offline, web), web.url("/docs/colorsys.html")
    judge = ScriptedJudge()
    checked = await verify_claim(settings, STATED[1], url, judge=judge)
    assert judge.asked == [(STATED[1], checked.passage)]
    assert checked.judge is not None
    assert checked.judge.verdict == "supported"
    failing = await verify_claim(settings, STATED[1], url, judge=ScriptedJudge(fail=True))
    assert failing.verdict == "passage_found"  # retrieval stands on its own
    assert failing.judge is None
    assert failing.reason.startswith("the judge model failed: judge-model: 503")
    assert "\n" not in failing.reason


def test_content_words_keep_numbers_and_negations() -> None:
    from deep_research.kb.words import claim_words

    assert claim_words("The Y coordinate isn't between 0 and 3.10") == {
        "coordin",
        "not",
        "0",
        "3.10",
    }


class TableEmbeddings(Embeddings):
    """Vectors from a table: the cosine of each passage to the claim is set by the test."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.batches: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(len(texts))
        return [self.table[text] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.table[text]


def test_a_passage_that_passes_beats_a_closer_one_with_a_changed_figure() -> None:
    claim = "The Y coordinate of YIQ lies between 0 and 1."
    wrong = "The Y coordinate of YIQ lies between 0 and 255."  # every other word, one figure
    right = "In YIQ the Y coordinate lies between 0 and 1, unlike I and Q."
    embedder = TableEmbeddings({claim: [1.0, 0.0], wrong: [1.0, 0.0], right: [0.8, 0.6]})
    match = claims.best_passage(claim, [wrong, right], embedder)
    assert match is not None
    assert match.passage == right
    assert match.found
    only_wrong = claims.best_passage(claim, [wrong], embedder)
    assert only_wrong is not None
    assert only_wrong.missing_exact == {"1"}
    assert not only_wrong.found


def test_a_long_page_embeds_only_its_likeliest_passages() -> None:
    claim = "Chunks overlap by forty tokens."
    filler = [f"Unrelated sentence number {n} about gardening." for n in range(500)]
    stated = "Chunks overlap by forty tokens, so no sentence is cut."
    table = {text: [0.0, 1.0] for text in filler} | {claim: [1.0, 0.0], stated: [1.0, 0.1]}
    embedder = TableEmbeddings(table)
    match = claims.best_passage(claim, [*filler[:250], stated, *filler[250:]], embedder)
    assert match is not None
    assert match.passage == stated
    assert max(embedder.batches) <= claims.MAX_RANKED
