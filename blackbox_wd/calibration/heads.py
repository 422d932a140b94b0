"""The parts of a calibration: a head (its combined score z over standardised members, the calibrator that maps z to
p, the threshold and what it gives, ``OperatingPoint``), a result's ``Verdict``, p moved to a stated base rate
(``shift_prior``); the heads of another sample count (``RoundHeads``) and where the heads were fitted (``FittedOn``).

The applied model (fitted by ``calibration.fit``) is

    z = sum_j coef_j * (x_j - mean_j) / scale_j + intercept      x = the head's members (``MEMBERS``)
    p = calibrator(z)
    flag = p >= threshold

with z the combined score (scikit-learn's ``StandardScaler`` then ``LogisticRegression``'s ``decision_function``) and
the calibrator either isotonic (``IsotonicRegression(out_of_bounds="clip")``: linear interpolation between the stored
points, constant beyond them) or Platt (``p = 1 / (1 + exp(a z + b))``, the sign scikit-learn's sigmoid calibration
stores). A head's parameters are plain numbers, so applying a calibration needs numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from blackbox_wd.adaptive import Settle

CALIBRATORS = ("isotonic", "platt")


def shift_prior(p: float, fitted: float, stated: float) -> float:
    """p, a probability at base rate ``fitted``, moved to base rate ``stated`` by Bayes' rule.

    The likelihood ratio a score carries does not change with the prior, so the odds scale by the ratio of
    the prior odds: odds' = odds * (stated / (1 - stated)) / (fitted / (1 - fitted)).

    Examples
    --------
    >>> shift_prior(0.5, 0.5, 0.75)
    0.75
    >>> round(shift_prior(0.9, 0.75, 0.5), 4)
    0.75
    """
    if p <= 0.0 or p >= 1.0 or fitted == stated:
        return float(p)
    odds = p / (1.0 - p) * (stated / (1.0 - stated)) / (fitted / (1.0 - fitted))
    return float(odds / (1.0 + odds))


@dataclass(frozen=True)
class Isotonic:
    """Isotonic calibrator: linear interpolation between the fitted points (z, p), constant beyond them."""

    x: tuple[float, ...]  # increasing
    y: tuple[float, ...]
    method: str = "isotonic"

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """p of each combined score z."""
        return np.interp(z, self.x, self.y)


@dataclass(frozen=True)
class Platt:
    """Platt calibrator: p = 1 / (1 + exp(a z + b))."""

    a: float
    b: float
    method: str = "platt"

    def __call__(self, z: np.ndarray) -> np.ndarray:
        """p of each combined score z."""
        return expit(-(self.a * np.asarray(z, dtype=float) + self.b))


@dataclass(frozen=True)
class ScoreModel:
    """p = calibrator(logistic regression's decision on standardised features); JSON-safe parameters."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    calibrator: Isotonic | Platt

    @property
    def method(self) -> str:
        """The calibrator's name: "isotonic" or "platt"."""
        return self.calibrator.method

    def decision(self, X: np.ndarray) -> np.ndarray:
        """The combined score z of each row of X (n, n_features)."""
        X = np.atleast_2d(np.asarray(X, dtype=float))
        return (X - np.asarray(self.mean)) / np.asarray(self.scale) @ np.asarray(self.coef) + self.intercept

    def probability(self, X: np.ndarray) -> np.ndarray:
        """Calibrated probability of hallucination of each row of X."""
        return self.calibrator(self.decision(X))


@dataclass(frozen=True)
class OperatingPoint:
    """The threshold on p and what it gave on the fitting data's cross-validated probabilities."""

    rule: str  # "target_fpr" (out of fold), "target_fpr_by_set" (each data set left out in turn) or "max_f1"
    target_fpr: float | None
    threshold: float
    fpr: float
    tpr: float
    precision: float
    f1: float
    fpr_range: tuple[float, float] | None = None  # by set: the lowest and highest FPR of a set left out
    tpr_range: tuple[float, float] | None = None
    # the FPR's 95% exact binomial (Clopper-Pearson) interval from the correct answers it was measured on, and their
    # number (weight): how far to trust ``fpr`` (``combine.fpr_interval``); None in files fitted before it
    fpr_interval: tuple[float, float] | None = None
    negatives: float | None = None


@dataclass(frozen=True)
class Head:
    """One applied model with its threshold: how results that have its members are judged."""

    model: ScoreModel
    operating_point: OperatingPoint
    kind: str | None = None  # the kind of answer it was fitted on and judges (``KINDS``); None: every kind

    @property
    def members(self) -> tuple[str, ...]:
        """The members the head reads."""
        return self.model.features

    def judge(self, values: np.ndarray, fitted_rate: float | None, base_rate: float | None) -> Verdict:
        """The verdict on the head's member ``values``: p moved from ``fitted_rate`` to ``base_rate`` when both are
        given (``shift_prior``), the flag on the fitted p."""
        fitted = float(self.model.probability(values)[0])
        p = fitted if base_rate is None or fitted_rate is None else shift_prior(fitted, fitted_rate, base_rate)
        return Verdict(p, bool(fitted >= self.operating_point.threshold), self, fitted)

    def judge_known(
        self, values: Sequence[float | None], fitted_rate: float | None, base_rate: float | None
    ) -> Verdict | None:
        """The verdict on the head's member ``values`` (``judge``); None when one of them is missing."""
        if any(v is None for v in values):
            return None
        return self.judge(np.array(values, dtype=float), fitted_rate, base_rate)


@dataclass(frozen=True)
class Verdict:
    """A result's verdict: p (at the stated base rate, else the fitted one), the flag, and how it was reached."""

    p: float
    flag: bool
    head: Head  # the head that judged: its members are what the verdict rests on
    p_fitted: float  # p at the base rate of the fitting data (the flag compares this with the head's threshold)

    @property
    def members(self) -> tuple[str, ...]:
        """The members the verdict rests on."""
        return self.head.members

    @property
    def threshold(self) -> float:
        """The head's threshold, on the fitted p."""
        return self.head.operating_point.threshold


@dataclass(frozen=True)
class RoundHeads:
    """The heads of another sample count than the calibration's own K: fitted on the first ``k`` samples of the
    calibration's data; they judge runs of ``k`` samples (and of every K up to the next fitted one), and stage ``k``
    of ``-k auto``. ``settle``, for a stage below the calibration's K: its band (``adaptive.Settle``) for ``-k auto``
    up to that K: a prompt whose p at this stage is outside it stops here (a stage above K: never, ``Settle()``)."""

    k: int
    heads: tuple[Head, ...]
    settle: Settle


@dataclass(frozen=True)
class FittedOn:
    """Where a calibration was fitted and how it did there (cross-validated)."""

    source: str  # the labelled results file
    data: dict[str, int]  # prompts per dataset (the rows' ``source``)
    protocol: dict[str, Any] | str | None  # how the rows were prompted and labelled (``bbwd eval``'s ``protocol``)
    label: str
    n: int
    positives: int
    base_rate: float
    folds: int
    seed: int
    cv: dict[str, float]  # auroc (combined score), log_loss, brier, ece of the applied model
    samples: str | None = None  # who drew the rows' samples (bbwd calibrate --samples); stored only when given
    sentence_base_rate: float | None = None  # with a sentence head: the share of hallucinated sentences it saw
    sentence_n: int | None = None  # with a sentence head: the sentences it was fitted on
    claim_base_rate: float | None = None  # with a claim head: the share of unsupported claims it saw
    claim_n: int | None = None  # with a claim head: the claims it was fitted on (``other`` left out)
    refit: str | None = None  # a map refitted on a user's labels (``recalibrate``): which, of which calibration
