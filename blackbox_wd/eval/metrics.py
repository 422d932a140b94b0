"""AUROC with a percentile-bootstrap 95% confidence interval.

Convention: label 1 = hallucination, and a higher score = more likely hallucination, so an AUROC
of 1 means the score ranks every hallucination above every correct answer, 0.5 is chance.
AUROC is ``sklearn.metrics.roc_auc_score`` (ties count one half). The CI resamples prompts with
replacement (``numpy.random.default_rng(seed)``, default 1000 resamples, seed 0), skips resamples
that hold one class only, and takes the 2.5 / 97.5 percentiles of the rest. The resamples' AUROCs
are computed all at once by the Mann-Whitney rank formula (mid-ranks for ties), which equals
``roc_auc_score`` exactly (tested) and is ~100x faster than calling it 1000 times.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata
from sklearn.metrics import roc_auc_score

N_BOOTSTRAP = 1000
SEED = 0
LEVEL = 0.95


@dataclass(frozen=True)
class AurocResult:
    """AUROC with its bootstrap CI on the n prompts with a finite score."""

    auroc: float
    lo: float
    hi: float
    n: int
    n_pos: int
    n_boot: int  # resamples actually used (those holding both classes)


def _clean(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=int).reshape(-1)
    s = np.asarray(scores, dtype=float).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"{y.size} labels but {s.size} scores")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 (correct) or 1 (hallucination)")
    keep = np.isfinite(s)
    return y[keep], s[keep]


def auroc(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray) -> float:
    """roc_auc_score(labels, scores) on the finite scores; NaN when only one class is present."""
    y, s = _clean(labels, scores)
    if y.size == 0 or y.min() == y.max():
        return float("nan")
    return float(roc_auc_score(y, s))


def rank_auroc(y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Row-wise AUROC of (B, n) label and score arrays, each row holding both classes:
    (sum of the positives' mid-ranks - n_pos (n_pos + 1) / 2) / (n_pos n_neg)."""
    y = np.atleast_2d(y)
    s = np.atleast_2d(s)
    if y.shape[0] == 0:
        return np.empty(0)
    ranks = rankdata(s, axis=1)  # average ranks of ties
    n_pos = y.sum(axis=1)
    n_neg = y.shape[1] - n_pos
    return ((ranks * y).sum(axis=1) - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def bootstrap_ci(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray,
                 n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL) -> tuple[float, float, int]:
    """(lo, hi, resamples used) of the percentile bootstrap CI of the AUROC."""
    y, s = _clean(labels, scores)
    if y.size == 0 or y.min() == y.max():
        return float("nan"), float("nan"), 0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, y.size, (n_boot, y.size))
    yb = y[idx]
    n_pos = yb.sum(axis=1)
    keep = (n_pos > 0) & (n_pos < y.size)
    values = rank_auroc(yb[keep], s[idx[keep]])
    if values.size == 0:
        return float("nan"), float("nan"), 0
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(values, [tail, 100.0 - tail])
    return float(lo), float(hi), int(values.size)


def auroc_with_ci(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray,
                  n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL) -> AurocResult:
    """AUROC and its bootstrap CI in one result."""
    y, s = _clean(labels, scores)
    lo, hi, used = bootstrap_ci(y, s, n_boot, seed, level)
    return AurocResult(auroc(y, s), lo, hi, int(y.size), int(y.sum()), used)
