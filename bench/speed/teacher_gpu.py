"""The teacher pass on a GPU: a Llama-2-7B-shaped model in bf16 against a plain transformers forward, and exact OT
on the CPU cores for the same records, measured in the same run.

The model is Llama-2-7B's architecture (``LLAMA2_7B``: 32 layers, hidden 4096, MLP 11008, 32 heads, vocabulary
32000) with random weights in bf16: weights do not change the speed, and no hub is needed. The workloads are the
shapes of the recorded dev sets (SAC3 NQ-open, K = 10; WikiBio, K = 20): each prompt's token count and its K
responses' counts under the embedded tokenizer, and the prefix that all prompts of a set share (the chat template's
head). The ids are random: the shapes file holds lengths only, no text of the data.

Two steps, the first on any machine with ``../shared/data``, the second on the GPU machine::

    python -m bench.speed.teacher_gpu shapes -o shapes.json           # lengths of every record (SmolLM2's tokenizer)
    python -m bench.speed.teacher_gpu run --shapes shapes.json [--prompts 128 24] [--budgets 8192 16384 ...]
    python -m bench.speed.teacher_gpu run --shapes shapes.json --quick --device cpu  # a 4-layer model: that it runs

Printed per set and token budget: records/s of bbwd's pass to the middle layer (``HFTeacher.encode_ids``: shared
prefix, levels attention, blocks above ell = 16 skipped, states projected on the device) and of the plain reference
(every prompt + response right-padded in length-sorted batches under the same budget, ``hidden_states[16]`` of a
full forward); the speed-up; each path's MFU (the FLOPs its real tokens need: weights and causal attention, padding
not counted) against the device's dense bf16 peak; the largest deviation of bbwd's states from the reference's.
Then exact OT (``transport.pairwise_w2`` of each record's K projected clouds) on all CPU cores, and which of the
two bounds a record.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch

from bench.common import data_dir, table
from blackbox_wd.measure.transport import pairwise_w2
from blackbox_wd.teachers.forcing import HFTeacher

LLAMA2_7B = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
}
# --quick: the same paths on a 4-layer Llama small enough for a CPU, to check that the bench runs.
QUICK = {
    **LLAMA2_7B,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
}
# Dense bf16 tensor-core peaks from the vendor's data sheets (SXM parts), in FLOP/s.
PEAKS = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12, "L40S": 362e12}
SETS = {"sac3": ("sac3_nq_open.jsonl", 10), "wikibio": ("wikibio_gpt3_dev.jsonl", 20)}
Pairs = list[tuple[list[int], list[int]]]
HEADER = [
    "set",
    "prompts",
    "pairs",
    "token budget",
    "bbwd records/s",
    "bbwd MFU",
    "plain records/s",
    "plain MFU",
    "speed-up",
    "max |dev| / max |state|",
]
OT_HEADER = [
    "set",
    "prompts",
    "K",
    "OT records/s (all CPU cores)",
    "teacher records/s (best budget)",
    "bounds a record",
]


def shapes(data: Path) -> dict:
    """Each set's shared prefix length and, per record, its prompt's and its K responses' token counts."""
    from blackbox_wd.doors.eval.data import load
    from blackbox_wd.teachers.hf import load_teacher

    teacher = load_teacher("smollm2-135m", device="cpu")
    out = {}
    for name, (file, k) in SETS.items():
        items = load(data / file, "zero-shot").items
        prompts = [teacher.prompt_ids(it.messages) for it in items]
        shared = len(os.path.commonprefix(prompts))
        records = [
            [len(p), [len(teacher.response_ids(s)) for s in it.samples[:k]]]
            for p, it in zip(prompts, items, strict=True)
        ]
        out[name] = {"k": k, "shared": shared, "records": records}
    return out


def workload(spec: dict, n: int, vocab: int, seed: int = 0) -> Pairs:
    """Random ids of the first ``n`` records' shapes: one shared head, then each prompt's own tokens, K responses."""
    rng = np.random.default_rng(seed)
    head = rng.integers(3, vocab, spec["shared"]).tolist()
    pairs = []
    for prompt_len, lengths in spec["records"][:n]:
        prompt = head + rng.integers(3, vocab, max(prompt_len - len(head), 1)).tolist()
        pairs += [(prompt, rng.integers(3, vocab, m).tolist()) for m in lengths]
    return pairs


