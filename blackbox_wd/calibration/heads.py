"""A head of a calibration: its combined score z over standardised members, the calibrator that maps z to p, the
threshold and what it gives (``OperatingPoint``), and a result's ``Verdict``; p moved to a stated base rate
(``shift_prior``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import expit

from blackbox_wd.records import JSONView

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

    @classmethod
    def from_dict(cls, body: JSONView) -> ScoreModel:
        """The model from its ``asdict`` form (lists for tuples); KeyError/TypeError when malformed."""
        cal: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in body["calibrator"].items()}
        kinds: dict[str, type[Isotonic] | type[Platt]] = {"isotonic": Isotonic, "platt": Platt}
        kind = kinds.get(str(cal.get("method")))
        if kind is None:
            raise TypeError(f"calibrator method {cal.get('method')!r} is not one of {', '.join(CALIBRATORS)}")
        fields: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in body.items() if k != "calibrator"
        }
        return cls(**fields, calibrator=kind(**cal))


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

    @classmethod
    def from_dict(cls, body: JSONView) -> Head:
        """The head from its ``asdict`` form; KeyError/TypeError when malformed."""
        return cls(ScoreModel.from_dict(body["model"]), OperatingPoint(**body["operating_point"]), body.get("kind"))

    def judge(self, values: np.ndarray, fitted_rate: float | None, base_rate: float | None) -> Verdict:
        """The verdict on the head's member ``values``: p moved from ``fitted_rate`` to ``base_rate`` when both are
        given (``shift_prior``), the flag on the fitted p."""
        fitted = float(self.model.probability(values)[0])
        p = fitted if base_rate is None or fitted_rate is None else shift_prior(fitted, fitted_rate, base_rate)
        return Verdict(p, bool(fitted >= self.operating_point.threshold), self, fitted)


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
