"""The combined verdict on the recorded dev sets: each member, the answer verdict and the sentence verdict,
cross-validated by prompt, beside the best single score with paired CIs.

Reads two `bbwd eval` runs of one teacher and settings: SAC3 NQ-open (0/1 ``label``: AUROC) and WikiBio dev
(``human_score``: Pearson x100; sentence labels: SelfCheckGPT's AUC-PR x100). What the runs predate is
read from their rows (``calibration.members.member_value``), but for EigenWD with a fixed bandwidth, computed
from D with the bandwidth given or measured here.

- The teacher's **reference bandwidth** (printed first; ``teachers.registry.REFERENCE_BANDWIDTHS``): the median
  over the prompts of both sets of each prompt's median positive D, no label used.
- **Members**: each single score's AUROC on SAC3 and Pearson on WikiBio, as is (no fitting).
- **Answer verdict**: one table of both sets (a passage's ``human_score`` h as two rows weighted h and
  1 - h), heads fitted by ``calibration.combine.fit_head`` with each combiner; the nested out-of-fold p of
  every prompt is scored per set, and against the best single member of that set (paired bootstrap over
  prompts, 1000 resamples).
- **Heads per kind** (``--kinds sentences|length``): the same, with one head for short answers and one for
  passages, each fitted on its kind's rows of both sets with the shipped combiner (``select``); a passage has
  two sentences or more (``sentences``) or a median sample of ``KIND_TOKENS`` tokens or more (``length``).
- **Scales per kind** (``--scales``): each member standardised within its kind (by length) before one head is
  fitted with each combiner, against the pooled ``select`` head.
- **Fold seeds** (``--seeds N``): each combiner, with pooled scales and with scales per kind, over N fold seeds.
- **Short-answer members on passages** (``--passages N``): ln EigenWD, ES and ER missing on a passage (a median
  sample of ``KIND_TOKENS`` tokens or more), ``mean``, against the pooled ``select`` and ``mean`` heads over N
  fold seeds; each on the nested p and on the **deployed p** (the head's own calibrator, fitted on every row's
  out-of-fold z, applied to each prompt's out-of-fold z: one calibrator for all prompts, as a shipped head has).
- **The sentence verdicts aggregated over the answer** (``--aggregate N``): the member ``sentence_verdict``, the mean
  over a judged answer's sentences of the ``mean`` sentence head's z (scales of WikiBio's sentences, no label), added
  to the shipped head (``mean``, short-answer members missing on passages) over N fold seeds, deployed p.
- **Sentence verdict**: WikiBio's sentences (NonFact label: minor or major), a head over the OT score and the
  lexical surprise, out-of-fold p (nested, and deployed) against each part.

    python -m bench.quality.verdict --sac3 R/sac3 --wikibio R/wikibio [--bandwidth B]
        [--kinds sentences|length | --scales | --seeds N | --passages N | --aggregate N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.common import table
from bench.verdicts import (
    API_MEMBERS,
    N_BOOT,
    SEED,
    api_members,
    auroc_text,
    both_sets,
    column,
    diff_text,
    out_of_fold,
    pearson_diff,
    pearson_text,
    per_set,
    pooled_table,
    r_text,
    read_rows,
    reference_bandwidth,
    sentence_head,
    sentence_table,
)
from blackbox_wd.calibration.combine import COMBINERS, CrossValidation, Table, first_by_prompt, fit_head
from blackbox_wd.calibration.members import PASSAGE_TOKENS, SHORT_ONLY, is_passage, sentence_verdict
from blackbox_wd.calibration.metrics import auroc_with_ci, correlation_with_ci, paired_auroc_diff, sentence_auc_pr

KIND_TOKENS = PASSAGE_TOKENS  # --kinds length, --scales, --passages: a median sample of this many tokens or more


def answer_section(sac3: list[dict], wiki: list[dict], bandwidth: float, folds: int) -> list[str]:
    """Members and the answer verdict on both sets."""
    m_s, m_w, y_s, h_w = both_sets(sac3, wiki, bandwidth)
    names = [n for n in (*API_MEMBERS, "dse", "lne") if any(m[n] is not None for m in m_s + m_w)]
    rows, best_s, best_w = [], ("", -1.0), ("", -1.0)
    for n in names:
        a = auroc_with_ci(y_s, column(m_s, n)) if np.isfinite(column(m_s, n)).any() else None
        c = correlation_with_ci(h_w, column(m_w, n)) if np.isfinite(column(m_w, n)).any() else None
        if a is not None and a.auroc > best_s[1]:
            best_s = (n, a.auroc)
        if c is not None and c.r > best_w[1]:
            best_w = (n, c.r)
        rows.append([n, "—" if a is None else auroc_text(a), "—" if c is None else r_text(c)])
    out = [
        "## Members (as they are, no fitting)",
        "",
        table(["member", "SAC3 AUROC", "WikiBio Pearson x100"], rows),
        "",
    ]
    members = [n for n in API_MEMBERS if n in names]
    t = pooled_table(sac3, wiki, m_s, m_w, members)
    vrows = []
    for combiner in COMBINERS:
        fit = fit_head(t, members, CrossValidation(combiner, folds, SEED))
        ps, pw = per_set(out_of_fold(t, fit), sac3, wiki)
        a = auroc_with_ci(y_s, ps)
        d = paired_auroc_diff(y_s, ps, column(m_s, best_s[0]))
        c = correlation_with_ci(h_w, pw)
        dw = pearson_diff(h_w, pw, column(m_w, best_w[0]))
        coefs = ", ".join(f"{n} {v:+.2f}" for n, v in zip(members, fit.head.model.coef, strict=True))
        vrows.append(
            [
                combiner,
                auroc_text(a),
                f"{diff_text(d)} vs {best_s[0]}",
                r_text(c),
                f"{pearson_text(dw)} vs {best_w[0]}",
                fit.head.model.method,
                coefs,
            ]
        )
    out += [
        f"## Answer verdict: one head over {', '.join(members)}, fitted on both sets, nested out-of-fold p "
        f"({folds} folds grouped by prompt)",
        "",
        table(
            [
                "combiner",
                "SAC3 AUROC",
                "minus best single",
                "WikiBio Pearson x100",
                "minus best single",
                "calibrator",
                "coef (standardised, all rows)",
            ],
            vrows,
        ),
        "",
    ]
    return out


def subset(t: Table, mask: np.ndarray) -> Table:
    """The rows of ``t`` where ``mask`` holds."""
    members = {k: v[mask] for k, v in t.members.items()}
    return Table(members, t.y[mask], t.w[mask], t.groups[mask], t.source[mask], t.target[mask])


def kind_of(token_counts: list[int]) -> int:
    """1 (a passage, ``members.is_passage``) when the median sample has at least KIND_TOKENS tokens, else 0."""
    return int(is_passage({"token_counts": token_counts}))


def scaled_by_kind(t: Table, rows: list[dict]) -> Table:
    """``t`` with each member standardised within each kind of answer (:func:`kind_of`) over all rows: a
    transform that reads no label, so the folds stay honest; the head's own scales are then about 1."""
    kind_by_id = {r["id"]: kind_of(r["token_counts"]) for r in rows}
    kind = np.array([kind_by_id[g] for g in t.groups])
    members = {}
    for name, x in t.members.items():
        z = x.copy()
        for k in (0, 1):
            at = kind == k
            z[at] = (x[at] - np.nanmean(x[at])) / (np.nanstd(x[at]) or 1.0)
        members[name] = z
    return Table(members, t.y, t.w, t.groups, t.source, t.target)


