"""AUROC with a percentile-bootstrap 95% confidence interval, paired AUROC differences, AUPRC and PRR.

Convention: label 1 = hallucination, and a higher score = more likely hallucination, so an AUROC
of 1 means the score ranks every hallucination above every correct answer, 0.5 is chance.
AUROC is ``sklearn.metrics.roc_auc_score`` (ties count one half). The CI resamples prompts with
replacement (``numpy.random.default_rng(seed)``, default 1000 resamples, seed 0), skips resamples
that hold one class only, and takes the 2.5 / 97.5 percentiles of the rest. The resamples' AUROCs
are computed all at once by the Mann-Whitney rank formula (mid-ranks for ties), which equals
``roc_auc_score`` exactly (tested) and is ~100x faster than calling it 1000 times.

The paired difference of two methods draws ONE set of resamples (same seed, same indices) and
scores both methods on each, so the CI of AUROC(a) - AUROC(b) accounts for their correlation; a
method is ``better`` only when that CI lies above 0, ``worse`` when below, else ``no difference``.

AUPRC is ``sklearn.metrics.average_precision_score`` with hallucination the positive class (its
chance level is the base rate). PRR is LM-Polygraph's prediction-rejection ratio, see :func:`prr`.

A probability's calibration (its ECE and reliability bins) is ``reliability``'s.

Continuous labels (WikiBio's ``human_score``: the share of a passage's sentences that are
inaccurate, higher = more hallucination) are compared by Pearson's r and Spearman's rho
(``scipy.stats.pearsonr`` / ``spearmanr`` values), with the same percentile bootstrap over prompts;
a higher score must correlate positively with more hallucination.

Sentence level (SelfCheckGPT, Manakul et al. 2023): each sentence of a judged passage has a human
severity (0 accurate, 1 minor, 2 major inaccurate) and a score (higher = more likely unsupported;
NaN: not scored, left out and counted). AUC-PR is ``sklearn.metrics.auc(recall, precision)`` of
``precision_recall_curve`` (the trapezoid, not average precision). NonFact: positive = minor or
major, ranked by the score; NonFact*: positive = major, over the passages not wholly major;
Factual: positive = accurate, ranked by the negated score. A random score's AUC-PR is the positive
share. The CI resamples passages (a passage's sentences go together), with the resamples' AUC-PRs
computed at once from multiplicity weights (equal to the sklearn curve on the resampled sentences,
tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
from scipy.stats import pearsonr, rankdata, spearmanr
from sklearn.metrics import auc, average_precision_score, precision_recall_curve, roc_auc_score

N_BOOTSTRAP = 1000
SEED = 0
LEVEL = 0.95

Ints: TypeAlias = Sequence[int] | np.ndarray  # labels, severities, passage ids: a sequence or an array
Floats: TypeAlias = Sequence[float] | np.ndarray  # scores and continuous labels (NaN: no score)


@dataclass(frozen=True)
class AurocResult:
    """AUROC with its bootstrap CI on the n prompts with a finite score."""

    auroc: float
    lo: float
    hi: float
    n: int
    n_pos: int
    n_boot: int  # resamples actually used (those holding both classes)


def _clean(labels: Ints, *scores: Floats) -> tuple[np.ndarray, ...]:
    """Labels and score arrays on the prompts where every score is finite; ValueError on bad input."""
    y = np.asarray(labels, dtype=int).reshape(-1)
    arrays = [np.asarray(s, dtype=float).reshape(-1) for s in scores]
    for s in arrays:
        if s.shape != y.shape:
            raise ValueError(f"{y.size} labels but {s.size} scores")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 (correct) or 1 (hallucination)")
    keep = np.logical_and.reduce([np.isfinite(s) for s in arrays])
    return (y[keep], *(s[keep] for s in arrays))


def _resamples(y: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(B, n) bootstrap indices of the resamples that hold both classes."""
    idx = np.random.default_rng(seed).integers(0, y.size, (n_boot, y.size))
    n_pos = y[idx].sum(axis=1)
    return idx[(n_pos > 0) & (n_pos < y.size)]


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float]:
    """The (1 - level) / 2 and (1 + level) / 2 percentiles."""
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(values, [tail, 100.0 - tail])
    return float(lo), float(hi)


def auroc(labels: Ints, scores: Floats) -> float:
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


