"""The verdict on a data set it never saw: leave one recorded set out, fit on the others, measure on it.

For each set S of the runs given: ``calibration.fit.fit_files`` on the other sets' ``bbwd eval`` runs at every K
(one run per K), with a combiner; the fitted calibration applied to S's rows at ``--k`` as ``batch`` applies it
(``Calibration.verdict(row, k=K)``). Printed per set and combiner: the verdict's AUROC (0/1 ``label``) or Pearson
x100 (a passage label: ``human_score``, ``unsupported_share``), ECE, the flag's FPR and TPR against the FPR the head
prints, S's best single member (oriented by the sign of its correlation with the label on the training sets), and
with ``--auto`` the ``-k auto`` replay (stages 3, 5, K: samples drawn, the metric, flag agreement with fixed K).
Then the verdict beside each lm-polygraph estimator on the sets of 0/1 labels, and the W2 members each alone beside
ROUGE-1 on every set (where they earn their place).

    python -m bench.quality.transfer --runs RUNS --combiners mean select logistic --auto

where RUNS holds ``<set>-k<K>/results.jsonl`` (with ``settings.json``) for each set and K.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.designs import Heads, fitting
from bench.verdicts import (
    judge,
    labelled_rows,
    metric,
    model_of,
    question_of,
    rates,
    runs_of,
    soft_ece,
    training_files,
    with_members,
)
from blackbox_wd.adaptive import rounds
from blackbox_wd.calibration.combine import CrossValidation
from blackbox_wd.calibration.fit import DESIGN, PHRASE, Design, fit_files
from blackbox_wd.calibration.members import MEMBERS, SHORT_ONLY, TEACHER_FREE, is_passage, member_value
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.signals.answers.text import em_key
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS

SAMPLES = "the recorded dev sets' target models at T=0.7-1.0, recorded in the data"
# the candidate designs of the rules (bench/RESULTS.md, "Ahead of the peers"); ``answer-phrase`` is the shipped
# ``DESIGN`` (the seventeenth rule), ``peers`` the one shipped before it
TODAY = DESIGN.other  # every member but the peers: the designs before the peers
LEXSIM = ("lexsim_rouge1", "lexsim_rougel")  # lm-polygraph's LexicalSimilarity, ROUGE-1 and ROUGE-L
ANSWER = PHRASE  # LEXSIM, the answer's ROUGE-L and its disagreement: the shipped phrase heads' members
LITE = (*LEXSIM, "eigval_jaccard", "degmat_jaccard", "answer_rougel", "answer_degmat")  # the second rule's
W2 = (*LEXSIM, "avg_wd", "sentence_wd", "answer_wd")
# the W2 members, each alone beside ROUGE-1 (where they earn their place)
W2_ALONE = ("lexsim_rouge1", "avg_wd", "log_eigen_wd", "log_eigen_wd_fixed", "answer_wd", "sentence_wd")
# shipped from the first rule to the seventeenth
PEERS_DESIGN = Design((*PEERS, *ANSWER_PEERS, "answer_disagreement"), TODAY)
DESIGNS = {
    "today": Design(TODAY, TODAY),
    "all": Design(MEMBERS, TODAY),
    "texts": Design(TEACHER_FREE, TODAY),
    "peers": PEERS_DESIGN,
    "texts+w2": Design((*TEACHER_FREE, "avg_wd", "log_eigen_wd_fixed", "answer_wd"), TODAY),
    "lexsim": Design(LEXSIM, TODAY),
    "lexsim+answer": Design(ANSWER, MEMBERS),
    "peers-lite": Design((*LITE, "answer_disagreement"), (*LITE, "avg_wd")),
    "peers-pooled": Heads(PEERS_DESIGN.short, TODAY, heads="pooled"),
    "lexsim+answer-pooled": Heads(ANSWER, MEMBERS, heads="pooled"),
    "lexsim-pooled": Heads(LEXSIM, TODAY, heads="pooled"),
    "lexsim-all": Heads(LEXSIM, LEXSIM, heads="pooled"),
    "lexsim-answer-all": Heads(ANSWER, LEXSIM, heads="pooled"),
    "lexsim-w2": Heads(ANSWER, W2, heads="pooled"),
    "lexsim-short": Heads(LEXSIM, LEXSIM, heads="short"),
    "lexsim-w2-short": Heads(ANSWER, W2, heads="short"),
    "lexsim-w2-one": Heads(ANSWER, W2, heads="one"),
    "lexsim-w2v-short": Heads(ANSWER, (*W2, "sentence_verdict"), heads="short"),
    "lexsim-w2u-short": Heads(ANSWER, (*W2, "answer_unigram"), heads="short"),
    "lexsim-w2vu-short": Heads(ANSWER, (*W2, "sentence_verdict", "answer_unigram"), heads="short"),
    "lexsim-today-short": Heads(ANSWER, (*LEXSIM, *TODAY), heads="short"),
    "answer-phrase": DESIGN,
    "lexsim-phrase": Design(PEERS_DESIGN.short, TODAY, phrase=LEXSIM),
}


def shortfall(verdict: float, best: float, y: np.ndarray) -> float:
    """verdict - best on one scale: AUROC, or Pearson / 100."""
    scale = 1.0 if np.all((y == 0) | (y == 1)) else 100.0
    return (verdict - best) / scale


def member_column(rows: Sequence[dict[str, Any]], name: str) -> np.ndarray:
    """A member's value per row (NaN where missing; the short-answer members missing on passages)."""
    return np.array(
        [np.nan if (name in SHORT_ONLY and is_passage(r)) or (v := member_value(r, name)) is None else v for r in rows]
    )


