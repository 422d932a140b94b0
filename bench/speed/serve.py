"""Requests/s and p50/p95 latency of `bbwd serve` vs a server that scores each request on its own, same run.

Target: the loopback fault server (``tests/api_support.py``, 127.0.0.1 only, its own process) answering
each request after ``--latency`` seconds with a real recorded SmolLM2 body, ignoring ``n`` (so the K
scoring samples are 1 + (K - 1) requests). Both servers run as subprocesses on 127.0.0.1 with the same
settings (target ``smollm2-135m`` at the fault server, teacher the embedded SmolLM2-135M on CPU, K,
cache off, ``--concurrency`` API slots), started side by side and measured in turn at each level:

  reference: ``python -m bench.speed.serve --reference-server``: a FastAPI app whose every request forwards
  the answer (``serve.upstream.Upstream``) while it draws its K samples (``APISampler.asample``),
  then runs ``Detector.score_samples`` on one model thread: one teacher pass per request, OT on that
  thread too. The same answer, samples and scores as `bbwd serve`, without the shared queue.
  bbwd serve: ``bbwd serve --target smollm2-135m --base-url <fault server> --no-cache``: concurrent
  requests share teacher passes (its default ``--batch-wait-ms``), OT on its own threads.

Load: the official ``AsyncOpenAI`` client keeps c requests in flight (c = 1, 8, 32) over distinct
NQ-open dev questions; every answer must carry its ``bbwd`` verdict. Each level runs ``--rounds``
rounds of ``--requests`` questions (new ones each round); in each round both servers get the same
questions, taking turns (which one goes first alternates), so that a change in the machine's load
hits both. requests/s is a round's requests / its wall time (the median of the rounds is reported,
and the per-round ratios); latency is per request, wall clock at the client, over all rounds.
Both servers run with ``OMP_NUM_THREADS=1`` (on a shared 2-core machine OpenMP's spinning threads
slow a forward many times over).

    python -m bench.speed.serve [--k 10] [--latency 0.2] [--levels 1,8,32] [--requests 4,16,32] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import uvicorn
from fastapi import FastAPI, Request  # module level: FastAPI resolves the handlers' annotations here
from fastapi.responses import JSONResponse

from bench.common import API_SERVER, HOST, ROOT, command, dataset, free_port, table, wait_healthy
from blackbox_wd.settings import Settings

TARGET = "smollm2-135m"


def settings_args(args: argparse.Namespace, base_url: str) -> list[str]:
    """The scoring options both servers get."""
    return [
        "--target",
        TARGET,
        "--base-url",
        base_url,
        "--teacher",
        Settings.teacher,
        "-k",
        str(args.k),
        "--max-tokens",
        str(args.max_tokens),
        "--device",
        "cpu",
        "--no-cache",
        "--concurrency",
        str(args.concurrency),
    ]


def reference_server(argv: list[str]) -> None:
    """Serve the per-request reference on 127.0.0.1 (``--reference-server --port P`` plus the scoring options)."""
    from blackbox_wd.doors.serve.protocol import parse_request, scoring_messages, verdict
    from blackbox_wd.doors.serve.upstream import Upstream
    from blackbox_wd.run.detector import Detector

    ap = argparse.ArgumentParser()
    for name in ("--port", "--target", "--base-url", "--teacher", "-k", "--max-tokens", "--device", "--concurrency"):
        ap.add_argument(name)
    ap.add_argument("--no-cache", action="store_true")
    a = ap.parse_args(argv)
    settings = Settings(
        target=a.target,
        base_url=a.base_url,
        teacher=a.teacher,
        k=int(a.k),
        max_tokens=int(a.max_tokens),
        device=a.device,
        cache=False,
        concurrency=int(a.concurrency),
    )
    detector = Detector.from_settings(settings, all_scores=True)  # every request forced, as the server's below
    upstream = Upstream(detector.sampler)
    model_thread = ThreadPoolExecutor(1)
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> JSONResponse:
        raw = await request.body()
        req = parse_request(raw, a.target)
        messages = scoring_messages(req)
        answer = asyncio.create_task(upstream.complete(req, raw, messages))
        samples = await detector.sampler.asample(messages, settings.sampling())
        result = await asyncio.get_running_loop().run_in_executor(
            model_thread, detector.score_samples, messages, samples
        )
        body = await answer
        body["bbwd"] = verdict(result)
        return JSONResponse(body)

    uvicorn.run(app, host=HOST, port=int(a.port), log_level="warning")


def start(cmd: list[str], port: int, log: Path, procs: list[subprocess.Popen]) -> None:
    """A server subprocess from the repository root (added to ``procs``), waited for until healthy."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with open(log, "wb") as out:
        procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env))
    wait_healthy(f"http://{HOST}:{port}/healthz", 600, procs[-1])


