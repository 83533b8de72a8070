"""The claim verifier's shipped classifier (gradient-boosted trees over ``verifier.read``'s
features, loaded from ``verifier_weights.json``) and the embedder it was fitted with."""

from __future__ import annotations

import functools
import json
import math
import threading
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deep_research.kb.embeddings import Embedder


@dataclass(frozen=True)
class Model:
    """The shipped classifier: gradient-boosted trees over ``read``'s features."""

    features: tuple[str, ...]
    baseline: float
    calibration: tuple[float, float]
    """Platt scaling of the trees' margin (fitted on out-of-fold margins)."""
    trees: tuple[tuple[tuple[Any, ...], ...], ...]
    """Per tree, its nodes: (feature index, threshold, left, right, leaf value); a leaf has
    feature index -1."""
    threshold: float
    partial_threshold: float
    uncertain_band: tuple[float, float]
    conflict_rate: float
    """The share of dev rows with a conflict that were supported (smoothed)."""
    quoted_rate: float
    """The share of dev rows quoted, without a conflict, that were supported (smoothed)."""
    about: dict[str, Any]

    def probability(self, features: dict[str, float]) -> float:
        row = [features[name] for name in self.features]
        total = self.baseline
        for nodes in self.trees:
            i = 0
            while nodes[i][0] >= 0:
                feature, threshold, left, right, _ = nodes[i]
                i = left if row[feature] <= threshold else right
            total += nodes[i][4]
        scale, shift = self.calibration
        return 1 / (1 + math.exp(-(scale * total + shift)))


@functools.cache
def model() -> Model:
    raw = json.loads(
        resources.files("deep_research.adapters").joinpath("verifier_weights.json").read_text()
    )
    return Model(
        features=tuple(raw["features"]),
        baseline=float(raw["baseline"]),
        calibration=(float(raw["calibration"][0]), float(raw["calibration"][1])),
        trees=tuple(tuple(tuple(node) for node in tree) for tree in raw["trees"]),
        threshold=float(raw["threshold"]),
        partial_threshold=float(raw["partial_threshold"]),
        uncertain_band=(float(raw["uncertain_band"][0]), float(raw["uncertain_band"][1])),
        conflict_rate=float(raw["conflict_rate"]),
        quoted_rate=float(raw["quoted_rate"]),
        about=raw["about"],
    )


_EMBEDDER_LOCK = threading.Lock()


@functools.cache
def _shipped_embedder() -> Embedder:
    from deep_research.kb.embeddings import MemoEmbeddings
    from deep_research.kb.onnx_embeddings import OnnxEmbeddings  # lazy: onnxruntime

    # Claims are checked in several worker threads at once: each embeds its few texts itself.
    return MemoEmbeddings(OnnxEmbeddings(workers=1), max_items=4_096)


def shipped_embedder() -> Embedder:
    """The embedder the classifier was fitted with (one per process), each distinct text
    embedded once: the question of every claim, the windows of a source many claims cite."""
    with _EMBEDDER_LOCK:
        return _shipped_embedder()
