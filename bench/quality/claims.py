"""Claim scores (#47): the shipped claim head's AUROC on the four claim-labelled recorded sets (docs/claims.md's
table), beside the issue's anchors.

Each record's K = 10 recorded samples are forced through the embedded teacher (SmolLM2-135M, fp32 on the CPU) as
responses to the record's prompt, a few records a pass; the samples' AvgWD (``scores.avg_wd`` of their D) is given
to each of the record's claims. The claim head is the one the API calibration ships: ``mean`` of that AvgWD and the
claim's score (its ``lex_share``, as ``claims.score_claims`` computes it). Per set, on the claims labelled
supported or unsupported (``other`` is scored, not counted): 5-fold ``StratifiedGroupKFold`` by answer, AUROC of
unsupported vs supported on the pooled out-of-fold scores, mean over the fold seeds (least and most beside), and
AvgWD and the claim score alone. The anchors are the issue's (the data README): verbalised confidence with options
and SelfCheck-Unigram(max), and gpt-3.5's self-consistency on PopQA. The head was chosen on popqa gpt-3.5 (its
development set); the members and heads measured and not shipped: docs/results-notebook.md, "Claim scores (#47)".

    python -m bench.quality.claims                      # the four sets, 5 fold seeds
    python -m bench.quality.claims --quick              # smoke run: 6 answers of two sets, 2 seeds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

import numpy as np

from bench.common import data_dir, table
from blackbox_wd.calibration.combine import decision, fit_linear, group_folds
from blackbox_wd.records import as_messages
from blackbox_wd.signals.claims import lex_shares

SETS = ("popqa_gpt35", "factscore_gpt35", "factscore_llama3_70b", "popqa_llama3_70b")  # the issue's column order
ISSUE_ANCHORS = {  # AUROC on the judged answer's claims (data README): VC with options, SelfCheck-Unigram(max)
    "vc_options": (0.630, 0.729, 0.678, 0.661),
    "unigram_max": (0.631, 0.648, 0.598, 0.567),
}
SC_BAR = 0.746  # self-consistency on popqa gpt-3.5
DEV = "popqa_gpt35"  # the set the head was picked on
HEAD = ("avg_wd", "lex_share")  # the shipped claim head: ``mean`` of these


def avg_wds(teacher: Any, records: list[dict[str, Any]], log: bool) -> list[float]:
    """Each record's AvgWD: its samples forced as responses to its prompt, 4 records a pass."""
    from blackbox_wd.measure.transport import pairwise_w2
    from blackbox_wd.measure.wd import avg_wd

    out: list[float] = []
    t0 = time.perf_counter()
    for at in range(0, len(records), 4):
        pairs = []
        for r in records[at : at + 4]:
            prompt = teacher.prompt_ids(as_messages(r["prompt"]))
            pairs += [(prompt, teacher.response_ids(s)) for s in r["samples"]]
        states = teacher.encode_ids(pairs)
        for r in records[at : at + 4]:
            got, states = states[: len(r["samples"])], states[len(r["samples"]) :]
            out.append(avg_wd(pairwise_w2([s.states for s in got])))
        if log:
            print(f"  forced {len(out)}/{len(records)} records, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return out


def set_claims(records: list[dict[str, Any]], wds: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, answer) of a set's supported and unsupported claims: x the columns of ``HEAD``, y 1 for unsupported."""
    x, y, groups = [], [], []
    for n, (r, wd) in enumerate(zip(records, wds, strict=True)):
        texts = [c["text"] for c in r["claims"]]
        share = lex_shares(texts, r["samples"], r["response"], r["prompt"])
        for c, s in zip(r["claims"], share, strict=True):
            if c["label"] != "other":
                x.append([wd, float(s)])
                y.append(int(c["label"] == "unsupported"))
                groups.append(n)
    return np.array(x), np.array(y), np.array(groups)


def auroc(y: np.ndarray, s: np.ndarray) -> float:
    """AUROC (ties one half)."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s))


def cv_auroc(x: np.ndarray, y: np.ndarray, groups: np.ndarray, folds: int, seed: int) -> float:
    """AUROC of the ``mean`` head's out-of-fold scores in one set, folds by answer."""
    z = np.empty(y.size)
    for train, test in group_folds(y, groups, folds, seed):
        params = fit_linear(x[train], y[train], np.ones(train.size), "mean", np.zeros(train.size))
        z[test] = decision(params, x[test])
    return auroc(y, z)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="6 answers of two sets, 2 fold seeds, 3 folds")
    ap.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    ap.add_argument("--limit", type=int, default=None, help="the first N answers of each set")
    ap.add_argument("--seeds", type=int, default=5, help="fold seeds 0 .. N-1")
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args()
    if args.quick:
        args.sets, args.limit, args.seeds, args.folds = SETS[:2], 6, 2, 3

    from blackbox_wd.teachers.hf import load_teacher

    teacher = load_teacher("smollm2-135m", device="cpu", dtype="float32")
    print(
        f"command: python -m bench.quality.claims {' '.join(sys.argv[1:])}   ({platform.machine()}, "
        f"{len(os.sched_getaffinity(0))} CPUs, load {os.getloadavg()[0]:.2f}); teacher smollm2-135m fp32 CPU, layer "
        f"{teacher.layer}, 128-d; {args.folds} folds by answer, fold seeds 0-{args.seeds - 1}\n"
    )
    rows = []
    for name in args.sets:
        with open(data_dir() / f"gbu_{name}.jsonl", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh][: args.limit]
        x, y, groups = set_claims(records, avg_wds(teacher, records, not args.quick))
        runs = [cv_auroc(x, y, groups, args.folds, seed) for seed in range(args.seeds)]
        i = SETS.index(name)
        rows.append(
            [
                name + (" (dev)" if name == DEV else ""),
                f"{y.sum()} / {(1 - y).sum()}",
                f"{np.mean(runs):.3f} ({min(runs):.3f}-{max(runs):.3f})",
                f"{auroc(y, x[:, 0]):.3f}",
                f"{auroc(y, x[:, 1]):.3f}",
                f"{ISSUE_ANCHORS['vc_options'][i]:.3f}",
                f"{ISSUE_ANCHORS['unigram_max'][i]:.3f}",
                f"{SC_BAR:.3f}" if name == DEV else "",
            ]
        )
    print("### The claim head mean(avg_wd, lex_share): AUROC, unsupported vs supported, within-set CV\n")
    header = ["set", "claims (unsupported / supported)", "claim head", "avg_wd alone", "lex_share alone"]
    print(table([*header, "VC with options (issue)", "SelfCheck-Unigram(max) (issue)", "SC (issue)"], rows))


if __name__ == "__main__":
    main()
