"""Fitting the combined verdict: heads over the signals bbwd computes, cross-validated by prompt.

A **table** holds one row per scored answer (or sentence): the value of each member (NaN where the row has
none), a 0/1 label, a weight, the prompt it belongs to and the data set it came from. A continuous label h in
[0, 1] (WikiBio's ``human_score``: the share of inaccurate sentences, minor counting half) enters as two rows
of the same prompt, labelled 1 with weight h and 0 with weight 1 - h: the fitted p then estimates h.

A **head** is fitted on the rows that have all its members:

    z = coef . (x - mean) / scale + intercept,     p = calibrator(z),     flag = p >= threshold

``combiner="logistic"``: coef and intercept of an L2-regularised logistic regression (C = 1) on the
standardised members; ``combiner="mean"``: every coef 1 / n_members (the members' standardised mean, a
fixed-weight rule with nothing fitted but the scales; a member constant on the rows gets 0); ``combiner="select"``:
the mean of the members kept by forward selection, each step adding the member that most raises the mean over the
data sets of the weighted AUROC within each (``forward_select``). The calibrator (isotonic or Platt) is fitted on
the out-of-fold z of every row and chosen by the log-loss of nested out-of-fold probabilities; the threshold is the
smallest whose out-of-fold false-positive rate is at most the target. Every fold is
``StratifiedGroupKFold(folds, shuffle=True, random_state=seed)`` over the prompts, so no prompt is on both sides of
a split.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from scipy.stats import beta
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import confusion_matrix, log_loss, roc_auc_score, roc_curve
from sklearn.model_selection import StratifiedGroupKFold

from blackbox_wd.calibration.heads import CALIBRATORS, Head, Isotonic, OperatingPoint, Platt, ScoreModel
from blackbox_wd.calibration.members import KINDS
from blackbox_wd.errors import BBWDError

COMBINERS = ("logistic", "mean", "select")
# the answer heads' combiner unless told otherwise: chosen leave-one-set-out on the six recorded dev sets
# (bench/RESULTS.md, "The verdict on a data set it never saw")
COMBINER = "mean"
MIN_SETS = 3  # data sets that can measure an FPR (``measuring_sets``) a head's rows need for its threshold to be
# chosen leave-one-set-out (``by_set_p``); with fewer, it is chosen on the nested out-of-fold p
RANGE_ROWS = 20  # a set's FPR enters the printed range when it has this weight of correct answers (rates of fewer
# are noise: a set with 3 short answers among passages flags 0% or 100% of them); its rows count in the pooled FPR
C = 1.0  # inverse L2 strength of the logistic combiner, on standardised members


@dataclass(frozen=True)
class CrossValidation:
    """How a head is fitted and checked: its combiner, and the folds (grouped by prompt) of every cross-validation.

    Parameters
    ----------
    combiner : {"logistic", "mean", "select"}, default=COMBINER
        How the head combines its standardised members (``fit_linear``).
    folds : int, default=5
        Folds of every cross-validation, >= 2; each class needs rows in at least ``2 * folds`` prompts.
    seed : int, default=0
        The folds' shuffle seed.
    target_fpr : float, default=0.1
        The threshold is the smallest whose out-of-fold false-positive rate is at most this.
    """

    combiner: str = COMBINER
    folds: int = 5
    seed: int = 0
    target_fpr: float = 0.1


@dataclass
class Table:
    """Rows to fit on: members (n,) each (NaN: missing), labels, weights, prompt ids and data sets."""

    members: dict[str, np.ndarray]
    y: np.ndarray  # 0/1
    w: np.ndarray  # weights (1, or h and 1 - h for a continuous label)
    groups: np.ndarray  # prompt id of each row
    source: np.ndarray  # data set of each row
    target: np.ndarray = field(default_factory=lambda: np.zeros(0))  # the label as given (0/1 or h), per row
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=str))  # each row's answer kind ("": none)

    def rows(self, names: Sequence[str]) -> np.ndarray:
        """Mask of the rows that have every member of ``names``."""
        return np.all([np.isfinite(self.members[n]) for n in names], axis=0)

    def matrix(self, names: Sequence[str]) -> np.ndarray:
        """(n, len(names)) values of the members."""
        return np.column_stack([self.members[n] for n in names])


def table_from(
    members: Mapping[str, Sequence[float | None]],
    labels: Sequence[float],
    groups: Sequence[str],
    source: Sequence[str],
    kinds: Sequence[str] | None = None,
) -> Table:
    """A table from one entry per answer (``kinds``: each answer's kind, ``members.answer_kind``; None: none); a label
    strictly between 0 and 1 becomes two weighted rows."""
    h = np.asarray(labels, dtype=float)
    if not np.all((h >= 0) & (h <= 1)):
        raise BBWDError("labels must be in [0, 1] (1 = hallucination)")
    soft = (h > 0) & (h < 1)
    idx = np.concatenate([np.arange(h.size), np.flatnonzero(soft)])
    y = np.concatenate([np.where(soft, 1.0, h), np.zeros(int(soft.sum()))]).astype(int)
    w = np.concatenate([np.where(soft, h, 1.0), 1.0 - h[soft]])
    cols = {
        name: np.array([np.nan if v is None else v for v in vals], dtype=float)[idx] for name, vals in members.items()
    }
    kind = np.asarray([""] * h.size if kinds is None else list(kinds), dtype=str)[idx]
    return Table(cols, y, w, np.asarray(groups)[idx], np.asarray(source)[idx], h[idx], kind)


def group_folds(y: np.ndarray, groups: np.ndarray, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) index pairs of ``StratifiedGroupKFold``: no prompt on both sides.

    The split is remembered for its inputs (``_FOLDS``): a calibration's heads split the same rows again and again
    (each head's folds, its nested folds, each data set left out), and scikit-learn's greedy assignment of the groups
    is most of a fit's time on thousands of prompts (bench/RESULTS.md: the API file's fit on twelve sets)."""
    key = hashlib.blake2b(b"".join([np.asarray(y).tobytes(), np.asarray(groups).astype(str).tobytes()]), digest_size=16)
    memo = (key.hexdigest(), y.size, folds, seed)
    if memo not in _FOLDS:
        splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
        if len(_FOLDS) >= 512:
            _FOLDS.pop(next(iter(_FOLDS)))
        _FOLDS[memo] = list(splitter.split(np.zeros(y.size), y, groups))
    return _FOLDS[memo]


_FOLDS: dict[tuple[str, int, int, int], list[tuple[np.ndarray, np.ndarray]]] = {}  # group_folds' cache


def per_source_auroc(z: np.ndarray, y: np.ndarray, w: np.ndarray, source: np.ndarray) -> float:
    """Mean over the data sets of the weighted AUROC of z within each (a set with one class left out)."""
    values = [
        roc_auc_score(y[at], z[at], sample_weight=w[at])
        for s in np.unique(source)
        if np.unique(y[(at := source == s)]).size == 2
    ]
    return float(np.mean(values))


def forward_select(Z: np.ndarray, y: np.ndarray, w: np.ndarray, source: np.ndarray) -> list[int]:
    """Members for the ``select`` combiner: from none, add the standardised member whose entry most raises
    :func:`per_source_auroc` of the members' mean; stop when none raises it."""
    chosen: list[int] = []
    best = 0.5
    while len(chosen) < Z.shape[1]:
        gains = {
            j: per_source_auroc(Z[:, [*chosen, j]].mean(axis=1), y, w, source)
            for j in range(Z.shape[1])
            if j not in chosen
        }
        j = max(gains, key=gains.__getitem__)
        if gains[j] <= best:
            break
        chosen, best = [*chosen, j], gains[j]
    return chosen


def fit_linear(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, combiner: str, source: np.ndarray | None = None
) -> tuple[np.ndarray, ...]:
    """(mean, scale, coef, intercept) of the combined score z on rows X (``source``: each row's data set, for
    the ``select`` combiner; None: one set)."""
    mean, scale = X.mean(axis=0), X.std(axis=0)
    varies = scale > 0  # a member constant on the rows says nothing: no combiner weighs it
    scale = np.where(varies, scale, 1.0)
    Z = (X - mean) / scale
    if combiner == "mean":
        return mean, scale, varies / max(int(varies.sum()), 1), np.zeros(1)
    if combiner == "select":
        chosen = forward_select(Z, y, w, np.zeros(y.size) if source is None else source)
        coef = np.zeros(X.shape[1])
        coef[chosen] = 1.0 / max(len(chosen), 1)
        return mean, scale, coef, np.zeros(1)
    if combiner != "logistic":
        raise BBWDError(f"unknown combiner '{combiner}': use one of {', '.join(COMBINERS)}")
    lr = LogisticRegression(C=C).fit(Z, y, sample_weight=w)
    return mean, scale, lr.coef_[0], lr.intercept_


def decision(params: tuple[np.ndarray, ...], X: np.ndarray) -> np.ndarray:
    """z of rows X under (mean, scale, coef, intercept)."""
    mean, scale, coef, intercept = params
    return ((X - mean) / scale) @ coef + float(intercept[0])


def fit_calibrator(z: np.ndarray, y: np.ndarray, w: np.ndarray, method: str) -> Isotonic | Platt:
    """p(z): isotonic (clipped beyond the fitted points) or Platt (a nearly unregularised 1-d logistic fit)."""
    if method == "isotonic":
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0).fit(z, y, sample_weight=w)
        return Isotonic(tuple(iso.X_thresholds_.tolist()), tuple(iso.y_thresholds_.tolist()))
    lr = LogisticRegression(C=1e6).fit(z.reshape(-1, 1), y, sample_weight=w)
    return Platt(-float(lr.coef_[0, 0]), -float(lr.intercept_[0]))


