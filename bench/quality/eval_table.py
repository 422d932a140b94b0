"""One Markdown table over several `bbwd eval` report folders: base rate, AUROC per method, verdicts.

Each row is one run (its ``results.jsonl``) under one label: n, hallucinated/correct counts, base
rate, every method's AUROC (the best baseline's marked with *), and AvgWD's and EigenWD's paired
bootstrap difference to that best baseline with the verdict ("better"/"worse" only when the 95% CI
excludes 0). The figures are those of each run's ``summary.md`` (same functions, same resamples);
``--first N`` recomputes them on a run's first N prompts (e.g. the K=10, T=0.5 point of an ablation
whose other settings ran on 150 prompts).

    python -m bench.quality.eval_table report/sciq report/nq --label label label_em [--first 150]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from blackbox_wd.doors.eval.summary import METHODS, NAMES, OURS, best_baseline, compare, labelled, shown, summarize


def read_rows(folder: Path, first: int | None) -> list[dict]:
    """The scored rows of a run (errors dropped), the first ``first`` of them when given."""
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "error" not in r]
    return rows[:first] if first else rows


def row(name: str, rows: list[dict], key: str) -> list[str]:
    """One table row for a run under one label."""
    rows = labelled(rows, key)
    pos = sum(int(r[key]) for r in rows)
    head = [name, key, str(len(rows)), f"{pos}/{len(rows) - pos}", f"{pos / len(rows):.3f}" if rows else "—"]
    if not rows or pos in (0, len(rows)):
        return head + ["—"] * (len(METHODS) + len(OURS))
    table = summarize(rows, label_key=key)
    base = best_baseline(table)
    aurocs = [f"{table[m].auroc:.3f}{'*' if m == base else ''}" if m in table else "—" for m in METHODS]
    diffs = []
    for m in OURS:
        if m not in shown(rows, [m]):  # e.g. SentenceWD of a run made before sentence scores
            diffs.append("—")
            continue
        d = compare(rows, m, base, key)
        verdict = f" **{d.verdict}**" if d.verdict in ("better", "worse") else ""
        diffs.append(f"{d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]{verdict}")
    return head + aurocs + diffs


def main() -> None:
    """Print the table for the given report folders."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--label", nargs="+", default=["label"], help="label fields, one row each per run")
    ap.add_argument("--first", type=int, default=None, help="only each run's first N scored prompts")
    args = ap.parse_args()
    header = [
        "run",
        "label",
        "n",
        "halluc./correct",
        "base rate",
        *(NAMES[m] for m in METHODS),
        *(f"{NAMES[m]} - best baseline [95% CI]" for m in OURS),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for folder in args.folders:
        if not (folder / "results.jsonl").is_file():
            sys.exit(f"error: no results.jsonl in {folder}")
        rows = read_rows(folder, args.first)
        name = folder.name + (f" (first {args.first})" if args.first else "")
        lines += ["| " + " | ".join(row(name, rows, key)) + " |" for key in args.label]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
