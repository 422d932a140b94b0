"""W2 members that mean the same for every teacher: fitted on one teacher's rows, judged on another's.

The rule, written before the run: docs/results-notebook.md, "W2 members that mean the same for every teacher". Per
kind of answer, the standardised mean of the kind's members that read the texts alone (BASE, as a teacher without a
calibration of its own is judged) against BASE plus each candidate, the control (raw AvgWD) printed beside. For each
direction (fit on one teacher's runs, judge the other's) and each model left out, the means and scales come from the
fitting teacher's rows of the other models (the left-out model's questions removed). Printed: AUROC per (set, kind)
cell, the mean gain over BASE per kind with its 5th percentile over paired bootstrap draws, and the decision.

    python -m bench.quality.teacher_members --runs R --other G   # R, G: folders of <set>-k10/results.jsonl
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.verdicts import labelled_rows, model_of, question_of
from blackbox_wd.calibration.choose import aurocs, resample_counts
from blackbox_wd.calibration.fit import DESIGN
from blackbox_wd.calibration.members import SHORT_ONLY, TEACHER_FREE, answer_kind, member_value

K = 10
MIN_EACH = 20  # rows of each label in a cell
GAIN, RESAMPLES = 0.01, 1000
CANDIDATES: dict[str, tuple[str, ...]] = {
    "log_eigen_wd": ("log_eigen_wd",),
    "answer_wd_rank": ("answer_wd_rank",),
    "both": ("log_eigen_wd", "answer_wd_rank"),
}
CONTROL = {"avg_wd (control)": ("avg_wd",)}


def answer_wd_rank(row: dict[str, Any]) -> float | None:
    """The judged answer's mean W2 to the samples ranked among each sample's mean W2 to the others: (samples below +
    half of those equal) / K; None without a judged answer's AnswerWD or two samples.

    >>> answer_wd_rank({"answer_wd": 2.0, "D": [[0, 1, 3], [1, 0, 2], [3, 2, 0]]})
    0.5
    """
    d, a = np.asarray(row.get("D") or [], dtype=float), row.get("answer_wd")
    if a is None or d.ndim != 2 or d.shape[0] < 2:
        return None
    means = d.sum(axis=1) / (d.shape[0] - 1)
    tol = 1e-9 * max(float(d.max()), float(a))
    return float((np.sum(means < a - tol) + 0.5 * np.sum(np.abs(means - a) <= tol)) / d.shape[0])


def value(row: dict[str, Any], name: str) -> float | None:
    """A member of an eval row, ``answer_wd_rank`` computed from its D and AnswerWD."""
    return answer_wd_rank(row) if name == "answer_wd_rank" else member_value(row, name)


def members(kind: str, extra: Sequence[str]) -> tuple[str, ...]:
    """BASE's members of ``kind`` and the candidate's ``extra`` (a short-answer member left out on passages)."""
    base = tuple(m for m in DESIGN.of_kind(kind) if m in TEACHER_FREE and not (kind == "passage" and m in SHORT_ONLY))
    return base + tuple(m for m in extra if not (kind == "passage" and m in SHORT_ONLY))


def matrix(rows: Sequence[dict[str, Any]], names: Sequence[str]) -> np.ndarray:
    """(rows, members), NaN where a row lacks a member."""
    return np.array([[np.nan if (v := value(r, m)) is None else v for m in names] for r in rows], dtype=float)


def mean_score(train: np.ndarray, test: np.ndarray) -> np.ndarray:
    """The standardised mean of ``test``'s members under ``train``'s means and scales, a missing member at z = 0."""
    mean, scale = np.nanmean(train, axis=0), np.nanstd(train, axis=0)
    scale = np.where(scale > 0, scale, np.inf)
    z = np.nan_to_num((test - mean) / scale, nan=0.0)
    return z.mean(axis=1)


def read_runs(root: Path) -> dict[str, list[dict[str, Any]]]:
    """{set: labelled rows} of ``root``'s ``<set>-k10`` runs."""
    return {p.parent.name[: -len(f"-k{K}")]: labelled_rows(p) for p in sorted(root.glob(f"*-k{K}/results.jsonl"))}


