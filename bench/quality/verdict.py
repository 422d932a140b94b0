"""The members and the sentence verdict on the recorded dev sets, the sentence verdict cross-validated by passage,
beside its two parts.

Reads two `bbwd eval` runs of one teacher and settings: SAC3 NQ-open (0/1 ``label``: AUROC) and WikiBio dev
(``human_score``: Pearson x100; sentence labels: SelfCheckGPT's AUC-PR x100). What the runs predate is
read from their rows (``calibration.model.member_value``), but for EigenWD with a fixed bandwidth, computed
from D with the bandwidth given or measured here.

- The teacher's **reference bandwidth** (printed first; ``teachers.registry.REFERENCE_BANDWIDTHS``): the median
  over the prompts of both sets of each prompt's median positive D, no label used.
- **Members**: each single score's AUROC on SAC3 and Pearson on WikiBio, as is (no fitting).
- **Sentence verdict**: WikiBio's sentences (NonFact label: minor or major), the shipped ``mean`` head over the OT
  score and the lexical surprise, out-of-fold p (nested, and deployed) against each part.

    python -m bench.quality.verdict --sac3 R/sac3 --wikibio R/wikibio [--bandwidth B]

(The answer verdict of every combiner, its head with the sentence verdicts aggregated (``--aggregate``), and the
studies of heads per kind, scales per kind, fold seeds and short-answer members on passages, designs not shipped
since: ``docs/results-notebook.md``, "The combined verdict".)
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
    auroc_text,
    both_sets,
    column,
    r_text,
    read_rows,
    reference_bandwidth,
    sentence_table,
)
from blackbox_wd.calibration.combine import CrossValidation, fit_head
from blackbox_wd.calibration.evaluation.metrics import auroc_with_ci, correlation_with_ci, sentence_auc_pr


def members_section(sac3: list[dict], wiki: list[dict], bandwidth: float) -> list[str]:
    """Each member's AUROC on SAC3 and Pearson on WikiBio."""
    m_s, m_w, y_s, h_w = both_sets(sac3, wiki, bandwidth)
    names = [n for n in (*API_MEMBERS, "dse", "lne") if any(m[n] is not None for m in m_s + m_w)]
    rows = []
    for n in names:
        a = auroc_with_ci(y_s, column(m_s, n)) if np.isfinite(column(m_s, n)).any() else None
        c = correlation_with_ci(h_w, column(m_w, n)) if np.isfinite(column(m_w, n)).any() else None
        rows.append([n, "—" if a is None else auroc_text(a), "—" if c is None else r_text(c)])
    return [
        "## Members (as they are, no fitting)",
        "",
        table(["member", "SAC3 AUROC", "WikiBio Pearson x100"], rows),
        "",
    ]


def sentence_section(wiki: list[dict], folds: int) -> list[str]:
    """The sentence verdict (the ``mean`` head) against its two parts."""
    t, sev, passage = sentence_table(wiki)
    lines = ["## Sentence verdict (WikiBio sentences; AUC-PR x100 with the CI over passages)", ""]
    cols = {"OT score (sentence)": t.members["score"], "lexical surprise (unigram max)": t.members["unigram"]}
    fit = fit_head(t, ["score", "unigram"], CrossValidation("mean", folds, SEED))
    p, deployed = np.full(sev.size, np.nan), np.full(sev.size, np.nan)
    p[fit.rows], deployed[fit.rows] = fit.p, fit.head.model.calibrator(fit.z)
    coefs = ", ".join(f"{v:+.2f}" for v in fit.head.model.coef)
    cols[f"verdict, mean ({coefs}; {fit.head.model.method})"] = p
    cols["verdict, mean, deployed p"] = deployed
    rows = []
    for name, s in cols.items():
        r = sentence_auc_pr(sev, np.array(s), passage, N_BOOT, SEED)
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
    args = ap.parse_args()
    sac3, wiki = read_rows(args.sac3), read_rows(args.wikibio)
    b = reference_bandwidth([sac3, wiki]) if args.bandwidth is None else args.bandwidth
    settings = json.loads((args.sac3 / "settings.json").read_text())
    print(f"# Verdict on {args.sac3.name} ({len(sac3)}) and {args.wikibio.name} ({len(wiki)})\n")
    print(f"teacher {settings['teacher']}, norm {settings.get('norm', 'none')}, reference bandwidth {b:.6g}\n")
    print("\n".join(members_section(sac3, wiki, b) + sentence_section(wiki, args.folds)))


if __name__ == "__main__":
    main()
