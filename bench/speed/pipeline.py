"""End-to-end prompts/s of `bbwd batch` vs naive one-prompt-at-a-time pipelines, measured in the same run.

Questions: the first N of NQ-open dev with zero-shot prompts (``blackbox_wd.doors.eval.data.load("nq",
"zero-shot", n)``). Teacher: the embedded SmolLM2-135M on CPU, one instance shared by every
pipeline. Each mode first scores one question untimed (warm-up), then times the naive
reference(s), then ``BatchRunner``.

``--mode black-box`` (the product's main use): the target is an OpenAI-compatible API, here the
loopback fault server ``tests/api_support.py`` (127.0.0.1 only, its own process) with ``--latency``
injected per request; it ignores ``n`` and replays real recorded bodies (SmolLM2 answers of at most 24
tokens whatever ``--max-tokens`` says), so every sample is one request.
  naive: one prompt at a time; the K samples as K sequential requests (APISampler, concurrency 1,
  no cache), then one full-model forward per response with ``output_hidden_states=True``, a Python
  loop of ``ot.dist`` + ``ot.emd2`` per pair, then the scores.
  bbwd batch: ``BatchRunner`` as ``bbwd batch --target smollm2-135m --base-url <url> --no-cache
  --concurrency 16 --group-size 8`` runs it (requests of the next groups in flight while the teacher
  scores this one, one length-bucketed teacher pass per group cut at layer floor(L/2), fast exact OT).

``--mode white-box``: the target is the teacher's own model (``bbwd batch --target smollm2-135m``).
  naive (strong reference): the K samples from ONE stock ``generate(do_sample=True)`` call per
  prompt (HF's sampler, torch.multinomial), then as above.
  naive (per-sample): K separate stock ``generate`` calls per prompt, seeds seed+i, as research code
  often does; then as above. Both ratios are printed.
  bbwd batch: groups of records sampled in one ``generate`` call (LocalSampler: left padding, the
  inverse-CDF draw), then as in black-box mode.

    python -m bench.speed.pipeline [--mode both] [--n 50] [--k 10] [--max-tokens 32] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import ot
import torch

from bench.common import API_SERVER, command, dataset, table
from blackbox_wd.clients.api import APISampler, make_api_sampler
from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.clients.presets import resolve_endpoint
from blackbox_wd.doors.batch import BatchRunner, BatchSummary
from blackbox_wd.measure.wd import avg_wd, eigen_wd
from blackbox_wd.records import Sample, as_messages
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.hf import HFTeacher, load_teacher

TARGET = "smollm2-135m"
Draw = Callable[[list[dict[str, str]]], list[Sample]]


class Stages:
    """Seconds spent per stage by a naive run, plus its request and error counts."""

    def __init__(self) -> None:
        self.sample = self.teacher = self.ot = 0.0
        self.requests = self.errors = 0


@torch.inference_mode()
def naive_prompt(
    teacher: HFTeacher, draw: Draw, prompt: str, settings: Settings, st: Stages
) -> tuple[float, float] | None:
    """Score one prompt the straightforward way; None (and an error counted) for an empty response."""
    messages = as_messages(prompt)
    t0 = time.perf_counter()
    samples = draw(messages)
    t1 = time.perf_counter()
    prompt_ids = teacher.prompt_ids(messages)
    clouds = []
    for s in samples:
        response = list(s.token_ids) if s.token_ids is not None else teacher.response_ids(s.text)
        if not response:
            st.errors += 1
            st.sample += t1 - t0
            st.teacher += time.perf_counter() - t1
            return None
        ids = torch.tensor([prompt_ids + response])
        hidden = teacher.model(ids, output_hidden_states=True).hidden_states[teacher.layer][0]
        clouds.append(hidden[len(prompt_ids) :].double().numpy() @ teacher.projection)
    t2 = time.perf_counter()
    k = len(clouds)
    d = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            a, b = np.full(len(clouds[i]), 1 / len(clouds[i])), np.full(len(clouds[j]), 1 / len(clouds[j]))
            d[i, j] = d[j, i] = np.sqrt(ot.emd2(a, b, ot.dist(clouds[i], clouds[j])))
    out = avg_wd(d), eigen_wd(d, settings.alpha, settings.p)
    st.sample, st.teacher, st.ot = st.sample + t1 - t0, st.teacher + t2 - t1, st.ot + time.perf_counter() - t2
    return out


def time_naive(teacher: HFTeacher, draw: Draw, prompts: list[str], settings: Settings) -> tuple[float, Stages]:
    """Wall seconds of the naive pipeline over all prompts, one at a time."""
    st = Stages()
    t0 = time.perf_counter()
    for prompt in prompts:
        naive_prompt(teacher, draw, prompt, settings, st)
    return time.perf_counter() - t0, st


def time_batch(detector: Detector, items: list, group_size: int) -> tuple[BatchSummary, dict[str, float]]:
    """``BatchRunner.run`` on a JSONL of the items (as ``bbwd batch`` runs it); summary and summed row timings."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps({"id": it.id, "messages": it.messages}) + "\n" for it in items))
        runner = BatchRunner(replace(detector, group_size=group_size), sample_missing=True)
        summary = asyncio.run(runner.run(src, dst))
        sums: dict[str, float] = {}
        for line in dst.read_text().splitlines():
            for key, v in json.loads(line)["timings"].items():
                sums[key] = sums.get(key, 0.0) + v
    return summary, sums


