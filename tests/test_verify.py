"""verify_claim and kb_fetch: claims checked against a page (through the real page reader,
on the loopback fake web) or a knowledge-base chunk, with the local embedder; the judge is a
small scripted fake."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from deep_research.adapters.claims import (
    JUDGE_BATCH,
    JudgedClaim,
    Judgements,
    JudgeVerdict,
    ToJudge,
    by_number,
    claims_text,
    settle,
)
from deep_research.adapters.verifier import SupportVerdict, verify
from deep_research.adapters.web.reader import PageReader, ReaderSettings
from deep_research.app import knowledge
from deep_research.app.config import Settings
from deep_research.app.knowledge import kb_fetch
from deep_research.app.verify import verify_claim
from deep_research.core.errors import KnowledgeBaseError, ProviderError, UsageError
from deep_research.kb.catalog import open_kb
from deep_research.kb.ingest import ingest
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
    assert checked.support.verdict == "supported", checked
    async with PageReader(ReaderSettings(allow=(web.netloc,))) as reader:
        page = await reader.read(web.url("/docs/colorsys.html"))
    assert checked.passage in page.text  # verbatim
    assert checked.support.verdict == "supported"
    assert checked.support.verifier == "text"  # no model configured
    assert checked.score == checked.support.score
    assert checked.location == web.url("/docs/colorsys.html")


@pytest.mark.parametrize("claim", NOT_STATED)
async def test_a_claim_the_page_does_not_state_has_none(
    offline: Settings, web: FakeWeb, claim: str
) -> None:
    checked = await verify_claim(allowing(offline, web), claim, web.url("/docs/colorsys.html"))
    assert checked.support.verdict != "supported", checked
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
    assert checked.support.verdict == "unverifiable"
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
    assert by_id.support.verdict == "supported", by_id
    assert by_id.location == hit.locator
    by_locator = await verify_claim(ingested, claim, hit.locator)
    assert by_locator.support.verdict == "supported"
    assert by_locator.passage == by_id.passage
    unstated = await verify_claim(ingested, "Each web job is retried three times.", hit.chunk_id)
    assert unstated.support.verdict != "supported"


async def test_bad_sources_and_claims_are_usage_errors(ingested: Settings) -> None:
    with pytest.raises(UsageError, match="not a chunk id"):
        kb_fetch(ingested, "../../etc/passwd")
    with pytest.raises(KnowledgeBaseError, match="no chunk"):
        kb_fetch(ingested, "0" * 32)
    gone = await verify_claim(ingested, "Anything at all.", "0" * 32)
    assert gone.support.verdict == "unverifiable"
    with pytest.raises(UsageError, match="must be a URL"):
        await verify_claim(ingested, "A claim.", "budgets.md")
    with pytest.raises(UsageError, match="empty"):
        await verify_claim(ingested, "  \n ", "0" * 32)
    with pytest.raises(UsageError, match="one at a time"):
        await verify_claim(ingested, "word " * 1000, "0" * 32)


class ScriptedJudge:
    """Says every claim it is given is supported, quoting ``quote`` (or fails, as a
    provider can)."""

    def __init__(self, *, fail: bool = False, quote: str = "") -> None:
        self.fail = fail
        self.quote = quote
        self.asked: list[list[ToJudge]] = []

    async def judge(self, claims: Sequence[ToJudge]) -> list[JudgeVerdict | None]:
        self.asked.append(list(claims))
        if self.fail:
            raise ProviderError("judge-model: 503 Service Unavailable\nretry later")
        return [
            JudgeVerdict(
                verdict="supported",
                explanation="It says so.",
                model="judge-model",
                quote=self.quote,
            )
            for _ in claims
        ]


UNSURE = "The colorsys module renders images on the GPU with CUDA kernels."
"""The page's subject, not what it says: the text verifier is unsure of it."""
PARAPHRASED = "The I and Q values of YIQ may be below zero."
"""What the page says, in other words: the text verifier is unsure of it too."""
ITS_SENTENCE = (
    "In the YIQ space, the Y coordinate is between 0 and 1, but the I and Q coordinates can "
    "be positive or negative."
)


async def test_the_judge_settles_only_what_the_text_verifier_is_unsure_of(
    offline: Settings, web: FakeWeb
) -> None:
    settings, url = allowing(offline, web), web.url("/docs/colorsys.html")
    judge = ScriptedJudge(quote=f"“{ITS_SENTENCE}”")
    sure = await verify_claim(settings, STATED[0], url, judge=judge)
    assert sure.support.verifier == "text"
    assert judge.asked == [], "a sure verdict costs no call"
    question = "What does colorsys do?"
    settled = await verify_claim(settings, PARAPHRASED, url, question=question, judge=judge)
    assert settled.support.verdict == "supported"
    assert settled.support.verifier == "judge-model"
    assert settled.support.explanation == "It says so."
    assert settled.support.verdict == "supported"
    assert settled.passage == ITS_SENTENCE, "the quote is the evidence shown"
    (asked,) = judge.asked
    assert asked[0].claim == PARAPHRASED
    assert ITS_SENTENCE in " ".join(asked[0].passages[0].split())


