"""A fitted calibration: raw scores -> probability of hallucination -> flag, stored as plain JSON.

The applied model (fitted by ``calibration.fit``) is

    z = sum_j coef_j * (x_j - mean_j) / scale_j + intercept      x = [AvgWD, ln EigenWD]
    p = calibrator(z)
    flag = p >= threshold

with z the combined score (scikit-learn's ``StandardScaler`` then ``LogisticRegression``'s
``decision_function``) and the calibrator either isotonic (``IsotonicRegression(out_of_bounds=
"clip")``: linear interpolation between the stored points, constant beyond them) or Platt
(``p = 1 / (1 + exp(a z + b))``, the sign scikit-learn's sigmoid calibration stores). The JSON holds
every number needed to compute p, so applying a calibration needs numpy only.

A calibration is valid for the settings that change a prompt's score except the seed (which
changes which samples are drawn, not their law): ``settings.fingerprint(reported, seed=False)``
over the run's reported settings. A run with another fingerprint is refused, never scored with it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy.special import expit

from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import RECORDED, SCORE_FIELDS, fingerprint

FORMAT = "bbwd-calibration/1"
FEATURES = ("avg_wd", "log_eigen_wd")  # what the applied model reads
METHODS = ("isotonic", "platt")
# The readable settings a calibration covers: what changes a score, less the seed and the prompt
# protocol (the protocol says where it was fitted, ``FittedOn.protocol``; a scored prompt has none).
COVERED = tuple(name for name in SCORE_FIELDS if name not in ("seed", "protocol"))
# Of those, what a score means: a calibration fitted under other values of these is refused ...
MEANING = ("teacher", "layer", "k", "alpha", "p", "proj_dim", "proj_seed")
# ... and the sampling side: a calibration fitted under other values of these applies, with a note.
SAMPLING = ("target", "sampler", "endpoint", "temperature", "top_p", "max_tokens")
assert sorted(MEANING + SAMPLING) == sorted(COVERED)
PACKAGE_CALIBRATIONS = Path(__file__).resolve().parents[1] / "calibrations"


def covered_settings(reported: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a run (``Detector.reported_settings()``) that a calibration must match."""
    return {name: reported.get(name) for name in COVERED}


def calibration_fingerprint(reported: Mapping[str, Any]) -> str:
    """``fingerprint(reported, seed=False)`` over the covered settings (no prompt protocol)."""
    return fingerprint(covered_settings(reported), seed=False)


def feature_row(result: Any) -> np.ndarray:
    """[AvgWD, ln EigenWD] of a ``Result`` or of a row dict (``avg_wd``, ``eigen_wd``)."""
    get = result.get if isinstance(result, Mapping) else lambda name: getattr(result, name, None)
    avg, eig = get("avg_wd"), get("eigen_wd")
    if not _number(avg) or not _number(eig) or eig <= 0:
        raise BBWDError(f"cannot calibrate: avg_wd={avg!r}, eigen_wd={eig!r} (need finite numbers, eigen_wd > 0)")
    return np.array([avg, math.log(eig)], dtype=float)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
    def from_dict(cls, body: dict[str, Any]) -> "ScoreModel":
        """The model from its ``asdict`` form (lists for tuples); KeyError/TypeError when malformed."""
        cal = dict(body["calibrator"])
        kind = {"isotonic": Isotonic, "platt": Platt}.get(cal.get("method"))
        if kind is None:
            raise TypeError(f"calibrator method {cal.get('method')!r} is not one of {', '.join(METHODS)}")
        fields = {k: tuple(v) if isinstance(v, list) else v for k, v in body.items() if k != "calibrator"}
        return cls(**fields, calibrator=kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in cal.items()}))


@dataclass(frozen=True)
class OperatingPoint:
    """The threshold on p and what it gave on the fitting data's cross-validated probabilities."""

    rule: str  # "target_fpr" or "max_f1"
    target_fpr: float | None
    threshold: float
    fpr: float
    tpr: float
    precision: float
    f1: float


@dataclass(frozen=True)
class FittedOn:
    """Where a calibration was fitted and how it did there (cross-validated)."""

    source: str  # the labelled results file
    data: dict[str, int]  # prompts per dataset (the rows' ``source``)
    protocol: str | None
    label: str
    n: int
    positives: int
    base_rate: float
    folds: int
    seed: int
    cv: dict[str, float]  # auroc (combined score), log_loss, brier, ece of the applied model
    samples: str | None = None  # who drew the rows' samples (bbwd calibrate --samples); stored only when given


