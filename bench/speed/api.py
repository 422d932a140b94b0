"""API sampling throughput on a loopback server with injected latency, against sequential requests.

    python -m bench.speed.api [--latency 0.2] [--concurrency 16] [--prompts 32] [--k 10] [--quick]

The server (tests/api_support.py) answers every request after ``latency`` seconds with a real
recorded body and ignores ``n``, so every sample is one request. The reference is the same
requests one at a time, measured in the same run. The bound is ``concurrency / latency``
requests per second; the target is a fraction of at least 0.9 of it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time

from bench.common import API_SERVER
from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.records import SamplingParams


async def draw(sampler: APISampler, prompts: int, k: int) -> int:
    """Sample ``k`` responses for each prompt, all prompts in flight together; returns requests made."""
    params = SamplingParams(k=k, seed=0)
    sets = await asyncio.gather(
        *(sampler.asample([{"role": "user", "content": f"bench prompt {i}"}], params) for i in range(prompts))
    )
    return sum(s.usage.requests for s in sets)


def rate(base_url: str, concurrency: int, prompts: int, k: int) -> tuple[float, int]:
    """Requests per second (and request count) with no cache and a fan-out-only endpoint, after a warm-up."""
    sampler = APISampler(Endpoint("bench-model", base_url, "bench-key", None), concurrency=concurrency)
    sampler.honours_n = False

    async def run() -> tuple[float, int]:
        await draw(sampler, 1, min(k, concurrency))  # warm-up: client, connections, imports
        t0 = time.perf_counter()
        requests = await draw(sampler, prompts, k)
        return requests / (time.perf_counter() - t0), requests

    return asyncio.run(run())


def main() -> None:
    """Run both measurements and print one JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="smoke: 50 ms per request, concurrency 4, 2 prompts, K=4")
    args = ap.parse_args()
    if args.quick:
        args.latency, args.concurrency, args.prompts, args.k = 0.05, 4, 2, 4
    # the server runs in its own process so that it does not share this one's GIL
    server = subprocess.Popen([sys.executable, str(API_SERVER), str(args.latency)], stdout=subprocess.PIPE, text=True)
    try:
        base_url = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
        seq_rate, seq_n = rate(base_url, 1, 1, args.k)
        conc_rate, conc_n = rate(base_url, args.concurrency, args.prompts, args.k)
    finally:
        server.terminate()
        server.wait()
    bound = args.concurrency / args.latency
    out = {
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "requests": conc_n,
        "sequential_req_per_s": round(seq_rate, 2),
        "concurrent_req_per_s": round(conc_rate, 2),
        "speedup": round(conc_rate / seq_rate, 2),
        "bound_req_per_s": bound,
        "fraction_of_bound": round(conc_rate / bound, 3),
        "target_fraction": 0.9,
    }
    print(json.dumps(out))
    if out["fraction_of_bound"] < 0.9:
        print("below target", file=sys.stderr)


if __name__ == "__main__":
    main()
