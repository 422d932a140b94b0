"""Start-up: `bbwd --help` in a new process against what it used to pay, measured in the same run (#24).

Commands, each a new interpreter, timed in alternating rounds (one run of each per round, the
order rotated) so that a change in the machine's load hits them alike:
- ``bbwd --help``: ``python -m blackbox_wd --help``, as a user runs it;
- ``previous --help``: the same after importing ``blackbox_wd.run.detector`` and ``blackbox_wd.calibration``,
  which the package's ``__init__`` (and so ``bbwd --help``) imported before #24;
- ``import torch, transformers``: the bulk of what ``--help`` used to load;
- ``python -c pass``: the interpreter alone.
Printed: median, min and max wall seconds of each, and each median's ratio to ``bbwd --help``'s.

    python -m bench.speed.startup [--runs 7] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, table

HELP = "bbwd --help"
PREVIOUS = (
    "import blackbox_wd.run.detector, blackbox_wd.calibration\nfrom blackbox_wd.doors.cli import main\nmain(['--help'])"
)
COMMANDS = {
    HELP: [sys.executable, "-m", "blackbox_wd", "--help"],
    "previous --help": [sys.executable, "-c", PREVIOUS],
    "import torch, transformers": [sys.executable, "-c", "import torch, transformers"],
    "python -c pass": [sys.executable, "-c", "pass"],
}
QUICK = (HELP, "python -c pass")


def wall(argv: list[str], env: dict[str, str]) -> float:
    """Seconds one new process takes, start to exit; it must exit 0."""
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="Counted runs of each command (after one warm-up round).")
    ap.add_argument("--quick", action="store_true", help="Smoke: 2 runs, bbwd --help and python -c pass only.")
    args = ap.parse_args()
    names = list(QUICK) if args.quick else list(COMMANDS)
    runs = 2 if args.quick else args.runs
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "COLUMNS": "100",
    }
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average at start "
        f"{os.getloadavg()[0]:.2f}; {runs} runs of each after one warm-up round, alternating"
    )
    for name in names:  # warm-up: file caches, .pyc files
        wall(COMMANDS[name], env)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(runs):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(wall(COMMANDS[name], env))
    help_median = statistics.median(times[HELP])
    rows = [
        (
            name,
            f"{statistics.median(t):.3f}",
            f"{min(t):.3f}",
            f"{max(t):.3f}",
            f"{statistics.median(t) / help_median:.2f}",
        )
        for name, t in times.items()
    ]
    print(table(["command (new process)", "median s", "min s", "max s", "median / bbwd --help"], rows))
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
