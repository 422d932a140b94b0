"""Teacher on CPU (issue #24): the pass to the layer against the pass as #24 measured it, and in int8, in
alternating rounds of one run.

Timed path: ``HFTeacher.encode_ids(pairs, logprobs=False)`` (prompts once with their cache, responses on
a copy of it, blocks up to the layer only), one call per workload per round, each variant on its own
copy of the model. Variants (``--variants``):
- ``padded``: the reference, the float32 pass as the issue measured it (``_reference.PaddedTeacher``: all of a
  chunk's responses padded to its longest), torch's default threads;
- ``fp32``: today's path, float32 (responses in runs of similar length, ``pad.length_runs``);
- ``fp32-1t``, ``int8-1t``: the variant with ``torch.set_num_threads(1)`` while it runs;
- ``int8``: ``torch.ao.quantization.quantize_dynamic`` of the blocks' nn.Linear (int8 weights per tensor,
  activations quantised per tensor at run time), not shipped.
Workloads: ``synthetic`` (one 44-token prompt, K ~80-token responses, as ``bench/speed/teacher.py``), ``sac3``
(the first ``--prompts`` records of the recorded SAC3 NQ-open set, K recorded gpt-3.5-turbo samples each:
short answers) and ``wikibio`` (the first ``--prompts`` records of the WikiBio GPT-3 set, K recorded GPT-3
passages each: the issue's "GPT-3 passages"). Printed: median ms and tokens/s (token floor / time), the median
over rounds of each variant's speed-up over ``padded`` in the same round, and the deviation of the projected
states from ``padded``'s.

(The other variants, bf16, eager attention, ``torch.compile``, SmoothQuant-style int8 and ONNX Runtime, and the
``eval``/``compare`` commands of the int8 AUROC runs, were measured and not shipped: ``docs/results-notebook.md``,
"Teacher on CPU (issue #24)".)

    python -m bench.speed.teacher_cpu [--variants padded,fp32,int8] [--rounds 7] [--prompts 16] [--k 10] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import os
import platform
import warnings
from functools import partial

import numpy as np
import torch
from torch import nn

from bench._reference import PaddedTeacher
from bench.common import Pairs, synthetic_pairs, table, timed
from blackbox_wd.eval.data import data_dir, load
from blackbox_wd.scoring import token_floor
from blackbox_wd.teachers.hf import HFTeacher, load_teacher

SAC3 = "sac3_nq_open.jsonl"  # in the shared data folder ($BBWD_DATA_DIR or ../shared/data)
WIKIBIO = "wikibio_gpt3_dev.jsonl"
REFERENCE = "padded"
VARIANTS = [REFERENCE, "fp32", "fp32-1t", "int8", "int8-1t"]
LINEARS = [
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
]
warnings.filterwarnings("ignore", message=".*(deprecated|quantize_per_tensor).*")


def recorded_pairs(teacher: HFTeacher, file: str, n: int, k: int) -> Pairs:
    """K recorded samples of each of the first n records of a shared data file, as (prompt ids, response ids)."""
    items = load(data_dir() / file, limit=n).items
    return [(teacher.prompt_ids(it.messages), teacher.response_ids(s)) for it in items for s in it.samples[:k]]


def block_linears(model: nn.Module, layer: int) -> list[str]:
    """Qualified names of the nn.Linear of decoder blocks 0 .. layer-1 (the ones the cut pass runs)."""
    return [f"model.layers.{i}.{name}" for i in range(layer) for name in LINEARS]


def quantize(model: nn.Module, layer: int) -> nn.Module:
    """int8 dynamic quantisation of the blocks' Linear up to the layer (weights per tensor)."""
    from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic

    return quantize_dynamic(model, {n: default_dynamic_qconfig for n in block_linears(model, layer)})


def variant_model(name: str, teacher: HFTeacher) -> nn.Module:
    """A copy of the teacher's model turned into variant ``name`` (fp32: the model itself)."""
    if name in (REFERENCE, "fp32"):
        return teacher.model
    if name != "int8":
        raise ValueError(f"unknown variant '{name}'")
    return quantize(copy.deepcopy(teacher.model), teacher.layer).eval()


def variant_teacher(name: str, teacher: HFTeacher) -> HFTeacher:
    """The teacher with its model turned into variant ``name``."""
    model = variant_model(name, teacher)
    kind = PaddedTeacher if name == REFERENCE else HFTeacher
    return kind(model, teacher.tokenizer, name=teacher.name, layer=teacher.layer, token_budget=teacher.token_budget)


def threads_for(name: str, default: int) -> int:
    """Torch threads a variant runs with."""
    return 1 if name.endswith("-1t") else default


def deviation(states: list[np.ndarray], ref: list[np.ndarray]) -> tuple[float, float, float]:
    """Max |a - b| over all projected states, that over the largest |value|, and the median per-token
    ||a - b|| / ||b||."""
    a, b = np.concatenate(states), np.concatenate(ref)
    diff = float(np.max(np.abs(a - b)))
    rel = np.linalg.norm(a - b, axis=1) / np.linalg.norm(b, axis=1)
    return diff, diff / float(np.max(np.abs(b))), float(np.median(rel))


def time_variants(teachers: dict[str, HFTeacher], pairs: Pairs, rounds: int, threads: int) -> dict[str, list]:
    """Per variant: ms of each round and the projected states of the last; the order rotates every round."""
    names = list(teachers)
    runs: dict[str, list] = {n: [[], None] for n in names}
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            torch.set_num_threads(threads_for(name, threads))
            ms, out = timed(partial(teachers[name].encode_ids, pairs, logprobs=False))
            runs[name][0].append(ms)
            runs[name][1] = [s.states for s in out]
    torch.set_num_threads(threads)
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
    names = [v for v in args.variants.split(",") if v]
    if names[0] != REFERENCE:
        names = [REFERENCE] + [n for n in names if n != REFERENCE]
    workloads = {"synthetic": synthetic_pairs(teacher, args.k)}
    for name, file in (("sac3", SAC3), ("wikibio", WIKIBIO)):
        if (data_dir() / file).exists():
            workloads[name] = recorded_pairs(teacher, file, args.prompts, args.k)
    built = {
        b: teacher if b == "fp32" else variant_teacher(b, teacher)
        for b in dict.fromkeys(n.removesuffix("-1t") for n in names)
    }
    teachers = {n: built[n.removesuffix("-1t")] for n in names}  # -1t: same model, one thread
    for n, t in teachers.items():  # warm-up (and compilation), untimed
        torch.set_num_threads(threads_for(n, threads))
        for pairs in workloads.values():
            t.encode_ids(pairs)
    torch.set_num_threads(threads)
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
        print(table(header, rows_for(w, pairs, time_variants(teachers, pairs, args.rounds, threads))), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def main() -> None:
    """The timing bench."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--prompts", type=int, default=16, help="records of each recorded workload (sac3, wikibio)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--quick", action="store_true", help="smoke: padded, fp32, int8, K=3, 2 prompts, 2 rounds")
    args = ap.parse_args()
    if args.quick:
        args.variants, args.k, args.prompts, args.rounds = "padded,fp32,int8", 3, 2, 2
    bench(args)


if __name__ == "__main__":
    main()
