"""Your own labels (#54): the learning curve of a calibration refitted on N labelled rows of a set it never saw.

For each recorded dev set S: the base calibration is the one fitted without S's model (``bench.quality.transfer
--leave model --save DIR`` writes ``<combiner>-without-<model>.json``); N rows of S's K run are labelled (picked at
random, or spread over the base risk: ``calibration.suggest.spread_picks``), the calibration refitted on them
(``prior`` or ``map``: ``calibration.recalibrate``; ``full``: ``calibration.fit.fit_files`` on those rows alone, as
``bbwd calibrate`` fits), and applied to S's other rows. Per set, N, pick and mode, over the draws: mean ECE, the
share of draws whose FPR on the rows not labelled is within 0.05 of the target, how often the printed FPR's interval
holds that FPR, mean TPR, and how many draws could not be fitted (too few labelled rows of a class). ``choose`` is
``bbwd calibrate``'s few-label path as it runs (``recalibrate`` with ``mode="map"``: the labels choose the members,
``calibration.choose``); with ``--choice`` the table also gives, on the same rows not labelled, the AUROC of the refit,
of the base verdict with no labels and of the best of lm-polygraph's five estimators there, the FPR printed against
the FPR seen, and the share of draws whose labels switched the members.

    python -m bench.quality.labels --runs RUNS --calibrations DIR --n 25 50 100 200 --draws 20
    python -m bench.quality.labels --runs RUNS --calibrations DIR --n 50 100 200 --picks random \
        --modes map choose --choice

where RUNS holds ``<set>-k<K>/results.jsonl`` (with ``settings.json``) as for ``bench.quality.transfer``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from bench.verdicts import labelled_rows, model_of, soft_ece, with_members
from blackbox_wd.calibration.combine import CrossValidation, operating_point
from blackbox_wd.calibration.fit import fit_files
from blackbox_wd.calibration.members import member_value
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.calibration.recalibrate import MIN_CLASS, RefitRows, fit_map, mapped_head, recalibrate
from blackbox_wd.calibration.suggest import spread_picks
from blackbox_wd.errors import BBWDError
from blackbox_wd.signals.baselines.peers import PEERS

TARGET_FPR = 0.1


@dataclass
class SetRows:
    """A set's labelled rows as the base calibration judges them: its rows, the labels as entries (a passage label
    h as two entries weighted h and 1 - h), and each row's head (index into ``heads``) and z."""

    rows: list[dict[str, Any]]
    y: np.ndarray  # entries
    w: np.ndarray
    of: np.ndarray  # entry -> row
    head: np.ndarray  # row -> index into heads
    z: np.ndarray  # row -> z under its head
    heads: list[Any]

    def entries(self, picked: np.ndarray) -> np.ndarray:
        """The entries of the rows ``picked`` (a mask over rows)."""
        return picked[self.of]


def judged(base: Calibration, rows: list[dict[str, Any]], k: int) -> SetRows:
    """Each row's head and z under ``base`` at ``k`` samples, and the entries of the labels."""
    heads: list[Any] = []
    head, z = [], []
    for r in rows:
        h, x = base.head_for(r, k)
        if h not in heads:
            heads.append(h)
        head.append(heads.index(h))
        z.append(float(h.model.decision(x)[0]))
    y, w, of = [], [], []
    for i, r in enumerate(rows):
        h = float(r["y"])
        parts = [(1, h), (0, 1 - h)] if 0 < h < 1 else [(int(h), 1.0)]
        for label, weight in parts:
            y.append(label)
            w.append(weight)
            of.append(i)
    return SetRows(rows, np.array(y), np.array(w), np.array(of), np.array(head), np.array(z), heads)


def probabilities(s: SetRows, heads: Sequence[Any]) -> np.ndarray:
    """Each row's p under ``heads`` (the same heads as ``s.heads``, mapped), vectorised by head."""
    p = np.empty(s.z.size)
    for i, h in enumerate(heads):
        at = s.head == i
        p[at] = h.model.calibrator(s.z[at])
    return p