def flops(pairs: Pairs, cfg: dict, layers: int, head: bool, floor: bool) -> float:
    """FLOPs of ``layers`` blocks (and the LM head when ``head``) over the pairs' real tokens: 2 per weight per token,
    and 4 * hidden per (query, key) the causal mask allows. ``floor``: each prompt once (bbwd), else prompt +
    response for every pair (the reference)."""
    d, ff, kv = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_key_value_heads"]
    per_token = 2 * (2 * d * d + 2 * d * d * kv // cfg["num_attention_heads"] + 3 * d * ff)
    seqs: list[tuple[int, int]] = []  # (tokens run, keys before them)
    if floor:
        seqs += [(len(p), 0) for p in {tuple(p) for p, _ in pairs}]
        seqs += [(len(r), len(p)) for p, r in pairs]
    else:
        seqs += [(len(p) + len(r), 0) for p, r in pairs]
    tokens = sum(t for t, _ in seqs)
    keys = sum(t * before + t * (t + 1) / 2 for t, before in seqs)  # sum over tokens of the keys each sees
    total = layers * (per_token * tokens + 4 * d * keys)
    return total + (2 * d * cfg["vocab_size"] * tokens if head else 0)


def model_of(cfg: dict, device: str) -> tuple[torch.nn.Module, object]:
    """A Llama of shape ``cfg`` with random bf16 weights on ``device``, and a stand-in tokenizer (pad id 0)."""
    from tokenizers import Tokenizer, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    config = LlamaConfig(**cfg, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=torch.bfloat16).eval()
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2}
    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<pad>")), pad_token="<pad>", eos_token="</s>"
    )
    return model, tok


def synced(fn):
    """Seconds of one call, the device synchronised before and after, and its result."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


@torch.inference_mode()
def plain(model: torch.nn.Module, pairs: Pairs, layer: int, budget: int) -> list[torch.Tensor]:
    """The reference: prompt + response of every pair, sorted by length, right-padded in batches whose padded size
    fits ``budget``; ``hidden_states[layer]`` of a full forward at the response tokens (on the device)."""
    device = next(model.parameters()).device
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    out: list[torch.Tensor | None] = [None] * len(pairs)
    start = 0
    while start < len(order):
        end = start + 1
        while end < len(order) and (end - start + 1) * sum(map(len, pairs[order[end]])) <= budget:
            end += 1
        rows = order[start:end]
        width = max(sum(map(len, pairs[i])) for i in rows)
        ids = torch.zeros(len(rows), width, dtype=torch.long)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for j, i in enumerate(rows):
            seq = pairs[i][0] + pairs[i][1]
            ids[j, : len(seq)] = torch.tensor(seq)
            mask[j, : len(seq)] = 1
        states = model(input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True)
        for j, i in enumerate(rows):
            p, r = pairs[i]
            out[i] = states.hidden_states[layer][j, len(p) : len(p) + len(r)].clone()
        del states  # before the next batch: the outputs of two batches at once do not fit at large budgets
        start = end
    return out  # type: ignore[return-value]


def ot_all(clouds: list[np.ndarray], k: int) -> list[np.ndarray]:
    """Exact pairwise W2 of each record's K clouds (consecutive), on all CPU cores."""
    return [pairwise_w2(clouds[i : i + k]) for i in range(0, len(clouds), k)]


