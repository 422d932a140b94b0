"""The OT bench runs from a fresh checkout and its optimised path stays exact."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_ot_bench_quick_runs_and_matches_emd2() -> None:
    out = subprocess.run([sys.executable, str(BENCH / "ot.py"), "--quick"], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    rows = [line for line in out.splitlines() if re.match(r"\|\s*(mixed|equal)\s*\|", line)]
    assert len(rows) == 4  # mixed and equal, M = 16 and 64, K = 10
    deviation = float(re.search(r"max relative deviation of D .*: (\S+)", out).group(1))
    assert deviation <= 1e-9
