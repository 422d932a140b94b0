"""Adaptive K on the recorded dev sets: samples drawn and the verdict's quality beside the fixed-K verdict.

Replays each record's samples in order, as ``-k auto`` draws them (``adaptive.rounds``: 3, 5, 10, 20), from one
``bbwd eval -k auto`` run, whose rows hold every stage's scores: the shipped white-box calibration's stages, fitted
on the embedded model's own few-shot SciQ answers.
Everything is fitted out of fold, 5 folds grouped by prompt: on the training prompts, each stage's answer head
(``calibration.combine.fit_head``, the shipped combiner, over the members every API row has) and each stage's
band (``calibration.settle.fit_settles`` on the heads' nested out-of-fold p, ``DELTA`` = 0.05); on the held-out prompts,
the rule is replayed and the prompt's verdict is p at the stage where it stopped. The fixed-K verdict is p of the
same folds' last-stage head, so the two are paired.

Per set: samples drawn (mean and count per stage), AUROC (0/1 label) of both verdicts and their paired bootstrap
difference (1000 prompt resamples), the share of prompts whose flag differs, and the target tokens saved (the
samples' tokens of the samples not drawn). (The first replays over recorded SAC3 and WikiBio runs, one per round, for
the API calibration: superseded by ``bench.quality.transfer --auto``.)

    python -m bench.quality.adaptive --set sciq=R/sciq-wb-auto --k-max 10
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import table
from bench.verdicts import API_MEMBERS, SEED, members_of, read_rows
from blackbox_wd.adaptive import DELTA, rounds, stop_round
from blackbox_wd.calibration.combine import (
    COMBINER,
    CrossValidation,
    Table,
    first_by_prompt,
    fit_head,
    group_folds,
    heads_on,
    table_from,
)
from blackbox_wd.calibration.evaluation.metrics import auroc_with_ci, paired_auroc_diff
from blackbox_wd.calibration.fit import verdicts_by_prompt
from blackbox_wd.calibration.heads import Head
from blackbox_wd.calibration.labelled import leave_out, short_only_members
from blackbox_wd.calibration.members import MEMBERS, SHORT_ONLY, is_passage
from blackbox_wd.calibration.settle import fit_settles
from blackbox_wd.teachers.registry import reference_bandwidth

FOLDS = 5


def stage_tables(
    sets: dict[str, list[list[dict[str, Any]]]], bandwidth: float, ks: tuple[int, ...]
) -> tuple[list[Table], dict]:
    """One table per stage over every set's prompts that every stage scored, and those prompts' rows by set; when
    the rows mix short answers and passages (``is_passage`` of the stage's samples), the SHORT_ONLY members are
    missing on the passages, as ``bbwd calibrate`` leaves them."""
    tables, kept = [], {}
    for name, runs in sets.items():
        ids = set.intersection(*({r["id"] for r in rows} for rows in runs))
        kept[name] = [[r for r in rows if r["id"] in ids] for rows in runs]
        for rows in kept[name]:
            rows.sort(key=lambda r: r["id"])
    for s in range(len(next(iter(kept.values())))):
        members: dict[str, list[float | None]] = {n: [] for n in MEMBERS}
        y, groups, source, passages = [], [], [], []
        for name, runs in kept.items():
            for r in runs[s]:
                m = members_of(r, bandwidth)
                passages.append(is_passage(r, ks[s]))
                for n in MEMBERS:
                    members[n].append(m[n])
                y.append(float(r["label"] if "label" in r and r["label"] is not None else r["human_score"]))
                groups.append(f"{name}:{r['id']}")
                source.append(name)
        leave_out(members, short_only_members(members, passages), passages)
        tables.append(table_from(members, y, groups, source))
    return tables, kept


def stage_runs(rows: list[dict[str, Any]], ks: tuple[int, ...]) -> list[list[dict[str, Any]]]:
    """One run's rows as one run per stage, from a ``bbwd eval -k auto`` run (each row's ``stages`` hold the
    scores at every stage; stage k's samples are the first k, so its D is the leading k x k block of D)."""
    out = []
    for k in ks:
        stage_rows = []
        for r in rows:
            (entry,) = [e for e in r["stages"] if e["k"] == k]
            stage_rows.append({**r, **entry["scores"], "D": [d[:k] for d in r["D"][:k]]})
        out.append(stage_rows)
    return out


def held_out(t: Table, held: np.ndarray, head: Head) -> tuple[np.ndarray, list[tuple[float, bool]]]:
    """The held-out prompts of ``t`` (rows ``held``) that have the members of ``head``, with its p and flag."""
    at = held & t.rows(head.members)
    p = head.model.probability(t.matrix(head.members)[at])
    return t.groups[at], [(float(x), bool(x >= head.operating_point.threshold)) for x in p]


def replay(
    tables: list[Table], heads: list[list[str]], combiner: str = COMBINER
) -> tuple[dict[str, np.ndarray], dict[str, int], list]:
    """Out-of-fold p at every stage for every prompt (stages x prompts), its stop stage, and each fold's bands; a
    prompt is judged by the first of ``heads`` whose members it has."""
    prompts = np.unique(tables[-1].groups)
    p_all = np.full((len(tables), prompts.size), np.nan)
    flags = np.zeros((len(tables), prompts.size), dtype=bool)
    stop = np.zeros(prompts.size, dtype=int)
    # outer folds over prompts, stratified by label (a passage's by human_score >= 0.5)
    first = {g: int(tables[-1].target[i] >= 0.5) for i, g in enumerate(tables[-1].groups)}
    y_prompt = np.array([first[g] for g in prompts])
    bands = []
    for train, test in group_folds(y_prompt, prompts, FOLDS, SEED):
        tr, te = set(prompts[train]), prompts[test]
        p_train = np.full((len(tables), train.size), np.nan)
        f_train = np.zeros((len(tables), train.size), dtype=bool)
        for s, t in enumerate(tables):
            rows = np.array([g in tr for g in t.groups])
            cols = {n: v[rows] for n, v in t.members.items()}
            sub = Table(cols, t.y[rows], t.w[rows], t.groups[rows], t.source[rows])
            fits = [fit_head(sub, h, CrossValidation(combiner, FOLDS, SEED)) for h in heads_on(sub, heads)]
            oof = verdicts_by_prompt(sub, fits)
            p_train[s] = [oof[g][0] for g in prompts[train]]
            f_train[s] = [oof[g][1] for g in prompts[train]]
            held = np.array([g in set(te) for g in t.groups])
            judged = first_by_prompt(held_out(t, held, fit.head) for fit in fits)
            p_all[s, test] = [judged[g][0] for g in te]
            flags[s, test] = [judged[g][1] for g in te]
        settles = fit_settles(p_train, f_train)
        bands.append(settles)
        stop[test] = stop_round(p_all[:, test], settles)
    return {"p": p_all, "flags": flags, "prompts": prompts}, dict(zip(prompts, stop, strict=True)), bands


def section(name: str, kept: list[list[dict]], out: dict, stop: dict[str, int], ks: tuple[int, ...]) -> list[str]:
    """The figures of one set."""
    prompts = list(out["prompts"])
    col = {g: i for i, g in enumerate(prompts)}
    final = kept[-1]
    idx = np.array([col[f"{name}:{r['id']}"] for r in final])
    at = np.array([stop[f"{name}:{r['id']}"] for r in final])
    p_fixed = out["p"][-1, idx]
    p_adapt = out["p"][at, idx]
    f_fixed, f_adapt = out["flags"][-1, idx], out["flags"][at, idx]
    drawn = np.array([ks[s] for s in at])
    counts = ", ".join(f"{k}: {int((drawn == k).sum())}" for k in ks)
    tokens = [np.asarray(r["token_counts"], dtype=float) for r in final]
    saved = sum(t[n:].sum() for t, n in zip(tokens, drawn, strict=True)) / sum(t.sum() for t in tokens)
    y = np.array([r["label"] for r in final], dtype=float)
    fa, fb = (f"{x.auroc:.3f} [{x.lo:.3f}, {x.hi:.3f}]" for x in (auroc_with_ci(y, p_adapt), auroc_with_ci(y, p_fixed)))
    d = paired_auroc_diff(y, p_adapt, p_fixed)
    return [
        f"### {name}: {len(final)} prompts, k_max {ks[-1]}, stages {', '.join(map(str, ks))}",
        "",
        table(
            ["", "value"],
            [
                ["samples drawn, mean", f"{drawn.mean():.2f} of {ks[-1]}"],
                ["prompts stopped at each stage", counts],
                ["adaptive verdict AUROC", fa],
                ["fixed-K verdict AUROC", fb],
                ["adaptive minus fixed (paired 95% CI)", f"{d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]"],
                ["flags that differ", f"{int((f_fixed != f_adapt).sum())} of {len(final)}"],
                ["target tokens saved", f"{100 * saved:.1f}%"],
            ],
        ),
        "",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", required=True, help="NAME=RUN of one `bbwd eval -k auto` run")
    ap.add_argument("--k-max", type=int, required=True)
    ap.add_argument("--teacher", default="smollm2-135m")
    ap.add_argument("--norm", default="none")
    ap.add_argument("--combiner", default=COMBINER, help=f"the answer heads' combiner (default: {COMBINER})")
    args = ap.parse_args()
    ks = rounds(args.k_max)
    sets = {}
    for spec in args.set:
        name, run = spec.split("=", 1)
        sets[name] = stage_runs(read_rows(Path(run)), ks)
    bandwidth = reference_bandwidth(args.teacher, args.norm)
    tables, kept = stage_tables(sets, bandwidth, ks)
    finite = {n: np.isfinite(v) for n, v in tables[-1].members.items()}
    # LNE and DSE where every row has them: white-box runs (the recorded sets lack LNE, and DSE on passages)
    members = [n for n in API_MEMBERS if finite[n].any()] + [n for n in ("lne", "dse") if finite[n].all()]
    heads = [members]
    if any(not finite[n].all() for n in SHORT_ONLY if n in members):  # passages among the rows: a head without them
        heads.append([n for n in members if n not in SHORT_ONLY])
    out, stop, bands = replay(tables, heads, args.combiner)
    lines = [
        f"## Adaptive K ({args.teacher}, norm {args.norm}, combiner {args.combiner}): rule settle, delta {DELTA}, "
        f"stages {ks}, {FOLDS}-fold out of fold, grouped by prompt",
        "",
        "Bands per fold (below, above) at each stage but the last: "
        + "; ".join(" ".join(f"({b.below:.2f}, {b.above:.2f})" for b in fold) for fold in bands),
        "",
    ]
    for name in sets:
        lines += section(name, kept[name], out, stop, ks)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