@dataclass(frozen=True)
class Calibration:
    """A fitted calibration, valid for one settings fingerprint (seed excluded)."""

    model: ScoreModel
    operating_point: OperatingPoint
    fingerprint: str
    settings: dict[str, Any]  # the covered settings, readable
    fitted_on: FittedOn
    bbwd_version: str
    origin: str = field(default="", compare=False)  # where it was loaded from; not stored

    @property
    def id(self) -> str:
        """16 hex digits of sha256 over the JSON document: which calibration scored a batch row."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    @property
    def threshold(self) -> float:
        """Flag a prompt when its p is at least this."""
        return self.operating_point.threshold

    def predict(self, result: Any) -> float:
        """Probability of hallucination of a ``Result`` or a row dict with ``avg_wd`` and ``eigen_wd``."""
        return float(self.model.probability(feature_row(result))[0])

    def flag(self, p: float) -> bool:
        """True when ``p`` reaches the threshold."""
        return bool(p >= self.threshold)

    def _differing(self, reported: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        """The run's value of each of ``names`` that differs from the calibration's."""
        run = covered_settings(reported)
        return {name: run[name] for name in names if self.settings.get(name) != run[name]}

    def _diffs(self, reported: Mapping[str, Any], names: tuple[str, ...]) -> list[str]:
        """'name: value in the calibration, value here' for each of ``names`` that differs."""
        return [f"{name}: {json.dumps(self.settings.get(name))} in the calibration, {json.dumps(value)} here"
                for name, value in self._differing(reported, names).items()]

    def mismatch(self, reported: Mapping[str, Any]) -> str | None:
        """None when the run's settings mean what the calibration's meant (``MEANING``), else which differ (one
        line). Settings of the sampling side (``SAMPLING``) may differ: see :meth:`sampling_note`."""
        if calibration_fingerprint(reported) == self.fingerprint:
            return None
        diffs = self._diffs(reported, MEANING)
        if not diffs and self._differing(reported, SAMPLING):
            return None
        return (f"it is for settings {self.fingerprint}, this run has {calibration_fingerprint(reported)} "
                f"({'; '.join(diffs) or 'the same values, of other types'})")

    def sampling_note(self, reported: Mapping[str, Any]) -> str | None:
        """None when the run samples as the calibration's data was sampled, else a one-line note naming what differs."""
        differing = self._differing(reported, SAMPLING)
        if not differing:
            return None
        name = f"calibration {self.origin}" if self.origin else "the calibration"
        data = ", ".join(f"{k} ({v})" for k, v in self.fitted_on.data.items())
        if self.settings.get("target") == RECORDED:  # no sampling settings to compare: say who drew the samples
            here = ", ".join(f"{k} {json.dumps(v)}" for k, v in differing.items())
            return (f"note: {name} was fitted on recorded samples ({self.fitted_on.samples or 'origin not stated'}; "
                    f"{data}); this run: {here}: its risk is a probability on that data")
        diffs = "; ".join(self._diffs(reported, SAMPLING))
        return (f"note: {name} was fitted on samples drawn otherwise ({data}; {diffs}): its risk is a probability "
                "on that data")

    def check(self, reported: Mapping[str, Any]) -> None:
        """Raise BBWDError unless the run's settings are those calibrated."""
        why = self.mismatch(reported)
        if why is not None:
            name = f"calibration {self.origin}" if self.origin else "the calibration"
            raise BBWDError(f"{name} does not apply to this run: {why}")

    def summary(self) -> dict[str, Any]:
        """What a scored result says about the calibration it used."""
        return {"origin": self.origin, "id": self.id, "fingerprint": self.fingerprint, "threshold": self.threshold,
                "operating_point": asdict(self.operating_point), "n": self.fitted_on.n,
                "label": self.fitted_on.label, "data": self.fitted_on.data}

    def to_json(self) -> str:
        """The calibration as a JSON document (plain numbers and strings; no NaN)."""
        body = {"format": FORMAT, **asdict(self)}
        del body["origin"]
        if self.fitted_on.samples is None:  # files without it keep their bytes, and so their id
            del body["fitted_on"]["samples"]
        return json.dumps(body, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, origin: str = "") -> "Calibration":
        """Parse and check a calibration written by ``to_json``."""
        where = origin or "calibration"
        try:
            body = json.loads(text, parse_constant=_no_constant)  # bytes: UTF-8 or a ValueError
        except ValueError as exc:
            raise BBWDError(f"{where} is not a calibration file: {exc}") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise BBWDError(f"{where} is not a calibration file (field 'format' is not {FORMAT!r})")
        try:
            cal = cls(model=ScoreModel.from_dict(body["model"]), operating_point=OperatingPoint(**body["operating_point"]),
                      fingerprint=body["fingerprint"], settings=body["settings"], fitted_on=FittedOn(**body["fitted_on"]),
                      bbwd_version=body["bbwd_version"], origin=origin)
        except (KeyError, TypeError) as exc:
            raise BBWDError(f"{where}: missing or unexpected field: {exc}") from None
        _check(cal, where)
        return cal

    def save(self, path: str | Path) -> None:
        """Write ``to_json()`` to ``path``."""
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        """Read a calibration file; BBWDError naming the file when it is missing or not one."""
        path = Path(path)
        if not path.is_file():
            raise BBWDError(f"calibration file not found: {path}")
        return cls.from_json(path.read_bytes(), origin=str(path))


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number in plain JSON")


