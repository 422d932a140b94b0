"""Fitting a calibration: coefficients, calibrators, ECE/Brier, thresholds, input checks, report bootstrap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, f1_score, roc_auc_score

from blackbox_wd.calibration.model import FEATURES, Isotonic, Platt
from blackbox_wd.calibration.fit import (choose_threshold, expected_calibration_error, fit_calibration, fit_model,
                                         read_labelled, read_settings)
from blackbox_wd.metrics import paired_auroc_diff
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import fingerprint

SETTINGS = {"teacher": "smollm2-135m", "target": "smollm2-135m", "sampler": "llama.cpp", "endpoint": None,
            "layer": 15, "k": 10, "temperature": 0.5, "top_p": 1.0, "max_tokens": 128, "seed": 0, "alpha": 0.001,
            "p": 0.1, "proj_dim": 128, "proj_seed": 0, "protocol": "zero-shot"}
TRUE_INTERCEPT, TRUE_COEF = -15.0, np.array([0.1, 0.5])  # logit of hallucination on [AvgWD, ln EigenWD]


def draw(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features [AvgWD, ln EigenWD], labels drawn from the known logistic model, and the true p."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(60, 15, n), rng.normal(18, 2, n)])
    p = 1 / (1 + np.exp(-(TRUE_INTERCEPT + X @ TRUE_COEF)))
    return X, (rng.random(n) < p).astype(int), p


def write_rows(path, X, y, fp="auto", extra=None):
    fp = fingerprint(SETTINGS) if fp == "auto" else fp
    with open(path, "w") as f:
        for i, ((avg, log_eig), label) in enumerate(zip(X, y)):
            row = {"id": str(i), "source": "nq" if i % 3 else "sciq", "avg_wd": avg, "eigen_wd": float(np.exp(log_eig)),
                   "label": int(label), "fingerprint": fp, **(extra or {})}
            f.write(json.dumps(row) + "\n")


def test_fit_recovers_the_logistic_coefficients():
    X, y, p_true = draw(5000)
    fit = fit_model(X, y, FEATURES, methods=("platt",))
    m = fit.model
    coef = np.array(m.coef) / np.array(m.scale)  # back to the raw features
    intercept = m.intercept - float(np.sum(np.array(m.coef) * np.array(m.mean) / np.array(m.scale)))
    assert coef == pytest.approx(TRUE_COEF, rel=0.1)
    assert intercept == pytest.approx(TRUE_INTERCEPT, rel=0.1)
    # the logistic regression is already calibrated: Platt is close to the identity, p close to the truth
    assert isinstance(m.calibrator, Platt)
    assert m.calibrator.a == pytest.approx(-1.0, abs=0.1) and m.calibrator.b == pytest.approx(0.0, abs=0.1)
    assert np.abs(m.probability(X) - p_true).mean() < 0.02


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_probability_from_the_stored_numbers_equals_scikit_learn(method):
    X, y, _ = draw(400, seed=1)
    fit = fit_model(X, y, FEATURES, methods=(method,))
    grid = np.column_stack([np.linspace(0, 130, 300), np.linspace(10, 26, 300)])
    ours, theirs = fit.model.probability(grid), fit.estimator.predict_proba(grid)[:, 1]
    assert np.abs(ours - theirs).max() < 1e-12
    assert fit.model.method == method and set(fit.log_loss) == {method}


def test_isotonic_output_is_monotone_in_each_score():
    X, y, _ = draw(400, seed=2)
    model = fit_model(X, y, FEATURES, methods=("isotonic",)).model
    assert isinstance(model.calibrator, Isotonic) and len(model.calibrator.x) > 3
    grid = np.linspace(-50, 200, 1001)  # far beyond the data on both sides: clipped, still monotone
    for column, fixed in ((0, 18.0), (1, 60.0)):
        Xg = np.full((grid.size, 2), fixed)
        Xg[:, column] = grid if column == 0 else grid / 10
        p = model.probability(Xg)
        assert np.all(np.diff(p) >= 0) and 0 <= p.min() < p.max() <= 1
    # constant beyond the fitted points
    assert model.calibrator(np.array([-1e9, 1e9])).tolist() == [model.calibrator.y[0], model.calibrator.y[-1]]


def test_the_calibrator_is_chosen_by_cross_validated_log_loss():
    X, y, _ = draw(300, seed=3)
    fit = fit_model(X, y, FEATURES)
    assert set(fit.log_loss) == {"isotonic", "platt"}
    assert fit.model.method == min(fit.log_loss, key=fit.log_loss.get)
    assert fit.log_loss["platt"] < fit.log_loss["isotonic"]  # the data are logistic: Platt fits them


def test_ece_and_brier_match_a_hand_worked_example():
    y = np.array([0, 0, 1, 1, 1, 0])
    p = np.array([0.05, 0.1, 0.15, 0.85, 0.95, 1.0])
    # bins [0, .1], (.1, .2], ..., (.9, 1]: {.05, .1 | 0, 0}: |0 - .15|; {.15 | 1}: .85; {.85 | 1}: .15;
    # {.95, 1 | 1, 0}: |1 - 1.95|  ->  (.15 + .85 + .15 + .95) / 6
    assert expected_calibration_error(y, p) == pytest.approx(2.1 / 6, abs=1e-12)
    # (.05^2 + .1^2 + .85^2 + .15^2 + .05^2 + 1) / 6
    assert brier_score_loss(y, p) == pytest.approx(1.76 / 6, abs=1e-12)
    # the same bins as the reliability diagram: ECE = count-weighted gap of calibration_curve's points
    true, pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    counts = np.array([2, 1, 1, 2])
    assert expected_calibration_error(y, p) == pytest.approx(float(counts @ np.abs(true - pred)) / 6, abs=1e-12)
    assert expected_calibration_error(y, y.astype(float)) == 0.0


@pytest.mark.parametrize("target", [0.05, 0.1, 0.2])
def test_threshold_meets_the_target_fpr_on_the_fitting_data(target):
    X, y, _ = draw(500, seed=4)
    p = fit_model(X, y, FEATURES, methods=("platt",)).p
    op = choose_threshold(y, p, target)
    flagged = p >= op.threshold
    fpr = flagged[y == 0].mean()
    assert fpr <= target and op.fpr == pytest.approx(fpr) and op.tpr == pytest.approx(flagged[y == 1].mean())
    lower = p[p < op.threshold].max()  # the next threshold down breaks the target: this is the smallest
    assert (p >= lower)[y == 0].mean() > target
    assert op.rule == "target_fpr" and op.target_fpr == target


def test_max_f1_threshold_is_the_best_of_all_thresholds():
    X, y, _ = draw(300, seed=5)
    p = fit_model(X, y, FEATURES, methods=("platt",)).p
    op = choose_threshold(y, p, max_f1=True)
    best = max(f1_score(y, p >= t) for t in np.unique(p))
    assert op.f1 == pytest.approx(best) and f1_score(y, p >= op.threshold) == pytest.approx(best)
    assert op.rule == "max_f1" and op.target_fpr is None


def test_unreachable_fpr_is_an_error():
    y = np.array([0, 1, 1, 0, 1])
    p = np.array([0.9, 0.8, 0.7, 0.2, 0.1])  # the highest p is a correct answer
    with pytest.raises(BBWDError, match="no threshold keeps the FPR at or below 0.0"):
        choose_threshold(y, p, 0.0)


def test_fit_calibration_records_where_and_how_it_was_fitted(tmp_path):
    X, y, _ = draw(200, seed=6)
    write_rows(tmp_path / "r.jsonl", X, y)
    scores = read_labelled(tmp_path / "r.jsonl")
    fit = fit_calibration(scores, SETTINGS, source="r.jsonl", folds=4)
    cal = fit.calibration
    on = cal.fitted_on
    assert (on.n, on.positives, on.folds, on.protocol, on.label) == (200, int(y.sum()), 4, "zero-shot", "label")
    assert on.data == {"sciq": 67, "nq": 133} and on.base_rate == pytest.approx(y.mean())
    assert on.cv["auroc"] == pytest.approx(roc_auc_score(y, fit.combined.decision))
    assert on.cv["brier"] == pytest.approx(brier_score_loss(y, fit.combined.p))
    assert cal.operating_point.fpr <= 0.1
    assert "seed" not in cal.settings and "protocol" not in cal.settings and cal.settings["k"] == 10
    assert cal.fingerprint == fingerprint({**SETTINGS, "seed": 123, "protocol": None}, seed=False)
    assert set(fit.singles) == {"avg_wd", "log_eigen_wd"} and fit.extended is None


def test_read_labelled_skips_errors_and_unlabelled_rows_and_refuses_bad_ones(tmp_path):
    path = tmp_path / "r.jsonl"
    X, y, _ = draw(4)
    write_rows(path, X, y)
    with open(path, "a") as f:
        f.write(json.dumps({"id": "e", "error": "boom", "fingerprint": fingerprint(SETTINGS)}) + "\n\n")
        f.write(json.dumps({"id": "m", "avg_wd": 1.0, "eigen_wd": 2.0, "fingerprint": fingerprint(SETTINGS)}) + "\n")
    s = read_labelled(path)
    assert s.y.tolist() == y.tolist() and (s.skipped_errors, s.skipped_unlabelled) == (1, 1)
    assert s.scores["log_eigen_wd"] == pytest.approx(X[:, 1]) and np.isnan(s.scores["lne"]).all()
    for bad, message in [({"label": 2}, "line 1: field 'label' must be 0 or 1"),
                         ({"eigen_wd": 0.0}, "line 1: field 'eigen_wd' must be a finite number > 0"),
                         ({"avg_wd": None}, "line 1: field 'avg_wd' must be a finite number")]:
        write_rows(path, X, y, extra=bad)
        with pytest.raises(BBWDError, match=message):
            read_labelled(path)


def test_rows_from_different_settings_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    X, y, _ = draw(6)
    write_rows(path, X[:3], y[:3], fp="aaaa")
    with open(path, "a") as f:
        f.write(json.dumps({"avg_wd": 50.0, "eigen_wd": 1e8, "label": 1, "fingerprint": "bbbb"}) + "\n")
    with pytest.raises(BBWDError, match=r"mixes rows from different settings \(fingerprints aaaa \(first on line 1\), "
                                        r"bbbb \(first on line 4\)\)"):
        read_labelled(path)


def test_settings_must_be_found_complete_and_those_of_the_rows(tmp_path):
    results = tmp_path / "results.jsonl"
    with pytest.raises(BBWDError, match="settings.json not found .*--settings-from"):
        read_settings(results, None, None)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    assert read_settings(results, None, fingerprint(SETTINGS)) == SETTINGS
    with pytest.raises(BBWDError, match=f"does not describe .* fingerprint {fingerprint(SETTINGS)}, the rows ffff"):
        read_settings(results, None, "ffff")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({k: v for k, v in SETTINGS.items() if k not in ("k", "alpha")}))
    with pytest.raises(BBWDError, match="lacks the setting\\(s\\) k, alpha"):
        read_settings(results, partial, None)


def test_too_few_of_a_class_for_the_folds_is_an_error(tmp_path):
    X, y, _ = draw(40, seed=7)
    y[:] = 1
    y[:9] = 0
    write_rows(tmp_path / "r.jsonl", X, y)
    scores = read_labelled(tmp_path / "r.jsonl")
    with pytest.raises(BBWDError, match="9 correct and 31 hallucinated prompts; 5-fold cross-validation needs at least 10"):
        fit_calibration(scores, SETTINGS)


def test_paired_bootstrap_equals_a_loop_over_the_same_resamples():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 60)
    a = y + rng.normal(0, 1, 60)
    b = y + rng.normal(0, 2, 60)
    d = paired_auroc_diff(y, a, b, n_boot=200, seed=3)
    idx = np.random.default_rng(3).integers(0, 60, (200, 60))
    loop = [roc_auc_score(y[i], a[i]) - roc_auc_score(y[i], b[i]) for i in idx if 0 < y[i].sum() < 60]
    assert d.n_boot == len(loop)
    assert (d.lo, d.hi) == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])), abs=1e-12)
    assert d.diff == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b))
    same = paired_auroc_diff(y, a, a, n_boot=50)
    assert (same.diff, same.lo, same.hi) == (0.0, 0.0, 0.0)


def test_eval_writes_the_settings_its_rows_were_scored_with(tiny_llama, tmp_path):
    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.eval.data import load
    from blackbox_wd.eval.run import evaluate
    from blackbox_wd.pipeline import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.hf import HFTeacher

    teacher = HFTeacher(*tiny_llama, name="tiny")
    detector = Detector(teacher, LocalSampler(teacher), Settings(k=2, max_tokens=4, device="cpu"))
    data = load(Path(__file__).resolve().parents[1] / "fixtures" / "tiny_qa.jsonl", "zero-shot", limit=2)
    rows = evaluate(detector, data, tmp_path, dse="none")
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert settings["protocol"]["prompts"] == "zero-shot" and settings["k"] == 2 and settings["layer"] == teacher.layer
    assert fingerprint(settings) == settings["fingerprint"] == rows[0]["fingerprint"] == rows[1]["fingerprint"]
    assert read_settings(tmp_path / "results.jsonl", None, rows[0]["fingerprint"]) == settings
