"""Teacher forcing: the shared-prefix pass (each prompt once) against the previous pass (prompt + response
for every response) and a per-response full forward, measured in the same run.

Workloads:
- ``synthetic``: one 44-token prompt, K responses of ~80 tokens built from fixed sentences.
- ``squad``, ``sciq`` (items with a support paragraph), ``nq``: the first ``--prompts`` items of each
  shared set as ``bbwd eval --protocol zero-shot`` prompts them (SQuAD ~240 tokens, SciQ ~100-300); K responses
  per prompt sampled once (untimed) from the teacher itself at T=0.5, up to ``--max-tokens`` tokens. All pairs
  go through one call, as a ``bbwd batch`` group does.

Paths, timed in alternating rounds on the same pairs (tokenisation excluded):
- previous: ``bench/_reference.PreviousTeacher`` (prompt + response sequences, right-padded,
  length-bucketed under the token budget, cut after the layer);
- shared prefix: ``HFTeacher.encode_ids`` (prompts once, left-padded, their cache copied to the
  responses, identical responses once);
- full forward (synthetic only): one whole-model forward per response with ``output_hidden_states``.
Printed per workload: median ms, speed-up, tokens each path ran against the token floor (prompt
tokens once + each distinct response's tokens once), and the largest state deviation between paths.

    python -m bench.speed.teacher [--workload all] [--rounds 3] [--prompts 8] [--k 10] [--quick]
"""

from __future__ import annotations

import argparse
import platform
from functools import partial

import numpy as np
import torch

from bench._reference import PreviousTeacher
from bench.common import Pairs, dataset, synthetic_pairs, table, timed
from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.eval.data import Item
from blackbox_wd.records import SamplingParams
from blackbox_wd.scoring import token_floor
from blackbox_wd.teachers.hf import HFTeacher, load_teacher


def sampled_pairs(teacher: HFTeacher, items: list[Item], k: int, max_tokens: int) -> Pairs:
    """K responses per item drawn from the teacher itself (white-box), as token ids."""
    params = SamplingParams(k=k, temperature=0.5, max_tokens=max_tokens, seed=0)
    sets = LocalSampler(teacher).sample_many([(it.messages, k) for it in items], params)
    return [
        (teacher.prompt_ids(it.messages), list(s.token_ids))
        for it, ss in zip(items, sets, strict=True)
        for s in ss.samples
    ]


@torch.inference_mode()
def full_forward(teacher: HFTeacher, pairs: Pairs) -> list[np.ndarray]:
    """Per response, one whole-model forward with all hidden states: projected states of the response."""
    out = []
    for prompt, response in pairs:
        hs = teacher.model(
            input_ids=torch.tensor([prompt + response], device=teacher.device), output_hidden_states=True
        ).hidden_states[teacher.layer]
        out.append(hs[0, len(prompt) :].float().cpu().double().numpy() @ teacher.projection)
    return out


def deviation(a: list[np.ndarray], b: list[np.ndarray]) -> str:
    """Largest |a - b| over all states, and relative to the largest |value|."""
    diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))
    scale = max(float(np.max(np.abs(y))) for y in b)
    return f"{diff:.1e} ({diff / scale:.1e} of max |value| {scale:.0f})"


def measure(name: str, teacher: HFTeacher, previous: PreviousTeacher, pairs: Pairs, rounds: int) -> list:
    """One table row: timings of both paths (and the full forward on synthetic), ratios, floor, deviation."""
    floor = token_floor(pairs)
    runs: dict[str, list[float]] = {"previous": [], "prefix": [], "full": []}
    for r in range(rounds):  # alternate the order so that drift hits both paths alike
        order = ["previous", "prefix"] if r % 2 == 0 else ["prefix", "previous"]
        for path in order:
            tool = previous if path == "previous" else teacher
            before = tool.tokens.padded
            ms, states = timed(partial(tool.encode_ids, pairs, logprobs=False))
            runs[path].append(ms)
            tokens = tool.tokens.padded - before
            if path == "previous":
                prev_states, prev_tokens = states, tokens
            else:
                new_states, new_tokens = states, tokens
        if name == "synthetic":
            runs["full"].append(timed(lambda: full_forward(teacher, pairs))[0])
    prev_ms, new_ms = np.median(runs["previous"]), np.median(runs["prefix"])
    full = f"{np.median(runs['full']):.0f} ({np.median(runs['full']) / new_ms:.2f}x)" if runs["full"] else "-"
    prompts = {tuple(p) for p, _ in pairs}
    return [
        name,
        len(prompts),
        len(pairs),
        f"{np.mean([len(p) for p in prompts]):.0f}",
        f"{np.mean([len(r) for _, r in pairs]):.0f}",
        floor,
        f"{prev_tokens / floor:.2f}",
        f"{new_tokens / floor:.2f}",
        f"{prev_ms:.0f}",
        f"{new_ms:.0f}",
        f"{prev_ms / new_ms:.2f}x",
        full,
        deviation([s.states for s in new_states], [s.states for s in prev_states]),
    ]


def main() -> None:
    """Build the workloads, time the paths, print one Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["all", "synthetic", "squad", "sciq", "nq"], default="all")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per dataset workload (one batch group)")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--quick", action="store_true", help="smoke: synthetic and nq, 2 prompts, K=3, 8 tokens, 2 rounds")
    args = ap.parse_args()
    if args.quick:
        args.prompts, args.k, args.max_tokens, args.rounds = 2, 3, 8, 2
    if args.threads:
        torch.set_num_threads(args.threads)
    teacher = load_teacher("smollm2-135m", device="cpu", dtype="float32")
    previous = PreviousTeacher.wrap(teacher)
    names = ["synthetic", "squad", "sciq", "nq"] if args.workload == "all" else [args.workload]
    if args.quick:
        names = ["synthetic", "nq"]
    workloads = {
        n: synthetic_pairs(teacher, args.k)
        if n == "synthetic"
        else sampled_pairs(teacher, dataset(n, args.prompts).items, args.k, args.max_tokens)
        for n in names
    }
    for pairs in workloads.values():  # warm-up, untimed
        previous.encode_ids(pairs[:2], False)
        teacher.encode_ids(pairs[:2], False)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, python {platform.python_version()}; teacher "
        f"smollm2-135m on cpu in float32, layer {teacher.layer} of {teacher.n_layers}, cut after the layer; token "
        f"budget {teacher.token_budget}; K={args.k}; {args.rounds} rounds; median ms"
    )
    rows = [measure(n, teacher, previous, pairs, args.rounds) for n, pairs in workloads.items()]
    print(
        table(
            [
                "workload",
                "prompts",
                "responses",
                "prompt tok",
                "resp tok",
                "floor tok",
                "previous/floor",
                "prefix/floor",
                "previous ms",
                "prefix ms",
                "speed-up",
                "full forward ms",
                "max |prefix - previous|",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