def report(
    title: str,
    n: int,
    naive: list[tuple[str, float, Stages]],
    fast_s: float,
    summary: BatchSummary,
    sums: dict[str, float],
    sample_note: str,
) -> None:
    """Print one mode's table and ratios."""
    rows = [
        [
            name,
            f"{s:.1f}",
            f"{n / s:.3f}",
            f"{st.sample:.1f}",
            f"{st.teacher:.1f}",
            f"{st.ot:.2f}",
            st.requests,
            st.errors,
        ]
        for name, s, st in naive
    ]
    rows.append(
        [
            "bbwd batch",
            f"{fast_s:.1f}",
            f"{n / fast_s:.3f}",
            sample_note,
            f"{sums.get('teacher', 0):.1f}",
            f"{sums.get('transport', 0):.2f}",
            summary.usage.requests,
            summary.errors,
        ]
    )
    print(f"\n### {title}\n")
    print(table(["pipeline", "seconds", "prompts/s", "sample s", "teacher s", "OT s", "API requests", "errors"], rows))
    for name, s, _ in naive:
        print(f"speed-up vs {name}: {s / fast_s:.2f}x (target >= 4x)")


def white_box(args: argparse.Namespace, teacher: HFTeacher, items: list) -> None:
    """Naive (K samples in one generate call), naive (K generate calls) and bbwd batch, local target."""
    settings = Settings(target=TARGET, k=args.k, max_tokens=args.max_tokens, device="cpu")
    sampler = LocalSampler(teacher)
    params = settings.sampling()

    def stock(messages, k: int, seed: int) -> list[Sample]:
        """k samples from one stock ``generate(do_sample=True)`` call (torch.multinomial), cut at a stop token."""
        ids = torch.tensor([teacher.prompt_ids(messages)])
        torch.manual_seed(seed)
        out = teacher.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=0,
            max_new_tokens=params.max_tokens,
            min_new_tokens=1,
            num_return_sequences=k,
            pad_token_id=sampler.pad_id(),
        )
        return sampler.samples(out[:, ids.shape[1] :].tolist())

    def one_call(messages):
        return stock(messages, params.k, params.seed)

    def per_sample(messages):
        return [stock(messages, 1, params.seed + i)[0] for i in range(params.k)]

    prompts = [it.messages[0]["content"] for it in items]  # zero-shot: one user turn
    naive = []
    naive_prompt(teacher, one_call, prompts[0], settings, Stages())  # warm-up, untimed
    for name, draw in [
        ("naive, K samples in 1 generate call (strong reference)", one_call),
        ("naive, K generate calls of 1 sample (per-sample seeds)", per_sample),
    ]:
        s, st = time_naive(teacher, draw, prompts, settings)
        naive.append((name, s, st))
    summary, sums = time_batch(Detector(teacher, sampler, settings), items, args.group_size)
    report(
        f"white-box: target = the teacher's own model ({TARGET}), generated locally",
        len(items),
        naive,
        summary.seconds,
        summary,
        sums,
        "in batch",
    )


