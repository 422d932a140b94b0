"""Fitting a calibration with scikit-learn on labelled results, with k-fold cross-validation.

Input: the rows of ``bbwd eval``'s ``results.jsonl`` (or any JSONL with ``avg_wd``, ``eigen_wd`` and
a 0/1 label, 1 = hallucination) and the reported settings they were scored with (``settings.json``
beside them, which ``bbwd eval`` writes, or any file named with ``--settings-from``).

For each feature set (the combined score [AvgWD, ln EigenWD]; each single score; with
``with_baselines`` also the combined score plus the baselines, for information) one model is
``CalibratedClassifierCV(make_pipeline(StandardScaler(), LogisticRegression()), method, cv,
ensemble=False)``: the logistic regression is fitted on all rows and its calibrator on its
out-of-fold decisions. The calibrator (isotonic or Platt) is the one with the lower log-loss of
out-of-fold probabilities (nested: ``cross_val_predict`` of the whole calibrated model). All folds are
``StratifiedKFold(folds, shuffle=True, random_state=seed)``. The threshold is chosen on the
out-of-fold probabilities of the applied (combined) model.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import (brier_score_loss, confusion_matrix, f1_score, log_loss, precision_recall_curve,
                             precision_score, recall_score, roc_auc_score, roc_curve)
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from blackbox_wd import __version__
from blackbox_wd.calibration.model import (COVERED, FEATURES, METHODS, Calibration, FittedOn, Isotonic, OperatingPoint, Platt,
                                     ScoreModel, calibration_fingerprint, covered_settings)
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import RECORDED, fingerprint

BASELINES = ("lne", "ls", "es", "er", "dse")
SKLEARN_METHOD = {"isotonic": "isotonic", "platt": "sigmoid"}
ECE_BINS = 10


@dataclass
class LabelledScores:
    """Labels and scores of the usable rows of a results file."""

    y: np.ndarray  # 1 = hallucination
    scores: dict[str, np.ndarray]  # avg_wd, log_eigen_wd and the baselines (NaN where missing)
    data: dict[str, int]  # rows per ``source``
    fingerprint: str | None  # the rows' settings fingerprint (None when they carry none)
    skipped_errors: int = 0
    skipped_unlabelled: int = 0

    def matrix(self, features: Sequence[str]) -> np.ndarray:
        """(n, len(features)) array of the named scores."""
        return np.column_stack([self.scores[f] for f in features])


@dataclass
class ModelFit:
    """One fitted score model and its out-of-fold figures on the fitting data."""

    model: ScoreModel
    estimator: CalibratedClassifierCV  # the fitted scikit-learn model ``model`` was read from
    decision: np.ndarray  # out-of-fold logistic-regression decision (the score's ranking)
    p: np.ndarray  # out-of-fold probabilities of the chosen calibrator
    log_loss: dict[str, float]  # out-of-fold log-loss of each calibrator tried


@dataclass
class CalibrationFit:
    """A fitted calibration with the cross-validated fits its report is made from."""

    calibration: Calibration
    scores: LabelledScores
    combined: ModelFit  # the applied model
    singles: dict[str, ModelFit]  # one per single score
    extended: ModelFit | None  # combined score plus the baselines: reported, not applied
    baselines: tuple[str, ...]  # the baselines in ``extended``


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_labelled(path: Path, label: str = "label") -> LabelledScores:
    """The rows of a JSONL results file that have scores and the label; BBWDError naming a bad line.

    Rows with an ``error`` and rows without the label (MATH rows have no ``label_em``) are skipped
    and counted; rows from more than one settings fingerprint are refused.
    """
    if not path.is_file():
        raise BBWDError(f"input file not found: {path}")
    ys, rows, data, fps = [], [], Counter(), {}
    errors = unlabelled = 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                raise BBWDError(f"{path} line {n}: not JSON") from None
            if not isinstance(row, dict):
                raise BBWDError(f"{path} line {n}: expected a JSON object")
            if row.get("error") is not None:
                errors += 1
                continue
            if row.get(label) is None:
                unlabelled += 1
                continue
            if row[label] not in (0, 1):  # True/False compare equal to 1/0
                raise BBWDError(f"{path} line {n}: field '{label}' must be 0 or 1 (got {row[label]!r})")
            for name in ("avg_wd", "eigen_wd"):
                if not _number(row.get(name)) or (name == "eigen_wd" and row[name] <= 0):
                    raise BBWDError(f"{path} line {n}: field '{name}' must be a finite number"
                                    f"{' > 0' if name == 'eigen_wd' else ''} (got {row.get(name)!r})")
            fps.setdefault(row.get("fingerprint"), n)
            ys.append(int(row[label]))
            rows.append(row)
            data[str(row.get("source", path.name))] += 1
    if not rows:
        raise BBWDError(f"{path} has no row with a score and field '{label}' ({unlabelled} without it, {errors} with "
                        "an error): choose the label with --label")
    if len(fps) > 1:
        seen = ", ".join(f"{fp} (first on line {n})" for fp, n in fps.items())
        raise BBWDError(f"{path} mixes rows from different settings (fingerprints {seen}): calibrate each run alone")
    scores = {"avg_wd": np.array([r["avg_wd"] for r in rows], dtype=float),
              "log_eigen_wd": np.log(np.array([r["eigen_wd"] for r in rows], dtype=float))}
    for name in BASELINES:
        scores[name] = np.array([r[name] if _number(r.get(name)) else np.nan for r in rows], dtype=float)
    return LabelledScores(np.array(ys, dtype=int), scores, dict(data), next(iter(fps), None), errors, unlabelled)


def read_settings(results: Path, settings_from: Path | None, rows_fingerprint: str | None) -> dict[str, Any]:
    """The reported settings of the results: ``settings_from``, else ``settings.json`` beside them.

    Raise BBWDError when there is none, when it lacks a covered field, or when the rows carry a
    fingerprint that is not that of these settings.
    """
    path = settings_from or results.parent / "settings.json"
    if not path.is_file():
        raise BBWDError(f"no settings for {results}: {path} not found (bbwd eval writes settings.json beside "
                        "results.jsonl; otherwise pass --settings-from FILE, e.g. the 'settings' of bbwd score --json)")
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        raise BBWDError(f"{path} is not JSON") from None
    if not isinstance(settings, dict):
        raise BBWDError(f"{path}: expected a JSON object of settings")
    missing = [name for name in COVERED if name not in settings]
    if missing:
        raise BBWDError(f"{path} lacks the setting(s) {', '.join(missing)}")
    if rows_fingerprint is not None and fingerprint(settings) != rows_fingerprint:
        raise BBWDError(f"{path} does not describe {results}: its settings have fingerprint {fingerprint(settings)}, "
                        f"the rows {rows_fingerprint}")
    return settings


def folds_for(folds: int, seed: int) -> StratifiedKFold:
    """The stratified, shuffled k-fold splitter of every cross-validation here."""
    return StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)


def calibrated_model(method: str, folds: int, seed: int) -> CalibratedClassifierCV:
    """Standardise, logistic regression, then the calibrator fitted on out-of-fold decisions."""
    return CalibratedClassifierCV(make_pipeline(StandardScaler(), LogisticRegression()),
                                  method=SKLEARN_METHOD[method], cv=folds_for(folds, seed), ensemble=False)


def score_model(estimator: CalibratedClassifierCV, features: Sequence[str], method: str) -> ScoreModel:
    """The JSON-safe parameters of a fitted ``calibrated_model``."""
    pair = estimator.calibrated_classifiers_[0]
    scaler, logistic = pair.estimator[0], pair.estimator[-1]
    cal = pair.calibrators[0]
    calibrator = Isotonic(tuple(cal.X_thresholds_.tolist()), tuple(cal.y_thresholds_.tolist())) \
        if method == "isotonic" else Platt(float(cal.a_), float(cal.b_))
    return ScoreModel(features=tuple(features), mean=tuple(scaler.mean_.tolist()), scale=tuple(scaler.scale_.tolist()),
                      coef=tuple(logistic.coef_[0].tolist()), intercept=float(logistic.intercept_[0]),
                      calibrator=calibrator)


def fit_model(X: np.ndarray, y: np.ndarray, features: Sequence[str], folds: int = 5, seed: int = 0,
              methods: Sequence[str] = METHODS) -> ModelFit:
    """Fit one score model; its calibrator is the one of ``methods`` with the lowest out-of-fold log-loss."""
    cv = folds_for(folds, seed)
    decision = cross_val_predict(make_pipeline(StandardScaler(), LogisticRegression()), X, y, cv=cv,
                                 method="decision_function")
    probs = {m: cross_val_predict(calibrated_model(m, folds, seed), X, y, cv=cv, method="predict_proba")[:, 1]
             for m in methods}
    losses = {m: float(log_loss(y, p, labels=[0, 1])) for m, p in probs.items()}
    best = min(methods, key=losses.__getitem__)
    estimator = calibrated_model(best, folds, seed).fit(X, y)
    return ModelFit(score_model(estimator, features, best), estimator, decision, probs[best], losses)


def expected_calibration_error(y: np.ndarray, p: np.ndarray, bins: int = ECE_BINS) -> float:
    """ECE = sum over bins b of (n_b / n) |mean(y in b) - mean(p in b)| = sum_b |sum_b y - sum_b p| / n.

    The bins are ``bins`` equal-width intervals of p: [0, 1/bins], (1/bins, 2/bins], ...,
    ((bins-1)/bins, 1], those of ``sklearn.calibration.calibration_curve(strategy="uniform")``, so
    the ECE is the count-weighted gap of the reliability diagram's points; empty bins count zero.
    """
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    which = np.searchsorted(np.linspace(0.0, 1.0, bins + 1)[1:-1], p)
    gap = np.bincount(which, weights=y, minlength=bins) - np.bincount(which, weights=p, minlength=bins)
    return float(np.abs(gap).sum() / p.size)


def choose_threshold(y: np.ndarray, p: np.ndarray, target_fpr: float | None = 0.1,
                     max_f1: bool = False) -> OperatingPoint:
    """The threshold on p (flag when p >= it) and its operating point on (y, p).

    ``target_fpr``: the smallest threshold whose false-positive rate is at most ``target_fpr``
    (``roc_curve``); ``max_f1``: the threshold of the highest F1 (``precision_recall_curve``).
    """
    y = np.asarray(y, dtype=int)
    p = np.asarray(p, dtype=float)
    if max_f1:
        precision, recall, thresholds = precision_recall_curve(y, p)
        denom = precision + recall
        f1 = np.divide(2 * precision * recall, denom, out=np.zeros_like(denom), where=denom > 0)[:-1]
        threshold = float(thresholds[np.argmax(f1)])
        rule, target_fpr = "max_f1", None
    else:
        check_target_fpr(target_fpr)
        fpr, _, thresholds = roc_curve(y, p, drop_intermediate=False)
        ok = np.flatnonzero((fpr <= target_fpr) & np.isfinite(thresholds))
        if ok.size == 0:
            raise BBWDError(f"no threshold keeps the FPR at or below {target_fpr} on the fitting data (the lowest is "
                            f"{fpr[np.isfinite(thresholds)].min():.3f}): raise --target-fpr or use --max-f1")
        threshold = float(thresholds[ok[-1]])
        rule = "target_fpr"
    flagged = (p >= threshold).astype(int)
    tn, fp = confusion_matrix(y, flagged, labels=[0, 1])[0]
    return OperatingPoint(rule=rule, target_fpr=target_fpr, threshold=threshold, fpr=float(fp / (fp + tn)),
                          tpr=float(recall_score(y, flagged, zero_division=0)),
                          precision=float(precision_score(y, flagged, zero_division=0)),
                          f1=float(f1_score(y, flagged, zero_division=0)))


def check_target_fpr(target_fpr: float | None) -> None:
    """Raise BBWDError unless the target false-positive rate is in [0, 1)."""
    if target_fpr is None or not 0 <= target_fpr < 1:
        raise BBWDError(f"target FPR must be in [0, 1) (got {target_fpr})")


def check_classes(y: np.ndarray, folds: int, label: str) -> None:
    """Raise BBWDError unless each class has at least 2 * folds rows (nested k-fold needs them)."""
    if not isinstance(folds, int) or folds < 2:
        raise BBWDError(f"folds must be an integer >= 2 (got {folds})")
    pos = int(y.sum())
    neg = int(y.size - pos)
    if min(pos, neg) < 2 * folds:
        raise BBWDError(f"label '{label}' has {neg} correct and {pos} hallucinated prompts; {folds}-fold "
                        f"cross-validation needs at least {2 * folds} of each (lower --folds or label more prompts)")


def fit_calibration(scores: LabelledScores, settings: Mapping[str, Any], *, source: str = "", label: str = "label",
                    folds: int = 5, target_fpr: float | None = 0.1, max_f1: bool = False,
                    with_baselines: bool = False, seed: int = 0, samples: str | None = None) -> CalibrationFit:
    """Fit the applied model, one model per single score, and pick the threshold; cross-validated."""
    if settings.get("target") == RECORDED and not samples:
        raise BBWDError("the rows' samples were recorded in the data (target \"recorded\"), so their settings do not "
                        "say who drew them: name it with --samples, e.g. --samples 'gpt-3.5-turbo at T=1.0'")
    y = scores.y
    check_classes(y, folds, label)
    if not max_f1:
        check_target_fpr(target_fpr)
    combined = fit_model(scores.matrix(FEATURES), y, FEATURES, folds, seed)
    baselines = tuple(b for b in BASELINES if np.isfinite(scores.scores[b]).all()) if with_baselines else ()
    singles = {f: fit_model(scores.matrix((f,)), y, (f,), folds, seed) for f in (*FEATURES, *baselines)}
    extended = fit_model(scores.matrix(FEATURES + baselines), y, FEATURES + baselines, folds, seed) \
        if baselines else None
    point = choose_threshold(y, combined.p, target_fpr, max_f1)
    cv = {"auroc": float(roc_auc_score(y, combined.decision)), "log_loss": combined.log_loss[combined.model.method],
          "brier": float(brier_score_loss(y, combined.p)), "ece": expected_calibration_error(y, combined.p)}
    fitted_on = FittedOn(source=source, data=scores.data, protocol=settings.get("protocol"), label=label,
                         n=int(y.size), positives=int(y.sum()), base_rate=float(y.mean()), folds=folds, seed=seed, cv=cv,
                         samples=samples or None)
    calibration = Calibration(model=combined.model, operating_point=point, fingerprint=calibration_fingerprint(settings),
                              settings=covered_settings(settings), fitted_on=fitted_on, bbwd_version=__version__)
    return CalibrationFit(calibration, scores, combined, singles, extended, baselines)


def fit_file(results: Path, *, label: str = "label", settings_from: Path | None = None, folds: int = 5,
             target_fpr: float | None = 0.1, max_f1: bool = False, with_baselines: bool = False,
             seed: int = 0, samples: str | None = None) -> CalibrationFit:
    """Read a labelled results file and its settings, and fit a calibration on them."""
    scores = read_labelled(results, label)
    settings = read_settings(results, settings_from, scores.fingerprint)
    return fit_calibration(scores, settings, source=str(results), label=label, folds=folds, target_fpr=target_fpr,
                           max_f1=max_f1, with_baselines=with_baselines, seed=seed, samples=samples)