def orientation(train: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Each member's sign: that of its correlation with the label over the training rows that have it."""
    y = np.array([r["y"] for r in train])
    out = {}
    for name in MEMBERS:
        x = member_column(train, name)
        ok = np.isfinite(x)
        if ok.sum() > 10 and np.std(x[ok]) > 0:
            out[name] = float(np.sign(np.corrcoef(x[ok], y[ok])[0, 1]) or 1.0)
    return out


def best_member(rows: Sequence[dict[str, Any]], signs: dict[str, float], cal: Calibration) -> tuple[str, float]:
    """The member with the best metric on the rows (those that every row has), oriented by ``signs``."""
    y = np.array([r["y"] for r in rows])
    best = ("", -math.inf)
    for name, sign in signs.items():
        x = np.array(
            [np.nan if (v := cal.member(r, name)) is None else v for r in rows]
            if name == "sentence_verdict"
            else member_column(rows, name)
        )
        if np.isfinite(x).all():
            value = metric(y, sign * x)
            if value > best[1]:
                best = (name, value)
    return best


def best_peer(rows: Sequence[dict[str, Any]]) -> tuple[str, float]:
    """The lm-polygraph estimator (``baselines.peers.PEERS``, each an uncertainty as it is) with the best metric on
    the rows."""
    y = np.array([r["y"] for r in rows])
    scored = [(name, metric(y, x)) for name in PEERS if np.isfinite(x := member_column(rows, name)).all()]
    return max(scored, key=lambda nv: nv[1], default=("none", math.nan))


def auto_replay(cal: Calibration, runs: dict[int, list[dict[str, Any]]], k_max: int) -> dict[str, Any]:
    """``-k auto`` up to ``k_max`` over the rows of each stage's run: where each prompt stops, and its verdict."""
    ladder = rounds(k_max)
    by_id = {k: {r["id"]: r for r in runs[k]} for k in ladder}
    ids = [r["id"] for r in runs[k_max] if all(r["id"] in by_id[k] for k in ladder)]
    drawn, p, flag = [], [], []
    for i in ids:
        for k in ladder:
            v = cal.verdict(by_id[k][i], k=k)
            if cal.settled(v, k, k_max):
                drawn.append(k)
                p.append(v.p)
                flag.append(float(v.flag))
                break
    return {"ids": ids, "drawn": np.array(drawn), "p": np.array(p), "flag": np.array(flag)}


def self_consistency(rows: Sequence[dict[str, Any]]) -> np.ndarray | None:
    """SC's risk of each row: 1 - the share of its samples equal to its judged answer after SQuAD normalisation;
    None for a set of passages (most rows), or with a row without a judged answer."""
    if sum(map(is_passage, rows)) > len(rows) / 2 or not all(r.get("answer") for r in rows):
        return None
    return np.array([1 - np.mean([em_key(s) == em_key(r["answer"]) for s in r["responses"]]) for r in rows])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--combiners", nargs="+", default=["mean", "select", "logistic"])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--leave", choices=("set", "model"), default="set", help="leave one data set, or one model, out")
    ap.add_argument("--strip", nargs="*", default=[], help="members to leave out of every row (a candidate without)")
    ap.add_argument("--auto", action="store_true", help="also replay -k auto up to --k")
    ap.add_argument("--fit-ks", type=int, nargs="*", default=None, help="fit on these K's runs only (default: all)")
    ap.add_argument("--save", type=Path, default=None, help="write each left-out fit's calibration here")
    ap.add_argument("--design", choices=DESIGNS, default="today", help="the members of each kind's heads")
    args = ap.parse_args(argv)
    runs = runs_of(args.runs)
    sets = [s for s in runs if args.k in runs[s]]
    print(f"sets: {', '.join(f'{s} (K = {sorted(runs[s])}, {model_of(s)})' for s in sets)}")
    folds = (
        {s: [s] for s in sets}
        if args.leave == "set"
        else {m: [s for s in sets if model_of(s) == m] for m in dict.fromkeys(map(model_of, sets))}
    )
    for combiner in args.combiners:
        print(f"\n### combiner {combiner}, leave one {args.leave} out\n")
        print(
            "| left out | n | verdict | best single member | shortfall | best peer | against it | SC | ECE | "
            "FPR printed (range) | FPR seen | TPR seen | -k auto: samples | -k auto: metric | flags agree |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        short: dict[str, list[float]] = {"verdict": [], **{name: [] for name in PEERS}}
        beside: list[str] = []  # the verdict beside each peer, a line per set
        alone: list[str] = []  # the W2 members alone beside ROUGE-1, a line per set
        gaps = []
        for fold, left in folds.items():
            tests = {s: [with_members(r, args.strip) for r in labelled_rows(runs[s][args.k])] for s in left}
            unseen = {question_of(r) for rows in tests.values() for r in rows}
            with tempfile.TemporaryDirectory() as tmp:
                others = [s for s in runs if s not in left]
                train = training_files(runs, others, args.fit_ks, unseen, Path(tmp), args.strip)
                cv = CrossValidation(combiner=combiner, folds=args.folds)
                with fitting(DESIGNS[args.design]):
                    fit = fit_files(train, samples=SAMPLES, cv=cv, design=DESIGNS[args.design])
                signs = orientation(
                    [
                        r
                        for s in others
                        for r in labelled_rows(Path(tmp) / f"{s}-k{args.k}" / "results.jsonl")
                        if (Path(tmp) / f"{s}-k{args.k}").is_dir()
                    ]
                )
            cal = fit.calibration
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                cal.save(args.save / f"{combiner}-without-{fold}.json")
            for name in left:
                rows = tests[name]
                y = np.array([r["y"] for r in rows])
                p, flag, verdicts = judge(cal, rows, args.k)
                value = metric(y, p)
                best_name, best = best_member(rows, signs, cal)
                gap = shortfall(value, best, y)
                gaps.append(gap)
                peer_name, peer = best_peer(rows)
                if np.all((y == 0) | (y == 1)) and math.isfinite(peer):
                    short["verdict"].append(value)
                    for m in PEERS:
                        short[m].append(metric(y, member_column(rows, m)))
                    beside.append(
                        f"| {name} | {value:.3f} | " + " | ".join(f"{short[m][-1]:.3f}" for m in PEERS) + " |"
                    )
                alone.append(
                    f"| {name} | "
                    + " | ".join(
                        f"{metric(y[ok], signs.get(m, 1.0) * x[ok]):.3f}" if (ok := np.isfinite(x)).sum() > 10 else ""
                        for m in W2_ALONE
                        for x in [member_column(rows, m)]
                    )
                    + " |"
                )
                sc = self_consistency(rows)
                fpr, tpr = rates(y, flag)
                ops = [v.head.operating_point for v in verdicts]
                printed = np.mean([op.fpr for op in ops])
                lo = min((op.fpr_range or (op.fpr, op.fpr))[0] for op in ops)
                hi = max((op.fpr_range or (op.fpr, op.fpr))[1] for op in ops)
                auto = " | | "
                if args.auto and all(k in runs[name] for k in rounds(args.k)):
                    by_k = {
                        k: [with_members(r, args.strip) for r in labelled_rows(runs[name][k])] for k in rounds(args.k)
                    }
                    rep = auto_replay(cal, by_k, args.k)
                    same = {r["id"]: f for r, f in zip(rows, flag, strict=True)}
                    label = {r["id"]: r["y"] for r in rows}
                    yy = np.array([label[i] for i in rep["ids"]])
                    agree = np.mean([same[i] == f for i, f in zip(rep["ids"], rep["flag"], strict=True)])
                    auto = f"{rep['drawn'].mean():.2f} | {metric(yy, rep['p']):.3f} | {agree:.1%}"
                print(
                    f"| {name} | {len(rows)} | {value:.3f} | {best_name} {best:.3f} | {gap:+.3f} | "
                    f"{peer_name} {peer:.3f} | {shortfall(value, peer, y):+.3f} | "
                    f"{'' if sc is None else f'{metric(y, sc):.3f}'} | {soft_ece(y, p):.3f} | "
                    f"{printed:.3f} ({lo:.3f}-{hi:.3f}) | {fpr:.3f} | {tpr:.3f} | {auto} |"
                )
                sys.stdout.flush()
        print(f"\nworst shortfall {min(gaps):+.3f}, mean {np.mean(gaps):+.3f}")
        if short["verdict"]:
            print(f"\n| left out, AUROC | verdict | {' | '.join(PEERS)} |")
            print("|---" * (len(PEERS) + 2) + "|")
            print("\n".join(beside))
            print("| mean | " + " | ".join(f"{np.mean(v):.3f}" for v in short.values()) + " |")
        print(f"\n| left out, each alone (oriented on the training rows) | {' | '.join(W2_ALONE)} |")
        print("|---" * (len(W2_ALONE) + 1) + "|")
        print("\n".join(alone))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