def bootstrap_ci(
    labels: Ints, scores: Floats, n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL
) -> tuple[float, float, int]:
    """(lo, hi, resamples used) of the percentile bootstrap CI of the AUROC."""
    y, s = _clean(labels, scores)
    if y.size == 0 or y.min() == y.max():
        return float("nan"), float("nan"), 0
    idx = _resamples(y, n_boot, seed)
    if idx.shape[0] == 0:
        return float("nan"), float("nan"), 0
    return (*_percentiles(rank_auroc(y[idx], s[idx]), level), int(idx.shape[0]))


def auroc_with_ci(
    labels: Ints, scores: Floats, n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL
) -> AurocResult:
    """AUROC and its bootstrap CI in one result."""
    y, s = _clean(labels, scores)
    lo, hi, used = bootstrap_ci(y, s, n_boot, seed, level)
    return AurocResult(auroc(y, s), lo, hi, int(y.size), int(y.sum()), used)


@dataclass(frozen=True)
class PairedDiff:
    """AUROC(a) - AUROC(b) on the n prompts where both scores are finite, with its paired bootstrap CI."""

    diff: float
    lo: float
    hi: float
    n: int
    n_boot: int

    @property
    def verdict(self) -> str:
        """'better' when the CI lies above 0, 'worse' when below, 'no difference' when it holds 0."""
        if not (np.isfinite(self.lo) and np.isfinite(self.hi)):
            return "not computable"
        return "better" if self.lo > 0 else "worse" if self.hi < 0 else "no difference"


def paired_auroc_diff(
    labels: Ints, scores_a: Floats, scores_b: Floats, n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL
) -> PairedDiff:
    """AUROC(a) - AUROC(b) and the percentile CI of the difference over the same resamples for both."""
    y, a, b = _clean(labels, scores_a, scores_b)
    nan = float("nan")
    if y.size == 0 or y.min() == y.max():
        return PairedDiff(nan, nan, nan, int(y.size), 0)
    diff = float(roc_auc_score(y, a) - roc_auc_score(y, b))
    idx = _resamples(y, n_boot, seed)
    if idx.shape[0] == 0:
        return PairedDiff(diff, nan, nan, int(y.size), 0)
    d = rank_auroc(y[idx], a[idx]) - rank_auroc(y[idx], b[idx])
    return PairedDiff(diff, *_percentiles(d, level), int(y.size), int(idx.shape[0]))


def auprc(labels: Ints, scores: Floats) -> float:
    """Average precision with hallucination (1) the positive class, on the finite scores; NaN with one class."""
    y, s = _clean(labels, scores)
    if y.size == 0 or y.min() == y.max():
        return float("nan")
    return float(average_precision_score(y, s))


def rejection_area(quality: np.ndarray) -> float:
    """Mean over j = 1..n of the mean quality of the first j prompts (ordered most confident first)."""
    return float(np.mean(np.cumsum(quality) / np.arange(1, quality.size + 1)))


def prr(labels: Ints, scores: Floats) -> float:
    """Prediction-rejection ratio (LM-Polygraph ``PredictionRejectionArea`` normalised by oracle and random).

    With quality q = 1 - label (correct = 1), prompts ordered by ascending score (most confident
    first) and PRA(order) = (1/n) sum_{j=1..n} mean(q of the first j prompts) -- the area under the
    curve of the quality kept when rejecting the n - j most uncertain prompts:

        PRR = (PRA(score) - PRA(random)) / (PRA(oracle) - PRA(random))

    where the oracle orders the correct prompts first and PRA(random) is its expectation over
    random orders, mean(q) (LM-Polygraph estimates it from random permutations). 1 = oracle,
    0 = random, < 0 worse than random. Tied scores take their expectation over tie orders: each
    tied prompt counts the mean quality of its tie group (LM-Polygraph leaves the order of ties to
    ``np.argsort``). NaN when only one class is present.
    """
    y, s = _clean(labels, scores)
    if y.size == 0 or y.min() == y.max():
        return float("nan")
    order = np.argsort(s, kind="stable")
    q = 1.0 - y[order].astype(float)
    _, group = np.unique(s[order], return_inverse=True)
    q_tied = (np.bincount(group, weights=q) / np.bincount(group))[group]
    random, oracle = q.mean(), rejection_area(np.sort(q)[::-1])
    return (rejection_area(q_tied) - random) / (oracle - random)


