"""The evaluation report: ``summary.md``, ``roc.png`` and ``heatmaps.png`` from per-prompt results.

A per-prompt result is a dict (e.g. ``pipeline.Result.to_dict()`` plus labels) holding:

* ``label``: 1 = hallucination, 0 = correct (primary label); optionally ``label_em`` (secondary);
* the score of every method, looked up as ``r[m]``, else ``r["baselines"][m]``, else
  ``r["scores"][m]`` for m in avg_wd, eigen_wd, lne, ls, es, er, dse (missing/None -> NaN, and
  that prompt is left out of that method's AUROC);
* ``D``: the K x K distance matrix (nested lists or an array), for the heat maps;
* optionally ``id`` and ``settings``.

Figures are drawn on ``matplotlib.figure.Figure`` (Agg canvas), never through pyplot.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from blackbox_wd.eval.metrics import N_BOOTSTRAP, SEED, AurocResult, auroc_with_ci

METHODS = ("avg_wd", "eigen_wd", "lne", "ls", "es", "er", "dse")
NAMES = {"avg_wd": "AvgWD", "eigen_wd": "EigenWD", "lne": "LNE", "ls": "LS", "es": "ES", "er": "ER",
         "dse": "DSE"}
LABEL_NAMES = {"label": "ROUGE-L >= 0.5 (QA) / answer equivalence (MATH)",
               "label_em": "exact match / containment (QA)",
               "label_judge": "LLM judge through the API client (first response)"}


def get_score(result: Mapping[str, Any], method: str) -> float:
    """The method's score in a result dict (top level, then 'baselines', then 'scores'); NaN if absent."""
    for where in (result, result.get("baselines") or {}, result.get("scores") or {}):
        value = where.get(method)
        if value is not None and not isinstance(value, (dict, list)):
            return float(value)
    return float("nan")


def score_array(results: Sequence[Mapping[str, Any]], method: str) -> np.ndarray:
    """Scores of one method over all results (NaN where missing)."""
    return np.array([get_score(r, method) for r in results], dtype=float)


def labelled(results: Sequence[Mapping[str, Any]], key: str) -> list[Mapping[str, Any]]:
    """The results that carry label ``key`` (math items have no ``label_em``; a judge may not answer)."""
    return [r for r in results if r.get(key) is not None]


def label_array(results: Sequence[Mapping[str, Any]], key: str = "label") -> np.ndarray:
    """0/1 labels under ``key``; KeyError when a result lacks it."""
    return np.array([int(r[key]) for r in results], dtype=int)


def summarize(results: Sequence[Mapping[str, Any]], methods: Sequence[str] = METHODS, label_key: str = "label",
              n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> dict[str, AurocResult]:
    """AUROC with 95% bootstrap CI of every method that has at least one finite score."""
    y = label_array(results, label_key)
    out = {}
    for m in methods:
        s = score_array(results, m)
        if np.isfinite(s).any():
            out[m] = auroc_with_ci(y, s, n_boot=n_boot, seed=seed)
    return out


def _fmt(x: float) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.3f}"


def _table(aurocs: Mapping[str, AurocResult], methods: Sequence[str]) -> list[str]:
    finite = [a.auroc for a in aurocs.values() if math.isfinite(a.auroc)]
    best = max(finite) if finite else None
    lines = ["| method | AUROC | 95% CI | n |", "|---|---|---|---|"]
    for m in methods:
        name = NAMES.get(m, m)
        a = aurocs.get(m)
        if a is None:
            lines.append(f"| {name} | — | — | 0 |")
            continue
        value = _fmt(a.auroc)
        if best is not None and math.isfinite(a.auroc) and np.isclose(a.auroc, best):
            name, value = f"**{name}**", f"**{value}**"
        lines.append(f"| {name} | {value} | [{_fmt(a.lo)}, {_fmt(a.hi)}] | {a.n} |")
    return lines


