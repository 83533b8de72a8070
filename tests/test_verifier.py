"""The claim verifier's contract (``deep_research/adapters/verifier.py``).

Every claim and source here is hand-written for these tests: a made-up library's
documentation ("ferrule") and a paraphrase of Python's bisect module. The expectations come
from the verifier's documented rules (markers stripped, a quoted sentence supported, a
changed number / negation / identifier in the passage that states the claim contradicted,
an empty input unverifiable) and from the shipped model's own thresholds, never from
figures copied out of a run. ``bench/verify.py``'s scoring helpers are checked against
hand computations.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from deep_research.adapters import verifier
from deep_research.adapters.verifier import (
    PARTIAL,
    TEXT_VERIFIER,
    WINDOW_WORDS,
    SupportVerdict,
    read,
    strip_markers,
    verify,
)
from deep_research.adapters.verifier_model import model, shipped_embedder

ROOT = Path(__file__).resolve().parents[1]
SUPPORTS = {"supported", "partial", "unsupported", "contradicted", "unverifiable"}

CONFIG = """# Ferrule configuration

Ferrule reads its settings from ferrule.toml in the project root. A legacy ferrule.ini file \
is ignored with a warning.

The cache is not shared between worker processes, so each worker warms its own copy on \
start. The connection pool is thread-safe and may be used from any thread.

The retry policy waits 3 seconds before the first retry and doubles the delay after each \
failure.

Call `ferrule.connect()` to open a single session. Call `ferrule.open_pool()` when many \
threads need connections at once.

The helper load_config merges environment variables over the file. The helper dump_config \
writes the merged settings back to disk.
"""

LOGGING = """## Logging

Log lines are written as JSON objects with a timestamp, a level and a message. Errors raised \
inside a worker are logged with their traceback and the name of the worker. The log file \
rotates every night at midnight, and the last 14 files are kept on disk.
"""

FERRULE = CONFIG + "\n" + LOGGING

BISECT = """# The bisect module

The bisect module keeps a list in sorted order without sorting the list again after each \
insertion. For long lists whose items are costly to compare, this beats a linear search.

The function `bisect_left` finds the insertion point for x in a that keeps a sorted. If x \
is already present in a, the insertion point is before any existing entries. The function \
`bisect_right` is similar, but returns an insertion point after any existing entries of x.