@pytest.mark.parametrize(
    ("claim", "quote", "why"),
    [
        (UNSURE, "", "quoting nothing"),
        (UNSURE, "The colorsys module renders images on the GPU.", "does not hold"),
        (UNSURE, "Coordinates in all of these color spaces are floating point values.", "GPU"),
        (PARAPHRASED, ITS_SENTENCE.replace("can", "cannot"), "does not hold"),
    ],
)
async def test_a_judges_supported_without_a_checked_quote_is_not_taken(
    offline: Settings, web: FakeWeb, claim: str, quote: str, why: str
) -> None:
    settings, url = allowing(offline, web), web.url("/docs/colorsys.html")
    text = await verify_claim(settings, claim, url)
    judged = await verify_claim(settings, claim, url, judge=ScriptedJudge(quote=quote))
    assert text.support.verdict != "supported"
    assert (judged.support.verdict, judged.support.verifier) == (text.support.verdict, "text")
    assert judged.reason.startswith("the judge model (judge-model) said supported, quoting")
    assert why in judged.reason


async def test_a_failing_judge_leaves_the_text_verdict_and_says_why(
    offline: Settings, web: FakeWeb
) -> None:
    settings, url = allowing(offline, web), web.url("/docs/colorsys.html")
    failing = await verify_claim(settings, UNSURE, url, judge=ScriptedJudge(fail=True))
    assert failing.support.verifier == "text"
    assert failing.support.verdict in ("partial", "unsupported")
    assert failing.reason.startswith("the judge model was not asked or failed: judge-model: 503")
    assert "\n" not in failing.reason


def test_the_unsure_claim_is_unsure() -> None:
    """What the two tests above rest on: UNSURE's score is in the uncertain band."""
    page = (Path(__file__).parent / "web_fixtures" / "colorsys.expected.md").read_text()
    assert verify(UNSURE, page).uncertain


async def test_settle_asks_in_batches_and_keeps_what_the_judge_leaves_out() -> None:
    verdicts = [
        SupportVerdict("partial", 0.4, (f"passage {i}",), "text", uncertain=i % 2 == 0)
        for i in range(2 * JUDGE_BATCH + 2)
    ]
    claims_ = [ToJudge(f"claim {i}", v.passages) for i, v in enumerate(verdicts)]

    class Forgetful(ScriptedJudge):
        async def judge(self, claims: Sequence[ToJudge]) -> list[JudgeVerdict | None]:
            answers = [  # each quoting its claim's passage, which holds its number
                a.model_copy(update={"quote": c.passages[0]}) if a else None
                for a, c in zip(await super().judge(claims), claims, strict=True)
            ]
            return [None, *answers[1:]]  # the reply left its first claim out

    judge = Forgetful()
    settled = await settle(claims_, verdicts, judge)
    unsure = [i for i, v in enumerate(verdicts) if v.uncertain]
    assert [len(batch) for batch in judge.asked] == [JUDGE_BATCH, len(unsure) - JUDGE_BATCH]
    assert [c.claim for batch in judge.asked for c in batch] == [f"claim {i}" for i in unsure]
    left_out = {unsure[0], unsure[JUDGE_BATCH]}
    for i, verdict in enumerate(settled.verdicts):
        judged = i in unsure and i not in left_out
        assert verdict.verifier == ("judge-model" if judged else "text"), i
        assert verdict.support == ("supported" if judged else "partial"), i
        assert verdict.score == verdicts[i].score  # the text score is kept
    assert settled.problem == ""


def test_the_judges_reply_is_read_by_claim_number() -> None:
    reply = Judgements(
        judgements=[
            JudgedClaim(claim=2, verdict="contradicted", explanation="b", quote=""),
            JudgedClaim(claim=9, verdict="supported", explanation="out of range", quote=""),
            JudgedClaim(claim=2, verdict="supported", explanation="a repeat", quote=""),
        ]
    )
    assert [v.verdict if v else None for v in by_number(reply, 3, "m")] == [
        None,
        "contradicted",
        None,
    ]
    listed = claims_text([ToJudge("A [1].", ("p1", "p2"), "Q?"), ToJudge("B.", ())])
    assert listed.startswith("Claim 1: A [1].\nIt answers: Q?\nPassages:\n> p1\n> p2")
    assert "Claim 2: B.\nPassages:\n> (no passage" in listed