def _check(cal: Calibration, where: str) -> None:
    """Raise BBWDError naming the first field of a calibration that cannot be right."""
    m = cal.model
    n = len(m.features)
    rules = [
        ("model.features", m.features == FEATURES, f"{list(FEATURES)}"),
        ("model.mean/scale/coef", len(m.mean) == len(m.scale) == len(m.coef) == n, f"{n} numbers each"),
        ("model.scale", all(s > 0 for s in m.scale), "positive"),
        ("model.calibrator", not isinstance(m.calibrator, Isotonic) or (
            len(m.calibrator.x) == len(m.calibrator.y) >= 1 and list(m.calibrator.x) == sorted(m.calibrator.x)
            and all(0 <= v <= 1 for v in m.calibrator.y)), "isotonic points with x increasing and y in [0, 1]"),
        ("operating_point.threshold", 0 <= cal.threshold <= 1, "in [0, 1]"),
        ("fingerprint", cal.fingerprint == calibration_fingerprint(cal.settings),
         "the fingerprint of its settings (the file was edited?)"),
    ]
    for name, ok, want in rules:
        if not ok:
            raise BBWDError(f"{where}: field '{name}' must be {want}")


def default_calibration_path(teacher: str, white_box: bool = True) -> Path | None:
    """The calibration shipped with bbwd for a registry teacher (it may not exist): ``<teacher>.json`` for white-box
    runs, ``<teacher>.api.json`` for runs that score another target; None for other teachers."""
    if not teacher or Path(teacher).name != teacher or teacher.startswith("."):
        return None
    return PACKAGE_CALIBRATIONS / (f"{teacher}.json" if white_box else f"{teacher}.api.json")


def embedded_calibration(reported: Mapping[str, Any]) -> tuple[Calibration | None, str | None]:
    """The shipped calibration for the run's teacher and kind (white- or black-box) when its meaning settings match.

    Returns (calibration, None) when it applies as fitted; (calibration, a one-line note) when it applies to
    samples drawn otherwise (``Calibration.sampling_note``); (None, a one-line note) when one is shipped but its
    meaning settings differ, or none ships for this registry teacher and kind; (None, None) for other teachers.
    """
    teacher = str(reported.get("teacher"))
    white_box = bool(reported.get("white_box", True))
    path = default_calibration_path(teacher, white_box)
    if path is None:
        return None, None
    if not path.is_file():
        kind = "" if white_box else "black-box runs with "
        return None, (f"note: no calibration ships for {kind}{teacher} yet, so no risk is shown: fit one on labelled "
                      "results with 'bbwd calibrate' and pass it with --calibration")
    cal = replace(Calibration.load(path), origin=f"embedded {path.name}")
    why = cal.mismatch(reported)
    if why is not None:
        return None, f"note: the embedded calibration {path.name} does not apply to this run, no risk shown: {why}"
    return cal, cal.sampling_note(reported)
