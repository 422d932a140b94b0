"""Re-record the API replay fixtures in fixtures/ from real OpenAI-compatible servers on 127.0.0.1.

    python -m scripts.record_fixtures            # both servers
    python -m scripts.record_fixtures transformers
    python -m scripts.record_fixtures llamacpp   # needs: pip install xllamacpp
    python -m scripts.record_fixtures auto       # -k auto: a batch drawn in stages from llama.cpp
    python -m scripts.record_fixtures claims     # score --claims target: the target lists an answer's claims

``transformers serve`` runs the embedded model's HF folder (it ignores ``n`` and sends no
logprobs); llama.cpp (xllamacpp) runs the embedded GGUF, honours ``n`` and sends logprobs, and is
started with a dummy API key so that a real 401 is recorded too. Every exchange is scrubbed of the
key before it is written. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from bench.common import LlamaCppServer
from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.clients.replay import RECORDING_KEY, Cassette, RecordingTransport
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams
from scripts.servers import TransformersServer, sampling_folder

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["What is the capital of France?", "Who wrote the novel Moby-Dick?"]
PARAMS = SamplingParams(k=4, temperature=0.7, top_p=1.0, max_tokens=24, seed=0)


def record(
    path: Path, server: str, model: str, base_url: str, key: str, honours_n: bool | None, extra: dict | None = None
) -> Cassette:
    """Sample every prompt once through a recording transport, one prompt at a time."""
    cassette = Cassette(
        meta={
            "server": server,
            "model": model,
            "prompts": PROMPTS,
            "params": asdict(PARAMS),
            "concurrency": 4,
            **(extra or {}),
        }
    )
    path.unlink(missing_ok=True)
    endpoint = Endpoint(model, base_url, key, None, honours_n=None)
    sampler = APISampler(endpoint, concurrency=4, transport=lambda: RecordingTransport(path, cassette, (key,)))
    try:
        for prompt in PROMPTS:
            result = sampler.sample([{"role": "user", "content": prompt}], PARAMS)
            print(f"{server}: {prompt!r}: {len(result.samples)} samples, {result.usage.requests} requests")
        cassette.meta["honours_n"] = sampler.honours_n
        if honours_n is not None and sampler.honours_n != honours_n:
            print(f"warning: {server} honours_n={sampler.honours_n}, expected {honours_n}", file=sys.stderr)
    finally:
        sampler.close()
    cassette.save(path)
    return cassette


def record_unauthorized(path: Path, cassette: Cassette, model: str, base_url: str) -> None:
    """Append one real 401 (wrong key) exchange to a cassette."""
    wrong = RECORDING_KEY + "-wrong"
    sampler = APISampler(
        Endpoint(model, base_url, wrong, None),
        transport=lambda: RecordingTransport(path, cassette, (wrong, RECORDING_KEY)),
    )
    try:
        sampler.sample([{"role": "user", "content": "unauthorized"}], SamplingParams(k=1, max_tokens=4, seed=0))
        print("warning: expected a 401", file=sys.stderr)
    except BBWDError as exc:
        print(f"recorded 401: {exc}")
        cassette.meta["unauthorized_prompt"] = "unauthorized"
        cassette.save(path)
    finally:
        sampler.close()


AUTO_PROMPTS = [
    "What is 2 + 2? Answer with the number only.",
    "What is the capital of France? Answer in one word.",
    "Invent the name of a fictional planet.",
    "Write one sentence about anything you like.",
]
AUTO_ARGS = ["-k", "auto", "--temperature", "0.7", "--max-tokens", "16", "--seed", "0", "--no-cache", "--device", "cpu"]


def record_auto(path: Path) -> None:
    """``bbwd batch -k auto`` against llama.cpp (no key), every exchange recorded: the stages' requests."""
    import json
    import os
    import subprocess
    import tempfile

    from blackbox_wd.teachers.embedded import ensure_gguf

    # slots for every sample of the largest stage, so that each stage is one request with n (no fan-out race)
    with LlamaCppServer(ensure_gguf(), n_parallel=8) as srv, tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.jsonl", Path(tmp) / "out.jsonl"
        src.write_text("".join(json.dumps({"id": f"a{i}", "prompt": p}) + "\n" for i, p in enumerate(AUTO_PROMPTS)))
        path.unlink(missing_ok=True)
        env = {**os.environ, "BBWD_API_RECORD": str(path)}
        args = ["--target", srv.model, "--base-url", srv.base_url, *AUTO_ARGS]
        cmd = [sys.executable, "-m", "blackbox_wd", "batch", str(src), "-o", str(dst), *args]
        subprocess.run(cmd, check=True, env=env)
        rows = [json.loads(line) for line in dst.read_text().splitlines()]
        for row in rows:
            print(f"auto: {row['id']}: {row['n_samples']} samples, {row['usage']['requests']} requests")
        body = json.loads(path.read_text())
        drawn = {row["id"]: [row["n_samples"], row["usage"]["requests"]] for row in rows}
        body["meta"].update(prompts=AUTO_PROMPTS, model=srv.model, args=AUTO_ARGS, drawn=drawn)
        path.write_text(json.dumps(body, indent=1) + "\n")