def out_of_fold_z(
    X: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    groups: np.ndarray,
    combiner: str,
    folds: int,
    seed: int,
    source: np.ndarray,
) -> np.ndarray:
    """Each row's z from the linear part fitted without its prompt."""
    z = np.empty(y.size)
    for train, test in group_folds(y, groups, folds, seed):
        z[test] = decision(fit_linear(X[train], y[train], w[train], combiner, source[train]), X[test])
    return z


@dataclass
class HeadFit:
    """A fitted head and its out-of-fold figures on the rows that have its members."""

    head: Head  # its ``kind``: the answers it was fitted on and judges (None: every answer)
    rows: np.ndarray  # mask of the table's rows it was fitted on
    z: np.ndarray  # out-of-fold combined score of those rows
    p: np.ndarray  # nested out-of-fold probability of the chosen calibrator
    log_loss: dict[str, float]  # out-of-fold log-loss of each calibrator tried


def fit_head(
    table: Table,
    members: Sequence[str],
    cv: CrossValidation = CrossValidation(),
    methods: Sequence[str] = CALIBRATORS,
    kind: str | None = None,
) -> HeadFit:
    """Fit one head over ``members`` on the rows that have them (see the module docstring).

    Parameters
    ----------
    table : Table
        The rows.
    members : sequence of str
        The head's members.
    cv : CrossValidation, default=CrossValidation()
        Its combiner and folds.
    methods : sequence of str, default=CALIBRATORS
        The calibrators tried; the one of lower nested out-of-fold log-loss is kept.
    kind : str or None, default=None
        Fit on the rows of this answer kind only (``Table.kind``), and judge that kind only; None: every row.

    Returns
    -------
    fit : HeadFit

    Raises
    ------
    CannotFlag
        No calibrator tried gives a threshold that flags (``can_flag``): such a head is never written.
    """
    combiner, folds, seed, target_fpr = cv.combiner, cv.folds, cv.seed, cv.target_fpr
    rows = table.rows(members) & (True if kind is None else table.kind == kind)
    X, y, w, g = table.matrix(members)[rows], table.y[rows], table.w[rows], table.groups[rows]
    src = table.source[rows]
    check_rows(y, g, folds, members)
    probs: dict[str, np.ndarray] = {m: np.empty(y.size) for m in methods}
    for train, test in group_folds(y, g, folds, seed):
        params = fit_linear(X[train], y[train], w[train], combiner, src[train])
        inner = out_of_fold_z(X[train], y[train], w[train], g[train], combiner, folds, seed, src[train])
        for m in methods:
            probs[m][test] = fit_calibrator(inner, y[train], w[train], m)(decision(params, X[test]))
    losses = {m: weighted_log_loss(y, p, w) for m, p in probs.items()}
    z = out_of_fold_z(X, y, w, g, combiner, folds, seed, src)
    for best in sorted(methods, key=losses.__getitem__):  # the calibrator of lower log-loss that can flag
        point = operating_point(y, probs[best], w, target_fpr)
        if len(measuring_sets(y, w, src)) >= MIN_SETS:  # the threshold where the FPR holds on a set left out
            unseen = by_set_p(X, y, w, g, src, best, cv)
            point = operating_point(y, unseen, w, target_fpr, src)
        if can_flag(point):
            break
    else:
        raise CannotFlag(
            f"the head over {', '.join(members)}{'' if kind is None else f' ({kind})'} cannot flag at FPR "
            f"{target_fpr:g}: under every calibrator ({', '.join(methods)}) its highest p holds more than that share "
            "of the correct answers"
        )
    mean, scale, coef, intercept = fit_linear(X, y, w, combiner, src)
    model = ScoreModel(
        features=tuple(members),
        mean=tuple(mean.tolist()),
        scale=tuple(scale.tolist()),
        coef=tuple(coef.tolist()),
        intercept=float(intercept[0]),
        calibrator=fit_calibrator(z, y, w, best),
    )
    return HeadFit(Head(model, point, kind), rows, z, probs[best], losses)


