"""What the bench scripts share: timing, Markdown tables, synthetic token clouds, the command line they print, the
repository's paths, the teacher workloads, llama.cpp's server and the helpers of servers on 127.0.0.1 (for the
tests, the fixture scripts and the serve and score benchmarks). A script imports from here
(``from bench.common import table``), never from another script.

Light on purpose: numpy at import, ``blackbox_wd`` only inside the functions that need it (every script imports
this module).
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from blackbox_wd.doors.eval.data import Dataset
    from blackbox_wd.teachers.forcing import HFTeacher

ROOT = Path(__file__).resolve().parents[1]  # the repository: scripts run from here as ``python -m bench.<kind>.<name>``
API_SERVER = ROOT / "tests" / "api_support.py"  # the loopback API target: ``python API_SERVER LATENCY`` prints its port
# the heavy libraries a door may load (bench.speed.score: which a run loads, and which it never)
HEAVY = (
    "torch",
    "transformers",
    "xllamacpp",
    "ot",
    "sklearn",
    "scipy",
    "pandas",
    "openai",
    "math_verify",
    "nltk",
    "spacy",
    "matplotlib",
    "fastapi",
    "ray",
)
DIM = 128
NORM = 30.0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock milliseconds of one call and its result."""
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table with right-aligned columns."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def token_clouds(rng: np.random.Generator, k: int, m: int, equal: bool) -> list[np.ndarray]:
    """K token-state clouds of one synthetic prompt: 128-d, norms ~30 (a shared prompt offset, a per-response
    shift and per-token spread); m_i ~ U[0.5M, 1.5M], or M each when ``equal``."""
    offset = rng.normal(size=DIM)
    offset *= NORM / np.linalg.norm(offset)
    sizes = [m] * k if equal else rng.integers(max(1, m // 2), 3 * m // 2 + 1, size=k)
    spread = 0.5 * NORM / np.sqrt(DIM)
    return [offset + 0.3 * spread * rng.normal(size=DIM) + spread * rng.normal(size=(n, DIM)) for n in sizes]


def command(argv: Sequence[str] | None = None) -> str:
    """The command line that runs this process's script again: ``python -m bench.speed.x ARGS``."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    script = ["-m", spec.name] if spec is not None else [sys.argv[0]]
    return shlex.join(["python", *script, *(sys.argv[1:] if argv is None else argv)])


# The teacher workloads (bench.speed.teacher_cpu, pipeline, serve).
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
Pairs = list[tuple[list[int], list[int]]]


def synthetic_pairs(teacher: HFTeacher, k: int, target: int = 80) -> Pairs:
    """K different responses of about ``target`` tokens after one prompt, built from rotated sentences."""
    prompt, out = teacher.prompt_ids(PROMPT), []
    for i in range(k):
        text, j = "", i
        while len(teacher.response_ids(text)) < target:
            text += (" " if text else "") + SENTENCES[j % len(SENTENCES)]
            j += 3
        out.append((prompt, teacher.response_ids(text)[: target - 4 + (i % 9)]))  # 76..84 tokens
    return out


def data_dir() -> Path:
    """The recorded data sets: $BBWD_DATA_DIR, else ``../shared/data`` beside the repository."""
    env = os.environ.get("BBWD_DATA_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def dataset(name: str, n: int, protocol: str = "zero-shot") -> Dataset:
    """The first n items of a shared set as ``bbwd eval`` prompts them (SciQ: items with support only)."""
    from blackbox_wd.doors.eval.data import DATASETS, load

    return load(data_dir() / DATASETS[name], protocol, n, require_context=name == "sciq")


# Servers: llama.cpp (honours ``n``, returns logprobs) in this process from the GGUF (xllamacpp, the white-box
# sampler's own); ``transformers serve``, which only the tests and the fixture script start: ``scripts/servers.py``

HOST = "127.0.0.1"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers 200; RuntimeError on timeout or if the process exits."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before becoming healthy")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"server at {url} not healthy after {timeout:.0f} s")


@dataclass
class LlamaCppServer:
    """llama.cpp's server in-process (xllamacpp) on 127.0.0.1 from a GGUF file."""

    gguf: Path
    alias: str = "smollm2-135m"
    api_key: str | None = None
    n_parallel: int = 4
    n_threads: int = 2
    port: int = 0  # 0: any free port
    server: Any = None
    base: str = ""

    @property
    def model(self) -> str:
        """The model name to send."""
        return self.alias

    @property
    def base_url(self) -> str:
        """The OpenAI base URL."""
        return self.base + "/v1"

    def __enter__(self) -> LlamaCppServer:
        import xllamacpp

        from blackbox_wd.clients.llamacpp import llamacpp_params

        params = llamacpp_params(
            self.gguf, slots=self.n_parallel, context=2048 * self.n_parallel, threads=self.n_threads
        )
        params.model_alias = {self.alias}
        if self.api_key:
            params.api_keys = [self.api_key]
        params.port = self.port
        self.server = xllamacpp.Server(params)
        self.base = self.server.listening_address
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server = None  # the destructor stops the server


def log_line(line: str) -> str:
    """A record of a data file (``samples``, maybe written as a Python list in a string; ``question``) as a batch log's
    line (``responses``, ``prompt``); a batch log's line as it is."""
    r = json.loads(line)
    if "responses" in r:
        return line if line.endswith("\n") else line + "\n"
    samples = r["samples"] if isinstance(r["samples"], list) else ast.literal_eval(r["samples"])
    out = {"id": r["id"], "prompt": r.get("prompt") or r["question"], "response": str(r["response"])}
    return json.dumps({**out, "responses": [str(s) for s in samples], "label": int(r["label"])}) + "\n"
