"""Teacher forcing of K responses: per-response full forward vs HFTeacher.encode (batched, cut at the layer).

Reference: for each response, one forward pass of the whole causal LM over prompt + response with
``output_hidden_states=True``, taking ``hidden_states[layer]`` at the response tokens and projecting
them with the teacher's fixed matrix. Optimised: ``teacher.encode(messages, responses)``, one
right-padded batch whose forward stops after block ``layer`` (a hook raises). Both include
tokenization. Run with the model cached:

    BBWD_CACHE_DIR=/tmp/bbwdcache python bench/teacher.py [--rounds 5] [--k 10]
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np
import torch

# bench/ot.py would shadow POT for `import ot`: keep this folder at the end of the path, not the front.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE] + [str(_HERE)]
from _common import table, timed  # noqa: E402

from blackbox_wd.teachers.hf import HFTeacher, load_teacher  # noqa: E402

PROMPT = [{"role": "user", "content": "Explain in a short paragraph why the sky looks blue during the day."}]
SENTENCES = [
    "Sunlight is made of many colours, and when it enters the atmosphere it meets molecules of nitrogen and oxygen.",
    "These molecules scatter short wavelengths far more strongly than long ones, a process called Rayleigh scattering.",
    "Blue light is therefore bounced around the sky in every direction, so wherever we look we see some of it.",
    "Violet is scattered even more, but our eyes are less sensitive to it and some of it is absorbed high up.",
    "At sunrise and sunset the light crosses much more air, so the blue is scattered away and reds remain.",
    "On other planets with different atmospheres, such as Mars, the daytime sky can look butterscotch instead.",
    "Clouds look white because their droplets are large and scatter all visible wavelengths about equally.",
    "The effect was explained by Lord Rayleigh in the nineteenth century using the wave theory of light.",
]


def responses(teacher: HFTeacher, k: int, target: int = 80) -> list[str]:
    """K different responses of about ``target`` tokens, built from rotated sentences."""
    out = []
    for i in range(k):
        text, j = "", i
        while len(teacher.response_ids(text)) < target:
            text += (" " if text else "") + SENTENCES[j % len(SENTENCES)]
            j += 3
        ids = teacher.response_ids(text)[: target - 4 + (i % 9)]  # 76..84 tokens
        out.append(teacher.tokenizer.decode(ids))
    return out


@torch.inference_mode()
def reference(teacher: HFTeacher, messages: list[dict], texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per-response full forward with all hidden states: (projected states, last unprojected state)."""
    prompt = teacher.prompt_ids(messages)
    out = []
    for text in texts:
        response = teacher.response_ids(text)
        ids = torch.tensor([prompt + response], device=teacher.device)
        hs = teacher.model(input_ids=ids, output_hidden_states=True).hidden_states[teacher.layer]
        states = hs[0, len(prompt):].cpu().double().numpy()
        out.append((states @ teacher.projection, states[-1].copy()))
    return out


def deviation(enc: list, ref: list[tuple[np.ndarray, np.ndarray]]) -> tuple[float, float, float, float]:
    """Max abs difference of projected states and of unprojected last states, and the largest |value| of each."""
    d_proj = max(float(np.max(np.abs(e.states - s))) for e, (s, _) in zip(enc, ref))
    d_last = max(float(np.max(np.abs(e.last - last))) for e, (_, last) in zip(enc, ref))
    return (d_proj, d_last, max(float(np.max(np.abs(s))) for s, _ in ref),
            max(float(np.max(np.abs(last))) for _, last in ref))


def main() -> None:
    """Time both paths in alternating rounds and print one Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    teacher = load_teacher("smollm2-135m", device="cpu")
    texts = responses(teacher, args.k)
    lengths = [len(teacher.response_ids(t)) for t in texts]
    reference(teacher, PROMPT, texts[:2])  # warm-up
    teacher.encode(PROMPT, texts[:2])
    t_ref, t_opt = [], []
    for r in range(args.rounds):
        if r % 2 == 0:
            t_ref.append(timed(lambda: reference(teacher, PROMPT, texts))[0])
        t, enc = timed(lambda: teacher.encode(PROMPT, texts))
        t_opt.append(t)
        if r % 2 == 1:
            t_ref.append(timed(lambda: reference(teacher, PROMPT, texts))[0])
    diffs = {"float32": deviation(enc, reference(teacher, PROMPT, texts))}
    teacher.model.double()  # same computation in float64: separates rounding from a real difference
    diffs["float64"] = deviation(teacher.encode(PROMPT, texts), reference(teacher, PROMPT, texts))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, python {platform.python_version()}; "
          f"teacher smollm2-135m on cpu, layer {teacher.layer} of {teacher.n_layers}; "
          f"prompt {len(teacher.prompt_ids(PROMPT))} tokens, {args.k} responses of {min(lengths)}-{max(lengths)} tokens")
    rows = [[args.k, args.rounds, f"{np.median(t_ref):.1f}", f"{np.median(t_opt):.1f}",
             f"{np.median(t_ref) / np.median(t_opt):.2f}x"]]
    print(table(["K", "rounds", "per-response full forward ms", "encode ms", "speed-up"], rows))
    for dtype, (d_proj, d_last, s_proj, s_last) in diffs.items():
        print(f"model in {dtype}: max |encode - reference| over all response tokens: projected states {d_proj:.2e} "
              f"(largest |value| {s_proj:.1f}, ratio {d_proj / s_proj:.1e}); unprojected last-token states "
              f"{d_last:.2e} (largest |value| {s_last:.1f}, ratio {d_last / s_last:.1e})")


if __name__ == "__main__":
    main()
