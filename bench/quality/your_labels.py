"""Your labels through the door: a labelled log as "the user's set", N random rows labelled, ``bbwd calibrate`` with
no option, every row judged again by the file it writes; measured on the rows not labelled.

Reads ``bbwd batch`` outputs, or ``bbwd eval`` runs (``results.jsonl`` with ``settings.json`` beside), whose rows
carry a label (0/1, or a passage's share h, counted as a hallucination of weight h). For each file and N, over the
draws (draw d: rows picked with seed d): the AUROC of the refitted verdict on the rows not labelled, beside the
verdict before the labels (the rows' own p; an eval run's: the shipped file's) and the best of lm-polygraph's five
estimators on the same rows; the ECE of p, the flag's FPR seen against the FPR ``calibrate`` printed, its TPR, the
share of draws whose labels switched the members the verdict reads, and how many draws were refused. At N = 100, the
checks of "Your labels choose the verdict": AUROC at least the base's less 0.01 and the best estimator's less 0.015,
ECE at most 0.10, FPR seen in [0.03, 0.20].

    python -m bench.quality.your_labels out-sac3.jsonl R/wikibio_gpt3_dev-k10/results.jsonl --n 50 100 200
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.common import command, table
from bench.verdicts import labelled_rows, soft_ece
from blackbox_wd.calibration.choice import embedded_calibration
from blackbox_wd.calibration.members import member_value
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.calibration.recalibrate import entries
from blackbox_wd.doors.calibrate import calibrate
from blackbox_wd.errors import BBWDError
from blackbox_wd.signals.baselines.peers import PEERS

KEYS = ("auroc", "base", "peer", "ece", "fpr", "printed", "tpr", "switched")


def weighted_auroc(y: np.ndarray, score: np.ndarray) -> float:
    """The AUROC of a row score against the rows' labels, a share h as two entries weighted h and 1 - h."""
    of, yy, w = entries(y)
    return float(roc_auc_score(yy, score[of], sample_weight=w))


def row_k(row: dict[str, Any]) -> int:
    return int(row.get("n_samples") or len(row.get("responses") or ()) or row["settings"]["k"])


def judged(cal: Calibration, rows: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Each row's fitted p and flag under ``cal``."""
    verdicts = [cal.verdict(r, k=row_k(r)) for r in rows]
    return np.array([v.p_fitted for v in verdicts]), np.array([v.flag for v in verdicts], dtype=float)


def one_draw(path: Path, rows: list[dict[str, Any]], picked: np.ndarray, base: np.ndarray) -> dict[str, float] | None:
    """Label the rows ``picked``, calibrate with no option, judge every row again; the figures on the others (None:
    refused)."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        if (path.parent / "settings.json").is_file():
            (folder / "settings.json").write_bytes((path.parent / "settings.json").read_bytes())
        keep = set(picked.tolist())
        lines = [json.dumps({k: v for k, v in r.items() if k != "y" and (n in keep or k != "label")}) for n, r in
                 enumerate(rows)]  # fmt: skip
        if rows and "human_score" in rows[0]:
            lines = [json.dumps({**json.loads(x), "human_score": rows[n]["y"] if n in keep else None}) for n, x in
                     enumerate(lines)]  # fmt: skip
        (folder / path.name).write_text("\n".join(lines) + "\n")
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                line = calibrate([folder / path.name], folder / "cal.json")
        except BBWDError:
            return None
        cal = Calibration.load(folder / "cal.json")
    p, flag = judged(cal, rows)
    rest = np.setdiff1d(np.arange(len(rows)), picked)
    y = np.array([rows[i]["y"] for i in rest], dtype=float)
    peers = [np.array([member_value(rows[i], m) for i in rest], dtype=float) for m in PEERS]
    k = row_k(rows[0])
    stage = cal.round_at(k)
    printed = (cal.heads if stage is None else stage.heads)[0].operating_point.fpr
    return {
        "auroc": weighted_auroc(y, p[rest]),
        "base": weighted_auroc(y, base[rest]),
        "peer": max(weighted_auroc(y, v) for v in peers if np.isfinite(v).all()),
        "ece": soft_ece(y, p[rest]),
        "fpr": float(np.sum((1 - y) * flag[rest]) / np.sum(1 - y)),
        "printed": printed,
        "tpr": float(np.sum(y * flag[rest]) / np.sum(y)),
        "switched": float("the labels chose" in line),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", type=Path, nargs="+")
    ap.add_argument("--n", type=int, nargs="+", default=[50, 100, 200])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--draws-from", type=int, default=200, help="N from which half the draws are run")
    args = ap.parse_args()
    print(command())
    out, checks = [], []
    for path in args.files:
        rows = labelled_rows(path)
        if all(isinstance(r.get("p_hallucination"), float) for r in rows):
            base = np.array([r["p_hallucination"] for r in rows])
        else:  # an eval run scored with --no-verdict: the file shipped for it
            settings = json.loads((path.parent / "settings.json").read_text())
            shipped, _ = embedded_calibration(settings)
            assert shipped is not None, f"{path}: no calibration ships for its settings"
            base = judged(shipped, rows)[0]
        name = path.parent.name if path.name == "results.jsonl" else path.stem
        for n in args.n:
            if n + 40 > len(rows):
                continue
            draws = args.draws if n < args.draws_from else args.draws // 2
            got = [one_draw(path, rows, np.sort(np.random.default_rng(d).choice(len(rows), n, replace=False)), base)
                   for d in range(draws)]  # fmt: skip
            done = [g for g in got if g is not None]
            if not done:
                out.append([name, n, f"0 of {draws}", *[""] * len(KEYS)])
                continue
            m = {k: float(np.mean([g[k] for g in done])) for k in KEYS}
            out.append(
                [name, n, f"{len(done)} of {draws}", *(f"{m[k]:.3f}" for k in KEYS[:-1]), f"{m['switched']:.0%}"]
            )
            if n == 100:
                ok = (m["auroc"] >= m["base"] - 0.01, m["auroc"] >= m["peer"] - 0.015, m["ece"] <= 0.10,
                      0.03 <= m["fpr"] <= 0.20, len(done) == draws)  # fmt: skip
                checks.append([name, *("yes" if c else "no" for c in ok)])
            print(table(["set", "N", "fitted", *KEYS], out[-1:]), flush=True)
    print(table(["set", "N", "draws fitted", "AUROC", "base AUROC", "best peer AUROC", "ECE", "FPR seen",
                 "FPR printed", "TPR", "switched"], out))  # fmt: skip
    if checks:
        print(table(["set (N = 100)", ">= base - 0.01", ">= peer - 0.015", "ECE <= 0.10", "FPR in [0.03, 0.20]",
                     "no draw refused"], checks))  # fmt: skip


if __name__ == "__main__":
    main()
