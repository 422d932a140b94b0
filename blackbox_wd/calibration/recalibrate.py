"""A calibration's map and threshold refitted on a user's own labelled rows (``bbwd calibrate`` with few labels).

With few labels a full fit (``fit.fit_calibration``: scales, calibrators and thresholds of every head) is noisy. Here
the base calibration (the one that judged the rows: the shipped file, or any) keeps its heads' members and linear
parts, and only the map from its probability to the user's moves:

    p' = g(p) = expit(a logit(p) + b)      p: the base calibration's fitted p of a row, clipped to [1e-4, 1 - 1e-4]

``mode="prior"`` refits b alone (a = 1: the base's likelihood ratios kept, the base rate moved, as
``heads.shift_prior`` moves it); ``mode="map"`` refits a and b (a Platt map on logit p, the slope too). g is composed
into every answer head's calibrator (a Platt calibrator stays Platt, exactly; an isotonic one keeps its points, each
level mapped), so a result is judged by the same head as before and ranked as before. The threshold of the heads
that judged the labelled rows (those of their K) is chosen on the rows: the smallest whose FPR on them is at most the
target, printed with its exact binomial interval from the number of correct rows (``combine.fpr_interval``). The
heads of the other K (``-k auto``'s rounds) keep their flags (threshold and band edges mapped by g); the sentence and
claim heads are kept as they are (the labels are the answers').

``mode="map"`` first lets the labels choose which members the verdict reads (``choose``): where a candidate ranks the
labelled rows clearly better than the base's heads, it becomes the first head of every kind at the rows' K (its
standardised mean under a Platt map fitted on the rows), ahead of the base's heads, mapped by g, for rows without its
members.

Rows that lack members the base's heads read for rows like them are refused (``check_labelled_rows``): g would be fitted
on a head that scored rows never fall to. The refit's out-of-fold log-loss and Brier score (``out_of_fold``, ``FOLDS``
folds of the rows) are stored in ``FittedOn.cv`` (``log_loss_oof``, ``brier_oof``), with the 95% bootstrap interval of
its log-loss less that of the labelled base rate out of the same folds (``log_loss_gap_low``, ``log_loss_gap_high``) and
the labelled AUROC of the verdict with its interval (``auroc``, ``auroc_low``, ``auroc_high``): ``bbwd calibrate``
refuses a refit that judges worse than the rows' base rate beyond that interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.special import expit, logit
from sklearn.metrics import roc_auc_score

from blackbox_wd import __version__
from blackbox_wd.adaptive import Settle
from blackbox_wd.calibration.choose import CANDIDATES, Candidate, MemberChoice, aurocs, choose, rate, resample_counts
from blackbox_wd.calibration.combine import operating_point, weighted_log_loss
from blackbox_wd.calibration.heads import FittedOn, Head, Isotonic, OperatingPoint, Platt, RoundHeads, ScoreModel
from blackbox_wd.calibration.members import ANSWER_LOGPROB_MEMBERS, ANSWER_MEMBERS, KINDS, answer_kind, member_value
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONView
from blackbox_wd.settings import calibration_fingerprint, covered_settings

MODES = ("prior", "map")
CLIP = 1e-4  # p is read in [CLIP, 1 - CLIP] before the logit: an isotonic head's p can be 0 or 1
MIN_CLASS = 10  # labelled rows of each class a refit needs (a threshold at FPR 0.1 needs 10 correct rows)
FOLDS = 5  # the refit's out-of-fold log-loss and Brier score (``out_of_fold``), in ``FittedOn.cv``
MIN_SLOPE = 0.01  # a map's slope where the labels show no ranking (``fit_map``): p' within 0.1 in logit of the rate
# members a scored row may lack and still be judged as bbwd judges it: LNE and the answer's log-prob members (no
# log-prob pass), the fixed-bandwidth EigenWD (a teacher without a reference bandwidth)
OPTIONAL_MEMBERS = ("lne", "log_eigen_wd_fixed", *ANSWER_LOGPROB_MEMBERS)


def fit_map(p: np.ndarray, y: np.ndarray, w: np.ndarray, mode: str) -> tuple[float, float]:
    """(a, b) of g on the rows' base p and labels (weighted log-loss); ``mode="prior"``: a = 1, b alone. A map
    whose fitted slope is not positive (the labels show no ranking, or rank against the base) takes the slope
    ``MIN_SLOPE`` and b fitted with it: p' near the labelled base rate on every row, the base's order kept (a slope of
    1, the prior's, would keep the base's spread of p, which such labels say is confidently wrong).

    >>> a, b = fit_map(np.full(4, 0.5), np.array([0, 1, 1, 1]), np.ones(4), "prior")  # b moves p to 3 of 4
    >>> a, round(b, 3), round(float(np.log(3)), 3)
    (1.0, 1.099, 1.099)
    """
    if mode not in MODES:
        raise BBWDError(f"unknown refit mode '{mode}': use one of {', '.join(MODES)}")
    x = logit(np.clip(p, CLIP, 1 - CLIP))
    if mode == "map":
        a, b = _newton(np.column_stack([x, np.ones_like(x)]), np.zeros(0), y, w)
        if a > 0:
            return float(a), float(b)
        (b,) = _newton(np.ones((x.size, 1)), MIN_SLOPE * x, y, w)
        return MIN_SLOPE, float(b)
    (b,) = _newton(np.ones((x.size, 1)), x, y, w)
    return 1.0, float(b)


def _newton(X: np.ndarray, offset: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float = 1e-6) -> np.ndarray:
    """The weighted logistic regression of y on X (with a fixed ``offset`` added to the logit; empty: none), by
    Newton's method with a tiny ridge (scikit-learn's ``C = 1e6``): one or two parameters, fitted in microseconds."""
    theta = np.zeros(X.shape[1])
    off = offset if offset.size else 0.0
    for _ in range(100):
        p = expit(X @ theta + off)
        grad = X.T @ (w * (y - p)) - ridge * theta
        hess = (X * (w * p * (1 - p))[:, None]).T @ X + ridge * np.eye(theta.size)
        step = np.linalg.solve(hess, grad)
        theta = theta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return theta


def entries(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row of each entry, y, w): a label h strictly between 0 and 1 as two entries, 1 of weight h and 0 of weight
    1 - h (as ``combine.table_from`` counts it); a NaN label (a row not labelled) as none.

    >>> [v.tolist() for v in entries(np.array([1.0, 0.25, np.nan]))]
    [[0, 1, 1], [1, 1, 0], [1.0, 0.25, 0.75]]
    """
    h = np.asarray(labels, dtype=float)
    known = np.isfinite(h)
    soft = known & (h > 0) & (h < 1)
    of = np.concatenate([np.flatnonzero(known), np.flatnonzero(soft)])
    y = np.concatenate([np.where(soft, 1.0, h)[known], np.zeros(int(soft.sum()))]).astype(int)
    w = np.concatenate([np.where(soft, h, 1.0)[known], 1.0 - h[soft]])
    return of, y, w


