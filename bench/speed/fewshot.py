"""`bbwd eval` few-shot SciQ (with its support paragraph) per prompt: the #13 path against the shared-prefix
path of #24, each in its own process (for an honest peak RSS), in alternating rounds of the same run.

Prompts: the first ``--prompts`` SciQ validation items with a support paragraph, under eval's few-shot
protocol (5 exemplars with their paragraphs, the same for every prompt: ~1000 tokens shared).
Settings: score's defaults (K=10, T=0.5, max_tokens 128) unless given; the embedded SmolLM2-135M is
target (white-box) and teacher, on CPU; ``evaluate`` runs ``--group-size`` prompts at a time.

Paths:
- previous (#13): ``bench/_reference.CopiedTeacher`` and ``CopiedSampler``: each prompt read whole once,
  its key/value cache copied to each of its rows; one ``generate`` decodes every row until the
  longest stops;
- shared prefix (#24): ``HFTeacher`` and ``LocalSampler``: the exemplars read once for the group,
  every row attends to the prompts' keys in place, a row leaves the batch at its stop token.
Each round runs both paths (order alternating), each a fresh process that loads the model, scores
one prompt untimed (warm-up, 4 tokens), then times every group; the shared path's first group reads
the exemplars itself (its memo is emptied after the warm-up), later groups reuse them as eval does.
Printed: seconds per prompt (median over the round's groups), peak RSS (``ru_maxrss`` of the process),
decoded row-steps, and the per-round ratio.

    python -m bench.speed.fewshot [--prompts 8] [--rounds 2] [--k 10] [--max-tokens 128]
    python -m bench.speed.fewshot --quick
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from bench.common import ROOT, command, table

PATHS = {"previous": "previous (#13: cache copied per row, generate)", "shared": "shared prefix (#24)"}


def child(args: argparse.Namespace) -> None:
    """Time one path's groups in this process and print one JSON line."""
    import torch

    from bench._reference import CopiedSampler, CopiedTeacher
    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.doors.eval.data import load
    from blackbox_wd.doors.eval.run import evaluate
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.hf import load_teacher
    from blackbox_wd.teachers.prefix import SharedMemo

    settings = Settings(k=args.k, max_tokens=args.max_tokens, device="cpu")
    data = load("sciq", "few-shot", args.prompts + 1, require_context=True)
    teacher = load_teacher(settings.teacher, "cpu")
    if args.child == "previous":
        teacher = CopiedTeacher.wrap(teacher)
        sampler = CopiedSampler(teacher)
    else:
        sampler = LocalSampler(teacher)
    detector = Detector(teacher, sampler, settings)
    items = data.items[1:]  # the first item is the warm-up
    warm = Detector(teacher, sampler, replace(settings, max_tokens=4))
    with tempfile.TemporaryDirectory() as tmp:
        evaluate(warm, replace(data, items=data.items[:1]), Path(tmp) / "warm")
    teacher.memo = SharedMemo(teacher.n_layers)  # the first timed group reads the exemplars itself
    sampler.decoded, seconds = 0, []
    for start in range(0, len(items), args.group_size):
        group = items[start : start + args.group_size]
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            evaluate(replace(detector, group_size=args.group_size), replace(data, items=group), Path(tmp))
            seconds.append((time.perf_counter() - t0) / len(group))
    prompt_tokens = [len(teacher.prompt_ids(it.messages)) for it in items]
    print(
        json.dumps(
            {
                "s_per_prompt": seconds,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "decoded": sampler.decoded,
                "prompt_tokens": prompt_tokens,
                "threads": torch.get_num_threads(),
            }
        )
    )


def run_child(path: str, args: argparse.Namespace) -> dict:
    """One path in a fresh process: its JSON report."""
    cmd = [
        sys.executable,
        "-m",
        "bench.speed.fewshot",
        "--child",
        path,
        "--prompts",
        str(args.prompts),
        "--k",
        str(args.k),
        "--max-tokens",
        str(args.max_tokens),
        "--group-size",
        str(args.group_size),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    """Alternate the two paths' processes over the rounds; print the table and the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=8, help="timed prompts (after one warm-up prompt)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="smoke: 2 prompts, K=2, 4 tokens, 1 round")
    ap.add_argument("--child", choices=list(PATHS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.k, args.max_tokens, args.group_size, args.rounds = 2, 2, 4, 2, 1
    if args.child:
        child(args)
        return
    print("command: " + command())
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}; "
        f"sciq few-shot with support, {args.prompts} prompts, K={args.k}, T=0.5, max_tokens={args.max_tokens}, "
        f"group size {args.group_size}, smollm2-135m white-box on CPU, {args.rounds} rounds"
    )
    got: dict[str, list[dict]] = {p: [] for p in PATHS}
    for r in range(args.rounds):
        for path in list(PATHS) if r % 2 == 0 else list(PATHS)[::-1]:
            got[path].append(run_child(path, args))
    tokens = got["shared"][0]["prompt_tokens"]
    print(f"prompt tokens: median {statistics.median(tokens):.0f}, range {min(tokens)}-{max(tokens)}")
    rows = []
    for path, reports in got.items():
        per_round = [statistics.median(rep["s_per_prompt"]) for rep in reports]
        rows.append(
            [
                PATHS[path],
                f"{statistics.median(per_round):.2f}",
                " ".join(f"{s:.2f}" for s in per_round),
                f"{max(rep['maxrss_mb'] for rep in reports):.0f}",
                reports[0]["decoded"],
            ]
        )
    print()
    print(table(["path", "s/prompt (median)", "per round", "peak RSS MB", "decoded row-steps"], rows))
    ratios = [
        statistics.median(a["s_per_prompt"]) / statistics.median(b["s_per_prompt"])
        for a, b in zip(got["previous"], got["shared"], strict=True)
    ]
    rss = max(r["maxrss_mb"] for r in got["previous"]) / max(r["maxrss_mb"] for r in got["shared"])
    print(f"\nspeed-up per round: {' '.join(f'{x:.2f}x' for x in ratios)}; median {statistics.median(ratios):.2f}x")
    print(f"peak RSS previous / shared prefix: {rss:.2f}x (goal: <= 5 s a prompt, <= 2048 MB)")


if __name__ == "__main__":
    main()
