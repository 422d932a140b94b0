"""`bbwd score` on the embedded default, in a new process, against llama.cpp's own n=10 request (#24).

Per prompt, in alternating rounds (so that a change in the machine's load hits both alike):
- reference: llama.cpp's server (xllamacpp, in this process, warm, on the same embedded GGUF, 10 slots,
  all the machine's threads) answering one OpenAI chat request with n=10, T=0.5, max_tokens=128 and the
  sampler chain bbwd uses (temperature then top-p; top-k, min-p and the rest off), over loopback HTTP;
- ``bbwd score PROMPT --json``: a new process, as a user runs it (imports, model load, llama.cpp start,
  sampling, teacher pass, scores, calibration);
- floor: a new process that only imports the libraries a short answer's ``bbwd score`` loads (numpy, scipy's
  assignment and special functions, llama.cpp, transformers' tokenizer; the teacher is forced in numpy, #71), the
  least it can take before its own modules and its work.
Printed per prompt: median/min/max wall seconds of each, the responses they drew, the median of
score's own stage timings, and the goal's bound 3 x reference + 2 s against score's median and the floor.
Then one more ``bbwd score`` of the first prompt, not counted, under ``python -X importtime``: the seconds its
imports take, those of each heavy library's own modules (``HEAVY``: the self times of its modules, summed, so a
library's share leaves out what it imports from others), and which of them it never loaded (#71: a door imports
what its run uses, when it uses it).

    python -m bench.speed.score [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import httpx

from bench.common import HEAVY, ROOT, LlamaCppServer, table
from blackbox_wd.clients.llamacpp import NEUTRAL
from blackbox_wd.cpus import cpu_threads
from blackbox_wd.teachers.embedded import ensure_gguf

PROMPTS = ("What is the capital of Australia?", "Who won the 1987 Tour de France?")
FLOOR = (
    "import numpy, scipy.optimize, scipy.special, xllamacpp, httpx, rapidfuzz\n"
    "from transformers import PreTrainedTokenizerFast"
)
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \|\s*(\S+)$")


def reference(client: httpx.Client, server: LlamaCppServer, prompt: str, seed: int) -> tuple[float, int]:
    """Seconds and response count of one n=10 chat request to the warm llama.cpp server (its ``usage`` undercounts
    the tokens of n > 1, so none are reported)."""
    body = {
        "model": server.model,
        "messages": [{"role": "user", "content": prompt}],
        "n": 10,
        "temperature": 0.5,
        "top_p": 1.0,
        "max_tokens": 128,
        "seed": seed,
        **NEUTRAL,
    }
    t0 = time.perf_counter()
    reply = client.post(f"{server.base_url}/chat/completions", json=body).raise_for_status().json()
    return time.perf_counter() - t0, len(reply["choices"])


def score(prompt: str, env: dict[str, str]) -> tuple[float, int, dict[str, float]]:
    """Seconds of ``bbwd score PROMPT --json`` in a new process, its response count and stage timings."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "blackbox_wd", "score", prompt, "--json"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    seconds = time.perf_counter() - t0
    result = json.loads(out)
    stages = {k: v for k, v in result["timings"].items() if isinstance(v, float)}
    return seconds, len(result["token_counts"]), stages


def floor(env: dict[str, str]) -> float:
    """Seconds of a new process that imports only the libraries of a short answer's ``bbwd score`` (``FLOOR``)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], env=env, cwd=ROOT, check=True)
    return time.perf_counter() - t0


def import_profile(prompt: str, env: dict[str, str]) -> tuple[float, dict[str, float]]:
    """One ``bbwd score PROMPT --json`` under ``-X importtime``: the seconds of all its imports, and of each
    ``HEAVY`` library's own modules (their self times summed; absent if none was loaded)."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "blackbox_wd", "score", prompt, "--json"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stderr
    total, heavy = 0.0, {}
    for line in err.splitlines():
        m = IMPORT_LINE.match(line)
        if m is None:
            continue
        seconds, package = int(m.group(1)) / 1e6, m.group(2).split(".")[0]
        total += seconds
        if package in HEAVY:
            heavy[package] = heavy.get(package, 0.0) + seconds
    return total, heavy


def row(name: str, seconds: list[float], responses: list[int]) -> list[str]:
    """A table row: median, min, max seconds and the responses drawn."""
    return [
        name,
        f"{statistics.median(seconds):.2f}",
        f"{min(seconds):.2f}",
        f"{max(seconds):.2f}",
        str(int(statistics.median(responses))),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="Counted rounds per prompt (after one warm-up round).")
    ap.add_argument("--quick", action="store_true", help="Smoke: one prompt, one counted round.")
    args = ap.parse_args()
    rounds, prompts = (1, PROMPTS[:1]) if args.quick else (args.rounds, PROMPTS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, llama.cpp threads {cpu_threads()}, "
        f"load average at start {os.getloadavg()[0]:.2f}"
    )
    with (
        LlamaCppServer(ensure_gguf(), n_parallel=10, n_threads=cpu_threads()) as server,
        httpx.Client(timeout=600) as client,
    ):
        for prompt in prompts:
            ref, ours, ref_n, our_n, stages, least = [], [], [], [], [], []
            for r in range(rounds + 1):  # the order alternates; round 0 warms both up
                if r % 2:
                    a, a_n = reference(client, server, prompt, r)
                    b, b_n, st = score(prompt, env)
                else:
                    b, b_n, st = score(prompt, env)
                    a, a_n = reference(client, server, prompt, r)
                if r:
                    ref.append(a), ref_n.append(a_n), ours.append(b), our_n.append(b_n)
                    stages.append(st)
                    least.append(floor(env))
            bound = 3 * statistics.median(ref) + 2
            print(f"\n{prompt!r}: {rounds} rounds\n")
            print(
                table(
                    ["command", "median s", "min s", "max s", "responses"],
                    [
                        row("llama.cpp n=10 request", ref, ref_n),
                        row("bbwd score (new process)", ours, our_n),
                        row("floor: imports only (new process)", least, [0] * len(least)),
                    ],
                )
            )
            keys = sorted({k for st in stages for k in st})
            print(
                "\nbbwd score stages (median s): "
                + ", ".join(f"{k} {statistics.median(st.get(k, 0.0) for st in stages):.2f}" for k in keys)
            )
            verdict = "met" if statistics.median(ours) <= bound else "NOT met"
            print(
                f"bbwd score / reference: {statistics.median(ours) / statistics.median(ref):.1f}x; "
                f"goal 3 x {statistics.median(ref):.2f} + 2 = {bound:.2f} s: {verdict}; "
                f"the imports alone take {statistics.median(least):.2f} s"
            )
    total, heavy = import_profile(prompts[0], env)
    print(
        f"\nbbwd score's imports (one more run of {prompts[0]!r} under -X importtime, s): all {total:.2f}; "
        "each library's own modules: "
        + ", ".join(f"{name} {heavy[name]:.2f}" for name in HEAVY if name in heavy)
        + "; never loaded: "
        + (", ".join(name for name in HEAVY if name not in heavy) or "-")
    )


if __name__ == "__main__":
    main()