CLAIMS_PROMPT = "Tell me a paragraph bio of Ada Lovelace."
CLAIMS_ANSWER = "Ada Lovelace was born in London in 1815. She wrote the first program, for Babbage's Analytical Engine."
CLAIMS_ARGS = ["-k", "3", "--temperature", "0.7", "--max-tokens", "48", "--seed", "0", "--no-cache", "--device", "cpu"]


def record_claims(path: Path) -> None:
    """``bbwd score --claims target`` against llama.cpp (no key), every exchange recorded: the K samples' request and
    the one that lists the answer's claims."""
    import json
    import os
    import subprocess

    from blackbox_wd.teachers.embedded import ensure_gguf

    with LlamaCppServer(ensure_gguf(), n_parallel=4) as srv:
        path.unlink(missing_ok=True)
        env = {**os.environ, "BBWD_API_RECORD": str(path)}
        args = ["--target", srv.model, "--base-url", srv.base_url, *CLAIMS_ARGS]
        cmd = [sys.executable, "-m", "blackbox_wd", "score", CLAIMS_PROMPT, *args, "--response", CLAIMS_ANSWER]
        cmd += ["--claims", "target", "--json"]
        out = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
        row = json.loads(out.stdout)
        print(f"claims: {[c['text'] for c in row['claims']]}, {row['usage']['requests']} requests")
        body = json.loads(path.read_text())
        body["meta"].update(
            prompt=CLAIMS_PROMPT, answer=CLAIMS_ANSWER, model=srv.model, args=CLAIMS_ARGS, claims=row["claims"]
        )
        path.write_text(json.dumps(body, indent=1) + "\n")


def main() -> None:
    """Start each server on 127.0.0.1, record its fixture, stop it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="*", default=["transformers", "llamacpp"])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures")
    args = ap.parse_args()
    from blackbox_wd.teachers.embedded import ensure_gguf
    from blackbox_wd.teachers.gguf import ensure_hf_folder

    if "transformers" in args.which:
        import transformers

        folder = sampling_folder(ensure_hf_folder())
        with TransformersServer(folder) as srv:
            record(
                args.out / "transformers_serve.json",
                f"transformers serve {transformers.__version__}",
                srv.model,
                srv.base_url,
                RECORDING_KEY,
                honours_n=False,
            )
    if "llamacpp" in args.which:
        import xllamacpp

        with LlamaCppServer(ensure_gguf(), api_key=RECORDING_KEY) as srv:
            path = args.out / "llamacpp.json"
            cassette = record(
                path,
                f"llama.cpp via xllamacpp {xllamacpp.__version__}",
                srv.model,
                srv.base_url,
                RECORDING_KEY,
                honours_n=True,
            )
            record_unauthorized(path, cassette, srv.model, srv.base_url)
    if "auto" in args.which:
        record_auto(args.out / "llamacpp_auto.json")
    if "claims" in args.which:
        record_claims(args.out / "llamacpp_claims.json")


if __name__ == "__main__":
    main()