class CannotFlag(BBWDError):
    """A head whose threshold at the target FPR flags nothing under every calibrator tried (``can_flag``)."""


def can_flag(point: OperatingPoint) -> bool:
    """Whether a threshold can flag a row: below 1 and flagging some hallucinations of its data (TPR above 0).

    >>> can_flag(OperatingPoint("target_fpr", 0.1, 1.0, 0.0, 0.0, 0.0, 0.0))
    False
    """
    return point.threshold < 1.0 and point.tpr > 0.0


def by_set_p(
    X: np.ndarray, y: np.ndarray, w: np.ndarray, g: np.ndarray, src: np.ndarray, method: str, cv: CrossValidation
) -> np.ndarray:
    """Each row's p from the head fitted without its data set (leave one set out): the linear part on the other
    sets (``cv.combiner``), the calibrator ``method`` on their out-of-fold z (``cv.folds`` grouped by prompt)."""
    combiner, folds, seed = cv.combiner, cv.folds, cv.seed
    p = np.empty(y.size)
    for s in np.unique(src):
        test, train = src == s, src != s
        params = fit_linear(X[train], y[train], w[train], combiner, src[train])
        inner = out_of_fold_z(X[train], y[train], w[train], g[train], combiner, folds, seed, src[train])
        p[test] = fit_calibrator(inner, y[train], w[train], method)(decision(params, X[test]))
    return p