def scale_section(sac3: list[dict], wiki: list[dict], bandwidth: float, folds: int) -> list[str]:
    """Every combiner with scales per kind of answer, against the pooled ``select`` head (RESULTS' rule)."""
    m_s, m_w, y_s, h_w = both_sets(sac3, wiki, bandwidth)
    members = api_members(m_s, m_w)
    t = pooled_table(sac3, wiki, m_s, m_w, members)
    per_kind = scaled_by_kind(t, sac3 + wiki)
    best_s = max(members, key=lambda n: auroc_with_ci(y_s, column(m_s, n)).auroc)
    best_w = max(members, key=lambda n: correlation_with_ci(h_w, column(m_w, n)).r)
    pooled = fit_head(t, members, CrossValidation("select", folds, SEED))
    fits = {"pooled scales, select": pooled}
    fits |= {f"scales per kind, {c}": fit_head(per_kind, members, CrossValidation(c, folds, SEED)) for c in COMBINERS}
    ref_s, ref_w = per_set(out_of_fold(t, pooled), sac3, wiki)
    rows = []
    for label, fit in fits.items():
        ps, pw = per_set(out_of_fold(t, fit), sac3, wiki)
        a, c = auroc_with_ci(y_s, ps), correlation_with_ci(h_w, pw)
        d, dw = paired_auroc_diff(y_s, ps, ref_s), pearson_diff(h_w, pw, ref_w)
        b, bw = paired_auroc_diff(y_s, ps, column(m_s, best_s)), pearson_diff(h_w, pw, column(m_w, best_w))
        coefs = ", ".join(f"{n} {v:+.2f}" for n, v in zip(members, fit.head.model.coef, strict=True) if v)
        rows.append(
            [
                label,
                auroc_text(a),
                r_text(c),
                f"{(a.auroc + c.r) / 2:.3f}",
                f"{diff_text(d)} / {pearson_text(dw)}",
                f"{diff_text(b)} / {pearson_text(bw)}",
                coefs,
            ]
        )
    counts = [sum(kind_of(r["token_counts"]) for r in rows) for rows in (sac3, wiki)]
    return [
        f"## Scales per kind of answer (passage: median sample >= {KIND_TOKENS} tokens; passages: SAC3 "
        f"{counts[0]}, WikiBio {counts[1]})",
        "",
        table(
            [
                "head",
                "SAC3 AUROC",
                "WikiBio Pearson x100",
                "mean",
                "minus pooled select (SAC3 / WikiBio)",
                f"minus best single ({best_s} / {best_w})",
                "coef",
            ],
            rows,
        ),
        "",
    ]


