"""The verdict through ``bbwd batch`` on labelled logs, beside lm-polygraph's model-free estimators.

Reads ``bbwd batch`` outputs whose rows carry a 0/1 ``label`` (batch copies it from the log) and lm-polygraph's
estimators in their ``baselines``. For each file, as ``bbwd report``'s labels box shows it
(``calibration.evaluation.verdicts.labelled_verdicts``): the verdict's AUROC, each estimator's
(``baselines.PEERS``) on the same rows, the margin to the best of them, the ECE of p and the flag's FPR and TPR
seen. Then the mean over the files and the two conditions the verdict is held to: (a) every file's margin at least
-0.015; (b) the verdict's mean at least every estimator's mean. With ``--auto``, the ``-k auto`` outputs of the same
logs, in the same order: their mean samples, their AUROC, and the share of rows (matched by id) whose flag agrees
with the K run's.

    bbwd batch log.jsonl -o out.jsonl && bbwd batch log.jsonl -k auto -o auto.jsonl      # per labelled log
    python -m bench.quality.door out-a.jsonl out-b.jsonl [--auto auto-a.jsonl auto-b.jsonl]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bench.common import command, table
from blackbox_wd.calibration.evaluation.metrics import auroc
from blackbox_wd.calibration.evaluation.verdicts import LabelledVerdicts, labelled_verdicts, risks
from blackbox_wd.doors.report.rows import ReportRow, read_rows
from blackbox_wd.signals.baselines import PEERS
from blackbox_wd.signals.names import PEER_SHORT_NAMES

MARGIN = -0.015  # condition (a): the verdict's AUROC at least every estimator's less 0.015


def labelled_of(path: Path) -> tuple[list[ReportRow], LabelledVerdicts, float]:
    """A batch output's rows, its labels box and the verdict's AUROC; SystemExit naming the file when it has no
    labelled verdicts of both classes."""
    read = read_rows(path)
    risk, risk_from = risks(read.rows)
    lab = labelled_verdicts(read.rows, risk, risk_from == "p_hallucination")
    if lab is None or lab.auroc is None or risk_from != "p_hallucination":
        raise SystemExit(f"{path}: no rows with a p_hallucination and a 0/1 label of both classes")
    missing = [k for k in PEERS if k not in {b.key for b in lab.beside}]
    if missing:
        raise SystemExit(f"{path}: a labelled row lacks {', '.join(missing)} in its baselines (scored before #58?)")
    return read.rows, lab, lab.auroc


def auto_line(rows: list[ReportRow], auto: Path) -> list[str]:
    """``-k auto``'s mean samples, AUROC and flags agreeing with ``rows`` (the K run), over the rows both have."""
    by_id = {r.id: r for r in read_rows(auto).rows if r.p is not None and r.label is not None}
    both = [(r, by_id[r.id]) for r in rows if r.id in by_id and r.p is not None and r.label is not None]
    if not both:
        raise SystemExit(f"{auto}: no labelled row with a verdict shares an id with the K run")
    y = [a.label for _, a in both]  # by_id holds labelled rows only
    return [
        f"{np.mean([a.n_samples for _, a in both]):.2f}",
        f"{auroc(y, [a.p for _, a in both]):.3f}",
        f"{100 * np.mean([bool(r.flag) == bool(a.flag) for r, a in both]):.1f}% ({len(both)})",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outputs", nargs="+", type=Path, help="bbwd batch outputs with a 0/1 label on the rows")
    ap.add_argument("--auto", nargs="+", type=Path, help="the same logs' -k auto outputs, in the same order")
    args = ap.parse_args()
    if args.auto and len(args.auto) != len(args.outputs):
        raise SystemExit(f"--auto gives {len(args.auto)} files for {len(args.outputs)} outputs")
    print(f"`{command()}`\n")
    header = ["file", "n", "verdict", *(PEER_SHORT_NAMES[k] for k in PEERS), "margin", "ECE", "FPR seen", "TPR"]
    if args.auto:
        header += ["-k auto: samples", "its AUROC", "flags agree"]
    lines, verdicts, peers, margins = [], [], {k: [] for k in PEERS}, []
    for n, path in enumerate(args.outputs):
        rows, lab, verdict = labelled_of(path)
        est = {b.key: b.auroc for b in lab.beside if b.key in PEERS}
        margin = verdict - max(est.values())
        verdicts.append(verdict)
        margins.append(margin)
        for k in PEERS:
            peers[k].append(est[k])
        line = [path.name, str(lab.n), f"{verdict:.3f}", *(f"{est[k]:.3f}" for k in PEERS), f"{margin:+.4f}"]
        line += [f"{v:.3f}" if v is not None else "n/a" for v in (lab.ece, lab.fpr_seen, lab.tpr_seen)]
        lines.append(line + (auto_line(rows, args.auto[n]) if args.auto else []))
    means = {k: float(np.mean(v)) for k, v in peers.items()}
    mean = float(np.mean(verdicts))
    lines.append(["mean", "", f"{mean:.4f}", *(f"{means[k]:.4f}" for k in PEERS), f"worst {min(margins):+.4f}"])
    print(table(header, [line + [""] * (len(header) - len(line)) for line in lines]))
    a = min(margins) >= MARGIN
    b = all(mean >= m for m in means.values())
    print(
        f"\n#58 over {len(verdicts)} file(s): (a) every margin >= {MARGIN}: {'met' if a else 'not met'} "
        f"(worst {min(margins):+.4f}); (b) the mean at least every estimator's: {'met' if b else 'not met'} "
        f"({mean:.4f} against {max(means.values()):.4f})"
    )


if __name__ == "__main__":
    main()