def peak(device: torch.device) -> tuple[str, float]:
    """The device's name and its dense bf16 peak (data sheet), or NaN when not listed."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    return name, next((v for k, v in PEAKS.items() if k in name), float("nan"))


def run(args: argparse.Namespace) -> None:
    """Time both paths and OT on each set and budget; print the tables."""
    device = torch.device(args.device)
    cfg = QUICK if args.quick else LLAMA2_7B
    if args.quick:
        args.prompts, args.budgets, args.rounds = [4, 2], [2048], 1
    model, tok = model_of(cfg, args.device)
    spec = json.loads(Path(args.shapes).read_text())
    name, bf16_peak = peak(device)
    layer = cfg["num_hidden_layers"] // 2
    print(f"device: {name}; torch {torch.__version__}; bf16 peak {bf16_peak / 1e12:.0f} TFLOP/s (data sheet); ", end="")
    print(f"CPU cores {os.cpu_count()}\n")
    rows, ot_rows = [], []
    for set_name, n in zip(SETS, args.prompts, strict=True):
        pairs = workload(spec[set_name], n, cfg["vocab_size"])
        k = spec[set_name]["k"]
        bbwd_flops = flops(pairs, cfg, layer, head=False, floor=True)
        ref_flops = flops(pairs, cfg, cfg["num_hidden_layers"], head=True, floor=False)
        for budget in args.budgets:
            teacher = HFTeacher(model, tok, name="llama-2-7b-shaped", token_budget=budget)
            teacher.encode_ids(pairs[: 4 * k])  # warm-up: kernels, allocator
            plain(model, pairs[: 4 * k], layer, budget)
            t_bbwd, t_ref = [], []
            for _ in range(args.rounds):
                teacher.memo = type(teacher.memo)(teacher.n_layers)  # nothing kept from the last round
                s, states = synced(partial(teacher.encode_ids, pairs))
                t_bbwd.append(s)
                s, ref = synced(partial(plain, model, pairs, layer, budget))
                t_ref.append(s)
            tb, tr = float(np.median(t_bbwd)), float(np.median(t_ref))
            proj = torch.from_numpy(teacher.projection).to(device)
            dev = max(
                float((torch.from_numpy(st.states).to(device) - x.double() @ proj).abs().max())
                for st, x in zip(states, ref, strict=True)
            )
            scale = max(float((x.double() @ proj).abs().max()) for x in ref)
            rows.append(
                [
                    set_name,
                    n,
                    len(pairs),
                    budget,
                    f"{n / tb:.1f}",
                    f"{bbwd_flops / tb / bf16_peak:.1%}",
                    f"{n / tr:.1f}",
                    f"{ref_flops / tr / bf16_peak:.1%}",
                    f"{tr / tb:.2f}x",
                    f"{dev / scale:.1e}",
                ]
            )
            del ref
            torch.cuda.empty_cache()
            print(table(HEADER, rows), file=sys.stderr, flush=True)  # so far: a later failure keeps what was measured
        clouds = [s.states for s in states]
        t_ot, _ = synced(partial(ot_all, clouds, k))
        best = max(float(r[4]) for r in rows if r[0] == set_name)
        ot_rate = n / t_ot
        ot_rows.append(
            [set_name, n, k, f"{ot_rate:.1f}", f"{best:.1f}", "teacher (GPU)" if best < ot_rate else "exact OT (CPU)"]
        )
        print(f"{set_name}: done", file=sys.stderr, flush=True)
    print(table(HEADER, rows))
    print()
    print(table(OT_HEADER, ot_rows))


def main() -> None:
    """``shapes`` (here, from ../shared/data) or ``run`` (on the GPU machine)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sh = sub.add_parser("shapes", help="write the dev sets' token counts (no text) to a JSON file")
    sh.add_argument("--data", type=Path, default=data_dir())
    sh.add_argument("-o", "--out", type=Path, required=True)
    rn = sub.add_parser("run", help="time the passes on the device")
    rn.add_argument("--shapes", type=Path, required=True)
    rn.add_argument("--prompts", type=int, nargs=2, default=[128, 24], metavar=("SAC3", "WIKIBIO"))
    rn.add_argument("--budgets", type=int, nargs="+", default=[8192, 16384, 32768, 65536])
    rn.add_argument("--rounds", type=int, default=3)
    rn.add_argument("--device", default="cuda")
    rn.add_argument("--quick", action="store_true", help="a 4-layer model, 4 + 2 prompts, one budget and round")
    args = ap.parse_args()
    if args.command == "shapes":
        args.out.write_text(json.dumps(shapes(args.data)))
        print(f"wrote {args.out}")
    else:
        run(args)


if __name__ == "__main__":
    main()