def seed_section(sac3: list[dict], wiki: list[dict], bandwidth: float, folds: int, seeds: int) -> list[str]:
    """Each combiner, with pooled scales and with scales per kind, over ``seeds`` fold seeds: the mean, least and
    most of its out-of-fold SAC3 AUROC and WikiBio Pearson (how much of a head's figure is the folds' draw)."""
    m_s, m_w, y_s, h_w = both_sets(sac3, wiki, bandwidth)
    members = api_members(m_s, m_w)
    t = pooled_table(sac3, wiki, m_s, m_w, members)
    tables = {"pooled scales": t, "scales per kind": scaled_by_kind(t, sac3 + wiki)}
    rows = []
    for (scales, tab), combiner in ((x, c) for x in tables.items() for c in COMBINERS):
        got = []
        for seed in range(seeds):
            fit = fit_head(tab, members, CrossValidation(combiner, folds, seed))
            ps, pw = per_set(out_of_fold(tab, fit), sac3, wiki)
            got.append((auroc_with_ci(y_s, ps).auroc, 100 * np.corrcoef(pw, h_w)[0, 1]))
        a, c = np.array(got).T
        rows.append(
            [
                f"{scales}, {combiner}",
                f"{a.mean():.3f} [{a.min():.3f}, {a.max():.3f}]",
                f"{c.mean():.2f} [{c.min():.2f}, {c.max():.2f}]",
                f"{(a.mean() + c.mean() / 100) / 2:.3f}",
                f"{a[0]:.3f} / {c[0]:.2f}",
            ]
        )
    return [
        f"## Every head over fold seeds 0 to {seeds - 1} (mean [least, most])",
        "",
        table(["head", "SAC3 AUROC", "WikiBio Pearson x100", "mean of the two", "seed 0"], rows),
        "",
    ]


def head_ps(t: Table, heads: list[list[str]], combiner: str, folds: int, seed: int) -> dict[str, tuple[float, float]]:
    """(nested out-of-fold p, deployed p) by prompt, from the first of ``heads`` whose members the prompt has. The
    deployed p is the calibrator the head ships with applied to the prompt's out-of-fold z: one calibrator for
    every prompt, as a shipped head has."""
    fits = [fit_head(t, members, CrossValidation(combiner, folds, seed)) for members in heads]
    return first_by_prompt(
        (t.groups[f.rows], [(float(p), float(d)) for p, d in zip(f.p, f.head.model.calibrator(f.z), strict=True)])
        for f in fits
    )


def spread(values: np.ndarray, digits: int) -> str:
    """mean [least, most] of ``values``."""
    return f"{values.mean():.{digits}f} [{values.min():.{digits}f}, {values.max():.{digits}f}]"


