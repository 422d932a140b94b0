"""The summary of a full fit (``bbwd calibrate``): ``<name>.md`` and ``<name>.reliability.png`` beside the
calibration, and the line ``bbwd calibrate`` prints.

Every figure is cross-validated by prompt (``calibration.combine``). For each head: its members and their
weights (the coefficients of the standardised members, fitted on all rows: the verdict's weights), the
out-of-fold AUROC of its combined score beside each single member's (the raw member: a calibrator does not
change its ranking; 0/1 rows only, with the paired bootstrap CI of the difference, 1000 resamples, seed 0),
the log-loss of each calibrator tried, Brier score and ECE (``evaluation.reliability``'s 10 bins) of its
out-of-fold p, and its threshold with what it gave out of fold. The same for the sentence head. Figures are drawn on
``matplotlib.figure.Figure``, never through pyplot.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from sklearn.metrics import brier_score_loss

from blackbox_wd.adaptive import DELTA
from blackbox_wd.calibration.combine import HeadFit, Table
from blackbox_wd.calibration.evaluation.metrics import N_BOOTSTRAP, SEED, auroc, auroc_with_ci, paired_auroc_diff
from blackbox_wd.calibration.evaluation.reliability import BINS, bins_of, expected_calibration_error
from blackbox_wd.calibration.fit import CalibrationFit
from blackbox_wd.calibration.heads import Platt
from blackbox_wd.calibration.members import CLAIM_NAMES, MEMBER_NAMES, PASSAGE_TOKENS


def _head_lines(fit: HeadFit, table: Table, title: str, names: dict[str, str] = MEMBER_NAMES) -> list[str]:
    m, op = fit.head.model, fit.head.operating_point
    rows = fit.rows
    hard = rows & (table.w == 1.0)  # rows with a 0/1 label: the AUROCs
    y, w = table.y[rows], table.w[rows]
    z = np.full(table.y.size, np.nan)
    z[rows] = fit.z
    combined = auroc_with_ci(table.y[hard], z[hard])
    lines = [
        f"### {title}: {', '.join(names.get(f, f) for f in m.features)}",
        "",
        f"{int(np.unique(table.groups[rows]).size)} prompts; p = {m.method} calibrator of z = sum_j coef_j "
        "(x_j - mean_j) / scale_j + intercept.",
        "",
        "| member | mean | scale | coef (weight) | CV AUROC alone (0/1 rows) | combined - member [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    for f, mu, s, c in zip(m.features, m.mean, m.scale, m.coef, strict=True):
        x = table.members[f]
        d = paired_auroc_diff(table.y[hard], z[hard], x[hard])
        lines.append(
            f"| {names.get(f, f)} | {mu:.6g} | {s:.6g} | {c:+.4f} | {auroc(table.y[hard], x[hard]):.3f} | "
            f"{d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] |"
        )
    lines += [
        f"| intercept | | | {m.intercept:+.4f} | | |",
        "",
        f"Combined score, out of fold: AUROC {combined.auroc:.3f} [{combined.lo:.3f}, {combined.hi:.3f}] (0/1 rows); "
        f"log-loss isotonic {fit.log_loss.get('isotonic', float('nan')):.4f}, Platt "
        f"{fit.log_loss.get('platt', float('nan')):.4f}; Brier {brier_score_loss(y, fit.p, sample_weight=w):.4f}, "
        f"ECE {expected_calibration_error(y, fit.p, w=w):.4f}.",
        "",
    ]
    cal = m.calibrator
    lines.append(
        f"Platt: p = 1 / (1 + exp(a z + b)), a = {cal.a:.6g}, b = {cal.b:.6g}."
        if isinstance(cal, Platt)
        else f"Isotonic: {len(cal.x)} points, z from {cal.x[0]:.4g} to {cal.x[-1]:.4g}, p from {cal.y[0]:.3f} to "
        f"{cal.y[-1]:.3f}."
    )
    by_set = op.fpr_range is not None and op.tpr_range is not None
    how = "leave-one-set-out" if by_set else "out-of-fold"
    spread = (
        f"; on each data set left out FPR {op.fpr_range[0]:.3f}-{op.fpr_range[1]:.3f}, "  # type: ignore[index]
        f"TPR {op.tpr_range[0]:.3f}-{op.tpr_range[1]:.3f}"  # type: ignore[index]
        if by_set
        else ""
    )
    lines += [
        "",
        f"**Threshold {op.threshold:.4f}** (the smallest with {how} FPR <= {op.target_fpr:g}): FPR {op.fpr:.3f}, "
        f"TPR {op.tpr:.3f}, precision {op.precision:.3f}, F1 {op.f1:.3f}{spread}.",
        "",
    ]
    return lines


def fit_markdown(fit: CalibrationFit, json_name: str, png_name: str) -> str:
    """The fit's summary as markdown (``<name>.md``)."""
    cal, labelled = fit.calibration, fit.labelled
    on = cal.fitted_on
    data = ", ".join(f"{name} ({n})" for name, n in on.data.items())
    settings = ", ".join(f"{k}={json.dumps(v)}" for k, v in cal.settings.items())
    lines = [
        f"# Calibration `{json_name}`",
        "",
        f"- fitted on: `{on.source}`: {data}; prompt protocol: {on.protocol or 'none recorded'}; label `{on.label}` "
        "(a row without it: its `human_score`, as two rows weighted h and 1 - h)",
        f"- samples: {on.samples or 'drawn under the settings below'}",
        f"- prompts: {on.n} (skipped: {labelled.skipped_errors} with an error, {labelled.skipped_unlabelled} "
        f"without a label); hallucination base rate {on.base_rate:.3f}",
        f"- valid for settings fingerprint `{cal.fingerprint}` (seed excluded): {settings}",
        f"- cross-validation: {on.folds}-fold, grouped by prompt, stratified, shuffled (seed {on.seed}); every "
        f"figure below is out-of-fold; AUROC CIs are 95% percentile bootstrap over prompts, {N_BOOTSTRAP} "
        f"resamples, seed {SEED}, paired (same resamples) for the differences",
        f"- bbwd {cal.bbwd_version}",
        "",
        "## Heads",
        "",
        "A result is judged by the first applied head whose members it has. Each fitted head below is applied "
        "without the members it gives no weight, and once: the applied heads, in order, read "
        + "; ".join(f"[{', '.join(h.members)}]" for h in fit.calibration.heads)
        + "."
        + (
            f" On a passage (the median sample has at least {PASSAGE_TOKENS} tokens) it reads "
            f"{', '.join(cal.short_only)} as missing: they are defined for short answers only."
            if cal.short_only
            else ""
        ),
        "",
    ]
    for n, head in enumerate(fit.heads):
        lines += _head_lines(head, labelled.answers, f"Head {n + 1}")
    if fit.sentence is not None and labelled.sentences is not None:
        lines += [
            "## Sentence head",
            "",
            f"{on.sentence_n} sentences, share inaccurate (minor or major) {on.sentence_base_rate:.3f}.",
            "",
        ]
        lines += _head_lines(fit.sentence, labelled.sentences, "Sentences")
    if fit.claim is not None and labelled.claims is not None:
        lines += [
            "## Claim head",
            "",
            f"{on.claim_n} claims, share unsupported {on.claim_base_rate:.3f} (`other` left out).",
            "",
        ]
        lines += _head_lines(fit.claim, labelled.claims, "Claims", CLAIM_NAMES)
    if cal.rounds:
        lines += [
            "## Heads at other K, and the stages of `-k auto`",
            "",
            f"Each K's heads are fitted on the rows of its run (a record's first K samples); they judge a run of K "
            f"samples, and of every K up to the next fitted one. Below K = {cal.k} (the heads above), `-k auto` up to "
            f"{cal.k} stops a prompt at stage k when its p there is below `below` or above `above` "
            f"(`adaptive.fit_settle`, delta {DELTA}).",
            "",
            "| k | below | above | first head's members | its threshold (FPR) |",
            "|--:|--:|--:|:--|:--|",
            *(
                f"| {s.k} | {s.settle.below:.4f} | {s.settle.above:.4f} | {', '.join(s.heads[0].members)} | "
                f"{s.heads[0].operating_point.threshold:.4f} ({s.heads[0].operating_point.fpr:.3f}) |"
                for s in cal.rounds
            ),
            "",
        ]
    lines += [f"![reliability diagram]({png_name})", ""]
    return "\n".join(lines)