def cells(fit: dict[str, list[dict]], judged: dict[str, list[dict]], names: dict[str, tuple[str, ...]]) -> list[dict]:
    """Each (left-out set, kind) cell of one direction: its labels and each candidate's scores."""
    out = []
    for model in sorted({model_of(s) for s in judged}):
        held = [s for s in judged if model_of(s) == model]
        unseen = {question_of(r) for s in held for r in judged[s]}
        train = [r for s, rows in fit.items() if model_of(s) != model for r in rows if question_of(r) not in unseen]
        for s in held:
            for kind in ("phrase", "sentence", "passage"):
                rows = [r for r in judged[s] if answer_kind(r, K) == kind]
                tr = [r for r in train if answer_kind(r, K) == kind]
                y = np.array([r["y"] for r in rows], dtype=float)
                if not tr or len(rows) < 2 * MIN_EACH:
                    continue
                scores = {
                    n: mean_score(matrix(tr, members(kind, e)), matrix(rows, members(kind, e)))
                    for n, e in names.items()
                }
                out.append({"set": s, "kind": kind, "y": y, "scores": scores})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, required=True, help="the default teacher's runs")
    ap.add_argument("--other", type=Path, required=True, help="a second teacher's runs of the same rows")
    args = ap.parse_args(argv)
    a, b = read_runs(args.runs), read_runs(args.other)
    both = sorted(set(a) & set(b))
    ids = {s: {r["id"] for r in a[s]} & {r["id"] for r in b[s]} for s in both}
    a = {s: [r for r in a[s] if r["id"] in ids[s]] for s in both}
    b = {s: [r for r in b[s] if r["id"] in ids[s]] for s in both}
    names = {"base": (), **CANDIDATES, **CONTROL}
    gains: dict[str, dict[str, list[np.ndarray]]] = {}
    print(f"sets: {', '.join(both)}; K = {K}")
    print("| fit on | judged | set | kind | n (pos) | " + " | ".join(names) + " |")
    print("|---|---|---|---|---|" + "---|" * len(names))
    for fit_name, fit, judged_name, judged in (("runs", a, "other", b), ("other", b, "runs", a)):
        for c in cells(fit, judged, names):
            y = c["y"]
            binary = np.all((y == 0) | (y == 1))
            if not binary:
                r = {n: 100 * np.corrcoef(y, s)[0, 1] for n, s in c["scores"].items()}
                line = " | ".join(f"r {v:.1f}" for v in r.values())
                print(f"| {fit_name} | {judged_name} | {c['set']} | {c['kind']} | {y.size} | {line} |")
                continue
            if min(int(y.sum()), int((1 - y).sum())) < MIN_EACH:
                continue
            counts = resample_counts(y.size, RESAMPLES, seed=0)
            draws = {n: aurocs(s, y, np.ones(y.size), counts) for n, s in c["scores"].items()}
            line = " | ".join(f"{d[0]:.3f}" for d in draws.values())
            print(f"| {fit_name} | {judged_name} | {c['set']} | {c['kind']} | {y.size} ({int(y.sum())}) | {line} |")
            for n in (*CANDIDATES, *CONTROL):
                gains.setdefault(c["kind"], {}).setdefault(n, []).append(draws[n] - draws["base"])
    print("\n| kind | candidate | cells | mean gain | 5th pct | adopted |")
    print("|---|---|---|---|---|---|")
    for kind, by in gains.items():
        best = None
        for n, g in by.items():
            mean = np.mean(np.stack(g), axis=0)
            low = float(np.quantile(mean[1:], 0.05))
            ok = n in CANDIDATES and mean[0] >= GAIN and low > 0
            if ok and (best is None or mean[0] > best[1]):
                best = (n, mean[0])
            print(f"| {kind} | {n} | {len(g)} | {mean[0]:+.4f} | {low:+.4f} | {'passes' if ok else 'no'} |")
        print(f"| {kind} | **decision** | | | | {best[0] if best else 'none: the texts alone'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