def measuring_sets(y: np.ndarray, w: np.ndarray, source: np.ndarray) -> list[np.ndarray]:
    """The row masks of the data sets that can measure an FPR: those with ``RANGE_ROWS`` of correct answers (weight).

    >>> [int(m.sum()) for m in measuring_sets(np.zeros(45), np.ones(45), np.array(["a"] * 20 + ["b"] * 20 + ["c"] * 5))]
    [20, 20]
    """
    return [at for s in np.unique(source) for at in [source == s] if np.sum(w[at] * (y[at] == 0)) >= RANGE_ROWS]


def weighted_log_loss(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    """Weighted log-loss of probabilities p (clipped to [1e-12, 1 - 1e-12])."""
    return float(log_loss(y, np.clip(p, 1e-12, 1 - 1e-12), sample_weight=w, labels=[0, 1]))


def enough_prompts(t: Table, rows: np.ndarray, folds: int) -> bool:
    """Whether the ``rows`` (a mask of ``t``'s) hold each class in at least ``2 * folds`` prompts, as a head fitted
    on them needs (``check_rows``)."""
    return all(np.unique(t.groups[rows & (t.y == c)]).size >= 2 * folds for c in (0, 1))


def check_rows(y: np.ndarray, groups: np.ndarray, folds: int, members: Sequence[str]) -> None:
    """Raise BBWDError unless each class has rows in at least ``2 * folds`` prompts (nested folds need them)."""
    for label in (0, 1):
        prompts = np.unique(groups[y == label]).size
        if prompts < 2 * folds:
            raise BBWDError(
                f"the rows with {', '.join(members)} have {prompts} prompts labelled {label}; {folds}-fold "
                f"cross-validation needs at least {2 * folds} (lower --folds or label more prompts)"
            )


def operating_point(
    y: np.ndarray, p: np.ndarray, w: np.ndarray, target_fpr: float, source: np.ndarray | None = None
) -> OperatingPoint:
    """The smallest threshold on p whose (weighted) false-positive rate is at most ``target_fpr``, and what it
    gives on (y, p, w); with ``source`` (p of each row from a head fitted without its set), also the range of the
    FPR and TPR over the sets at that threshold (those with ``RANGE_ROWS`` of correct answers)."""
    if not 0 <= target_fpr < 1:
        raise BBWDError(f"target FPR must be in [0, 1) (got {target_fpr})")
    fpr, _, thresholds = roc_curve(y, p, sample_weight=w, drop_intermediate=False)
    ok = np.flatnonzero((fpr <= target_fpr) & np.isfinite(thresholds))
    threshold = float(thresholds[ok[-1]]) if ok.size else 1.0
    flagged = (p >= threshold).astype(int)
    tn, fp, fn, tp = confusion_matrix(y, flagged, labels=[0, 1], sample_weight=w).ravel()
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    ranges: dict[str, Any] = {}
    if source is not None:
        sets = measuring_sets(y, w, source)
        rates = [rates_at(y[at], p[at] >= threshold, w[at]) for at in sets] or [rates_at(y, p >= threshold, w)]
        ranges = {
            "rule": "target_fpr_by_set",
            "fpr_range": (min(r[0] for r in rates), max(r[0] for r in rates)),
            "tpr_range": (min(r[1] for r in rates), max(r[1] for r in rates)),
        }
    return OperatingPoint(
        rule=ranges.pop("rule", "target_fpr"),
        target_fpr=target_fpr,
        threshold=threshold,
        fpr=float(fp / (fp + tn)) if fp + tn else 0.0,
        tpr=float(recall),
        precision=float(precision),
        f1=float(f1),
        **ranges,
        fpr_interval=fpr_interval(float(fp), float(fp + tn)),
        negatives=float(fp + tn),
    )


def fpr_interval(flagged: float, negatives: float, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial (Clopper-Pearson) interval of a false-positive rate: ``flagged`` of ``negatives`` correct
    answers (weights: the beta quantiles take real counts), at confidence ``level``.

    >>> [round(v, 4) for v in fpr_interval(5, 50)]
    [0.0333, 0.2181]
    >>> fpr_interval(0, 0)
    (0.0, 1.0)
    """
    tail = (1 - level) / 2
    lo = float(beta.ppf(tail, flagged, negatives - flagged + 1)) if flagged > 0 else 0.0
    hi = float(beta.ppf(1 - tail, flagged + 1, negatives - flagged)) if flagged < negatives else 1.0
    return lo, hi


def labels_to_halve(flagged: float, negatives: float, share_correct: float, level: float = 0.95) -> int:
    """About how many more labelled rows, at ``share_correct`` correct answers among them, halve the width of the
    FPR's interval (``fpr_interval``) at the same rate; 0 without a correct answer to measure it on.

    >>> labels_to_halve(5, 50, 0.5)  # 50 correct of 100 labelled: 133 more correct ones
    266
    """
    if negatives <= 0 or share_correct <= 0:
        return 0
    rate, (lo, hi) = flagged / negatives, fpr_interval(flagged, negatives, level)

    def halved(n: float) -> bool:
        a, b = fpr_interval(rate * n, n, level)
        return b - a <= (hi - lo) / 2

    small, large = negatives, 16 * negatives  # the width falls about as 1 / sqrt(n): 4x halves it
    while large - small > 1:
        mid = (small + large) / 2
        small, large = (small, mid) if halved(mid) else (mid, large)
    return int(math.ceil((large - negatives) / share_correct))


def rates_at(y: np.ndarray, flagged: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """(FPR, TPR) of the flags (weighted); 0 for a rate with no rows."""
    neg, pos = np.sum(w * (y == 0)), np.sum(w * (y == 1))
    fpr = float(np.sum(w * (y == 0) * flagged) / neg) if neg else 0.0
    tpr = float(np.sum(w * (y == 1) * flagged) / pos) if pos else 0.0
    return fpr, tpr


V = TypeVar("V")  # a head's value of a prompt


def first_by_prompt(heads: Iterable[tuple[Iterable[str], Iterable[V]]]) -> dict[str, V]:
    """Each prompt's value from the first head that judges it: ``heads`` gives, most members first, each head's
    prompts (one per row it judged; a prompt's rows share a value) and its values for them.

    >>> first_by_prompt([(["a", "b"], [1, 2]), (["b", "c"], [3, 4])])
    {'a': 1, 'b': 2, 'c': 4}
    """
    out: dict[str, V] = {}
    for groups, values in heads:
        for g, v in zip(groups, values, strict=True):
            out.setdefault(g, v)
    return out


def heads_on(t: Table, sets: Sequence[Sequence[str]], kind: str | None = None) -> list[tuple[str, ...]]:
    """``sets`` less the members no row of ``t`` (of the answer ``kind``, when given) has (a ``-k auto`` round's rows
    have no ``sentence_verdict``, a passage no short-answer member), each set once and none empty."""
    within = True if kind is None else t.kind == kind
    return [h for h in dict.fromkeys(tuple(m for m in s if (t.rows([m]) & within).any()) for s in sets) if h]


def kinds_to_fit(t: Table, folds: int) -> list[str]:
    """The answer kinds (``members.KINDS``, in that order) whose rows hold each class in at least ``2 * folds``
    prompts: each gets heads of its own; none when the rows are of one kind (the heads over every row are its)."""
    if np.unique(t.kind).size < 2:
        return []
    return [kind for kind in KINDS if enough_prompts(t, t.kind == kind, folds)]


def head_sets(available: Sequence[str], optional: Sequence[Sequence[str]]) -> list[tuple[str, ...]]:
    """The heads to fit, most members first: ``available`` less each combination of the ``optional`` groups
    (members a result may lack), ending with the smallest; duplicates dropped.

    >>> for head in head_sets(["avg_wd", "answer_wd", "lne"], [["answer_wd"], ["lne"]]):
    ...     print(head)
    ('avg_wd', 'answer_wd', 'lne')
    ('avg_wd', 'lne')
    ('avg_wd', 'answer_wd')
    ('avg_wd',)
    """
    out: list[tuple[str, ...]] = []
    for mask in range(2 ** len(optional)):
        drop = {m for i, group in enumerate(optional) if mask >> i & 1 for m in group}
        head = tuple(m for m in available if m not in drop)
        if head and head not in out:
            out.append(head)
    return out
