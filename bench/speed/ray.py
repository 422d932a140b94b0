"""Records/s of `bbwd batch` with the local engine and with the Ray engine (1 and 2 teacher workers), in one run.

Input: a JSONL of the first N NQ-open dev questions (``blackbox_wd.eval.data.load("nq", "zero-shot", n)``, the
prompts ``bbwd eval --protocol zero-shot`` builds), white-box: the target is the embedded teacher SmolLM2-135M itself,
sampled locally (K responses of at most ``--max-tokens`` tokens), on CPU.

Each engine scores the same file into a fresh output, timed from the call to the summary, so Ray's
times include what a user waits for: starting the actors (a Python worker importing torch and
loading the model) as well as the work. The Ray engine runs on one local cluster of ``--cpus``
logical CPUs started before the timings. With 1 worker the teacher actor uses the local run's torch
threads (so its output equals the local engine's); with 2 workers each actor gets half of them
(torch threads / 2, at least 1), so the two share the cores instead of oversubscribing them, and
its float32 states round differently (the deviation column shows by how much).

    python -m bench.speed.ray [--n 40] [--k 5] [--max-tokens 16] [--group-size 8] [--cpus 2] [--quick]

Run it from the checkout (Ray's workers import ``blackbox_wd`` from the driver's working folder).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from functools import partial
from pathlib import Path

import ray
import torch

from bench.common import table
from blackbox_wd.doors.batch import BatchRunner, BatchSummary
from blackbox_wd.doors.eval.data import load
from blackbox_wd.doors.ray_engine import RayRunner
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings


def deviation(path: Path, reference: Path) -> float:
    """Largest relative difference of AvgWD/EigenWD between two outputs (inf if other fields differ)."""
    worst = 0.0
    for raw_a, raw_b in zip(path.read_text().splitlines(), reference.read_text().splitlines(), strict=True):
        a, b = json.loads(raw_a), json.loads(raw_b)
        if (a["id"], a["error"], a["token_counts"]) != (b["id"], b["error"], b["token_counts"]):
            return float("inf")
        for key in ("avg_wd", "eigen_wd"):
            if b[key] is not None:
                worst = max(worst, abs(a[key] - b[key]) / max(abs(b[key]), 1e-300))
    return worst


def timed(run) -> tuple[float, BatchSummary]:
    """Seconds of one engine run and its summary."""
    t0 = time.perf_counter()
    summary = asyncio.run(run())
    return time.perf_counter() - t0, summary


def main() -> None:
    """Time the engines on the same input and print a table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="NQ-open questions")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 2, help="logical CPUs of the local Ray cluster")
    ap.add_argument("--rounds", type=int, default=1, help="times each engine runs, in turn (the table has every run)")
    ap.add_argument("--quick", action="store_true", help="smoke: 2 questions, K=3, 4 tokens, 2 CPUs, 1 Ray worker")
    args = ap.parse_args()
    if args.quick:
        args.n, args.k, args.max_tokens, args.cpus, args.rounds = 2, 3, 4, 2, 1

    threads = torch.get_num_threads()
    print(
        f"python {platform.python_version()}, torch {torch.__version__} ({threads} threads), ray {ray.__version__}, "
        f"{os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{args.n} NQ-open dev questions, white-box smollm2-135m on CPU, K={args.k}, max_tokens={args.max_tokens}, "
        f"group size {args.group_size}; Ray: local cluster of {args.cpus} CPUs"
    )
    settings = Settings(target="smollm2-135m", k=args.k, max_tokens=args.max_tokens, device="cpu")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "nq.jsonl"
        src.write_text(
            "".join(
                json.dumps({"id": it.id, "messages": it.messages}) + "\n"
                for it in load("nq", "zero-shot", args.n).items
            )
        )
        t0 = time.perf_counter()
        ray.init(  # on loopback: Ray turns 127.0.0.1 itself into the machine's interface address
            num_cpus=args.cpus,
            include_dashboard=False,
            log_to_driver=False,
            logging_level="ERROR",
            _node_ip_address="127.0.0.2",
        )
        print(f"ray.init: {time.perf_counter() - t0:.1f} s (not in the times below)")
        rows = []
        try:
            for n in range(args.rounds):
                local = Path(tmp) / f"local{n}.jsonl"
                seconds, summary = timed(
                    lambda local=local: BatchRunner(
                        Detector.from_settings(settings, group_size=args.group_size), True
                    ).run(src, local)
                )
                rows.append(
                    [
                        n + 1,
                        "local",
                        f"{threads}",
                        f"{seconds:.1f}",
                        f"{summary.records / seconds:.3f}",
                        "-",
                        summary.errors,
                    ]
                )
                for workers in (1,) if args.quick else (1, 2):
                    out = Path(tmp) / f"ray{workers}-{n}.jsonl"
                    driver = Detector.from_settings(
                        settings, group_size=args.group_size, **RayRunner.build_options(settings)
                    )
                    runner = RayRunner(
                        driver,
                        True,
                        teacher_workers=workers,
                        teacher_cpus=args.cpus / (2 * workers),
                        score_cpus=args.cpus / 4,
                        threads=max(1, threads // workers),
                    )
                    seconds, summary = timed(partial(runner.run, src, out))
                    rows.append(
                        [
                            n + 1,
                            f"ray, {workers} teacher worker{'s' * (workers > 1)}",
                            f"{workers} x {max(1, threads // workers)}",
                            f"{seconds:.1f}",
                            f"{summary.records / seconds:.3f}",
                            f"{deviation(out, local):.2g}",
                            summary.errors,
                        ]
                    )
        finally:
            ray.shutdown()
    print(
        table(
            ["round", "engine", "torch threads", "seconds", "records/s", "max rel. deviation vs local", "errors"], rows
        )
    )


if __name__ == "__main__":
    main()
