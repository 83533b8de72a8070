"""How well the claim verifier's classifier transfers: leave-one-dataset-out on AttributionBench
dev, next to the usual cross-validation, for the shipped model, a content-word-overlap
baseline and variants (other features, capacities, a logistic regression, a blend).

    pip install -e ".[train]"
    python scripts/verifier_lodo.py ../shared/benchmarks/attributionbench/id_dev.jsonl
    python scripts/verifier_lodo.py DATA --variants shipped,overlap,lr --seeds 2

The held-out test splits include three datasets the verifier never sees in dev (other styles:
dialogue, short quotes, generative search); leaving each dev dataset out in turn is the proxy
for that. Per held-out dataset: fit on the other three (each row with and without its
question, as ``train_verifier`` does), choose the threshold on the training part only
(out-of-fold probabilities of a 5-fold split of it, Platt-scaled, the threshold that maximizes
its average per-dataset macro-F1), then score the held-out dataset's macro-F1.
``cv`` is ``train_verifier``'s figure (5 folds stratified by dataset and label, ``--seeds``
repeats, one threshold for the pooled out-of-fold probabilities). The verifier's rules apply
as in ``verify``: a conflict caps the probability at the conflict rate, a quoted claim lifts
it to the quoted rate (both from the training part). ``overlap`` is ``cov_all`` alone with a
threshold chosen the same way. The row's source dataset is used for folds and scoring only.

Features are cached under /tmp (keyed by the data and the text of ``verifier.py`` and
``claim_details.py``), so variants compare in seconds; every feature ``verifier.read``
returns is cached, variants pick theirs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import train_verifier as tv  # noqa: E402

from deep_research.adapters import verifier, verifier_model  # noqa: E402

THRESHOLDS = np.round(np.linspace(0.3, 0.7, 41), 3)
CACHE_DIR = Path("/tmp")


@dataclass
class Data:
    names: list[str]
    x_q: np.ndarray
    x_bare: np.ndarray
    conflicts: np.ndarray
    quoted: np.ndarray
    y: np.ndarray
    groups: np.ndarray

    def columns(self, wanted: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        idx = [self.names.index(n) for n in wanted]
        return self.x_q[:, idx], self.x_bare[:, idx]


def load(path: Path) -> Data:
    raw = path.read_bytes()
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    adapters = ROOT / "deep_research" / "adapters"
    code = b"".join((adapters / n).read_bytes() for n in ("verifier.py", "claim_details.py"))
    key = hashlib.sha256(raw + code).hexdigest()[:16]
    cache = CACHE_DIR / f"verifier_features_{key}.npz"
    if not cache.exists():
        started = time.perf_counter()
        probe = verifier.read("a claim", "a source.", "", verifier_model.shipped_embedder())
        names = list(probe.features)
        x_q, x_bare, conflicts, quoted = tv.featurize(rows, names)
        np.savez(
            cache,
            names=np.array(names),
            x_q=x_q,
            x_bare=x_bare,
            conflicts=np.array(conflicts),
            quoted=np.array(quoted),
        )
        print(f"features: {time.perf_counter() - started:.0f} s → {cache}", file=sys.stderr)
    stored = np.load(cache)
    return Data(
        names=[str(n) for n in stored["names"]],
        x_q=stored["x_q"],
        x_bare=stored["x_bare"],
        conflicts=stored["conflicts"].astype(bool),
        quoted=stored["quoted"].astype(bool),
        y=np.array([int(r["label"]) for r in rows]),
        groups=np.array([r["source_dataset"] for r in rows]),  # folds and scoring only
    )


# --- the models ---------------------------------------------------------------------------


@dataclass
class Variant:
    """A classifier over some features: ``fit(x, y)`` returns ``margin(x)``."""

    features: list[str]
    kind: str = "gbt"  # "gbt", "lr", "blend" (gbt margin + mix * lr margin), "raw"
    params: dict[str, Any] = field(default_factory=dict)
    lr_c: float = 1.0
    mix: float = 1.0
    rules: bool = True

    def fit(self, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        if self.kind == "raw":  # the feature itself is the score
            return lambda z: z[:, 0]
        parts: list[Callable[[np.ndarray], np.ndarray]] = []
        if self.kind in ("gbt", "blend"):
            parts.append(self._gbt(x, y))
        if self.kind in ("lr", "blend"):
            lr = self._lr(x, y)
            parts.append(lr if self.kind == "lr" else (lambda z: self.mix * lr(z)))
        return lambda z: np.sum([p(z) for p in parts], axis=0)

    def _gbt(self, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        from sklearn.ensemble import HistGradientBoostingClassifier

        params = {**tv.PARAMS, **self.params}
        monotone = [tv.MONOTONE.get(n, 0) for n in self.features]
        model = HistGradientBoostingClassifier(monotonic_cst=monotone, random_state=0, **params)
        model.fit(x, y)
        return lambda z: np.asarray(model.decision_function(z), dtype=float)

    def _lr(self, x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        from sklearn.linear_model import LogisticRegression

        mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
        model = LogisticRegression(C=self.lr_c, max_iter=2000).fit((x - mean) / scale, y)
        return lambda z: np.asarray(model.decision_function((z - mean) / scale), dtype=float)


# --- the protocols ------------------------------------------------------------------------


def rates(data: Data, rows: np.ndarray) -> tuple[float, float]:
    marked, quotes = data.conflicts[rows], data.quoted[rows] & ~data.conflicts[rows]
    y = data.y[rows]
    return (
        float((y[marked].sum() + 1) / (marked.sum() + 2)),
        float((y[quotes].sum() + 1) / (quotes.sum() + 2)),
    )


def apply_rules(
    data: Data, rows: np.ndarray, p: np.ndarray, rate: tuple[float, float], on: bool
) -> np.ndarray:
    if not on:
        return p
    marked, quotes = data.conflicts[rows], data.quoted[rows] & ~data.conflicts[rows]
    p = np.where(marked, np.minimum(p, rate[0]), p)
    return np.where(quotes, np.maximum(p, rate[1]), p)


def fit_rows(
    variant: Variant, data: Data, xq: np.ndarray, xb: np.ndarray, rows: np.ndarray
) -> Callable[[np.ndarray], np.ndarray]:
    x = np.vstack([xq[rows], xb[rows]])
    return variant.fit(x, np.concatenate([data.y[rows], data.y[rows]]))


def oof_margins(
    variant: Variant, data: Data, xq: np.ndarray, xb: np.ndarray, rows: np.ndarray, seed: int
) -> np.ndarray:
    """Out-of-fold margins for ``rows`` (5 folds stratified by dataset and label)."""
    from sklearn.model_selection import StratifiedKFold

    strata = np.array([f"{g}:{label}" for g, label in zip(data.groups, data.y, strict=True)])
    out = np.zeros(len(rows))
    folds = StratifiedKFold(5, shuffle=True, random_state=seed)
    for train, test in folds.split(rows, strata[rows]):
        margin = fit_rows(variant, data, xq, xb, rows[train])
        out[test] = margin(xq[rows[test]])
    return out


def calibrate(variant: Variant, margin: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    return (1.0, 0.0) if variant.kind == "raw" else tv.platt(margin, y)


def best_threshold(p: np.ndarray, y: np.ndarray, groups: np.ndarray) -> float:
    scores = [tv.benchmark_score(y, groups, p, t) for t in THRESHOLDS]
    return float(THRESHOLDS[int(np.argmax(scores))])


def per_dataset(y: np.ndarray, groups: np.ndarray, p: np.ndarray, t: float) -> dict[str, float]:
    return {
        g: tv.macro_f1(y[groups == g], (p[groups == g] >= t).astype(int))
        for g in sorted(set(groups))
    }


def cross_validate(variant: Variant, data: Data, seeds: int) -> dict[str, float]:
    xq, xb = data.columns(variant.features)
    every = np.arange(len(data.y))
    margins = np.array([oof_margins(variant, data, xq, xb, every, s) for s in range(seeds)])
    scale = calibrate(variant, margins.ravel(), np.tile(data.y, seeds))
    rate = rates(data, every)
    if variant.kind == "raw":
        p = list(margins)
    else:
        p = [
            apply_rules(data, every, tv.calibrated(m, scale), rate, variant.rules) for m in margins
        ]
    by_t = [np.mean([tv.benchmark_score(data.y, data.groups, q, t) for q in p]) for t in THRESHOLDS]
    t = float(THRESHOLDS[int(np.argmax(by_t))])
    figures = [per_dataset(data.y, data.groups, q, t) for q in p]
    out = {g: float(np.mean([f[g] for f in figures])) for g in figures[0]}
    out["average"] = float(np.mean(list(out.values())))
    return out


def leave_one_out(variant: Variant, data: Data, seed: int = 0) -> dict[str, float]:
    xq, xb = data.columns(variant.features)
    out: dict[str, float] = {}
    for held in sorted(set(data.groups)):
        train = np.flatnonzero(data.groups != held)
        test = np.flatnonzero(data.groups == held)
        rate = rates(data, train)
        if variant.kind == "raw":
            p_train = xq[train, 0]
            t = best_threshold(p_train, data.y[train], data.groups[train])
            p_test = xq[test, 0]
        else:
            margin = oof_margins(variant, data, xq, xb, train, seed)
            scale = calibrate(variant, margin, data.y[train])
            p_train = apply_rules(data, train, tv.calibrated(margin, scale), rate, variant.rules)
            t = best_threshold(p_train, data.y[train], data.groups[train])
            final = fit_rows(variant, data, xq, xb, train)
            p_test = tv.calibrated(final(xq[test]), scale)
            p_test = apply_rules(data, test, p_test, rate, variant.rules)
        out[held] = tv.macro_f1(data.y[test], (p_test >= t).astype(int))
    out["average"] = float(np.mean(list(out.values())))
    return out


# --- the variants -------------------------------------------------------------------------

SHIPPED = list(tv.MONOTONE)
SHIFTY = {"log_source", "given", "cos_question", "has_numbers"}
"""Features whose distribution may be a dataset's style more than support."""
START = {"max_depth": 3, "max_iter": 200, "learning_rate": 0.04}
"""The first shipped model's trees (``PARAMS`` is now stumps)."""


