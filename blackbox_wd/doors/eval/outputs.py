"""``bbwd eval``'s outputs beside results.jsonl: ``summary.md`` (``eval.summary``), ``roc.png``, ``heatmaps.png``
(``sentence_pr.png``) from per-prompt results (the rows ``eval.summary`` describes).

Figures are drawn on ``matplotlib.figure.Figure`` (Agg canvas), never through pyplot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from sklearn.metrics import precision_recall_curve, roc_auc_score, roc_curve

from blackbox_wd.calibration.evaluation.labels import LABEL_KEYS, TASK_NAMES, Rows, label_array, rows_with
from blackbox_wd.calibration.evaluation.methods import METHODS, get_score, score_array
from blackbox_wd.calibration.evaluation.metrics import N_BOOTSTRAP, SEED, auc_pr, sentence_task
from blackbox_wd.calibration.evaluation.sentences import sentence_arrays
from blackbox_wd.calibration.members import MEMBER_NAMES
from blackbox_wd.doors.eval.summary import write_summary


def plot_roc(results: Rows, path: Path, methods: Sequence[str] = METHODS, label_key: str = "label") -> None:
    """ROC curves of every method with a finite score (label ``label_key``)."""

    y_all = label_array(results, label_key)
    fig = Figure(figsize=(5.5, 5.0))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    for m in methods:
        s = score_array(results, m)
        keep = np.isfinite(s)
        y = y_all[keep]
        if keep.sum() == 0 or y.min() == y.max():
            continue
        fpr, tpr, _ = roc_curve(y, s[keep])
        ax.plot(fpr, tpr, label=f"{MEMBER_NAMES.get(m, m)} ({roc_auc_score(y, s[keep]):.3f})")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate (hallucinations caught)")
    ax.set_title(f"ROC (label `{label_key}`), n={len(results)}, base rate {y_all.mean():.2f}")
    save_figure(fig, ax, path, "lower right")  # no legend when the label has one class


def save_figure(fig: Any, ax: Any, path: Path, legend: str) -> None:
    """Write a one-axes figure as a PNG, with its legend at ``legend`` when it has labelled lines."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc=legend, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_sentence_pr(results: Rows, path: Path) -> None:
    """Precision-recall curves of the sentence score for NonFact and Factual, each with its random rate."""

    rows = rows_with(results, "sentence_labels")
    arrays = sentence_arrays(rows)
    fig = Figure(figsize=(5.5, 5.0))
    ax = fig.add_subplot()
    for task, color in (("nonfact", "C0"), ("factual", "C1")):
        y, s, _ = sentence_task(*arrays, task)
        y, s = y[np.isfinite(s)], s[np.isfinite(s)]
        if y.size == 0:
            continue
        if y.min() != y.max():
            precision, recall, _ = precision_recall_curve(y, s)
            ax.plot(recall, precision, color=color, label=f"{TASK_NAMES[task]} (AUC-PR {100 * auc_pr(y, s):.2f})")
        ax.axhline(
            y.mean(), color=color, linestyle=":", linewidth=1, label=f"{TASK_NAMES[task]} random ({100 * y.mean():.2f})"
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_title(f"Sentence level: {arrays[0].size} sentences of {len(rows)} answers")
    save_figure(fig, ax, path, "lower left")  # no legend when no sentence has a score


def pick_extremes(results: Rows, by: str = "eigen_wd", n: int = 2) -> tuple[list[int], list[int]]:
    """Indices of the n most-likely and n least-likely hallucinations under ``by`` (with a D)."""
    s = score_array(results, by)
    ok = [i for i in range(len(results)) if math.isfinite(s[i]) and results[i].get("D") is not None]
    order = sorted(ok, key=lambda i: s[i], reverse=True)
    top = order[:n]
    bottom = [i for i in order[::-1] if i not in top][:n]
    return top, bottom


def plot_heatmaps(results: Rows, path: Path, by: str = "eigen_wd", n: int = 2, label_key: str = "label") -> None:
    """D of the n most- and n least-likely hallucinations under ``by``, on one colour scale."""

    top, bottom = pick_extremes(results, by, n)
    panels = [(i, "most likely") for i in top] + [(i, "least likely") for i in bottom]
    fig = Figure(figsize=(3.2 * max(len(panels), 1) + 1.0, 3.6), layout="constrained")
    if not panels:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, f"no result with a {by} score and a D matrix", ha="center", va="center")
        ax.set_axis_off()
        fig.savefig(path, dpi=120)
        return
    mats = [np.asarray(results[i]["D"], dtype=float) for i, _ in panels]
    vmax = max(float(m.max()) for m in mats) or 1.0
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (i, what), mat in zip(axes, panels, mats, strict=True):  # at least one panel
        r = results[i]
        image = ax.imshow(mat, cmap="viridis", vmin=0.0, vmax=vmax)
        label = r.get(label_key)
        label_text = "?" if label is None else ("hallucination" if int(label) else "correct")
        ax.set_title(
            f"{what}: {str(r.get('id', i))[:24]}\n{MEMBER_NAMES.get(by, by)}={get_score(r, by):.4g}, {label_text}",
            fontsize="small",
        )
        ax.set_xlabel("response j")
        ax.set_xticks(range(len(mat)))
        ax.set_yticks(range(len(mat)))
    axes[0].set_ylabel("response i")
    fig.colorbar(image, ax=list(axes), shrink=0.9, label="W2 distance")
    fig.savefig(path, dpi=120)


def write_outputs(
    results: Rows,
    out_dir: str | Path,
    *,
    settings: Mapping[str, Any] | None = None,
    title: str = "Hallucination detection",
    n_boot: int = N_BOOTSTRAP,
) -> dict[str, Path]:
    """Write summary.md, roc.png and heatmaps.png (and sentence_pr.png with sentence labels) into ``out_dir``.

    Parameters
    ----------
    results : Rows
        The scored rows (none with an ``error``).
    out_dir : str or Path
        The output folder (made if missing).
    settings : mapping of str to Any or None, default=None
        The reported settings, printed in summary.md.
    title : str, default="Hallucination detection"
        summary.md's title.
    n_boot : int, default=N_BOOTSTRAP
        Bootstrap resamples of every confidence interval (seed ``SEED``).

    Returns
    -------
    paths : dict of str to Path
        Each file written, by its kind (summary, roc, heatmaps, sentence_pr).
    """
    if not results:
        raise ValueError("no results to report")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out / "summary.md", "roc": out / "roc.png", "heatmaps": out / "heatmaps.png"}
    write_summary(results, paths["summary"], METHODS, LABEL_KEYS, settings, title, n_boot, SEED)
    # the first label with both classes, else the first present, on the results that carry it
    present = [k for k in LABEL_KEYS if rows_with(results, k)]
    key = next((k for k in present if len({r[k] for r in rows_with(results, k)}) == 2), present[0] if present else None)
    if key is None:  # continuous labels only (e.g. WikiBio's human_score): no ROC to draw
        del paths["roc"]
    else:
        plot_roc(rows_with(results, key), paths["roc"], METHODS, key)
    plot_heatmaps(results, paths["heatmaps"], "eigen_wd", 2, key or LABEL_KEYS[0])
    if rows_with(results, "sentence_labels"):
        paths["sentence_pr"] = out / "sentence_pr.png"
        plot_sentence_pr(results, paths["sentence_pr"])
    return paths
