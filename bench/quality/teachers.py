"""A teacher without its own calibration (#59): leave one teacher out.

For each set of the second teacher's runs (``--other``: ``<set>-k10/results.jsonl`` scored by, say, Gemma-3-270m):
the calibration fitted on the default teacher's runs without the set's model (``bench.quality.transfer --leave model
--save C``: ``C/mean-without-<model>.json``) judges (1) the default teacher's rows of the set with its own heads, as a
run of that teacher is judged, and (2) the second teacher's rows with its heads that read the texts alone
(``Calibration.teacher_free``; those of ``--texts``' fits where given), as a run of any other teacher is judged; (3)
the second teacher's own fit on all its sets, out of fold by prompt (the in-fold reference). Printed per set: AUROC
(Pearson x100 on passages), ECE, the flag's FPR seen against printed, TPR, and #59's checks of (2) against (1).

    python -m bench.quality.teachers --runs R --other G --calibrations C [--texts T]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.verdicts import (
    judge,
    labelled_rows,
    metric,
    model_of,
    rates,
    runs_of,
    soft_ece,
    training_files,
    with_members,
)
from blackbox_wd.calibration.fit import fit_files, verdicts_by_prompt
from blackbox_wd.calibration.model import Calibration

K = 10


def in_fold(other: dict[str, dict[int, Path]]) -> dict[str, tuple[float, bool]]:
    """Each prompt's nested out-of-fold (p, flag) under the second teacher's own fit on all its sets at K."""
    with tempfile.TemporaryDirectory() as tmp:
        files = training_files(other, list(other), [K], set(), Path(tmp), ())
        fit = fit_files(files)
    return verdicts_by_prompt(fit.labelled.answers, fit.heads)


def line(name: str, y: np.ndarray, p: np.ndarray, flag: np.ndarray, printed: float | None) -> str:
    """One table row: metric, ECE, FPR seen (printed), TPR."""
    fpr, tpr = rates(y, flag)
    said = "" if printed is None else f" ({printed:.3f})"
    return f"{name} | {metric(y, p):.3f} | {soft_ece(y, p):.3f} | {fpr:.3f}{said} | {tpr:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="the default teacher's runs")
    ap.add_argument("--other", type=Path, required=True, help="the second teacher's runs")
    ap.add_argument("--calibrations", type=Path, required=True, help="transfer --save's fits without each model")
    ap.add_argument("--texts", type=Path, help="fits whose heads of the texts alone judge the second teacher")
    args = ap.parse_args(argv)
    runs, other = runs_of(args.runs), runs_of(args.other)
    reference = in_fold(other)
    print("| set | n | judged by | metric | ECE | FPR seen (printed) | TPR |")
    print("|---|---|---|---|---|---|---|")
    for name, by_k in other.items():
        fit = f"mean-without-{model_of(name)}.json"
        cal = Calibration.load(args.calibrations / fit)
        free = (cal if args.texts is None else Calibration.load(args.texts / fit)).teacher_free()
        theirs = {r["id"]: with_members(r, ()) for r in labelled_rows(by_k[K])}
        ours = {r["id"]: with_members(r, ()) for r in labelled_rows(runs[name][K])}
        ids = [i for i in theirs if i in ours]
        y = np.array([ours[i]["y"] for i in ids])
        rows_ours, rows_theirs = [ours[i] for i in ids], [theirs[i] for i in ids]
        p1, f1, v1 = judge(cal, rows_ours, K)
        p2, f2, v2 = judge(free, rows_theirs, K)
        oof = [reference.get(f"{theirs[i].get('source')}:{i}") for i in ids]
        printed1 = float(np.mean([v.head.operating_point.fpr for v in v1]))
        printed2 = float(np.mean([v.head.operating_point.fpr for v in v2]))
        print(f"| {name} | {len(ids)} | " + line("default teacher, its own heads", y, p1, f1, printed1) + " |")
        print("| | | " + line("second teacher, the text heads", y, p2, f2, printed2) + " |")
        if all(o is not None for o in oof):
            p3 = np.array([o[0] for o in oof])  # type: ignore[index]
            f3 = np.array([o[1] for o in oof], dtype=float)  # type: ignore[index]
            print("| | | " + line("second teacher, its own fit (in fold)", y, p3, f3, None) + " |")
        scale = 1.0 if np.all((y == 0) | (y == 1)) else 100.0
        checks = (
            metric(y, p2) >= metric(y, p1) - 0.02 * scale,
            soft_ece(y, p2) <= soft_ece(y, p1) + 0.03,
            abs(rates(y, f2)[0] - rates(y, f1)[0]) <= 0.05,
        )
        print(f"| | | #59's checks (AUROC, ECE, FPR) | {' / '.join('met' if c else 'not met' for c in checks)} | | | |")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
