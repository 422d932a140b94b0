"""The combined verdict on the recorded dev sets: each member, the answer verdict and the sentence verdict,
cross-validated by prompt, beside the best single score with paired CIs.

Reads two `bbwd eval` runs of one teacher and settings: SAC3 NQ-open (0/1 ``label``: AUROC) and WikiBio dev
(``human_score``: Pearson x100; sentence labels: SelfCheckGPT's AUC-PR x100). What the runs predate is
read from their rows (``calibration.model.member_value``), but for EigenWD with a fixed bandwidth, computed
from D with the bandwidth given or measured here.

- The teacher's **reference bandwidth** (printed first; ``teachers.registry.REFERENCE_BANDWIDTHS``): the median
  over the prompts of both sets of each prompt's median positive D, no label used.
- **Members**: each single score's AUROC on SAC3 and Pearson on WikiBio, as is (no fitting).
- **Answer verdict**: one table of both sets (a passage's ``human_score`` h as two rows weighted h and
  1 - h), heads fitted by ``calibration.combine.fit_head`` with each combiner; the nested out-of-fold p of
  every prompt is scored per set, and against the best single member of that set (paired bootstrap over
  prompts, 1000 resamples).
- **The sentence verdicts aggregated over the answer** (``--aggregate N``): the member ``sentence_verdict``, the mean
  over a judged answer's sentences of the ``mean`` sentence head's z (scales of WikiBio's sentences, no label), added
  to the shipped head (``mean``, short-answer members missing on passages) over N fold seeds, deployed p.
- **Sentence verdict**: WikiBio's sentences (NonFact label: minor or major), a head over the OT score and the
  lexical surprise, out-of-fold p (nested, and deployed) against each part.

    python -m bench.quality.verdict --sac3 R/sac3 --wikibio R/wikibio [--bandwidth B]
        [--aggregate N]

(The studies of heads per kind, scales per kind, fold seeds and short-answer members on passages, ``--kinds``,
``--scales``, ``--seeds`` and ``--passages``, measured designs not shipped since #53: ``docs/results-notebook.md``,
"The combined verdict".)
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
from blackbox_wd.calibration.model import PASSAGE_TOKENS, SHORT_ONLY, is_passage, sentence_verdict
from blackbox_wd.metrics import auroc_with_ci, correlation_with_ci, paired_auroc_diff, sentence_auc_pr

KIND_TOKENS = PASSAGE_TOKENS  # a passage: a median sample of this many tokens or more


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


def kind_of(token_counts: list[int]) -> int:
    """1 (a passage, ``model.is_passage``) when the median sample has at least KIND_TOKENS tokens, else 0."""
    return int(is_passage({"token_counts": token_counts}))


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
    ap.add_argument("--aggregate", type=int, metavar="SEEDS", help="only the shipped head with sentence_verdict")
    args = ap.parse_args()
    sac3, wiki = read_rows(args.sac3), read_rows(args.wikibio)
    b = reference_bandwidth([sac3, wiki]) if args.bandwidth is None else args.bandwidth
    settings = json.loads((args.sac3 / "settings.json").read_text())
    print(f"# Verdict on {args.sac3.name} ({len(sac3)}) and {args.wikibio.name} ({len(wiki)})\n")
    print(f"teacher {settings['teacher']}, norm {settings.get('norm', 'none')}, reference bandwidth {b:.6g}\n")
    if args.aggregate:
        print("\n".join(aggregate_section(sac3, wiki, b, args.folds, args.aggregate)))
        return
    print("\n".join(answer_section(sac3, wiki, b, args.folds) + sentence_section(wiki, args.folds)))


if __name__ == "__main__":
    main()
