"""End-to-end prompts/s of `bbwd batch` (white-box, embedded SmolLM2) vs a naive pipeline, same run.

Naive reference, one prompt at a time with no overlap: K samples from one ``generate`` call, then
for each response a full forward of the whole model with ``output_hidden_states=True``, then a
Python loop of ``ot.dist`` + ``ot.emd2`` per pair, then the scores. Optimised: ``BatchRunner`` as
``bbwd batch --target smollm2-135m`` runs it (groups of records sampled in one generate call, one
length-bucketed teacher pass cut at layer floor(L/2), the fast exact OT). The same model instance
serves both. Questions: the first N of NQ-open dev from ../shared/data.

    python bench/pipeline.py [--n 50] [--k 10] [--max-tokens 32] [--group-size 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

_HERE = Path(__file__).resolve().parent  # bench/ot.py would shadow POT: keep this folder last on the path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]

import ot  # noqa: E402

from blackbox_wd.batch import BatchRunner  # noqa: E402
from blackbox_wd.clients.local import LocalSampler  # noqa: E402
from blackbox_wd.eval.data import load  # noqa: E402
from blackbox_wd.pipeline import Detector, Settings, as_messages  # noqa: E402
from blackbox_wd.scores import avg_wd, eigen_wd  # noqa: E402
from blackbox_wd.teachers.hf import load_teacher  # noqa: E402


@torch.inference_mode()
def naive_prompt(teacher, sampler, prompt: str, settings: Settings) -> tuple[float, float]:
    """Score one prompt the straightforward way."""
    messages = as_messages(prompt)
    samples = sampler.sample(messages, settings.sampling()).samples
    prompt_ids = teacher.prompt_ids(messages)
    clouds = []
    for s in samples:
        ids = torch.tensor([prompt_ids + list(s.token_ids)])
        hidden = teacher.model(ids, output_hidden_states=True).hidden_states[teacher.layer][0]
        clouds.append(hidden[len(prompt_ids):].double().numpy() @ teacher.projection)
    k = len(clouds)
    d = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            a, b = np.full(len(clouds[i]), 1 / len(clouds[i])), np.full(len(clouds[j]), 1 / len(clouds[j]))
            d[i, j] = d[j, i] = np.sqrt(ot.emd2(a, b, ot.dist(clouds[i], clouds[j])))
    return avg_wd(d), eigen_wd(d, settings.alpha, settings.p)


def main() -> None:
    """Run both pipelines on the same questions and print prompts/s and the ratio."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=8)
    args = ap.parse_args()
    items = list(load("nq", args.n))
    settings = Settings(target="smollm2-135m", k=args.k, max_tokens=args.max_tokens, device="cpu")
    teacher = load_teacher(settings.teacher, "cpu")
    sampler = LocalSampler(teacher)

    t0 = time.perf_counter()
    for item in items:
        naive_prompt(teacher, sampler, item.prompt, settings)
    naive_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps({"id": it.id, "prompt": it.prompt}) + "\n" for it in items))
        runner = BatchRunner(Detector(teacher, sampler, settings), sample_missing=True, group_size=args.group_size)
        summary = asyncio.run(runner.run(src, dst))
        errors = summary.errors
    fast_s = summary.seconds

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {len(items)} NQ-open dev questions, "
          f"K={args.k}, T={settings.temperature}, max_tokens={args.max_tokens}, group size {args.group_size}")
    print("| pipeline | seconds | prompts/s |")
    print("|---|---:|---:|")
    print(f"| naive (one prompt at a time) | {naive_s:.1f} | {len(items) / naive_s:.3f} |")
    print(f"| bbwd batch | {fast_s:.1f} | {len(items) / fast_s:.3f} |")
    print(f"speed-up: {naive_s / fast_s:.2f}x (target >= 4x); batch errors: {errors}")


if __name__ == "__main__":
    main()