def write_summary(results: Sequence[Mapping[str, Any]], path: Path, methods: Sequence[str] = METHODS,
                  label_keys: Sequence[str] = ("label", "label_em"), settings: Mapping[str, Any] | None = None,
                  title: str = "Hallucination detection", n_boot: int = N_BOOTSTRAP,
                  seed: int = SEED) -> dict[str, dict[str, AurocResult]]:
    """Write summary.md; return {label_key: {method: AurocResult}}."""
    lines = [f"# {title}", "", f"- prompts: {len(results)}",
             f"- AUROC: higher score = more likely hallucination; 95% percentile bootstrap CI, "
             f"{n_boot} resamples, seed {seed}; best in bold", ""]
    tables: dict[str, dict[str, AurocResult]] = {}
    for key in label_keys:
        rows = labelled(results, key)
        if not rows:
            continue
        y = label_array(rows, key)
        tables[key] = summarize(rows, methods, key, n_boot, seed)
        lines += [f"## Label `{key}`: {LABEL_NAMES.get(key, key)}", "",
                  f"Hallucination base rate: {y.mean():.3f} ({int(y.sum())} of {y.size})", ""]
        lines += _table(tables[key], methods) + [""]
    if settings is None and results:
        settings = results[0].get("settings")
    if settings:
        lines += ["## Settings", ""]
        lines += [f"- {k}: `{json.dumps(v, default=str)}`" for k, v in settings.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return tables


def plot_roc(results: Sequence[Mapping[str, Any]], path: Path, methods: Sequence[str] = METHODS,
             label_key: str = "label") -> None:
    """ROC curves of every method with a finite score (label ``label_key``)."""
    from matplotlib.figure import Figure
    from sklearn.metrics import roc_auc_score, roc_curve

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
        ax.plot(fpr, tpr, label=f"{NAMES.get(m, m)} ({roc_auc_score(y, s[keep]):.3f})")
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate (hallucinations caught)")
    ax.set_title(f"ROC (label `{label_key}`), n={len(results)}, base rate {y_all.mean():.2f}")
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def pick_extremes(results: Sequence[Mapping[str, Any]], by: str = "eigen_wd",
                  n: int = 2) -> tuple[list[int], list[int]]:
    """Indices of the n most-likely and n least-likely hallucinations under ``by`` (with a D)."""
    s = score_array(results, by)
    ok = [i for i in range(len(results)) if math.isfinite(s[i]) and results[i].get("D") is not None]
    order = sorted(ok, key=lambda i: s[i], reverse=True)
    top = order[:n]
    bottom = [i for i in order[::-1] if i not in top][:n]
    return top, bottom


def plot_heatmaps(results: Sequence[Mapping[str, Any]], path: Path, by: str = "eigen_wd", n: int = 2,
                  label_key: str = "label") -> None:
    """D of the n most- and n least-likely hallucinations under ``by``, on one colour scale."""
    from matplotlib.figure import Figure

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
    image = None
    for ax, (i, what), mat in zip(axes, panels, mats):
        r = results[i]
        image = ax.imshow(mat, cmap="viridis", vmin=0.0, vmax=vmax)
        label = r.get(label_key)
        label_text = "?" if label is None else ("hallucination" if int(label) else "correct")
        ax.set_title(f"{what}: {str(r.get('id', i))[:24]}\n{NAMES.get(by, by)}={get_score(r, by):.4g}, "
                     f"{label_text}", fontsize="small")
        ax.set_xlabel("response j")
        ax.set_xticks(range(len(mat)))
        ax.set_yticks(range(len(mat)))
    axes[0].set_ylabel("response i")
    fig.colorbar(image, ax=list(axes), shrink=0.9, label="W2 distance")
    fig.savefig(path, dpi=120)


def write_report(results: Sequence[Mapping[str, Any]], out_dir: str | Path, *,
                 settings: Mapping[str, Any] | None = None, methods: Sequence[str] = METHODS,
                 label_keys: Sequence[str] = ("label", "label_em", "label_judge"), heatmap_by: str = "eigen_wd",
                 n_heat: int = 2, title: str = "Hallucination detection", n_boot: int = N_BOOTSTRAP,
                 seed: int = SEED) -> dict[str, Path]:
    """Write summary.md, roc.png and heatmaps.png into ``out_dir``; return their paths."""
    if not results:
        raise ValueError("no results to report")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"summary": out / "summary.md", "roc": out / "roc.png", "heatmaps": out / "heatmaps.png"}
    write_summary(results, paths["summary"], methods, label_keys, settings, title, n_boot, seed)
    # the first label with both classes, on the results that carry it
    key = next((k for k in label_keys if len({r[k] for r in labelled(results, k)}) == 2), label_keys[0])
    plot_roc(labelled(results, key), paths["roc"], methods, key)
    plot_heatmaps(results, paths["heatmaps"], heatmap_by, n_heat, key)
    return paths