CORRELATIONS = ("pearson", "spearman")


@dataclass(frozen=True)
class CorrelationResult:
    """A correlation of scores with a continuous hallucination label, with its bootstrap CI."""

    method: str  # 'pearson' or 'spearman'
    r: float
    lo: float
    hi: float
    n: int
    n_boot: int  # resamples used (those where both sides vary)


def _row_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pearson's r of each row of two (B, n) arrays."""
    xc = x - x.mean(axis=1, keepdims=True)
    yc = y - y.mean(axis=1, keepdims=True)
    return (xc * yc).sum(axis=1) / np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))


def correlation_with_ci(
    labels: Floats,
    scores: Floats,
    method: str = "pearson",
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
    level: float = LEVEL,
) -> CorrelationResult:
    """Pearson's r or Spearman's rho of scores with a continuous label, on the prompts where both are finite,
    with the percentile bootstrap CI (resamples where either side is constant are skipped)."""
    if method not in CORRELATIONS:
        raise ValueError(f"unknown correlation '{method}': use one of {', '.join(CORRELATIONS)}")
    y = np.asarray(labels, dtype=float).reshape(-1)
    s = np.asarray(scores, dtype=float).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"{y.size} labels but {s.size} scores")
    keep = np.isfinite(y) & np.isfinite(s)
    y, s = y[keep], s[keep]
    nan = float("nan")
    if y.size < 3 or np.ptp(y) == 0 or np.ptp(s) == 0:
        return CorrelationResult(method, nan, nan, nan, int(y.size), 0)
    r = float(pearsonr(s, y)[0] if method == "pearson" else spearmanr(s, y)[0])
    idx = np.random.default_rng(seed).integers(0, y.size, (n_boot, y.size))
    ys, ss = y[idx], s[idx]
    if method == "spearman":
        ys, ss = rankdata(ys, axis=1), rankdata(ss, axis=1)
    varies = (np.ptp(ys, axis=1) > 0) & (np.ptp(ss, axis=1) > 0)
    if not varies.any():
        return CorrelationResult(method, r, nan, nan, int(y.size), 0)
    lo, hi = _percentiles(_row_pearson(ss[varies], ys[varies]), level)
    return CorrelationResult(method, r, lo, hi, int(y.size), int(varies.sum()))


def paired_pearson_diff(
    labels: Floats,
    scores_a: Floats,
    scores_b: Floats,
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
    level: float = LEVEL,
) -> tuple[float, float, float]:
    """Pearson's r(a, labels) - r(b, labels) on the prompts where all three are finite, and the percentile CI of the
    difference over the same prompt resamples for both (resamples where a side is constant are skipped)."""
    y, a, b = (np.asarray(v, dtype=float).reshape(-1) for v in (labels, scores_a, scores_b))
    keep = np.isfinite(y) & np.isfinite(a) & np.isfinite(b)
    y, a, b = y[keep], a[keep], b[keep]
    nan = float("nan")
    if y.size < 3 or min(np.ptp(y), np.ptp(a), np.ptp(b)) == 0:
        return nan, nan, nan
    diff = float(pearsonr(a, y)[0] - pearsonr(b, y)[0])
    idx = np.random.default_rng(seed).integers(0, y.size, (n_boot, y.size))
    ys, as_, bs = y[idx], a[idx], b[idx]
    varies = (np.ptp(ys, axis=1) > 0) & (np.ptp(as_, axis=1) > 0) & (np.ptp(bs, axis=1) > 0)
    if not varies.any():
        return diff, nan, nan
    d = _row_pearson(as_[varies], ys[varies]) - _row_pearson(bs[varies], ys[varies])
    return (diff, *_percentiles(d, level))


ACCURATE, MINOR, MAJOR = 0, 1, 2  # sentence severities, in the order of eval.data.SENTENCE_LABELS
SENTENCE_TASKS = ("nonfact", "nonfact_star", "factual")


def auc_pr(labels: Ints, scores: Floats) -> float:
    """SelfCheckGPT's AUC-PR, ``auc(recall, precision)`` of ``precision_recall_curve`` (positive 1), on the
    finite scores; NaN with one class."""
    y, s = _clean(labels, scores)
    if y.size == 0 or y.min() == y.max():
        return float("nan")
    precision, recall, _ = precision_recall_curve(y, s)
    return float(auc(recall, precision))


