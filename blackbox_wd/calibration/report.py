"""The report of ``bbwd calibrate``: ``<name>.md`` and ``<name>.reliability.png`` beside the calibration.

Every figure is cross-validated (out-of-fold, ``calibration.fit``). Ranking: AUROC of the combined
score (the out-of-fold logistic-regression decision) against each single score (the raw score: a
calibrator does not change its ranking), with the percentile CI of their difference from a paired
bootstrap (the same resampled prompts for both; 1000 resamples, seed 0). Probabilities: log-loss of
each calibrator tried, Brier score (``brier_score_loss``), ECE (10 equal-width bins) and the
reliability diagram (``calibration_curve``). The confusion matrix is at the chosen threshold.
Figures are drawn on ``matplotlib.figure.Figure``, never through pyplot.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, confusion_matrix

from blackbox_wd.calibration.model import FEATURES, Platt
from blackbox_wd.calibration.fit import ECE_BINS, CalibrationFit, ModelFit, expected_calibration_error
from blackbox_wd.metrics import N_BOOTSTRAP, SEED, auroc, auroc_with_ci, paired_auroc_diff

NAMES = {"avg_wd": "AvgWD", "log_eigen_wd": "EigenWD (log)", "lne": "LNE", "ls": "LS", "es": "ES", "er": "ER",
         "dse": "DSE"}


def _name(features: Sequence[str]) -> str:
    return " + ".join(NAMES.get(f, f) for f in features)


def _ranking(fit: CalibrationFit) -> list[str]:
    y = fit.scores.y
    combined = fit.combined.decision
    first = auroc_with_ci(y, combined)
    lines = ["| score | CV AUROC | 95% CI | combined - score | 95% CI of the difference |", "|---|---|---|---|---|",
             f"| **combined: {_name(FEATURES)} (applied)** | **{first.auroc:.3f}** | [{first.lo:.3f}, {first.hi:.3f}] "
             "| — | — |"]
    if fit.extended is not None:
        ext = auroc_with_ci(y, fit.extended.decision)
        d = paired_auroc_diff(y, combined, fit.extended.decision)
        lines.append(f"| combined + {_name(fit.baselines)} (for information, not applied) | {ext.auroc:.3f} | "
                     f"[{ext.lo:.3f}, {ext.hi:.3f}] | {d.diff:+.3f} | [{d.lo:+.3f}, {d.hi:+.3f}] |")
    for name in fit.singles:
        raw = fit.scores.scores[name]
        one = auroc_with_ci(y, raw)
        d = paired_auroc_diff(y, combined, raw)
        lines.append(f"| {NAMES.get(name, name)} | {one.auroc:.3f} | [{one.lo:.3f}, {one.hi:.3f}] | "
                     f"{d.diff:+.3f} | [{d.lo:+.3f}, {d.hi:+.3f}] |")
    return lines


def _calibrators(fit: CalibrationFit) -> list[str]:
    y = fit.scores.y
    lines = ["| score | log-loss, isotonic | log-loss, Platt | chosen | Brier | ECE |", "|---|---|---|---|---|---|"]
    models: list[tuple[str, ModelFit]] = [("**combined (applied)**", fit.combined)]
    models += [(NAMES.get(name, name), m) for name, m in fit.singles.items()]
    for name, m in models:
        loss = m.log_loss
        lines.append(f"| {name} | {loss.get('isotonic', float('nan')):.4f} | {loss.get('platt', float('nan')):.4f} | "
                     f"{m.model.method} | {brier_score_loss(y, m.p):.4f} | {expected_calibration_error(y, m.p):.4f} |")
    return lines


def _operating_point(fit: CalibrationFit) -> list[str]:
    y = fit.scores.y
    op = fit.calibration.operating_point
    rule = f"the smallest threshold with FPR <= {op.target_fpr:g}" if op.rule == "target_fpr" else "maximum F1"
    (tn, fp), (fn, tp) = confusion_matrix(y, (fit.combined.p >= op.threshold).astype(int), labels=[0, 1])
    return [f"Rule: {rule}. **Threshold {op.threshold:.4f}**: a prompt is flagged when p >= the threshold.", "",
            f"FPR {op.fpr:.3f}, TPR (recall) {op.tpr:.3f}, precision {op.precision:.3f}, F1 {op.f1:.3f}.", "",
            "| | flagged | not flagged |", "|---|---|---|",
            f"| hallucination (1) | {tp} | {fn} |", f"| correct (0) | {fp} | {tn} |"]


def _model(fit: CalibrationFit) -> list[str]:
    m = fit.calibration.model
    lines = ["z = sum_j coef_j (x_j - mean_j) / scale_j + intercept, x = [AvgWD, ln EigenWD]; "
             f"p = {m.method} calibrator of z.", "", "| feature | mean | scale | coef |", "|---|---|---|---|"]
    lines += [f"| {NAMES.get(f, f)} | {mu:.6g} | {s:.6g} | {c:+.4f} |"
              for f, mu, s, c in zip(m.features, m.mean, m.scale, m.coef)]
    lines.append(f"| intercept | | | {m.intercept:+.4f} |")
    c = m.calibrator
    if isinstance(c, Platt):
        lines += ["", f"Platt: p = 1 / (1 + exp(a z + b)), a = {c.a:.6g}, b = {c.b:.6g}."]
    else:
        lines += ["", f"Isotonic: {len(c.x)} points, z from {c.x[0]:.4g} to {c.x[-1]:.4g}, "
                      f"p from {c.y[0]:.3f} to {c.y[-1]:.3f}."]
    return lines


def report_markdown(fit: CalibrationFit, json_name: str, png_name: str) -> str:
    """The calibration report as markdown."""
    cal, s = fit.calibration, fit.scores
    on = cal.fitted_on
    data = ", ".join(f"{name} ({n})" for name, n in on.data.items())
    settings = ", ".join(f"{k}={json.dumps(v)}" for k, v in cal.settings.items())
    lines = [f"# Calibration `{json_name}`", "",
             f"- fitted on: `{on.source}`: {data}; prompt protocol: {on.protocol or 'none recorded'}; label `{on.label}`",
             f"- samples: {on.samples or 'drawn under the settings below'}",
             f"- prompts: {on.n} (skipped: {s.skipped_errors} with an error, {s.skipped_unlabelled} without "
             f"`{on.label}`); hallucination base rate {on.base_rate:.3f} ({on.positives} of {on.n})",
             f"- valid for settings fingerprint `{cal.fingerprint}` (seed excluded): {settings}",
             f"- cross-validation: {on.folds}-fold stratified, shuffled (seed {on.seed}); every figure below is "
             "out-of-fold; AUROC CIs are 95% percentile bootstrap over prompts, "
             f"{N_BOOTSTRAP} resamples, seed {SEED}, paired (same resamples) for the differences",
             f"- bbwd {cal.bbwd_version}", "",
             "## Ranking", "",
             "The combined score is the out-of-fold decision of a logistic regression on the standardised "
             "features; a single score is ranked as it is.", ""]
    lines += _ranking(fit)
    lines += ["", "## Probability", "",
              "Each model's calibrator is the one with the lower out-of-fold log-loss; Brier and ECE "
              f"({ECE_BINS} equal-width bins of p) of its out-of-fold probabilities.", ""]
    lines += _calibrators(fit)
    lines += ["", f"![reliability diagram]({png_name})", "", "## Operating point (out-of-fold probabilities)", ""]
    lines += _operating_point(fit)
    lines += ["", "## Applied model", ""] + _model(fit) + [""]
    return "\n".join(lines)


def plot_reliability(fit: CalibrationFit, path: Path, bins: int = ECE_BINS) -> None:
    """Reliability diagram of the out-of-fold probabilities (applied model and single scores) and their histogram."""
    from matplotlib.figure import Figure

    y = fit.scores.y
    fig = Figure(figsize=(5.5, 6.5))
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    top.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="perfectly calibrated")
    models = [("combined (applied)", fit.combined)] + [(NAMES.get(n, n), m) for n, m in fit.singles.items()]
    for name, m in models:
        true, pred = calibration_curve(y, m.p, n_bins=bins, strategy="uniform")
        top.plot(pred, true, marker="o", markersize=3, linewidth=2 if m is fit.combined else 1,
                 label=f"{name}: ECE {expected_calibration_error(y, m.p, bins):.3f}")
    top.set_ylabel("fraction of hallucinations")
    top.set_title(f"Reliability (out-of-fold), n={len(y)}, base rate {y.mean():.2f}")
    top.legend(loc="upper left", fontsize="small")
    bottom.hist(fit.combined.p, bins=np.linspace(0, 1, bins + 1), color="C0")
    bottom.axvline(fit.calibration.threshold, color="C3", linestyle="--", linewidth=1, label="threshold")
    bottom.set_xlabel("predicted p (combined)")
    bottom.set_ylabel("prompts")
    bottom.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def summary_line(fit: CalibrationFit) -> str:
    """One line: n, base rate, CV AUROC of the combined and single scores, the threshold and its operating point."""
    on, op, y = fit.calibration.fitted_on, fit.calibration.operating_point, fit.scores.y
    singles = ", ".join(f"{NAMES.get(n, n)} {auroc(y, fit.scores.scores[n]):.3f}" for n in fit.singles)
    return (f"n={on.n}, base rate {on.base_rate:.3f}; CV AUROC combined {on.cv['auroc']:.3f} ({singles}); "
            f"{fit.calibration.model.method} calibrator, Brier {on.cv['brier']:.4f}, ECE {on.cv['ece']:.4f}; "
            f"threshold {op.threshold:.4f}: FPR {op.fpr:.3f}, TPR {op.tpr:.3f}")


def write_report(fit: CalibrationFit, calibration_path: Path) -> dict[str, Path]:
    """Write ``<name>.md`` and ``<name>.reliability.png`` beside the calibration file; return their paths."""
    paths = {"report": calibration_path.with_suffix(".md"),
             "reliability": calibration_path.with_name(calibration_path.stem + ".reliability.png")}
    plot_reliability(fit, paths["reliability"])
    paths["report"].write_text(report_markdown(fit, calibration_path.name, paths["reliability"].name), encoding="utf-8")
    return paths
