"""Teacher on CPU (issue #24): the pass to the layer in other precisions, compilers and runtimes, against
today's float32 path, in alternating rounds of one run.

Timed path: ``HFTeacher.encode_ids(pairs, logprobs=False)`` (prompts once with their cache, responses on
a copy of it, blocks up to the layer only), one call per workload per round, each variant on its own
copy of the model. Variants (``--variants``):
- ``padded``: the reference, the float32 pass as the issue measured it (``_reference.PaddedTeacher``: all of a
  chunk's responses padded to its longest), torch's default threads;
- ``fp32``: today's path, float32 (responses in runs of similar length, ``pad.length_runs``);
- ``fp32-1t``, ``int8-1t``, ...: any variant with ``torch.set_num_threads(1)`` while it runs;
- ``eager``: eager attention instead of SDPA;
- ``bf16``: weights and activations in bfloat16;
- ``compile``: ``nn.Module.compile(dynamic=True)`` of each decoder block up to the layer (recompile limit
  raised to cover one graph per block);
- ``int8``: ``torch.ao.quantization.quantize_dynamic`` of the blocks' nn.Linear (int8 weights per tensor,
  activations quantised per tensor at run time);
- ``int8-rs``: int8 with per-channel weights after a SmoothQuant-style rescale (alpha 0.5, input maxima
  from the synthetic workload, folded into the norms, up_proj and v_proj, exact in real arithmetic),
  each Linear's input divided by its row's max |value| so that the per-tensor scale acts per token;
- ``ort`` (table of its own): ONNX Runtime on the model cut at the layer, plain forward of
  prompt + response (right-padded, no cache: exporting the cached prefix path is impractical), against the
  same plain forward in torch.
Workloads: ``synthetic`` (one 44-token prompt, K ~80-token responses, as ``bench/speed/teacher.py``), ``sac3``
(the first ``--prompts`` records of the recorded SAC3 NQ-open set, K recorded gpt-3.5-turbo samples each:
short answers) and ``wikibio`` (the first ``--prompts`` records of the WikiBio GPT-3 set, K recorded GPT-3
passages each: the issue's "GPT-3 passages"). Printed: median ms and tokens/s (token floor / time), the median
over rounds of each variant's speed-up over ``padded`` in the same round, and the deviation of the projected
states from ``padded``'s.

Also ``eval VARIANT -- ARGS`` (``bbwd eval ARGS`` with the teacher in that variant) and ``compare REF RUN...``
(paired AUROC differences of AvgWD and EigenWD against REF's results.jsonl).

    python -m bench.speed.teacher_cpu [--variants padded,fp32,int8,...] [--rounds 7] [--prompts 16] [--k 10] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import tempfile
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch
from torch import nn

from bench._reference import PaddedTeacher
from bench.common import Pairs, synthetic_pairs, table, timed
from blackbox_wd.doors.eval.data import data_dir, load
from blackbox_wd.run.stages import token_floor
from blackbox_wd.teachers import hf
from blackbox_wd.teachers.hf import HFTeacher, load_teacher
from blackbox_wd.teachers.pad import pad_batch

SAC3 = "sac3_nq_open.jsonl"  # in the shared data folder ($BBWD_DATA_DIR or ../shared/data)
WIKIBIO = "wikibio_gpt3_dev.jsonl"
REFERENCE = "padded"
VARIANTS = [REFERENCE, "fp32", "fp32-1t", "eager", "bf16", "compile", "int8", "int8-1t", "int8-rs", "int8-rs-1t", "ort"]
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


@torch.inference_mode()
def input_absmax(teacher: HFTeacher, pairs: Pairs) -> dict[str, torch.Tensor]:
    """Per input channel, the largest |value| each Linear of the blocks sees on these pairs."""
    amax: dict[str, torch.Tensor] = {}

    def hook(name: str) -> Callable:
        def record(_module: nn.Module, args: tuple) -> None:
            x = args[0].reshape(-1, args[0].shape[-1]).abs().amax(0)
            amax[name] = torch.maximum(amax[name], x) if name in amax else x

        return record

    modules = dict(teacher.model.named_modules())
    handles = [modules[n].register_forward_pre_hook(hook(n)) for n in block_linears(teacher.model, teacher.layer)]
    try:
        teacher.encode_ids(pairs)
    finally:
        for h in handles:
            h.remove()
    return amax


def _factor(x: torch.Tensor, linears: list[nn.Linear], alpha: float) -> torch.Tensor:
    """SmoothQuant's per-input-channel factor max|X|^alpha / max|W|^(1 - alpha)."""
    w = torch.cat([lin.weight.abs() for lin in linears]).amax(0)
    return (x.clamp(min=1e-5) ** alpha / w.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)