def without_short_only(t: Table, rows: list[dict]) -> Table:
    """``t`` with the SHORT_ONLY members missing on every passage (:func:`kind_of`)."""
    passage = {r["id"]: kind_of(r["token_counts"]) for r in rows}
    at = np.array([bool(passage[g]) for g in t.groups])
    members = {k: np.where(at, np.nan, v) if k in SHORT_ONLY else v for k, v in t.members.items()}
    return Table(members, t.y, t.w, t.groups, t.source, t.target)


SEEDED_COLUMNS = [
    "head",
    "SAC3 AUROC, deployed",
    "WikiBio Pearson x100, deployed",
    "SAC3 AUROC, nested p",
    "WikiBio Pearson x100, nested p",
    "seed 0, deployed minus best single (paired 95% CI)",
]


def seeded(
    families: dict[str, tuple[Table, list[list[str]], str]],
    sac3: list[dict],
    wiki: list[dict],
    sets: tuple[list, list, np.ndarray, np.ndarray],
    members: list[str],
    folds: int,
    seeds: int,
) -> tuple[list[list[str]], list[tuple[np.ndarray, np.ndarray]], str]:
    """Each family (label: table, heads most members first, combiner) over ``seeds`` fold seeds, on the deployed p
    and the nested p (``SEEDED_COLUMNS``); each family's seed-0 deployed p per set; the best single of ``members``
    on each set (``sets``: :func:`both_sets` of the rows)."""
    m_s, m_w, y_s, h_w = sets
    best_s = max(members, key=lambda n: auroc_with_ci(y_s, column(m_s, n)).auroc)
    best_w = max(members, key=lambda n: correlation_with_ci(h_w, column(m_w, n)).r)
    rows, first = [], []
    for label, (tab, heads, combiner) in families.items():
        got = []
        for seed in range(seeds):
            ps = head_ps(tab, heads, combiner, folds, seed)
            nested_s, nested_w = per_set({g: v[0] for g, v in ps.items()}, sac3, wiki)
            dep_s, dep_w = per_set({g: v[1] for g, v in ps.items()}, sac3, wiki)
            got.append(
                [auroc_with_ci(y_s, x).auroc for x in (nested_s, dep_s)]
                + [100 * np.corrcoef(x, h_w)[0, 1] for x in (nested_w, dep_w)]
            )
            if seed == 0:
                first.append((dep_s, dep_w))
                d = paired_auroc_diff(y_s, dep_s, column(m_s, best_s))
                diffs = f"{diff_text(d)} / {pearson_text(pearson_diff(h_w, dep_w, column(m_w, best_w)))}"
        g = np.array(got).T
        rows.append([label, spread(g[1], 3), spread(g[3], 2), spread(g[0], 3), spread(g[2], 2), diffs])
    single_s = auroc_with_ci(y_s, column(m_s, best_s)).auroc
    single_w = 100 * correlation_with_ci(h_w, column(m_w, best_w)).r
    return rows, first, f"{best_s} {single_s:.3f}, {best_w} {single_w:.2f}"


def passage_section(sac3: list[dict], wiki: list[dict], bandwidth: float, folds: int, seeds: int) -> list[str]:
    """The short-answer members left out on passages (``mean``), against the pooled ``select`` and ``mean`` heads
    and the best single scores, on the nested p and on the deployed p, over ``seeds`` fold seeds."""
    sets = both_sets(sac3, wiki, bandwidth)
    m_s, m_w = sets[:2]
    members = api_members(m_s, m_w)
    t = pooled_table(sac3, wiki, m_s, m_w, members)
    rest = [n for n in members if n not in SHORT_ONLY]
    families = {
        "pooled scales, select (shipped)": (t, [members], "select"),
        "pooled scales, mean": (t, [members], "mean"),
        "short-answer members missing on passages, mean": (without_short_only(t, sac3 + wiki), [members, rest], "mean"),
    }
    rows, _, best = seeded(families, sac3, wiki, sets, members, folds, seeds)
    return [
        f"## Short-answer members ({', '.join(SHORT_ONLY)}) missing on passages, over fold seeds 0 to {seeds - 1} "
        f"(mean [least, most]); best single: {best}",
        "",
        table(SEEDED_COLUMNS, rows),
        "",
    ]


