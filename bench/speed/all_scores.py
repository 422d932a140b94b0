"""Compute what is read (#71): `bbwd batch` on recorded short-answer logs by default (the teacher forces only the
rows whose verdict reads it) against the same run with `--all-scores` (every row forced, today's rows), in one run.

Each log's first N records (a data file's records made a batch log: ``prompt``, ``response``, its recorded ``samples``
as ``responses``, ``label``) go through ``python -m blackbox_wd batch LOG -o OUT`` (a new process, the embedded
teacher on the CPU, the shipped black-box calibration), once each way, in alternating order over the rounds so that a
change in the machine's load hits both alike. Printed per log: the rows that skipped the teacher, prompts/s of each
(batch's own summary line: the run after start-up) with the default's ratio to ``--all-scores`` (median over rounds),
each process's peak resident memory (its own ``ru_maxrss``), whether p and the flag are identical on every row, and
whether every ``--all-scores`` row carries AvgWD and EigenWD. #71's held-out condition: at least 5x.

    python -m bench.speed.all_scores [--logs ../shared/data/kk_llama31_8b_triviaqa.jsonl ...] [--n 200] [--rounds 3]
    python -m bench.speed.all_scores --quick        # 8 short answers of fixtures/report_log.jsonl, 1 round
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from bench.common import ROOT, command, data_dir, log_line, table

DATA = data_dir()
LOGS = (DATA / "kk_llama31_8b_triviaqa.jsonl", DATA / "kk_mistral_7b_sciq.jsonl")
QUICK_LOG = ROOT / "fixtures" / "report_log.jsonl"  # its first 16 records are short answers
# bbwd batch in this process, its peak resident memory (KiB on Linux) printed last on stderr
RUN = (
    "import atexit, resource, sys\n"
    "atexit.register(lambda: print(f'peak_rss_kib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', "
    "file=sys.stderr))\n"
    "from blackbox_wd.doors.cli import main\n"
    "main(sys.argv[1:])\n"
)
WAYS = ("default", "--all-scores")


@dataclass
class Run:
    """One `bbwd batch` process: its prompts/s (its summary line), peak memory and rows."""

    per_s: float
    peak_mb: float
    rows: list[dict]


def batch(src: Path, out: Path, all_scores: bool) -> Run:
    """``bbwd batch src -o out`` (``--all-scores`` when asked) in a new process."""
    out.unlink(missing_ok=True)
    argv = [sys.executable, "-c", RUN, "batch", str(src), "-o", str(out), "--device", "cpu"]
    done = subprocess.run(
        [*argv, *(["--all-scores"] if all_scores else [])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
    )
    if done.returncode != 0:
        raise SystemExit(f"bbwd batch failed:\n{done.stderr[-3000:]}")
    per_s = float(re.search(r"([\d.]+) prompts/s", done.stderr).group(1))  # type: ignore[union-attr]
    peak = int(re.search(r"peak_rss_kib=(\d+)", done.stderr).group(1))  # type: ignore[union-attr]
    return Run(per_s, peak / 1024, [json.loads(line) for line in out.open()])


def same_verdicts(a: list[dict], b: list[dict]) -> bool:
    """p, the flag, the members and the error identical on every row."""
    keys = ("line", "p_hallucination", "flag", "members", "error")
    return len(a) == len(b) and all(
        [x.get(k) for k in keys] == [y.get(k) for k in keys] for x, y in zip(a, b, strict=True)
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", type=Path, nargs="+", default=list(LOGS), help="recorded short-answer logs")
    ap.add_argument("--n", type=int, default=200, help="records of each log")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="8 short answers of the fixture log, 1 round")
    args = ap.parse_args()
    logs, n, rounds = ([QUICK_LOG], 8, 1) if args.quick else (args.logs, args.n, args.rounds)
    print(f"# `bbwd batch` by default against `--all-scores` (#71)\n\n`{command()}`\n")
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}\n")
    body = []
    with tempfile.TemporaryDirectory() as tmp:
        for log in logs:
            src = Path(tmp) / log.name
            with log.open() as f:
                src.write_text("".join(log_line(line) for line in islice(f, n)))
            runs: dict[str, list[Run]] = {way: [] for way in WAYS}
            for r in range(rounds):
                for way in WAYS if r % 2 == 0 else WAYS[::-1]:
                    runs[way].append(batch(src, Path(tmp) / f"{way.strip('-')}.jsonl", way != "default"))
            default, every = runs["default"][-1].rows, runs["--all-scores"][-1].rows
            scored = [r for r in every if r["error"] is None]
            if len(scored) < len(every) / 2:
                raise SystemExit(
                    f"{log}: {len(every) - len(scored)} of {len(every)} rows are errors, e.g. {every[0]['error']}"
                )
            per_s = {way: statistics.median(x.per_s for x in got) for way, got in runs.items()}
            peak = {way: max(x.peak_mb for x in got) for way, got in runs.items()}
            body.append(
                [
                    log.name,
                    len(default),
                    sum(r["error"] is None and r["avg_wd"] is None for r in default),
                    f"{per_s['default']:.2f}",
                    f"{per_s['--all-scores']:.2f}",
                    f"{per_s['default'] / per_s['--all-scores']:.1f}x",
                    f"{peak['default']:.0f}",
                    f"{peak['--all-scores']:.0f}",
                    "yes"
                    if all(same_verdicts(x.rows, y.rows) for x in runs["default"] for y in runs["--all-scores"])
                    else "NO",
                    "yes" if all(r["avg_wd"] is not None and r["eigen_wd"] is not None for r in scored) else "NO",
                ]
            )
    header = [
        "log",
        "rows",
        "skipped",
        "default prompts/s",
        "--all-scores prompts/s",
        "ratio",
        "default peak MB",
        "--all-scores peak MB",
        "p and flag identical",
        "all-scores rows carry AvgWD, EigenWD",
    ]
    print(table(header, body))


if __name__ == "__main__":
    main()