def outcome(
    s: SetRows, p: np.ndarray, flag: np.ndarray, interval: tuple[float, float] | None, labelled: np.ndarray
) -> dict[str, float]:
    """ECE, FPR, TPR and whether the printed interval holds the FPR, on the rows not labelled (``p`` and ``flag``:
    each row's)."""
    rest = ~labelled
    e = s.entries(rest)
    y, w, fe = s.y[e], s.w[e], flag[s.of[e]]
    neg, pos = np.sum(w * (y == 0)), np.sum(w * (y == 1))
    fpr = float(np.sum(w * (y == 0) * fe) / neg) if neg else float("nan")
    tpr = float(np.sum(w * (y == 1) * fe) / pos) if pos else float("nan")
    yr = np.array([s.rows[i]["y"] for i in np.flatnonzero(rest)])
    return {
        "ece": soft_ece(yr, p[rest]),
        "fpr": fpr,
        "tpr": tpr,
        "near": float(abs(fpr - TARGET_FPR) <= 0.05),
        "covered": float(interval is not None and interval[0] <= fpr <= interval[1]),
        "auroc": rest_auroc(s, p, rest),
    }


def rest_auroc(s: SetRows, score: np.ndarray, rest: np.ndarray) -> float:
    """The weighted AUROC of a row score over the entries of the rows ``rest``."""
    e = s.entries(rest)
    return float(roc_auc_score(s.y[e], score[s.of[e]], sample_weight=s.w[e]))


def refit_choose(s: SetRows, labelled: np.ndarray, base: Calibration, settings: dict[str, Any], k: int) -> dict:
    """``bbwd calibrate``'s few-label path on the labelled rows (``recalibrate``, ``mode="map"``: the members chosen
    by the labels, the map, the threshold), measured on the others; with the FPR it prints and whether it switched."""
    picked = np.flatnonzero(labelled)
    rows = [s.rows[i] for i in picked]
    refit = recalibrate(base, RefitRows(rows, [float(r["y"]) for r in rows], k), settings, mode="map")
    verdicts = [refit.calibration.verdict(r, k=k) for r in s.rows]
    p = np.array([v.p_fitted for v in verdicts])
    point = verdicts[0].head.operating_point
    out = outcome(s, p, np.array([v.flag for v in verdicts]), point.fpr_interval, labelled)
    return out | {"printed": point.fpr, "switched": float(refit.choice is not None and refit.choice.chosen is not None)}


def refit_map(s: SetRows, labelled: np.ndarray, mode: str) -> dict[str, float]:
    """``prior`` or ``map`` on the labelled rows (as ``recalibrate`` fits it: the map, then the threshold on the
    labelled rows), measured on the others."""
    e = s.entries(labelled)
    p0 = probabilities(s, s.heads)
    y, w = s.y[e], s.w[e]
    for c in (0, 1):
        if np.sum(w[y == c]) < MIN_CLASS:
            raise BBWDError("too few of a class")
    a, b = fit_map(p0[s.of[e]], y, w, mode)
    p = probabilities(s, [mapped_head(h, a, b) for h in s.heads])
    point = operating_point(y, p[s.of[e]], w, TARGET_FPR)
    return outcome(s, p, p >= point.threshold, point.fpr_interval, labelled)


