"""Re-record the API replay fixtures in fixtures/ from real OpenAI-compatible servers on 127.0.0.1.

    python scripts/record_fixtures.py            # both servers
    python scripts/record_fixtures.py transformers
    python scripts/record_fixtures.py llamacpp   # needs: pip install xllamacpp

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

from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.clients.replay import RECORDING_KEY, Cassette, RecordingTransport
from blackbox_wd.clients.servers import LlamaCppServer, TransformersServer, sampling_folder
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["What is the capital of France?", "Who wrote the novel Moby-Dick?"]
PARAMS = SamplingParams(k=4, temperature=0.7, top_p=1.0, max_tokens=24, seed=0)


def record(path: Path, server: str, model: str, base_url: str, key: str, honours_n: bool | None,
           extra: dict | None = None) -> Cassette:
    """Sample every prompt once through a recording transport, one prompt at a time."""
    cassette = Cassette(meta={"server": server, "model": model, "prompts": PROMPTS, "params": asdict(PARAMS),
                              "concurrency": 4, **(extra or {})})
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
    sampler = APISampler(Endpoint(model, base_url, wrong, None),
                         transport=lambda: RecordingTransport(path, cassette, (wrong, RECORDING_KEY)))
    try:
        sampler.sample([{"role": "user", "content": "unauthorized"}], SamplingParams(k=1, max_tokens=4, seed=0))
        print("warning: expected a 401", file=sys.stderr)
    except BBWDError as exc:
        print(f"recorded 401: {exc}")
        cassette.meta["unauthorized_prompt"] = "unauthorized"
        cassette.save(path)
    finally:
        sampler.close()


def main() -> None:
    """Start each server on 127.0.0.1, record its fixture, stop it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="*", default=["transformers", "llamacpp"])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures")
    args = ap.parse_args()
    from blackbox_wd.teachers.embedded import ensure_gguf, ensure_hf_folder

    if "transformers" in args.which:
        import transformers

        folder = sampling_folder(ensure_hf_folder())
        with TransformersServer(folder) as srv:
            record(args.out / "transformers_serve.json", f"transformers serve {transformers.__version__}",
                   srv.model, srv.base_url, RECORDING_KEY, honours_n=False)
    if "llamacpp" in args.which:
        import xllamacpp

        with LlamaCppServer(ensure_gguf(), api_key=RECORDING_KEY) as srv:
            path = args.out / "llamacpp.json"
            cassette = record(path, f"llama.cpp via xllamacpp {xllamacpp.__version__}", srv.model,
                              srv.base_url, RECORDING_KEY, honours_n=True)
            record_unauthorized(path, cassette, srv.model, srv.base_url)


if __name__ == "__main__":
    main()