def variants() -> dict[str, Variant]:
    stumps = {"max_depth": 1, "max_iter": 300}
    out: dict[str, Variant] = {
        "overlap": Variant(["cov_all"], kind="raw", rules=False),
        "start": Variant(SHIPPED, params=START),
        "shipped": Variant(SHIPPED),
        "shipped_norules": Variant(SHIPPED, rules=False),
        "lr": Variant(SHIPPED, kind="lr"),
        "blend": Variant(SHIPPED, kind="blend", params=START),
        "no_shifty": Variant([n for n in SHIPPED if n not in SHIFTY], params=START),
        "depth2": Variant(SHIPPED, params={**START, "max_depth": 2}),
        "depth4": Variant(SHIPPED, params={**START, "max_depth": 4}),
        "slow": Variant(SHIPPED, params={**START, "learning_rate": 0.02}),
        "leaf60": Variant(SHIPPED, params={**START, "min_samples_leaf": 60}),
        "stumps_0.04": Variant(SHIPPED, params={**stumps, "learning_rate": 0.04}),
        "stumps_500": Variant(SHIPPED, params={**stumps, "max_iter": 500, "learning_rate": 0.04}),
        "stumps_no_shifty": Variant([n for n in SHIPPED if n not in SHIFTY]),
    }
    for name in SHIPPED:
        out[f"-{name}"] = Variant([n for n in SHIPPED if n != name])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="AttributionBench id_dev.jsonl")
    parser.add_argument("--variants", default="overlap,start,shipped", help="comma-separated names")
    parser.add_argument("--seeds", type=int, default=3, help="cross-validation repeats")
    parser.add_argument("--json", action="store_true", help="one JSON line per variant")
    args = parser.parse_args()
    data = load(args.data)
    known = variants()
    names = list(known) if args.variants == "all" else args.variants.split(",")
    short = {g: g[:8] for g in sorted(set(data.groups))}
    if not args.json:
        head = " ".join(f"{s:>8}" for s in short.values())
        print(f"{'variant':<24} {'CV avg':>7} {head} | {'LODO avg':>8} {head}")
    for name in names:
        cv = cross_validate(known[name], data, args.seeds)
        lodo = leave_one_out(known[name], data)
        if args.json:
            print(json.dumps({"variant": name, "cv": cv, "lodo": lodo}))
            continue
        cells = " ".join(f"{100 * cv[g]:8.1f}" for g in short)
        lcells = " ".join(f"{100 * lodo[g]:8.1f}" for g in short)
        average = f"{100 * cv['average']:7.1f} {cells} | {100 * lodo['average']:8.1f}"
        print(f"{name:<24} {average} {lcells}", flush=True)


if __name__ == "__main__":
    main()