def row_lacks(base: Calibration, row: JSONView, k: int) -> tuple[str, ...]:
    """The members a labelled row lacks that the heads of ``base`` read for a row like it: of the first head (of
    the row's K and kind of answer, as ``Calibration.head_for`` orders them) whose missing members are all ones every
    scored row has, those missing; a row may lack the judged answer's members (it has none), those read as missing
    on a passage (``short_only``), DSE on a passage (``bbwd eval`` clusters no passages) and ``OPTIONAL_MEMBERS``. Empty
    when the row has them all.

    A row that lacks such a member is judged by a head that a row scored by bbwd never falls to (the rows of
    ``avg_wd`` and ``eigen_wd`` alone: the last head, of ln EigenWD), so a map fitted on it would be carried into
    heads it never saw.
    """
    stage = base.round_at(k)
    kind = answer_kind(row, k)
    every = base.heads if stage is None else stage.heads
    heads = [h for h in every if h.kind == kind] + [h for h in every if h.kind is None]
    skip = set(base.short_only) if kind == "passage" else set()
    no_answer = set(ANSWER_MEMBERS) if member_value(row, "answer_wd") is None else set()
    optional = set(OPTIONAL_MEMBERS) | skip | no_answer | ({"dse"} if kind == "passage" else set())
    for head in heads:
        absent = tuple(m for m in head.members if m in skip or base.member(row, m) is None)
        if not set(absent) & optional:
            return absent
    return ()