def plot_reliability(fit: CalibrationFit, path: Path, bins: int = BINS) -> None:
    """Reliability diagram of each head's out-of-fold probabilities, and the first head's histogram."""
    fig = Figure(figsize=(5.5, 6.5))
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 1], sharex=True)
    top.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1, label="perfectly calibrated")
    t = fit.labelled.answers
    heads = [(f"head {n + 1}", h, t) for n, h in enumerate(fit.heads)]
    if fit.sentence is not None and fit.labelled.sentences is not None:
        heads.append(("sentences", fit.sentence, fit.labelled.sentences))
    for name, h, table in heads:
        y, w = table.y[h.rows], table.w[h.rows]
        hard = w == 1.0
        filled = [b for b in bins_of(y[hard], h.p[hard], bins) if b.n]
        top.plot(
            [b.p for b in filled],
            [b.rate for b in filled],
            marker="o",
            markersize=3,
            linewidth=2 if h is fit.heads[0] else 1,
            label=f"{name}: ECE {expected_calibration_error(y, h.p, bins, w):.3f}",
        )
    top.set_ylabel("fraction of hallucinations (0/1 rows)")
    top.set_title(f"Reliability (out-of-fold), {fit.calibration.fitted_on.n} prompts")
    top.legend(loc="upper left", fontsize="small")
    first = fit.heads[0]
    bottom.hist(first.p, bins=np.linspace(0, 1, bins + 1), color="C0", weights=t.w[first.rows])
    bottom.axvline(
        fit.calibration.operating_point.threshold, color="C3", linestyle="--", linewidth=1, label="threshold"
    )
    bottom.set_xlabel("predicted p (head 1)")
    bottom.set_ylabel("prompts")
    bottom.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def summary_line(fit: CalibrationFit) -> str:
    """One line: prompts, base rate, the first head's members, CV AUROC and threshold; the sentence head's."""
    on, op = fit.calibration.fitted_on, fit.calibration.operating_point
    line = (
        f"n={on.n}, base rate {on.base_rate:.3f}; {len(fit.calibration.heads)} heads applied of "
        f"{len(fit.heads)} fitted, the first over "
        f"{', '.join(fit.calibration.model.features)}: CV AUROC {on.cv['auroc']:.3f}, "
        f"{fit.calibration.model.method} calibrator, Brier {on.cv['brier']:.4f}, ECE {on.cv['ece']:.4f}; "
        f"threshold {op.threshold:.4f}: FPR {op.fpr:.3f}, TPR {op.tpr:.3f}"
    )
    if fit.calibration.sentence is not None:
        sop = fit.calibration.sentence.operating_point
        line += f"; sentence head on {on.sentence_n} sentences: threshold {sop.threshold:.4f}, FPR {sop.fpr:.3f}"
    if fit.calibration.claim is not None:
        cop = fit.calibration.claim.operating_point
        line += f"; claim head on {on.claim_n} claims: threshold {cop.threshold:.4f}, FPR {cop.fpr:.3f}"
    if fit.calibration.rounds:
        line += "; heads at K = " + ", ".join(
            f"{s.k}"
            + (f" (stop below {s.settle.below:.3f} or above {s.settle.above:.3f})" if s.k < fit.calibration.k else "")
            for s in fit.calibration.rounds
        )
    if fit.left_out:
        line += f"; {len(fit.left_out)} heads left out, as they cannot flag: {fit.left_out[0]}"
        line += f" (and {len(fit.left_out) - 1} more)" if len(fit.left_out) > 1 else ""
    return line


def write_fit_summary(fit: CalibrationFit, calibration_path: Path) -> dict[str, Path]:
    """Write ``<name>.md`` and ``<name>.reliability.png`` beside the calibration file.

    Parameters
    ----------
    fit : CalibrationFit
    calibration_path : Path
        The calibration file written.

    Returns
    -------
    dict of str to Path
        ``summary`` (the markdown) and ``reliability`` (the plot).
    """
    paths = {
        "summary": calibration_path.with_suffix(".md"),
        "reliability": calibration_path.with_name(calibration_path.stem + ".reliability.png"),
    }
    plot_reliability(fit, paths["reliability"])
    paths["summary"].write_text(fit_markdown(fit, calibration_path.name, paths["reliability"].name), encoding="utf-8")
    return paths