async def drive(base_url: str, prompts: list[str], concurrency: int, max_tokens: int) -> tuple[float, list[float]]:
    """Wall seconds and per-request latencies of all prompts with ``concurrency`` in flight."""
    from openai import AsyncOpenAI

    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []
    async with AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=900) as client:

        async def one(prompt: str) -> None:
            async with slots:
                t0 = time.perf_counter()
                got = await client.chat.completions.create(
                    model=TARGET, max_tokens=max_tokens, messages=[{"role": "user", "content": prompt}]
                )
                latencies.append(time.perf_counter() - t0)
                if "bbwd" not in (got.model_extra or {}):
                    raise RuntimeError(f"no verdict in the answer to {prompt!r}")

        t0 = time.perf_counter()
        await asyncio.gather(*(one(p) for p in prompts))
    return time.perf_counter() - t0, latencies


def main() -> None:
    """Start the target and both servers, drive each level, print the table and ratios."""
    if len(sys.argv) > 1 and sys.argv[1] == "--reference-server":
        reference_server(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2, help="injected seconds per target request")
    ap.add_argument("--concurrency", type=int, default=64, help="API request slots of each server")
    ap.add_argument("--levels", default="1,8,32", help="requests in flight")
    ap.add_argument("--requests", default="4,16,32", help="requests per round at each level")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per level, the servers taking turns")
    ap.add_argument("--quick", action="store_true", help="smoke: K=3, 8 tokens, 50 ms, 1 and 2 in flight, 1 round")
    args = ap.parse_args()
    if args.quick:
        args.k, args.max_tokens, args.latency, args.levels, args.requests, args.rounds = 3, 8, 0.05, "1,2", "1,2", 1
    levels = [int(x) for x in args.levels.split(",")]
    counts = [int(x) for x in args.requests.split(",")]
    questions = [it.messages[-1]["content"] for it in dataset("nq", args.rounds * sum(counts) + 2).items]
    print("command: " + command())
    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load average at start "
        f"{os.getloadavg()[0]:.2f}; servers with OMP_NUM_THREADS=1"
    )
    print(
        f"K={args.k}, max_tokens={args.max_tokens}, target latency {args.latency * 1e3:.0f} ms/request (n ignored), "
        f"API slots {args.concurrency} per server, cache off"
    )
    logs = Path(tempfile.gettempdir())
    procs: list[subprocess.Popen] = []
    try:
        target = subprocess.Popen(
            [sys.executable, str(API_SERVER), str(args.latency)], stdout=subprocess.PIPE, text=True
        )
        procs.append(target)
        base_url = f"http://{HOST}:{int(target.stdout.readline())}/v1"
        ports = {"reference (each request on its own)": free_port(), "bbwd serve": free_port()}
        ref_port, serve_port = ports.values()
        start(
            [
                sys.executable,
                "-m",
                "bench.speed.serve",
                "--reference-server",
                "--port",
                str(ref_port),
                *settings_args(args, base_url),
            ],
            ref_port,
            logs / "bench_serve_reference.log",
            procs,
        )
        start(
            [
                sys.executable,
                "-m",
                "blackbox_wd",
                "serve",
                "--host",
                HOST,
                "--port",
                str(serve_port),
                "--all-scores",  # the teacher queue is what is measured: every request forced, short answers too
                *settings_args(args, base_url),
            ],
            serve_port,
            logs / "bench_serve_bbwd.log",
            procs,
        )
        for port in ports.values():  # warm-up, untimed
            asyncio.run(drive(f"http://{HOST}:{port}/v1", questions[:1], 1, args.max_tokens))
        rows, ratios = [], {}
        start_at = 2
        for level, n in zip(levels, counts, strict=True):
            rates: dict[str, list[float]] = {name: [] for name in ports}
            latencies: dict[str, list[float]] = {name: [] for name in ports}
            for r in range(args.rounds):  # the servers take turns, first one then the other, on the same prompts
                prompts = questions[start_at : start_at + n]
                start_at += n
                for name in list(ports) if r % 2 == 0 else list(ports)[::-1]:
                    url = f"http://{HOST}:{ports[name]}/v1"
                    seconds, lat = asyncio.run(drive(url, prompts, level, args.max_tokens))
                    rates[name].append(n / seconds)
                    latencies[name] += lat
            for name in ports:
                rows.append(
                    [
                        name,
                        level,
                        n * args.rounds,
                        " ".join(f"{x:.2f}" for x in rates[name]),
                        f"{np.median(rates[name]):.2f}",
                        f"{np.percentile(latencies[name], 50):.2f}",
                        f"{np.percentile(latencies[name], 95):.2f}",
                    ]
                )
            ref, fast = ports
            ratios[level] = [f / r for f, r in zip(rates[fast], rates[ref], strict=True)]
        print()
        print(
            table(
                ["server", "in flight", "requests", "requests/s per round", "median requests/s", "p50 s", "p95 s"], rows
            )
        )
        for level, values in ratios.items():
            print(
                f"concurrency {level}: bbwd serve / reference requests/s per round "
                f"{' '.join(f'{v:.2f}' for v in values)}, median {np.median(values):.2f}x"
            )
        print(f"load average at end {os.getloadavg()[0]:.2f}")
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