def check_labelled_rows(base: Calibration, rows: Sequence[JSONView], k: int) -> None:
    """Raise BBWDError naming each member the labelled rows lack (``row_lacks``) and how many rows lack it."""
    counts: dict[str, int] = {}
    for row in rows:
        for name in row_lacks(base, row, k):
            counts[name] = counts.get(name, 0) + 1
    if counts:
        lack = ", ".join(f"{m} ({n} of {len(rows)} rows)" for m, n in counts.items())
        raise BBWDError(
            f"the labelled rows lack members the heads of {base.name} read: {lack}; score the rows with this bbwd "
            "(bbwd batch --all-scores), give a calibration over what they have with --base FILE, or fit one with "
            "--refit full"
        )


def out_of_fold(p: np.ndarray, y: np.ndarray, w: np.ndarray, of: np.ndarray, mode: str) -> np.ndarray:
    """g(p) of each entry with g fitted (``fit_map``) on the other folds' rows: ``FOLDS`` folds of the rows (an
    entry's row, ``of``, decides its fold: a passage label's two entries stay together), in a fixed random order;
    ``mode="platt"``: p is a chosen head's combined score z, mapped by a Platt map fitted on the other folds."""
    fold = (np.random.default_rng(0).permutation(int(of.max()) + 1) % FOLDS)[of]
    out = np.empty_like(p)
    for f in range(FOLDS):
        test = fold == f
        if mode == "platt":
            out[test] = platt_map(p[~test], y[~test], w[~test])(p[test])
            continue
        a, b = fit_map(p[~test], y[~test], w[~test], mode)
        out[test] = expit(a * logit(np.clip(p[test], CLIP, 1 - CLIP)) + b)
    return out


def platt_map(z: np.ndarray, y: np.ndarray, w: np.ndarray) -> Platt:
    """The Platt calibrator p = 1 / (1 + exp(a z + b)) of the weighted logistic regression of y on z."""
    slope, offset = _newton(np.column_stack([z, np.ones_like(z)]), np.zeros(0), y, w)
    return Platt(-float(slope), -float(offset))


def chosen_head(members: tuple[str, ...], values: np.ndarray, y: np.ndarray, w: np.ndarray, of: np.ndarray) -> Head:
    """The head over the chosen ``members`` (``values``: rows x members): their standardised mean (the scales of the
    labelled rows) under a Platt map fitted on the labelled entries (``of``: each entry's row); its operating point is
    set with the other heads' (``recalibrate``)."""
    mean, scale = values.mean(axis=0), values.std(axis=0)
    coef = np.full(len(members), 1.0 / len(members))
    z = ((values - mean) / scale) @ coef
    model = ScoreModel(members, tuple(mean.tolist()), tuple(scale.tolist()), tuple(coef.tolist()), 0.0,
                       platt_map(z[of], y, w))  # fmt: skip
    return Head(model, OperatingPoint("target_fpr_labelled", None, 1.0, 0.0, 0.0, 0.0, 0.0))


def member_table(base: Calibration, rows: Sequence[JSONView], k: int, names: Sequence[str]) -> dict[str, Any]:
    """Each member of ``names`` on each row as ``base`` reads it (NaN where absent, and for a member it reads as
    missing on a passage, ``short_only``)."""
    passage = np.array([answer_kind(r, k) == "passage" for r in rows])
    out = {}
    for m in names:
        v = np.array([np.nan if (x := base.member(r, m)) is None else x for r in rows], dtype=float)
        out[m] = np.where(passage, np.nan, v) if m in base.short_only else v
    return out


def oof_rate(y: np.ndarray, w: np.ndarray, of: np.ndarray) -> np.ndarray:
    """Each entry's labelled base rate out of fold: the rate of the other folds' rows (the folds of ``out_of_fold``),
    what p = the base rate scores when it is held to the refit's standard."""
    fold = (np.random.default_rng(0).permutation(int(of.max()) + 1) % FOLDS)[of]
    out = np.empty(y.size)
    for f in range(FOLDS):
        test = fold == f
        out[test] = np.sum(w[~test] * y[~test]) / np.sum(w[~test])
    return out


