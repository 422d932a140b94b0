"""Start-up: `bbwd --help` in a new process against what it used to pay, measured in the same run (#24); and what
each door's modules import, and which heavy libraries they pull in before the run uses them (#71).

Commands, each a new interpreter, timed in alternating rounds (one run of each per round, the
order rotated) so that a change in the machine's load hits them alike:
- ``bbwd --help``: ``python -m blackbox_wd --help``, as a user runs it;
- ``previous --help``: the same after importing ``blackbox_wd.run.detector`` and ``blackbox_wd.calibration``,
  which the package's ``__init__`` (and so ``bbwd --help``) imported before #24;
- ``import torch, transformers``: the bulk of what ``--help`` used to load;
- ``python -c pass``: the interpreter alone.
Printed: median, min and max wall seconds of each, and each median's ratio to ``bbwd --help``'s.

Then, per door (``DOORS``), a new interpreter imports the modules that door imports before its run starts, in
alternating rounds: the seconds of the imports alone (the interpreter's start left out) and the heavy libraries
(``HEAVY``) in ``sys.modules`` after them. A run loads more as it uses it (``bbwd score``: POT, with scikit-learn,
when its first simplex runs; ``bench.speed.score`` shows the whole command).

    python -m bench.speed.startup [--runs 7] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from bench.common import HEAVY, ROOT, table

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

# door -> the modules it imports before its run starts (its command's module imports them inside the command)
DOORS = {
    "--help (the CLI)": ("blackbox_wd.doors.cli",),
    "score (the builder, llama.cpp, a calibration)": (
        "blackbox_wd.run.detector",
        "blackbox_wd.clients.llamacpp",
        "blackbox_wd.calibration",
    ),
    "batch": ("blackbox_wd.doors.batch",),
    "calibrate": ("blackbox_wd.doors.calibrate",),
    "eval": ("blackbox_wd.doors.eval.main",),
    "serve": ("blackbox_wd.doors.serve.app",),
    "report": ("blackbox_wd.doors.report.page",),
    "applying a calibration": ("blackbox_wd.calibration",),
    "floor: a teacher and exact OT": ("torch", "transformers.modeling_utils", "ot"),
}
QUICK_DOORS = ("--help (the CLI)", "score (the builder, llama.cpp, a calibration)")
IMPORT = """
import json, sys, time
t0 = time.perf_counter()
import {modules}
seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def wall(argv: list[str], env: dict[str, str]) -> float:
    """Seconds one new process takes, start to exit; it must exit 0."""
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def imports(modules: tuple[str, ...], env: dict[str, str]) -> tuple[float, list[str]]:
    """Seconds a new interpreter takes to import ``modules`` (its start left out), and the ``HEAVY`` ones loaded."""
    code = IMPORT.format(modules=", ".join(modules), heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True, capture_output=True, text=True)
    got = json.loads(out.stdout.splitlines()[-1])
    return got["seconds"], got["heavy"]


def door_table(names: list[str], runs: int, env: dict[str, str]) -> str:
    """Each door's import seconds (median and min of ``runs`` alternating rounds, after a warm-up) and heavy
    libraries, as a table."""
    for name in names:  # warm-up: .pyc files, file caches
        imports(DOORS[name], env)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    heavy: dict[str, list[str]] = {}
    for r in range(runs):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t, heavy[name] = imports(DOORS[name], env)
            seconds[name].append(t)
    rows = [
        (name, f"{statistics.median(t):.2f}", f"{min(t):.2f}", ", ".join(heavy[name]) or "-")
        for name, t in seconds.items()
    ]
    return table(["door: its modules' imports (new process)", "median s", "min s", "heavy libraries loaded"], rows)


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
    doors = list(QUICK_DOORS) if args.quick else list(DOORS)
    print(f"\nEach door's imports before its run starts, {runs} runs each after one warm-up round, alternating:\n")
    print(door_table(doors, runs, env))
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