def refit_full(s: SetRows, labelled: np.ndarray, run: Path, k: int) -> dict[str, float]:
    """A full fit on the labelled rows alone (``fit_files``, 5 folds), measured on the others."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "labelled"
        folder.mkdir()
        (folder / "settings.json").write_bytes((run.parent / "settings.json").read_bytes())
        picked = [r for r, on in zip(s.rows, labelled, strict=True) if on]
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in picked))
        cal = fit_files([folder / "results.jsonl"], samples="recorded", cv=CrossValidation(folds=5)).calibration
    verdicts = [cal.verdict(r, k=k) for r in s.rows]
    p = np.array([v.p_fitted for v in verdicts])
    flag = np.array([v.flag for v in verdicts])
    return outcome(s, p, flag, cal.operating_point.fpr_interval, labelled)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--calibrations", type=Path, required=True, help="the leave-one-model-out fits (transfer --save)")
    ap.add_argument("--combiner", default="mean")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--n", type=int, nargs="+", default=[25, 50, 60, 100, 200, 400])
    ap.add_argument("--draws", type=int, default=20)
    ap.add_argument("--picks", nargs="+", default=["random", "spread"])
    ap.add_argument("--modes", nargs="+", choices=["prior", "map", "full", "choose"], default=["prior", "map", "full"])
    ap.add_argument("--choice", action="store_true", help="also the AUROC columns beside the base and the peers")
    args = ap.parse_args(argv)
    runs = {d.name.rsplit("-k", 1)[0]: d / "results.jsonl" for d in sorted(args.runs.glob(f"*-k{args.k}"))}
    extra = " AUROC | base AUROC | best peer AUROC | FPR printed | switched |" if args.choice else ""
    print(
        f"| set | N | picks | mode | draws fitted | ECE | FPR within 0.05 of 0.10 | interval holds the FPR | FPR | "
        f"TPR |{extra}\n|---|---|---|---|---|---|---|---|---|---|{'---|' * 5 if args.choice else ''}"
    )
    for name, run in runs.items():
        base = Calibration.load(args.calibrations / f"{args.combiner}-without-{model_of(name)}.json")
        settings = json.loads((run.parent / "settings.json").read_text())
        rows = [with_members(r, ()) for r in labelled_rows(run)]
        s = judged(base, rows, args.k)
        p_base = probabilities(s, s.heads)
        peers = {m: np.array([member_value(r, m) for r in rows], dtype=float) for m in PEERS}
        for n in args.n:
            if n + 50 > len(rows):  # at least 50 rows not labelled to measure on
                continue
            for pick in args.picks:
                for mode in args.modes:
                    got: list[dict[str, float]] = []
                    for draw in range(args.draws):
                        if pick == "random":
                            idx = np.random.default_rng(draw).choice(len(rows), n, replace=False)
                        else:
                            idx = spread_picks(probabilities(s, s.heads), n, seed=draw)
                        labelled = np.zeros(len(rows), dtype=bool)
                        labelled[idx] = True
                        try:
                            if mode == "full":
                                one = refit_full(s, labelled, run, args.k)
                            elif mode == "choose":
                                one = refit_choose(s, labelled, base, settings, args.k)
                            else:
                                one = refit_map(s, labelled, mode)
                        except BBWDError:
                            continue
                        rest = ~labelled
                        known = [v for v in peers.values() if np.isfinite(v).all()]
                        best = max((rest_auroc(s, v, rest) for v in known), default=np.nan)
                        got.append(one | {"base": rest_auroc(s, p_base, rest), "peer": best})
                    if not got:
                        print(f"| {name} | {n} | {pick} | {mode} | 0 of {args.draws} | | | | | |")
                        continue
                    m = {key: float(np.nanmean([g.get(key, np.nan) for g in got])) for key in got[0]}
                    more = (
                        f" {m['auroc']:.3f} | {m['base']:.3f} | {m['peer']:.3f} | {m.get('printed', np.nan):.3f} | "
                        f"{m.get('switched', np.nan):.0%} |"
                        if args.choice
                        else ""
                    )
                    print(
                        f"| {name} | {n} | {pick} | {mode} | {len(got)} of {args.draws} | {m['ece']:.3f} | "
                        f"{m['near']:.0%} | {m['covered']:.0%} | {m['fpr']:.3f} | {m['tpr']:.3f} |{more}"
                    )
                    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