@torch.inference_mode()
def smooth(model: nn.Module, amax: dict[str, torch.Tensor], layer: int, alpha: float = 0.5) -> nn.Module:
    """Move activation range into the weights of blocks 0 .. layer-1, in place (same function in real arithmetic)."""
    cfg = model.config
    head = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    for i, block in enumerate(model.model.layers[:layer]):
        att, mlp, p = block.self_attn, block.mlp, f"model.layers.{i}."
        s = _factor(amax[p + "self_attn.q_proj"], [att.q_proj, att.k_proj, att.v_proj], alpha)
        block.input_layernorm.weight.div_(s)
        for lin in (att.q_proj, att.k_proj, att.v_proj):
            lin.weight.mul_(s)
        s = _factor(amax[p + "mlp.gate_proj"], [mlp.gate_proj, mlp.up_proj], alpha)
        block.post_attention_layernorm.weight.div_(s)
        for lin in (mlp.gate_proj, mlp.up_proj):
            lin.weight.mul_(s)
        s = _factor(amax[p + "mlp.down_proj"], [mlp.down_proj], alpha)
        mlp.up_proj.weight.div_(s[:, None])
        mlp.down_proj.weight.mul_(s)
        s = _factor(amax[p + "self_attn.o_proj"], [att.o_proj], alpha)  # o_proj's input = softmax @ V:
        s = s.view(cfg.num_key_value_heads, group, head).amax(1)  # one factor per V channel, shared by its heads
        att.v_proj.weight.div_(s.reshape(-1)[:, None])
        att.o_proj.weight.mul_(s[:, None, :].expand(-1, group, -1).reshape(-1))
    return model


class RowScaled(nn.Module):
    """A dynamically quantised Linear fed rows of max |value| 1: its per-tensor activation scale acts per row."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """inner(x / r) * r with r each row's max |value|."""
        r = x.abs().amax(-1, keepdim=True).clamp_(min=1e-6)
        return self.inner(x / r) * r


def quantize(model: nn.Module, layer: int, per_channel: bool = False, rows: bool = False) -> nn.Module:
    """int8 dynamic quantisation of the blocks' Linear up to the layer (optionally per-channel weights, row-scaled)."""
    from torch.ao.quantization import default_dynamic_qconfig, per_channel_dynamic_qconfig, quantize_dynamic

    qconfig = per_channel_dynamic_qconfig if per_channel else default_dynamic_qconfig
    names = block_linears(model, layer)
    model = quantize_dynamic(model, {n: qconfig for n in names})
    if rows:
        for name in names:
            parent, _, leaf = name.rpartition(".")
            owner = model.get_submodule(parent)
            setattr(owner, leaf, RowScaled(getattr(owner, leaf)))
    return model


def variant_model(name: str, teacher: HFTeacher, calibration: Pairs | None = None) -> nn.Module:
    """A copy of the teacher's model turned into variant ``name`` (fp32: the model itself)."""
    if name in (REFERENCE, "fp32"):
        return teacher.model
    model = copy.deepcopy(teacher.model)
    if name == "eager":
        model.set_attn_implementation("eager")
    elif name == "bf16":
        model = model.to(torch.bfloat16)
    elif name == "compile":
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 4 * teacher.layer)
        for block in model.model.layers[: teacher.layer]:
            block.compile(dynamic=True)
    elif name == "int8":
        model = quantize(model, teacher.layer)
    elif name == "int8-rs":
        model = quantize(
            smooth(model, input_absmax(teacher, calibration or []), teacher.layer),
            teacher.layer,
            per_channel=True,
            rows=True,
        )
    else:
        raise ValueError(f"unknown variant '{name}'")
    return model.eval()


def variant_teacher(name: str, teacher: HFTeacher, calibration: Pairs) -> HFTeacher:
    """The teacher with its model turned into variant ``name``."""
    model = variant_model(name, teacher, calibration)
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