def weighted_auc_pr(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise :func:`auc_pr` of the sentences ``y``, ``s`` (n,) each counted ``w`` (B, n) times; every row
    must hold a positive. Cumulative counts at each distinct score, highest first, from (recall 0, precision 1)."""
    order = np.argsort(-s, kind="stable")
    y, s, w = y[order], s[order], np.atleast_2d(w)[:, order]
    ends = np.append(np.flatnonzero(np.diff(s)), s.size - 1)  # the last sentence of each tie group
    tp = np.cumsum(w * y, axis=1)[:, ends].astype(float)
    fp = np.cumsum(w * (1 - y), axis=1)[:, ends].astype(float)
    seen = tp + fp
    precision = np.divide(tp, seen, out=np.ones_like(tp), where=seen > 0)  # nothing drawn yet: the start point
    start = np.ones((tp.shape[0], 1))
    recall = np.hstack([np.zeros_like(start), tp / tp[:, -1:]])
    precision = np.hstack([start, precision])
    return (np.diff(recall, axis=1) * (precision[:, 1:] + precision[:, :-1]) / 2.0).sum(axis=1)


def passage_weights(passage: np.ndarray, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> np.ndarray:
    """(B, n) times each sentence is drawn when its passages are resampled with replacement."""
    ids, which = np.unique(passage, return_inverse=True)
    draws = np.random.default_rng(seed).integers(0, ids.size, (n_boot, ids.size))
    counts = np.bincount((draws + ids.size * np.arange(n_boot)[:, None]).ravel(), minlength=n_boot * ids.size)
    return counts.reshape(n_boot, ids.size)[:, which]


@dataclass(frozen=True)
class AucPr:
    """AUC-PR of one sentence-level task with its bootstrap CI over passages, on the sentences with a score."""

    auc_pr: float
    lo: float
    hi: float
    random: float  # the positive share of the scored sentences: a random score's AUC-PR
    n: int  # sentences scored
    n_pos: int
    n_passages: int  # passages with a scored sentence
    n_unscored: int  # sentences of the task without a score, left out
    n_boot: int  # resamples used (those holding both classes)


def auc_pr_with_ci(
    labels: np.ndarray,
    scores: np.ndarray,
    passage: np.ndarray,
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
    level: float = LEVEL,
) -> AucPr:
    """:func:`auc_pr` with the percentile bootstrap CI over passages; NaN scores are left out and counted."""
    scores = np.asarray(scores, dtype=float)
    scored = np.isfinite(scores)
    y, s, p = np.asarray(labels, dtype=int)[scored], scores[scored], np.asarray(passage)[scored]
    n_pos, nan = int(y.sum()), float("nan")
    random = n_pos / y.size if y.size else nan
    counts = (int(y.size), n_pos, int(np.unique(p).size), int((~scored).sum()))
    if n_pos in (0, y.size):
        return AucPr(nan, nan, nan, random, *counts, 0)
    w = passage_weights(p, n_boot, seed)
    pos = w @ y
    w = w[(pos > 0) & (pos < w.sum(axis=1))]
    lo, hi = _percentiles(weighted_auc_pr(y, s, w), level) if w.shape[0] else (nan, nan)
    return AucPr(auc_pr(y, s), lo, hi, random, *counts, int(w.shape[0]))


def sentence_task(
    severity: np.ndarray, scores: np.ndarray, passage: np.ndarray, task: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One task's sentences: (0/1 labels, the score that ranks its positives first, passage of each)."""
    if task == "nonfact":
        return (severity != ACCURATE).astype(int), scores, passage
    if task == "factual":
        return (severity == ACCURATE).astype(int), -scores, passage
    if task != "nonfact_star":
        raise ValueError(f"unknown sentence task '{task}': use one of {', '.join(SENTENCE_TASKS)}")
    _, which = np.unique(passage, return_inverse=True)
    wholly_major = np.bincount(which, weights=severity != MAJOR) == 0
    keep = ~wholly_major[which]
    return (severity[keep] == MAJOR).astype(int), scores[keep], passage[keep]


@dataclass(frozen=True)
class SentenceAucPr:
    """SelfCheckGPT's three sentence-level AUC-PRs of one score."""

    nonfact: AucPr
    nonfact_star: AucPr
    factual: AucPr


def sentence_auc_pr(
    severity: Ints, scores: Floats, passage: Ints, n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL
) -> SentenceAucPr:
    """NonFact, NonFact* and Factual AUC-PR of sentence scores (NaN: unscored) with severities and passage ids."""
    v = np.asarray(severity, dtype=int).reshape(-1)
    s = np.asarray(scores, dtype=float).reshape(-1)
    p = np.asarray(passage).reshape(-1)
    if not v.shape == s.shape == p.shape:
        raise ValueError(f"{v.size} severities, {s.size} scores and {p.size} passage ids")
    if not np.isin(v, (ACCURATE, MINOR, MAJOR)).all():
        raise ValueError("severities must be 0 (accurate), 1 (minor) or 2 (major inaccurate)")
    return SentenceAucPr(
        *(auc_pr_with_ci(*sentence_task(v, s, p, task), n_boot, seed, level) for task in SENTENCE_TASKS)
    )


def weighted_auroc(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise AUROC of the items ``y``, ``s`` (n,) each counted ``w`` (B, n) times (ties count a half): the
    weighted share of (positive, negative) pairs the score orders right; NaN for a row without both classes.

    >>> float(weighted_auroc(np.array([1, 0, 1]), np.array([0.9, 0.5, 0.1]), np.ones((1, 3)))[0])
    0.5
    >>> float(weighted_auroc(np.array([1, 0, 1]), np.array([0.9, 0.5, 0.1]), np.array([[1, 1, 0]]))[0])
    1.0
    """
    order = np.argsort(s, kind="stable")
    y, s, w = y[order], s[order], np.atleast_2d(w)[:, order].astype(float)
    group = np.concatenate([[0], np.cumsum(np.diff(s) != 0)])  # tie groups, lowest score first
    n_groups = int(group[-1]) + 1 if s.size else 0
    pos = np.zeros((w.shape[0], n_groups))
    neg = np.zeros((w.shape[0], n_groups))
    np.add.at(pos.T, group, (w * y).T)
    np.add.at(neg.T, group, (w * (1 - y)).T)
    below = np.cumsum(neg, axis=1) - neg  # negatives strictly below each group
    pairs = pos.sum(axis=1) * neg.sum(axis=1)
    right = (pos * (below + 0.5 * neg)).sum(axis=1)
    return np.divide(right, pairs, out=np.full(pairs.shape, np.nan), where=pairs > 0)


def grouped_auroc_ci(
    labels: Ints, scores: Floats, groups: np.ndarray, n_boot: int = N_BOOTSTRAP, seed: int = SEED, level: float = LEVEL
) -> AurocResult:
    """AUROC of the finite scores with its percentile bootstrap CI over ``groups`` (an answer's claims resampled
    together, ``passage_weights``)."""
    keep = np.isfinite(np.asarray(scores, dtype=float))
    y, s, g = np.asarray(labels, dtype=int)[keep], np.asarray(scores, dtype=float)[keep], np.asarray(groups)[keep]
    if y.size == 0 or y.min() == y.max():
        return AurocResult(float("nan"), float("nan"), float("nan"), int(y.size), int(y.sum()), 0)
    boots = weighted_auroc(y, s, passage_weights(g, n_boot, seed))
    boots = boots[np.isfinite(boots)]
    return AurocResult(auroc(y, s), *_percentiles(boots, level), int(y.size), int(y.sum()), int(boots.size))


def grouped_paired_diff(
    labels: Ints, scores_a: Floats, scores_b: Floats, groups: np.ndarray, n_boot: int = N_BOOTSTRAP, seed: int = SEED
) -> PairedDiff:
    """AUROC(a) - AUROC(b) on the items both score, with its percentile CI over the same group resamples."""
    a, b = np.asarray(scores_a, dtype=float), np.asarray(scores_b, dtype=float)
    keep = np.isfinite(a) & np.isfinite(b)
    y, a, b, g = np.asarray(labels, dtype=int)[keep], a[keep], b[keep], np.asarray(groups)[keep]
    nan = float("nan")
    if y.size == 0 or y.min() == y.max():
        return PairedDiff(nan, nan, nan, int(y.size), 0)
    w = passage_weights(g, n_boot, seed)
    d = weighted_auroc(y, a, w) - weighted_auroc(y, b, w)
    d = d[np.isfinite(d)]
    return PairedDiff(auroc(y, a) - auroc(y, b), *_percentiles(d, LEVEL), int(y.size), int(d.size))
