"""Each answer combiner on a calibration's own rows, over several draws of the folds.

Reads labelled results as ``bbwd calibrate`` does (``calibration.fit.read_labelled``), takes the first head it
would fit (every member all rows have, ``calibration.fit.fit_calibration``) and fits it with each combiner and fold
seeds 0 to N - 1 (``calibration.combine.fit_head``, 5 folds grouped by prompt). Prints the out-of-fold AUROC of z
on the 0/1 rows (as ``fitted_on.cv.auroc`` of a calibration) per seed, their mean, least and most, and the
members each combiner keeps on all rows.

    python -m bench.quality.combiner R/sciq-wb/results.jsonl --seeds 5
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.common import table
from blackbox_wd.calibration.combine import COMBINERS, CrossValidation, fit_head, head_sets
from blackbox_wd.calibration.fit import OPTIONAL
from blackbox_wd.calibration.labelled import read_labelled
from blackbox_wd.calibration.members import MEMBERS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="+", help="labelled results.jsonl (one settings fingerprint)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    t = read_labelled(args.results).answers
    head = head_sets([m for m in MEMBERS if t.rows([m]).all()], OPTIONAL)[0]
    rows = []
    for combiner in COMBINERS:
        aurocs = []
        for seed in range(args.seeds):
            fit = fit_head(t, head, CrossValidation(combiner, args.folds, seed))
            aurocs.append(roc_auc_score(t.y[fit.rows], fit.z, sample_weight=t.w[fit.rows]))
        a = np.array(aurocs)
        kept = [n for n, c in zip(head, fit.head.model.coef, strict=True) if c]
        rows.append(
            [
                combiner,
                f"{a.mean():.4f} [{a.min():.4f}, {a.max():.4f}]",
                " ".join(f"{x:.4f}" for x in a),
                ", ".join(kept) if combiner == "select" else f"all {len(kept)}",
            ]
        )
    print(f"# First head over {', '.join(head)}: out-of-fold AUROC over fold seeds 0 to {args.seeds - 1}\n")
    print(f"{', '.join(str(p) for p in args.results)}\n")
    print(table(["combiner", "mean [least, most]", "per seed", "members kept (all rows)"], rows))


if __name__ == "__main__":
    main()