def aggregate_section(sac3: list[dict], wiki: list[dict], bandwidth: float, folds: int, seeds: int) -> list[str]:
    """The shipped head (``mean``, short-answer members missing on passages) with and without ``sentence_verdict``,
    on the deployed p and the nested p over ``seeds`` fold seeds, beside the best single scores (RESULTS' rule)."""
    m_s, m_w, y_s, h_w = both_sets(sac3, wiki, bandwidth)
    head = sentence_head(wiki, folds)
    for ms, rows in ((m_s, sac3), (m_w, wiki)):
        for m, r in zip(ms, rows, strict=True):
            m["sentence_verdict"] = sentence_verdict(head, r["sentences"])
    members = [n for n in api_members(m_s, m_w) if n != "sentence_verdict"]
    rest = [n for n in members if n not in SHORT_ONLY]
    plus, rest_plus = [*members, "sentence_verdict"], [*rest, "sentence_verdict"]
    t = without_short_only(pooled_table(sac3, wiki, m_s, m_w, plus), sac3 + wiki)
    families = {
        "shipped: mean, short-answer members missing on passages": (t, [members, rest], "mean"),
        "the same with sentence_verdict": (t, [plus, rest_plus, members, rest], "mean"),
    }
    sv_s, sv_w = column(m_s, "sentence_verdict"), column(m_w, "sentence_verdict")
    ok = np.isfinite(sv_s)
    rows, ((a_s, a_w), (b_s, b_w)), best = seeded(families, sac3, wiki, (m_s, m_w, y_s, h_w), members, folds, seeds)
    return [
        f"## The sentence verdicts aggregated over the answer (sentence scales: mean "
        f"{[round(x, 4) for x in head.model.mean]}, scale {[round(x, 4) for x in head.model.scale]})",
        "",
        f"sentence_verdict alone: SAC3 AUROC {auroc_with_ci(y_s[ok], sv_s[ok]).auroc:.3f} on the {int(ok.sum())} of "
        f"{ok.size} answers that have it; WikiBio Pearson x100 {100 * np.corrcoef(sv_w, h_w)[0, 1]:.2f}",
        "",
        f"Over fold seeds 0 to {seeds - 1} (mean [least, most]); best single: {best}",
        "",
        table(SEEDED_COLUMNS, rows),
        "",
        f"seed 0, with minus without (paired 95% CI): SAC3 {diff_text(paired_auroc_diff(y_s, b_s, a_s))}, WikiBio "
        f"{pearson_text(pearson_diff(h_w, b_w, a_w))}",
        "",
    ]


def kind_section(sac3: list[dict], wiki: list[dict], bandwidth: float, folds: int, by: str) -> list[str]:
    """Heads per kind of answer against the pooled head, both ``select``; kinds ``by`` "sentences" (one: short;
    more: passage) or "length" (:func:`kind_of`)."""
    m_s, m_w, y_s, h_w = both_sets(sac3, wiki, bandwidth)
    members = api_members(m_s, m_w)
    if by == "length":
        kind = {r["id"]: "passage" if kind_of(r["token_counts"]) else "short" for r in sac3 + wiki}
    else:
        kind = {r["id"]: "passage" if len(r.get("sentences") or []) >= 2 else "short" for r in sac3 + wiki}
    t = pooled_table(sac3, wiki, m_s, m_w, members)
    pooled = fit_head(t, members, CrossValidation("select", folds, SEED))
    p_pooled = out_of_fold(t, pooled)
    p_kind: dict[str, float] = {}
    used = []
    for name in ("short", "passage"):
        part = subset(t, np.array([kind[g] == name for g in t.groups]))
        fit = fit_head(part, members, CrossValidation("select", folds, SEED))
        p_kind.update(zip(part.groups[fit.rows], fit.p, strict=True))
        chosen = [n for n, c in zip(members, fit.head.model.coef, strict=True) if c]
        used.append(f"{name} ({len(np.unique(part.groups))} prompts): {', '.join(chosen)}")
    (ps, pw), (ks, kw) = per_set(p_pooled, sac3, wiki), per_set(p_kind, sac3, wiki)
    rows = [
        [label, auroc_text(auroc_with_ci(y_s, a)), r_text(correlation_with_ci(h_w, c))]
        for label, a, c in (("pooled head (select)", ps, pw), ("heads per kind (select)", ks, kw))
    ]
    d, dw = paired_auroc_diff(y_s, ks, ps), pearson_diff(h_w, kw, pw)
    counts = {k: sum(kind[r["id"]] == k for r in sac3) for k in ("short", "passage")}
    return [
        f"## Heads per kind of answer, kinds by {by} (nested out-of-fold p)",
        "",
        f"SAC3 kinds: {counts}; members kept: " + "; ".join(used),
        "",
        table(["verdict", "SAC3 AUROC", "WikiBio Pearson x100"], rows),
        "",
        f"per kind minus pooled: SAC3 {diff_text(d)}, WikiBio {pearson_text(dw)}",
        "",
    ]