def black_box(args: argparse.Namespace, teacher: HFTeacher, items: list) -> None:
    """Naive (K sequential requests) and bbwd batch (concurrent, prefetched) against the loopback server."""
    for var in ("BBWD_API_REPLAY", "BBWD_API_RECORD"):
        if os.environ.pop(var, None) is not None:
            print(f"note: {var} was set and is ignored by this bench")
    # the server runs in its own process so that it does not share this one's GIL
    server = subprocess.Popen([sys.executable, str(API_SERVER), str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
        settings = Settings(
            target=TARGET,
            base_url=base_url,
            k=args.k,
            max_tokens=args.max_tokens,
            device="cpu",
            cache=False,
            concurrency=args.concurrency,
        )
        params = settings.sampling()
        seq = APISampler(resolve_endpoint(TARGET, base_url, None), concurrency=1)  # no cache
        seq.honours_n = False  # one request per sample, sent one after another
        requests = [0]

        def sequential(messages):
            got = seq.sample(messages, params)
            requests[0] += got.usage.requests
            return got.samples

        prompts = [it.messages[0]["content"] for it in items]
        naive_prompt(teacher, sequential, prompts[0], settings, Stages())  # warm-up, untimed
        requests[0] = 0
        naive_s, st = time_naive(teacher, sequential, prompts, settings)
        st.requests = requests[0]
        seq.close()
        fast = make_api_sampler(settings)  # exactly what `bbwd batch --target ... --base-url ...` builds
        summary, sums = time_batch(Detector(teacher, fast, settings), items, args.group_size)
        fast.close()
    finally:
        server.terminate()
        server.wait()
    report(
        f"black-box: target {TARGET} behind an OpenAI-compatible API at {base_url}, {args.latency * 1e3:.0f} ms "
        f"per request, n ignored",
        len(items),
        [("naive, K sequential requests", naive_s, st)],
        summary.seconds,
        summary,
        sums,
        "overlapped",
    )
    print(
        f"bound from latency alone: naive >= {args.k * args.latency:.2f} s/prompt; bbwd batch >= "
        f"{args.k * args.latency / args.concurrency:.3f} s/prompt (concurrency {args.concurrency})"
    )


def main() -> None:
    """Print the command and settings, then run the chosen modes."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["white-box", "black-box", "both"], default="both")
    ap.add_argument("--n", type=int, default=50, help="questions")
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--latency", type=float, default=0.2, help="black-box: injected seconds per request")
    ap.add_argument("--concurrency", type=int, default=16, help="black-box: bbwd batch request slots")
    ap.add_argument("--quick", action="store_true", help="smoke: 2 questions, K=3, 4 tokens, 50 ms, concurrency 4")
    args = ap.parse_args()
    if args.quick:
        args.n, args.k, args.max_tokens, args.latency, args.concurrency = 2, 3, 4, 0.05, 4
    items = dataset("nq", args.n, "zero-shot").items
    print("command: " + command())
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, torch threads {torch.get_num_threads()}, "
        f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} CPUs, "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{len(items)} NQ-open questions, K={args.k}, T={Settings.temperature}, max_tokens={args.max_tokens}, "
        f"group size {args.group_size}, teacher {Settings.teacher} on CPU (layer floor(L/2)); black-box: latency "
        f"{args.latency * 1e3:.0f} ms/request, concurrency {args.concurrency}, cache off"
    )
    teacher = load_teacher(Settings.teacher, "cpu")
    if args.mode in ("black-box", "both"):
        black_box(args, teacher, items)
    if args.mode in ("white-box", "both"):
        white_box(args, teacher, items)


if __name__ == "__main__":
    main()