class Cut(nn.Module):
    """The decoder cut after block ``layer`` (no final norm): plain forward, no cache, for export."""

    def __init__(self, model: nn.Module, layer: int) -> None:
        super().__init__()
        self.decoder = copy.deepcopy(model.get_decoder())
        self.decoder.layers = self.decoder.layers[:layer]
        self.decoder.norm = nn.Identity()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Hidden states after block ``layer`` for every position."""
        return self.decoder(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state


def ort_rows(teacher: HFTeacher, workloads: dict[str, Pairs], rounds: int, folder: Path) -> list[list]:
    """Plain forward of prompt + response, right-padded, one batch per workload: torch against ONNX Runtime."""
    import onnxruntime as ort

    cut = Cut(teacher.model, teacher.layer).eval()
    pad = teacher.tokenizer.pad_token_id or 0
    batches = {w: pad_batch([p + r for p, r in pairs], pad) for w, pairs in workloads.items()}
    ids, mask = next(iter(batches.values()))
    path = folder / "cut.onnx"
    dyn = {0: "batch", 1: "tokens"}
    with torch.inference_mode():
        torch.onnx.export(
            cut,
            (ids, mask),
            str(path),
            input_names=["input_ids", "attention_mask"],
            output_names=["h"],
            dynamic_axes={"input_ids": dyn, "attention_mask": dyn, "h": dyn},
            dynamo=False,
            opset_version=18,
        )
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rows = []
    for w, (ids, mask) in batches.items():
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        tools = {
            "torch": lambda ids=ids, mask=mask: cut(ids, mask).numpy(),
            "ort": lambda feed=feed: session.run(None, feed)[0],
        }
        ms: dict[str, list[float]] = {"torch": [], "ort": []}
        out: dict[str, np.ndarray] = {}
        with torch.inference_mode():
            for name in tools:
                tools[name]()  # warm-up
            for r in range(rounds):
                for name in ["torch", "ort"] if r % 2 == 0 else ["ort", "torch"]:
                    t, out[name] = timed(tools[name])
                    ms[name].append(t)
        real = mask.numpy().astype(bool)
        a, b = out["ort"][real] @ teacher.projection, out["torch"][real] @ teacher.projection
        diff = float(np.max(np.abs(a - b)))
        tokens = int(real.sum())
        ratio = float(np.median(np.asarray(ms["torch"]) / np.asarray(ms["ort"])))
        for name in ("torch", "ort"):
            med = float(np.median(ms[name]))
            rows.append(
                [
                    w,
                    f"plain forward, {name}",
                    tokens,
                    f"{med:.0f}",
                    f"{tokens / med * 1e3:.0f}",
                    "1.00x" if name == "torch" else f"{ratio:.2f}x",
                    "-" if name == "torch" else f"{diff:.1e}",
                    "-" if name == "torch" else f"{diff / np.abs(b).max():.1e}",
                    "-",
                ]
            )
    return rows


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
    calibration = workloads["synthetic"]
    built = {
        b: teacher if b == "fp32" else variant_teacher(b, teacher, calibration)
        for b in dict.fromkeys(n.removesuffix("-1t") for n in names if n != "ort")
    }
    teachers = {n: built[n.removesuffix("-1t")] for n in names if n != "ort"}  # -1t: same model, one thread
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
    if "ort" in names:
        with tempfile.TemporaryDirectory() as folder:
            ort_header = [*header[:5], "speed-up vs torch", *header[6:]]  # against torch's same plain forward
            print(table(ort_header, ort_rows(teacher, workloads, args.rounds, Path(folder))), flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


def run_eval(variant: str, argv: list[str]) -> None:
    """``bbwd eval`` with every teacher it loads turned into ``variant`` (calibrated on the synthetic pairs)."""
    from blackbox_wd.doors.cli import main as bbwd

    original = hf.load_weights

    def load_variant(files, dtype):
        model, tokenizer = original(files, dtype)
        teacher = HFTeacher(model.eval(), tokenizer)
        return variant_model(variant, teacher, synthetic_pairs(teacher, 10)), tokenizer

    hf.load_weights = load_variant
    bbwd(["eval", *argv])


def compare(ref: Path, runs: list[Path], label: str = "label") -> None:
    """Paired AUROC differences (run - ref) of AvgWD and EigenWD on the prompts both scored."""
    from blackbox_wd.calibration.metrics import auroc, paired_auroc_diff

    def read(folder: Path) -> dict[str, dict]:
        rows = (json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip())
        return {r["id"]: r for r in rows if "error" not in r}

    base = read(ref)
    out = []
    for run in runs:
        got = read(run)
        ids = [i for i in base if i in got]
        y = [base[i][label] for i in ids]
        for method, key in (("AvgWD", "avg_wd"), ("EigenWD", "eigen_wd")):
            a, b = [got[i][key] for i in ids], [base[i][key] for i in ids]
            d = paired_auroc_diff(y, a, b)
            out.append(
                [
                    run.name,
                    method,
                    len(ids),
                    f"{auroc(y, b):.3f}",
                    f"{auroc(y, a):.3f}",
                    f"{d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}]",
                    d.verdict,
                ]
            )
    print(table(["run", "method", "n", f"AUROC {ref.name}", "AUROC run", "run - ref [95% CI]", "verdict"], out))


def main() -> None:
    """Dispatch: the timing bench (default), ``eval VARIANT -- ARGS`` or ``compare REF RUN...``."""
    if sys.argv[1:2] == ["eval"]:
        rest = sys.argv[3:]
        run_eval(sys.argv[2], rest[1:] if rest[:1] == ["--"] else rest)
        return
    if sys.argv[1:2] == ["compare"]:
        compare(Path(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
        return
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