def gap_interval(p: np.ndarray, rate: np.ndarray, y: np.ndarray, w: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The weighted log-loss of p less that of ``rate`` (each entry's, out of fold), under each row of ``counts``
    (resamples of the entries' rows)."""

    def loss(q: np.ndarray) -> np.ndarray:
        q = np.clip(q, 1e-12, 1 - 1e-12)
        return -(y * np.log(q) + (1 - y) * np.log(1 - q))

    return (counts * w) @ (loss(p) - loss(rate)) / (counts * w).sum(axis=1)


def mapped_head(head: Head, a: float, b: float, threshold: float | None = None) -> Head:
    """The head with g composed into its calibrator; its threshold ``threshold`` when given, else g of its own."""
    cal = head.model.calibrator
    g = lambda p: expit(a * logit(np.clip(np.asarray(p, dtype=float), CLIP, 1 - CLIP)) + b)  # noqa: E731
    new: Isotonic | Platt = (
        Platt(a * cal.a, a * cal.b - b) if isinstance(cal, Platt) else Isotonic(cal.x, tuple(g(cal.y).tolist()))
    )
    point = head.operating_point
    if threshold is None:
        point = replace(point, threshold=float(g(point.threshold)))
    else:
        point = replace(point, threshold=threshold)
    return replace(head, model=replace(head.model, calibrator=new), operating_point=point)


def mapped_settle(settle: Settle, a: float, b: float) -> Settle:
    """A ``-k auto`` band with its edges mapped by g (0 and 1 kept), so that every stop is the one without g."""
    edge = lambda v: v if v in (0.0, 1.0) else float(expit(a * logit(np.clip(v, CLIP, 1 - CLIP)) + b))  # noqa: E731
    return replace(settle, below=edge(settle.below), above=edge(settle.above))


@dataclass(frozen=True)
class RefitRows:
    """The labelled rows a refit reads, and what the refitted calibration says of them (``FittedOn``).

    Parameters
    ----------
    rows : sequence of mapping
        The labelled rows (each as ``Calibration.verdict`` reads it).
    labels : sequence of float
        Each row's label: 0/1 (1 = hallucination), or a passage label h in [0, 1], which counts as a hallucination
        of weight h and a correct answer of weight 1 - h (as ``combine.table_from`` counts it).
    k : int
        The rows' sample count: the heads of ``base.fitted_k(k)`` get the threshold chosen on the rows.
    source, label : str
        The labelled files and the label's field, as stored.
    data : mapping of str to int or None
        The labelled rows per data set (default: one set, ``source``).
    samples : str or None
        Who drew the rows' samples (default: the settings' ``samples_from``, else the base's).
    """

    rows: Sequence[JSONView]
    labels: Sequence[float]
    k: int
    source: str = ""
    label: str = "label"
    data: Mapping[str, int] | None = None
    samples: str | None = None


@dataclass(frozen=True)
class Refit:
    """A refitted calibration and, for ``mode="map"``, what the labels chose (``choose.MemberChoice``)."""

    calibration: Calibration
    choice: MemberChoice | None


def recalibrate(
    base: Calibration,
    labelled: RefitRows,
    settings: JSONView,
    *,
    mode: str = "prior",
    target_fpr: float = 0.1,
    candidates: Sequence[Candidate] = CANDIDATES,
) -> Refit:
    """The base calibration with its map (g) and the threshold at the rows' K refitted on the labelled rows, and
    with ``mode="map"`` the members its first heads read chosen by them (the module's docstring).

    Parameters
    ----------
    base : Calibration
        The calibration that judged the rows (its heads judge them again, mapped).
    labelled : RefitRows
        The labelled rows, their sample count and where they came from.
    settings : mapping
        The rows' reported settings: the new calibration is for these (its own K kept: the base's).
    mode : {"prior", "map"}
        b alone, or a and b (``fit_map``).
    target_fpr : float
        The threshold is the smallest whose FPR on the labelled rows is at most this (its interval exact binomial,
        ``combine.fpr_interval``).
    candidates : sequence of Candidate
        What ``mode="map"`` weighs against the base's heads (``choose``); empty: the base's heads kept.

    Returns
    -------
    Refit
    """
    rows, labels, k, source = labelled.rows, labelled.labels, labelled.k, labelled.source
    of, y, w = entries(np.asarray(labels, dtype=float))
    for c in (0, 1):
        if float(np.sum(w[y == c])) < MIN_CLASS:
            raise BBWDError(
                f"the labelled rows hold {float(np.sum(w[y == c])):g} labelled {c}; a refit needs at least "
                f"{MIN_CLASS} of each class"
            )
    fitted = base.fitted_k(k)
    check_labelled_rows(base, rows, k)
    p = np.array([base.verdict(r, k=k).p_fitted for r in rows])[of]
    a, b = fit_map(p, y, w, mode)
    p_oof = out_of_fold(p, y, w, of, mode)
    own = fitted == base.k
    heads = tuple(mapped_head(h, a, b) for h in base.heads)
    rounds = tuple(
        RoundHeads(s.k, tuple(mapped_head(h, a, b) for h in s.heads), mapped_settle(s.settle, a, b))
        for s in base.rounds
    )
    choice = None
    if mode == "map" and candidates:
        names = tuple(dict.fromkeys(m for c in candidates for m in c.members))
        values = member_table(base, rows, k, names)
        choice = choose(p, values, y, w, of, candidates)
    if choice is not None and choice.chosen is not None:
        x = np.column_stack([values[m] for m in choice.chosen.members])
        head = chosen_head(choice.chosen.members, x, y, w, of)
        first = (head, *(replace(head, kind=kind) for kind in KINDS))
        if own:
            heads = (*first, *heads)
        else:
            rounds = tuple(replace(s, heads=(*first, *s.heads)) if s.k == fitted else s for s in rounds)
        p_oof = out_of_fold(head.model.decision(x)[of], y, w, of, "platt")
    draft = replace(base, heads=heads, rounds=rounds)
    p_new = np.array([draft.verdict(r, k=k).p_fitted for r in rows])[of]
    point = replace(operating_point(y, p_new, w, target_fpr), rule="target_fpr_labelled")
    if own:
        heads = tuple(replace(h, operating_point=point) for h in heads)
    else:
        rounds = tuple(
            replace(s, heads=tuple(replace(h, operating_point=point) for h in s.heads)) if s.k == fitted else s
            for s in rounds
        )
    counts = resample_counts(int(of.max()) + 1)
    verdict = rate("verdict", (), aurocs(p_new, y, w, counts[:, of]))
    gap_lo, gap_hi = np.quantile(gap_interval(p_oof, oof_rate(y, w, of), y, w, counts[:, of])[1:], [0.025, 0.975])
    chosen = "" if choice is None or choice.chosen is None else f"; the labels chose {', '.join(choice.chosen.members)}"
    reported = {**settings, "k": base.k}
    fitted_on = FittedOn(
        source=source,
        data=dict(labelled.data or {source: len(rows)}),
        protocol=None,
        label=labelled.label,
        n=len(rows),
        positives=int(round(float(np.sum(w * y)))),
        base_rate=float(np.sum(w * y) / np.sum(w)),
        folds=0,
        seed=0,
        cv={
            "auroc_base": _auroc(y, p, w),
            "log_loss": weighted_log_loss(y, p_new, w),
            "log_loss_base": weighted_log_loss(y, p, w),
            "log_loss_oof": weighted_log_loss(y, p_oof, w),
            "brier_oof": float(np.sum(w * (p_oof - y) ** 2) / np.sum(w)),
            "log_loss_gap_low": float(gap_lo),
            "log_loss_gap_high": float(gap_hi),
            "auroc": verdict.auroc,
            "auroc_low": verdict.interval[0],
            "auroc_high": verdict.interval[1],
            "slope": a,
            "intercept": b,
        },
        samples=labelled.samples or settings.get("samples_from") or base.fitted_on.samples,
        sentence_base_rate=base.fitted_on.sentence_base_rate,
        sentence_n=base.fitted_on.sentence_n,
        claim_base_rate=base.fitted_on.claim_base_rate,
        claim_n=base.fitted_on.claim_n,
        refit=f"{mode} of {base.origin or 'a calibration'} ({base.id}){chosen}",
    )
    cal = replace(
        base,
        heads=heads,
        rounds=rounds,
        fingerprint=calibration_fingerprint(reported),
        settings=covered_settings(reported),
        fitted_on=fitted_on,
        bbwd_version=__version__,
        origin="",
    )
    return Refit(cal, choice)


def _auroc(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    """Weighted AUROC of p (0.5 with one class)."""
    return float(roc_auc_score(y, p, sample_weight=w)) if np.unique(y).size == 2 else 0.5