The key parameter was added in Python 3.10. The functions do not call the __eq__ method; \
they only use the __lt__ method to compare values. The module never checks that the list \
is sorted, so an unsorted list gives meaningless results.
"""

LOADER = (
    "Since release 2 the loader no longer reads the legacy settings file from the home "
    "directory of the current user on start."
)


def flat(text: str) -> str:
    return " ".join(text.split())


def sentence(source: str, start: str) -> str:
    """The sentence of ``source`` that begins with ``start``, as one line."""
    text = flat(source)
    begin = text.index(start)
    return text[begin : text.index(". ", begin) + 1]


# --- citation markers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("marked", "bare"),
    [
        ("Raft elects a leader by majority vote [1].", "Raft elects a leader by majority vote."),
        ("Raft elects a leader [2, 3] by vote.", "Raft elects a leader by vote."),
        ("Raft elects a leader [4][5] by vote [6].", "Raft elects a leader by vote."),
        ("Raft elects a leader [1-3] by vote.", "Raft elects a leader by vote."),
        ("4. Turn the device on.", "Turn the device on."),
        ("12) Press the  button [7].", "Press the button."),
    ],
)
def test_strip_markers_removes_citations_and_a_list_number(marked: str, bare: str) -> None:
    assert strip_markers(marked) == bare


def test_strip_markers_keeps_numbers_that_are_not_markers() -> None:
    # A version at the start is not a list item's number; a bracketed word is not a marker.
    assert strip_markers("3.10 added the key parameter.") == "3.10 added the key parameter."
    assert strip_markers("Use a[i] or [x] here.") == "Use a[i] or [x] here."


@pytest.mark.parametrize(
    "claim",
    [
        "The key parameter was added in Python 3.10.",
        "The key parameter was added in Python 3.11.",
        "The module always checks that the list is sorted.",
    ],
)
def test_a_claim_with_markers_gets_the_verdict_it_gets_without(claim: str) -> None:
    marked = "2. " + claim[:-1] + " [1][2, 3]."
    assert strip_markers(marked) == claim
    assert verify(marked, BISECT) == verify(claim, BISECT)


# --- supported ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "start"),
    [
        (BISECT, "The key parameter"),
        (BISECT, "If x is already present"),
        (FERRULE, "The cache is not shared"),
        (FERRULE, "Call `ferrule.connect()`"),
        (FERRULE, "The helper load_config"),
    ],
)
def test_a_sentence_quoted_from_a_longer_source_is_supported(source: str, start: str) -> None:
    claim = sentence(source, start)
    verdict = verify(claim, source)
    assert verdict.support == "supported", verdict
    assert verdict.score >= model().threshold
    assert verdict.verifier == TEXT_VERIFIER
    assert verdict.conflicts == ()
    assert len(verdict.passages) == 1
    passage = verdict.passages[0]
    assert passage in source  # verbatim: a slice of the source, not a normalised copy
    assert len(passage) < len(source.strip())  # a passage, not the whole source
    assert claim in flat(passage)  # it holds the claim's sentence (modulo line wrapping)


# --- contradicted: numbers ------------------------------------------------------------------


def test_one_changed_number_contradicts() -> None:
    verdict = verify("The key parameter was added in Python 3.11.", BISECT)
    assert verdict.support == "contradicted"
    assert verdict.conflicts == ("number 3.11",)
    assert verdict.score <= model().conflict_rate
    assert verify("The key parameter was added in Python 3.10.", BISECT).support == "supported"


def test_a_number_found_only_far_from_the_stating_sentence_still_contradicts() -> None:
    # "14" is in the source, but more than a window's words away from the retry sentence:
    # no window that states the claim holds it.
    between = FERRULE[FERRULE.index("The retry policy") : FERRULE.index("14 files")]
    assert len(between.split()) > WINDOW_WORDS
    claim = (
        "The retry policy waits 14 seconds before the first retry and doubles the delay "
        "after each failure."
    )
    verdict = verify(claim, FERRULE)
    assert verdict.support == "contradicted"
    assert "number 14" in verdict.conflicts
    assert verdict.score <= model().conflict_rate


def test_a_number_in_the_window_that_states_the_claim_is_no_number_conflict() -> None:
    # The documented rule is per window, not per sentence: "3" is in the sentence right
    # after the one stating "the pool is thread-safe", inside one window with it.
    source = (
        "The connection pool is thread-safe and may be used from any thread. "
        "It holds 3 connections by default."
    )
    verdict = verify("The connection pool is thread-safe and holds 3 connections.", source)
    assert not any(c.startswith("number") for c in verdict.conflicts), verdict
    changed = verify("The connection pool is thread-safe and holds 5 connections.", source)
    assert changed.support == "contradicted"
    assert changed.conflicts == ("number 5",)


# --- contradicted: negations ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "source"),
    [
        # "is not" → "is"
        (
            "The cache is shared between worker processes, so each worker warms its own "
            "copy on start.",
            FERRULE,
        ),
        # "is" → "is not"
        ("The connection pool is not thread-safe and may be used from any thread.", FERRULE),
        # "never" → "always"
        (
            "The module always checks that the list is sorted, so an unsorted list gives "
            "meaningless results.",
            BISECT,
        ),
        # "do not" → affirmative
        ("The functions call the __eq__ method to compare values.", BISECT),
        # "no longer" → "still"
        (
            "Since release 2 the loader still reads the legacy settings file from the home "
            "directory of the current user on start.",
            LOADER,
        ),
        # "no longer" → "still", with a "not" elsewhere that leaves the count of negations
        # odd on both sides: only the "always"/"still" rule sees it
        (
            "Since release 2 the loader still reads the legacy settings file from the home "
            "directory of the current user on start, not the project.",
            LOADER,
        ),
        # "not" added to a sentence whose "without" negates nothing ("sorted without
        # sorting" is sorted)
        ("The bisect module does not keep a list in sorted order.", BISECT),
        # "still" and "not" are not words the stating sentence must hold: a short sentence
        # with the polarity flipped is still the one that states the claim
        (
            "The loader still reads the legacy file, not the project file.",
            "The loader no longer reads the legacy file or the project file.",
        ),
    ],
)
def test_a_flipped_negation_contradicts(claim: str, source: str) -> None:
    verdict = verify(claim, source)
    assert verdict.support == "contradicted", verdict
    assert "negation" in verdict.conflicts
    assert verdict.score <= model().conflict_rate


@pytest.mark.parametrize(
    "claim",
    [
        "The cache is not shared between worker processes.",
        "The module never checks that the list is sorted.",
        "The functions do not call the __eq__ method.",
    ],
)
def test_a_claim_that_keeps_the_negation_is_supported(claim: str) -> None:
    source = FERRULE if "cache" in claim else BISECT
    verdict = verify(claim, source)
    assert verdict.support == "supported", verdict
    assert "negation" not in verdict.conflicts


# --- contradicted: identifiers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("wrong", "right", "name"),
    [
        # backticked, the other function of the same page
        (
            "The function `bisect_right` finds the insertion point for x in a that keeps a sorted.",
            "The function `bisect_left` finds the insertion point for x in a that keeps a sorted.",
            "bisect_right",
        ),
        # a backticked dotted call
        (
            "Call `ferrule.open_pool()` to open a single session.",
            "Call `ferrule.connect()` to open a single session.",
            "ferrule.open_pool",
        ),
        # snake_case, bare
        (
            "The helper dump_config merges environment variables over the file.",
            "The helper load_config merges environment variables over the file.",
            "dump_config",
        ),
        # dotted file name, bare
        (
            "Ferrule reads its settings from ferrule.ini in the project root.",
            "Ferrule reads its settings from ferrule.toml in the project root.",
            "ferrule.ini",
        ),
    ],
)
def test_a_swapped_identifier_contradicts_and_the_right_one_is_supported(
    wrong: str, right: str, name: str
) -> None:
    source = BISECT if "bisect" in name else FERRULE
    assert name in source  # the wrong name is elsewhere in the source
    verdict = verify(wrong, source)
    assert verdict.support == "contradicted", verdict
    assert f"identifier {name}" in verdict.conflicts
    assert verdict.score <= model().conflict_rate
    good = verify(right, source)
    assert good.support == "supported", good
    assert good.conflicts == ()


# --- not supported --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        "Photosynthesis converts light energy into chemical energy in plant chloroplasts.",
        "Raft elects a leader by majority vote among the servers of a cluster.",
    ],
)
def test_an_off_topic_claim_is_unsupported_with_a_low_score(claim: str) -> None:
    for source in (FERRULE, BISECT):
        verdict = verify(claim, source)
        assert verdict.support == "unsupported", verdict
        assert verdict.score < model().partial_threshold
        assert verdict.conflicts == ()


@pytest.mark.parametrize(
    "claim",
    [
        # sentences of the logging section, checked against the configuration section
        "The log file rotates every night at midnight, and the last 14 files are kept on disk.",
        "Errors raised inside a worker are logged with their traceback and the name of the worker.",
        # a section on workers the page does not have, in the page's own words
        "Each worker process retries a failed connection on its own and never shares the "
        "retry delay with other workers.",
        "The helper load_config is called once per worker process, before the cache warms.",
    ],
)
def test_a_claim_from_another_part_of_the_document_is_not_supported(claim: str) -> None:
    verdict = verify(claim, CONFIG)
    assert verdict.support != "supported", verdict
    assert verdict.score < model().threshold


# --- unverifiable ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "source"),
    [
        ("The cache is not shared.", ""),
        ("The cache is not shared.", "  \n\t \n"),
        ("The cache is not shared.", "..."),
        ("", FERRULE),
        ("   ", FERRULE),
        ("[1][2, 3]", FERRULE),
        ("!!", "??"),
    ],
)
def test_an_empty_source_or_claim_is_unverifiable(claim: str, source: str) -> None:
    verdict = verify(claim, source)
    assert verdict == SupportVerdict("unverifiable", 0.0, (), TEXT_VERIFIER)


# --- the score and the band -----------------------------------------------------------------

CASES = [
    (sentence(BISECT, "The key parameter"), BISECT),
    ("The key parameter was added in Python 3.11.", BISECT),
    ("The module always checks that the list is sorted.", BISECT),
    ("Photosynthesis converts light energy into chemical energy.", BISECT),
    ("Worker processes open their own session with a fresh copy of the settings.", FERRULE),
    ("The connection pool writes its settings to a JSON log file on disk.", FERRULE),
    ("Each worker keeps its own log file, which rotates after every retry.", FERRULE),
    ("The log file rotates every hour and keeps the last 3 files.", FERRULE),
    ("Ferrule", FERRULE),
    ("42", "The answer is 42."),
    ("The cache", "."),
    ("Ferrule reads its settings from ferrule.toml.", "ferrule"),
    ("Le cache n'est pas partagé entre les processus.", FERRULE),
    ("缓存不在工作进程之间共享。", "缓存不在工作进程之间共享。"),
]


@pytest.mark.parametrize(("claim", "source"), CASES)
def test_the_verdict_follows_its_score(claim: str, source: str) -> None:
    weights = model()
    verdict = verify(claim, source)
    assert verdict.support in SUPPORTS
    assert 0.0 <= verdict.score <= 1.0
    low, high = weights.uncertain_band
    assert verdict.uncertain == (low <= verdict.score < high)
    if verdict.support == "unverifiable":
        return
    assert len(verdict.passages) == 1
    assert verdict.passages[0] in source
    unstated = [c for c in verdict.conflicts if c.startswith("not stated: ")]
    if verdict.conflicts:
        # a detail the passage gives otherwise; or none of its details given at all
        assert verdict.support == ("unsupported" if unstated else "contradicted")
        assert verdict.score <= weights.conflict_rate
    elif verdict.score >= weights.threshold:
        assert verdict.support == "supported"
    else:
        # partial: the score, and one window holding half the claim's words
        held = read(strip_markers(claim), source, "", shipped_embedder()).features["cov_window"]
        partial = verdict.score >= weights.partial_threshold and held >= PARTIAL
        assert verdict.support == ("partial" if partial else "unsupported")


def test_the_cases_reach_more_than_one_verdict_and_both_sides_of_the_band() -> None:
    # Guards the test above against passing vacuously on a set that all lands in one place.
    verdicts = [verify(c, s) for c, s in CASES]
    assert {v.support for v in verdicts} >= {"supported", "contradicted", "unsupported"}
    assert {v.uncertain for v in verdicts} == {True, False}


# --- the weights ----------------------------------------------------------------------------


def test_the_model_loads_with_sane_thresholds_and_provenance() -> None:
    weights = model()
    assert weights.trees
    assert 0.0 < weights.partial_threshold <= weights.threshold < 1.0
    low, high = weights.uncertain_band
    assert 0.0 <= low < high <= 1.0
    assert 0.0 < weights.conflict_rate < weights.threshold
    assert weights.threshold <= weights.quoted_rate <= 1.0
    about = weights.about
    assert "AttributionBench" in about["trained_on"]
    assert "dev" in about["trained_on"]
    assert "AttributionBench" in about["data_source"]
    cv = about["cv"]
    assert cv["folds"] >= 2
    assert 0.0 < cv["macro_f1_average"] <= 1.0
    by_dataset = cv["macro_f1_by_dataset"]
    assert by_dataset
    assert all(0.0 < value <= 1.0 for value in by_dataset.values())
    mean = sum(by_dataset.values()) / len(by_dataset)
    assert cv["macro_f1_average"] == pytest.approx(mean, abs=0.01)


def test_every_tree_node_references_a_valid_feature_and_children() -> None:
    weights = model()
    used: set[int] = set()
    for nodes in weights.trees:
        assert nodes
        for i, node in enumerate(nodes):
            assert len(node) == 5
            feature, threshold, left, right, value = node
            assert isinstance(threshold, int | float)
            assert isinstance(value, int | float)
            if feature < 0:
                assert feature == -1
                continue
            assert feature < len(weights.features)
            used.add(feature)
            # children come after their parent, so a walk always ends at a leaf
            assert i < left < len(nodes)
            assert i < right < len(nodes)
    assert used  # the trees split on something


def test_read_produces_every_feature_the_trees_use() -> None:
    weights = model()
    found = verifier.read(
        "The key parameter was added in Python 3.10.",
        BISECT,
        "When was the key parameter added?",
        verifier.shipped_embedder(),
    )
    assert set(found.features) >= set(weights.features)
    assert all(isinstance(found.features[name], float) for name in weights.features)
    assert 0.0 <= weights.probability(found.features) <= 1.0


def test_the_weights_file_is_what_model_loads() -> None:
    raw = json.loads(
        (ROOT / "deep_research" / "adapters" / "verifier_weights.json").read_text("utf-8")
    )
    weights = model()
    assert list(weights.features) == raw["features"]
    assert len(weights.trees) == len(raw["trees"])
    assert weights.threshold == raw["threshold"]


# --- the question ---------------------------------------------------------------------------


def test_the_question_is_optional() -> None:
    claim = sentence(BISECT, "The key parameter")
    without = verify(claim, BISECT)
    asked = verify(claim, BISECT, "When was the key parameter added to bisect?")
    for verdict in (without, asked):
        assert verdict.support in SUPPORTS - {"unverifiable"}
        assert 0.0 <= verdict.score <= 1.0
        assert verdict.passages
    assert verify(claim, BISECT, "  \n ") == without  # a blank question is no question


@pytest.mark.parametrize("question", [None, 5, ["When?"], b"When was it added?"])
def test_a_wrongly_typed_question_does_not_crash(question: Any) -> None:
    claim = "The key parameter was added in Python 3.10."
    assert verify(claim, BISECT, question) == verify(claim, BISECT)


# --- a long source --------------------------------------------------------------------------


def test_a_long_source_still_finds_the_stating_sentence() -> None:
    filler = [
        f"Note {i} of the appendix lists routine maintenance for garden shed number {i}, "
        "including paint, hinges and the gutter."
        for i in range(1000)
    ]
    claim = "The bisect module never checks that the list it is given is sorted."
    source = " ".join([*filler[:500], claim, *filler[500:]])
    assert len(source.split()) >= 15_000
    verdict = verify(claim, source)
    assert verdict.support == "supported", verdict
    assert claim in verdict.passages[0]
    assert verdict.passages[0] in source
    assert len(verdict.passages[0].split()) <= WINDOW_WORDS + len(claim.split())


# --- decided_by -----------------------------------------------------------------------------


def test_decided_by_keeps_the_evidence_and_records_the_judge() -> None:
    verdict = verify("The connection pool writes its settings to a JSON log file.", FERRULE)
    uncertain = SupportVerdict(
        "partial", 0.4, ("The pool is thread-safe.",), TEXT_VERIFIER, ("negation",), True
    )
    for before in (verdict, uncertain):
        after = before.decided_by("unsupported", "judge-model")
        assert after.support == "unsupported"
        assert after.verifier == "judge-model"
        assert after.uncertain is False
        assert after.score == before.score
        assert after.passages == before.passages
        assert after.conflicts == before.conflicts
    assert uncertain.uncertain  # unchanged: the verdict is frozen


# --- bench/verify.py's figures --------------------------------------------------------------


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_verify", ROOT / "bench" / "verify.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_macro_f1_against_a_hand_computation(bench: ModuleType) -> None:
    # labels 1 1 0 0, preds 1 0 0 0: class 1 tp=1 fp=0 fn=1 → F1 2/3;
    # class 0 tp=2 fp=1 fn=0 → F1 4/5; macro (2/3 + 4/5) / 2 = 11/15.
    assert bench.macro_f1([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(11 / 15)
    assert bench.macro_f1([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert bench.macro_f1([1, 0], [0, 1]) == pytest.approx(0.0)
    # all predicted 1: class 1 tp=1 fp=1 → 2/3, class 0 no true positive → 0; macro 1/3
    assert bench.macro_f1([1, 0], [1, 1]) == pytest.approx(1 / 3)


def test_figures_per_dataset_and_kind(bench: ModuleType) -> None:
    rows: list[dict[str, Any]] = [
        {"source_dataset": "A", "label": 1, "kind": "verbatim"},
        {"source_dataset": "A", "label": 1, "kind": "verbatim"},
        {"source_dataset": "A", "label": 0, "kind": "number"},
        {"source_dataset": "A", "label": 0, "kind": "number"},
        {"source_dataset": "B", "label": 1},
        {"source_dataset": "B", "label": 0},
        {"source_dataset": "A"},  # unlabelled: timed, not scored
    ]
    preds = [1, 0, 0, 0, 1, 1, 1]
    predictions = [{"id": i, "pred": p, "score": float(p)} for i, p in enumerate(preds)]
    seconds = [0.001, 0.002, 0.003, 0.004, 0.005, 0.006, 0.100]
    out = bench.figures(rows, predictions, seconds)
    assert out["rows"] == 7
    assert out["median_ms"] == pytest.approx(4.0)
    assert out["p95_ms"] == pytest.approx(100.0)  # int(0.95 * 7) = 6: the slowest row
    # A: labels 1 1 0 0, preds 1 0 0 0 → 11/15 = 73.3; B: labels 1 0, preds 1 1 → 1/3 = 33.3
    assert out["macro_f1[A]"] == pytest.approx(73.3)
    assert out["macro_f1[B]"] == pytest.approx(33.3)
    assert out["macro_f1_average"] == pytest.approx(round((73.3 + 33.3) / 2, 1))
    # verbatim: 1 of 2 right; number: 2 of 2 right
    assert out["right[verbatim]"] == pytest.approx(50.0)
    assert out["right[number]"] == pytest.approx(100.0)
    assert {k for k in out if re.fullmatch(r"right\[.*\]", k)} == {
        "right[number]",
        "right[verbatim]",
    }


def test_figures_without_a_dataset_name_or_labels(bench: ModuleType) -> None:
    rows: list[dict[str, Any]] = [{"label": 1}, {"label": 0}, {"label": 0}]
    predictions = [{"id": i, "pred": p, "score": 0.0} for i, p in enumerate([1, 1, 0])]
    out = bench.figures(rows, predictions, [0.01, 0.02, 0.03])
    # one group, "all": class 1 tp=1 fp=1 fn=0 → 2/3; class 0 tp=1 fp=0 fn=1 → 2/3
    assert out["macro_f1[all]"] == pytest.approx(66.7)
    assert out["macro_f1_average"] == pytest.approx(66.7)
    unlabelled = bench.figures([{}], [{"id": 0, "pred": 1, "score": 1.0}], [0.5])
    assert unlabelled == {"rows": 1, "median_ms": 500.0, "p95_ms": 500.0}


def test_the_shipped_embedder_embeds_the_question_and_a_sources_windows_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every claim of a report is read with the run's question, and many cite one source:
    the verifier embeds each distinct text once a process, and reads it the same."""
    from deep_research.kb.embeddings import MemoEmbeddings

    embedder = shipped_embedder()
    assert isinstance(embedder, MemoEmbeddings)
    embedded: list[str] = []
    inner = embedder.inner

    class Counting:
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            embedded.extend(texts)
            return inner.embed_documents(texts)

    question = "How does ferrule retry a failed call, and where does it read its settings?"
    claims = ["The retry policy waits 3 seconds.", "Ferrule reads ferrule.toml."]
    first = [verify(c, CONFIG, question) for c in claims]  # the memo may hold these already
    monkeypatch.setattr(embedder, "inner", Counting())
    assert [verify(c, CONFIG, question) for c in claims] == first
    assert embedded == [], "nothing embedded twice"
    assert verify("The cache is shared between workers.", CONFIG, question).support
    assert embedded == ["The cache is shared between workers."], "only the new claim"
