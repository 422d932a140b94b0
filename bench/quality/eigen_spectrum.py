"""Why EigenWD fails on long passages: its kernel spectrum when every sample differs from every other.

Reads the D matrices of `bbwd eval` runs (``results.jsonl``; K' <= K uses each D's first K' samples,
which is what ``-k K'`` scores) and prints, per run and K', what the spectrum looks like and how each
score follows the run's label (`human_score`: Pearson/Spearman x100; a 0/1 `label`: AUROC):

- ``cv``: the median over prompts of std/mean of D's off-diagonal entries (how unequal the distances are);
- ``s1``: the median share of the largest singular value of EigenWD's kernel;
- ``corr(EigenWD, AvgWD)``: Spearman over prompts;
- AvgWD, EigenWD as shipped (each prompt's median bandwidth), and EigenWD with one bandwidth for the
  whole run (the median of every positive D entry of every prompt: it uses no label, but the other
  prompts of the run, so it is a diagnosis, not a drop-in score).

    python -m bench.quality.eigen_spectrum R/wikibio-k20 R/sac3 --k 5 10 20
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import roc_auc_score

from bench.common import table
from blackbox_wd.measure.wd import BANDWIDTH_EPS, DEFAULT_ALPHA, P_NORM, avg_wd, eigen_wd, spectrum_ratio


def eigen_wd_at(d: np.ndarray, bandwidth: float, alpha: float = DEFAULT_ALPHA, p: float = P_NORM) -> float:
    """EigenWD with a given bandwidth instead of D's own median."""
    kernel = np.exp(-(d**2) / (2.0 * (bandwidth**2 + BANDWIDTH_EPS))) + alpha * np.eye(len(d))
    return spectrum_ratio(np.linalg.svd(kernel, compute_uv=False), p)


def top_share(d: np.ndarray) -> float:
    """Share of the largest singular value in the shipped kernel's spectrum."""
    b = np.median(d[d > 0]) if (d > 0).any() else 1.0
    s = np.linalg.svd(
        np.exp(-(d**2) / (2.0 * (b**2 + BANDWIDTH_EPS))) + DEFAULT_ALPHA * np.eye(len(d)), compute_uv=False
    )
    return float(s[0] / s.sum())


def follow(scores: list[float], rows: list[dict]) -> str:
    """How a score follows the label: Pearson/Spearman x100 with human_score, else AUROC with label."""
    if all("human_score" in r for r in rows):
        y = [r["human_score"] for r in rows]
        return f"{100 * pearsonr(scores, y)[0]:.1f} / {100 * spearmanr(scores, y)[0]:.1f}"
    return f"{roc_auc_score([r['label'] for r in rows], scores):.3f}"


def run_rows(folder: Path, k: int) -> list[list[str]]:
    """The table rows of one run at K' = k."""
    rows = [json.loads(x) for x in (folder / "results.jsonl").read_text().splitlines() if x.strip()]
    rows = [r for r in rows if "error" not in r and len(r["D"]) >= k]
    if len(rows) < 3:  # too few prompts with K samples to say anything
        return []
    ds = [np.asarray(r["D"])[:k, :k] for r in rows]
    off = [d[np.triu_indices(k, 1)] for d in ds]
    glob = float(np.median(np.concatenate([o[o > 0] for o in off])))
    cv = np.median([o.std() / o.mean() for o in off if o.mean() > 0])
    avg = [avg_wd(d) for d in ds]
    eig = [eigen_wd(d) for d in ds]
    return [
        [
            folder.name,
            k,
            len(rows),
            f"{cv:.3f}",
            f"{np.median([top_share(d) for d in ds]):.3f}",
            f"{100 * spearmanr(eig, avg)[0]:.0f}",
            follow(avg, rows),
            follow(eig, rows),
            follow([eigen_wd_at(d, glob) for d in ds], rows),
        ]
    ]


def main() -> None:
    """Print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--k", nargs="+", type=int, default=[10])
    args = ap.parse_args()
    out = [r for folder in args.runs for k in args.k for r in run_rows(folder, k)]
    print(
        table(
            [
                "run",
                "K",
                "n",
                "cv of D",
                "s1 share",
                "Spearman(EigenWD, AvgWD) x100",
                "AvgWD",
                "EigenWD (median b)",
                "EigenWD (run b)",
            ],
            out,
        )
    )


if __name__ == "__main__":
    main()
