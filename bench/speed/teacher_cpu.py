"""Teacher on CPU (issue #24): the pass to the layer against the pass as #24 measured it, in alternating rounds of
one run.

Timed path: ``HFTeacher.encode_ids(pairs, logprobs=False)`` (prompts once with their cache, responses on
a copy of it, blocks up to the layer only), one call per workload per round. Variants:
- ``padded``: the reference, the float32 pass as the issue measured it (``PaddedTeacher``: all of a
  chunk's responses padded to its longest);
- ``fp32``: today's path, float32 (responses in runs of similar length, ``pad.length_runs``).
Workloads: ``synthetic`` (one 44-token prompt, K ~80-token responses, ``bench.common.synthetic_pairs``), ``sac3``
(the first ``--prompts`` records of the recorded SAC3 NQ-open set, K recorded gpt-3.5-turbo samples each:
short answers) and ``wikibio`` (the first ``--prompts`` records of the WikiBio GPT-3 set, K recorded GPT-3
passages each: the issue's "GPT-3 passages"). Printed: median ms and tokens/s (token floor / time), the median
over rounds of each variant's speed-up over ``padded`` in the same round, and the deviation of the projected
states from ``padded``'s.

(The other variants, one thread, int8 dynamic quantisation, bf16, eager attention, ``torch.compile``,
SmoothQuant-style int8 and ONNX Runtime, and the ``eval``/``compare`` commands of the int8 AUROC runs, were
measured and not shipped: ``docs/results-notebook.md``, "Teacher on CPU (issue #24)".)

    python -m bench.speed.teacher_cpu [--rounds 7] [--prompts 16] [--k 10] [--quick]
"""

from __future__ import annotations

import argparse
import os
import platform
from functools import partial

import numpy as np
import torch

from bench.common import Pairs, data_dir, synthetic_pairs, table, timed
from blackbox_wd.doors.eval.data import load
from blackbox_wd.run.stages import token_floor
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.hf import load_teacher

SAC3 = "sac3_nq_open.jsonl"  # in the shared data folder ($BBWD_DATA_DIR or ../shared/data)
WIKIBIO = "wikibio_gpt3_dev.jsonl"
REFERENCE = "padded"


class PaddedTeacher(HFTeacher):
    """The reference: HFTeacher whose responses run padded to the longest of their budget-sized chunk (the pass
    before responses ran in runs of similar length, #24)."""

    def _runs(self, lengths: list[int], extra: int) -> list[list[int]]:
        """As many rows per pass as the token budget holds."""
        return self._chunks(lengths, extra)


def recorded_pairs(teacher: HFTeacher, file: str, n: int, k: int) -> Pairs:
    """K recorded samples of each of the first n records of a shared data file, as (prompt ids, response ids)."""
    items = load(data_dir() / file, limit=n).items
    return [(teacher.prompt_ids(it.messages), teacher.response_ids(s)) for it in items for s in it.samples[:k]]


def deviation(states: list[np.ndarray], ref: list[np.ndarray]) -> tuple[float, float, float]:
    """Max |a - b| over all projected states, that over the largest |value|, and the median per-token
    ||a - b|| / ||b||."""
    a, b = np.concatenate(states), np.concatenate(ref)
    diff = float(np.max(np.abs(a - b)))
    rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
    return diff, diff / float(np.max(np.abs(b))), float(np.median(rel))


def time_variants(teachers: dict[str, HFTeacher], pairs: Pairs, rounds: int) -> dict[str, list]:
    """Per variant: ms of each round and the projected states of the last; the order rotates every round."""
    names = list(teachers)
    runs: dict[str, list] = {n: [[], None] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            ms, out = timed(partial(teachers[name].encode_ids, pairs, logprobs=False))
            runs[name][0].append(ms)
            runs[name][1] = [s.states for s in out]
    return runs


def rows_for(workload: str, pairs: Pairs, runs: dict[str, list]) -> list[list]:
    """Table rows of one workload: ms, tokens/s, speed-up over fp32 (median of per-round ratios), deviation."""
    floor = token_floor(pairs)
    ref_ms, ref_states = runs[REFERENCE]
    out = []
    for name, (ms, states) in runs.items():
        med = float(np.median(ms))
        ratio = float(np.median(np.asarray(ref_ms) / np.asarray(ms)))
        diff, rel, tok = deviation(states, ref_states)
        out.append(
            [
                workload,
                name,
                floor,
                f"{med:.0f}",
                f"{floor / med * 1e3:.0f}",
                f"{ratio:.2f}x",
                f"{diff:.1e}",
                f"{rel:.1e}",
                f"{tok:.1e}",
            ]
        )
    return out


def bench(args: argparse.Namespace) -> None:
    """Build the workloads and variants, time them, print the table."""
    torch.set_num_threads(args.threads or torch.get_num_threads())
    threads = torch.get_num_threads()
    teacher = load_teacher("smollm2-135m", device="cpu")
    workloads = {"synthetic": synthetic_pairs(teacher, args.k)}
    for name, file in (("sac3", SAC3), ("wikibio", WIKIBIO)):
        if (data_dir() / file).exists():
            workloads[name] = recorded_pairs(teacher, file, args.prompts, args.k)
    padded = PaddedTeacher(
        teacher.model, teacher.tokenizer, name=teacher.name, layer=teacher.layer, token_budget=teacher.token_budget
    )
    teachers = {REFERENCE: padded, "fp32": teacher}
    for t in teachers.values():  # warm-up, untimed
        for pairs in workloads.values():
            t.encode_ids(pairs)
    load = os.getloadavg()[0]
    print(
        f"torch {torch.__version__}, {threads} threads, python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average at start {load:.2f}; smollm2-135m on cpu, layer {teacher.layer} of {teacher.n_layers}, "
        f"cut after the layer; K={args.k}; {args.rounds} rounds, order rotated each round; median ms",
        flush=True,
    )
    header = [
        "workload",
        "variant",
        "tokens",
        "median ms",
        "tokens/s",
        f"speed-up vs {REFERENCE}",
        "max |d|",
        "max |d| / max |value|",
        "median token rel L2",
    ]
    for w, pairs in workloads.items():  # one table per workload, printed as soon as it is measured
        print(table(header, rows_for(w, pairs, time_variants(teachers, pairs, args.rounds))), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def main() -> None:
    """The timing bench."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--prompts", type=int, default=16, help="records of each recorded workload (sac3, wikibio)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--quick", action="store_true", help="smoke: K=3, 2 prompts, 2 rounds")
    args = ap.parse_args()
    if args.quick:
        args.k, args.prompts, args.rounds = 3, 2, 2
    bench(args)


if __name__ == "__main__":
    main()
