"""Exact pairwise W2 per prompt: naive ot.dist + ot.emd2 loop vs blackbox_wd.measure.transport.pairwise_w2.

Random 128-d token sets with norms ~30 (a shared prompt offset, a per-response shift and per-token
spread); m_i ~ U[0.5M, 1.5M] ("mixed") or m_i = M ("equal"). Each round draws a fresh prompt and
times on it, in alternating order, the reference with BLAS as the old code ran it (default threads;
a 0.3 s pause follows it, while its idle BLAS threads spin), the reference with BLAS pinned to one
thread (the stronger baseline), and the optimised path; the table gives medians of ms per prompt
and the median over rounds of each round's ratio (reference / optimised on the same prompt).

    python -m bench.speed.ot            # full grid, ~3 min on 2 cores
    python -m bench.speed.ot --quick    # smoke run, a few seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from functools import partial

import numpy as np
import ot
from threadpoolctl import threadpool_limits

from bench.common import table, timed, token_clouds
from blackbox_wd.measure.transport import pairwise_w2

PAUSE_S = 0.3  # OpenBLAS workers spin on for ~0.1 s after a multi-threaded call


def naive_pairwise(clouds: list[np.ndarray]) -> np.ndarray:
    """The reference: a Python loop of ot.dist + ot.emd2 over the pairs, float64."""
    k = len(clouds)
    d = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            x, y = clouds[i], clouds[j]
            a, b = np.full(len(x), 1 / len(x)), np.full(len(y), 1 / len(y))
            cost = ot.emd2(a, b, ot.dist(x, y, metric="sqeuclidean"), numItermax=10_000_000)
            d[i, j] = d[j, i] = np.sqrt(max(cost, 0.0))
    return d


def repeats(k: int, m: int, quick: bool) -> int:
    """Rounds per configuration: fewer where one naive prompt takes seconds."""
    if quick:
        return 2
    return {16: 25, 64: 11, 256: 5, 512: 3}[m] if k == 10 else {16: 25, 64: 7, 256: 3, 512: 2}[m]


def ref_pinned(clouds: list[np.ndarray]) -> tuple[float, np.ndarray]:
    """The naive reference's ms and D with BLAS on one thread."""
    with threadpool_limits(1, "blas"):
        return timed(partial(naive_pairwise, clouds))


def ref_default(clouds: list[np.ndarray]) -> tuple[float, np.ndarray]:
    """The naive reference's ms and D with BLAS threads as the old code ran."""
    return timed(partial(naive_pairwise, clouds))


def optimised(clouds: list[np.ndarray]) -> tuple[float, np.ndarray]:
    """The package's ms and D."""
    return timed(partial(pairwise_w2, clouds))


def main() -> None:
    """Run the grid and print one Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="K=10, M in {16, 64}, 2 rounds")
    args = ap.parse_args()
    ks = [10] if args.quick else [10, 20]
    ms = [16, 64] if args.quick else [16, 64, 256, 512]
    rng = np.random.default_rng(0)
    rows, worst = [], 0.0
    for kind in ("mixed", "equal"):
        for k in ks:
            for m in ms:
                t_def, t_pin, t_opt = [], [], []
                for r in range(repeats(k, m, args.quick)):
                    clouds = token_clouds(rng, k, m, kind == "equal")
                    iu = np.triu_indices(k, 1)
                    fns = [ref_pinned, ref_default, optimised]
                    got = {}
                    for fn in fns if r % 2 == 0 else fns[::-1]:
                        got[fn.__name__] = fn(clouds)
                        if fn is ref_default:  # its idle BLAS threads spin on and would slow the next timing
                            time.sleep(PAUSE_S)
                    t_pin.append(got["ref_pinned"][0])
                    t_def.append(got["ref_default"][0])
                    t_opt.append(got["optimised"][0])
                    ref, opt = got["ref_pinned"][1], got["optimised"][1]
                    worst = max(worst, float(np.max(np.abs(opt[iu] - ref[iu]) / ref[iu])))
                rows.append(
                    [
                        kind,
                        k,
                        m,
                        len(t_opt),
                        f"{np.median(t_def):.1f}",
                        f"{np.median(t_pin):.1f}",
                        f"{np.median(t_opt):.1f}",
                        f"{np.median(np.divide(t_def, t_opt)):.2f}x",
                        f"{np.median(np.divide(t_pin, t_opt)):.2f}x",
                    ]
                )
                print(" ".join(map(str, rows[-1])), file=sys.stderr, flush=True)
    print(
        f"POT {ot.__version__}, numpy {np.__version__}, python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs available"
    )
    print(
        table(
            [
                "sizes",
                "K",
                "M",
                "rounds",
                "naive ms (default BLAS)",
                "naive ms (1-thread BLAS)",
                "optimised ms",
                "speed-up vs default (median of rounds)",
                "speed-up vs 1-thread (median of rounds)",
            ],
            rows,
        )
    )
    print(f"max relative deviation of D (all pairs, all rounds): {worst:.2e}")


if __name__ == "__main__":
    main()