def sentence_section(wiki: list[dict], folds: int) -> list[str]:
    """The sentence verdict against its two parts."""
    t, sev, passage = sentence_table(wiki)
    score, unigram = t.members["score"], t.members["unigram"]
    lines = ["## Sentence verdict (WikiBio sentences; AUC-PR x100 with the CI over passages)", ""]
    cols = {"OT score (sentence)": np.array(score), "lexical surprise (unigram max)": np.array(unigram)}
    for combiner in COMBINERS:
        fit = fit_head(t, ["score", "unigram"], CrossValidation(combiner, folds, SEED))
        p, deployed = np.full(sev.size, np.nan), np.full(sev.size, np.nan)
        p[fit.rows], deployed[fit.rows] = fit.p, fit.head.model.calibrator(fit.z)
        coefs = ", ".join(f"{v:+.2f}" for v in fit.head.model.coef)
        cols[f"verdict, {combiner} ({coefs}; {fit.head.model.method})"] = p
        cols[f"verdict, {combiner}, deployed p"] = deployed
    rows = []
    for name, s in cols.items():
        r = sentence_auc_pr(sev, s, passage, N_BOOT, SEED)
        parts = (r.nonfact, r.nonfact_star, r.factual)
        rows.append([name, *(f"{100 * x.auc_pr:.2f} [{100 * x.lo:.2f}, {100 * x.hi:.2f}]" for x in parts)])
    lines += [table(["score", "NonFact", "NonFact*", "Factual"], rows), ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sac3", type=Path, required=True, help="bbwd eval folder of sac3_nq_open.jsonl")
    ap.add_argument("--wikibio", type=Path, required=True, help="bbwd eval folder of wikibio_gpt3_dev.jsonl")
    ap.add_argument("--bandwidth", type=float, help="EigenWD's fixed bandwidth (default: measured on the two runs)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seeds", type=int, help="only every head over this many fold seeds")
    ap.add_argument("--scales", action="store_true", help="only the scales per kind against the pooled head")
    ap.add_argument("--kinds", choices=("sentences", "length"), help="only the heads per kind against the pooled head")
    ap.add_argument("--passages", type=int, metavar="SEEDS", help="only the short-answer members left out on passages")
    ap.add_argument("--aggregate", type=int, metavar="SEEDS", help="only the shipped head with sentence_verdict")
    args = ap.parse_args()
    sac3, wiki = read_rows(args.sac3), read_rows(args.wikibio)
    b = reference_bandwidth([sac3, wiki]) if args.bandwidth is None else args.bandwidth
    settings = json.loads((args.sac3 / "settings.json").read_text())
    print(f"# Verdict on {args.sac3.name} ({len(sac3)}) and {args.wikibio.name} ({len(wiki)})\n")
    print(f"teacher {settings['teacher']}, norm {settings.get('norm', 'none')}, reference bandwidth {b:.6g}\n")
    if args.seeds:
        print("\n".join(seed_section(sac3, wiki, b, args.folds, args.seeds)))
        return
    if args.scales:
        print("\n".join(scale_section(sac3, wiki, b, args.folds)))
        return
    if args.passages:
        print("\n".join(passage_section(sac3, wiki, b, args.folds, args.passages)))
        print("\n".join(sentence_section(wiki, args.folds)))
        return
    if args.aggregate:
        print("\n".join(aggregate_section(sac3, wiki, b, args.folds, args.aggregate)))
        return
    if args.kinds:
        print("\n".join(kind_section(sac3, wiki, b, args.folds, args.kinds)))
        return
    print("\n".join(answer_section(sac3, wiki, b, args.folds) + sentence_section(wiki, args.folds)))


if __name__ == "__main__":
    main()
