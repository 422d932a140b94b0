"""Live: real OpenAI-compatible servers on 127.0.0.1 started inside the test session."""

from __future__ import annotations

import numpy as np
import pytest
from serve_support import bbwd_score

from bench.common import LlamaCppServer
from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.cache import SampleCache
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams
from scripts.servers import TransformersServer, sampling_folder

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def transformers_server(tmp_path_factory):
    """``transformers serve`` on the embedded model's HF folder (weights symlinked, sampling on)."""
    from blackbox_wd.teachers.gguf import ensure_hf_folder

    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with TransformersServer(sampling_folder(ensure_hf_folder()), log_path=log) as server:
        yield server


def _score(server, cache_dir) -> dict:
    return bbwd_score(
        "What is the capital of France?",
        "--target",
        server.model,
        "--base-url",
        server.base_url,
        "--teacher",
        "smollm2-135m",
        "-k",
        "3",
        "--max-tokens",
        "16",
        "--temperature",
        "0.8",
        "--device",
        "cpu",
        "--cache-dir",
        str(cache_dir),
        env={"BBWD_API_TIMEOUT": "120"},
        timeout=300,
    )


def test_bbwd_score_against_transformers_serve(transformers_server, tmp_path):
    first = _score(transformers_server, tmp_path / "cache")
    assert len(first["responses"]) == 3 and all(r.strip() for r in first["responses"])
    assert first["settings"]["target"] == transformers_server.model and not first["settings"]["white_box"]
    assert first["usage"]["requests"] == 3 and first["usage"]["cache_hits"] == 0  # n ignored: 1 + 2 fan-out
    assert first["usage"]["completion_tokens"] > 0 and first["eigen_wd"] >= 1
    assert len(first["D"]) == 3
    again = _score(transformers_server, tmp_path / "cache")  # rerun: zero HTTP requests
    assert again["usage"]["requests"] == 0 and again["usage"]["cache_hits"] == 3
    assert again["responses"] == first["responses"]  # the cache replays the samples to the token
    # the teacher reruns: float32 CPU kernels are not bitwise stable across processes
    assert np.allclose(again["D"], first["D"], rtol=1e-4, atol=1e-6)


def test_llamacpp_server_honours_n_and_logprobs(tmp_path):
    import xllamacpp  # noqa: F401  (in the test extra: a missing install fails here, loudly)

    from blackbox_wd.teachers.embedded import ensure_gguf

    key = "sk-live-llamacpp-key-31415926"
    with LlamaCppServer(ensure_gguf(), api_key=key, n_parallel=2, n_threads=1) as server:
        sampler = APISampler(Endpoint(server.model, server.base_url, key, "X"), cache=SampleCache(tmp_path))
        out = sampler.sample([{"role": "user", "content": "Name a colour."}], SamplingParams(k=2, max_tokens=6))
        assert len(out.samples) == 2 and out.usage.requests == 1 and sampler.honours_n
        assert all(s.token_logprobs for s in out.samples)
        sampler.close()
        # llama.cpp caps n at its slot count (2 here) with a 400 naming 'n': fall back to single requests
        sampler = APISampler(Endpoint(server.model, server.base_url, key, "X"), cache=SampleCache(tmp_path))
        out = sampler.sample([{"role": "user", "content": "Name a fruit."}], SamplingParams(k=3, max_tokens=6))
        assert len(out.samples) == 3 and out.usage.requests == 1 + 3 and sampler.honours_n is False
        assert all(s.token_logprobs for s in out.samples)
        wrong = APISampler(Endpoint(server.model, server.base_url, "sk-wrong-key-000000", "X"))
        with pytest.raises(BBWDError, match="401: Invalid API Key"):
            wrong.sample([{"role": "user", "content": "x"}], SamplingParams(k=1, max_tokens=2))
        sampler.close()
        wrong.close()
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or key.encode() not in path.read_bytes()


def test_llamacpp_server_listens_on_the_port_asked_for(tmp_path):
    """A pinned port gives a restarted server the same endpoint, so a run's fingerprint still matches."""
    import socket

    from blackbox_wd.teachers.embedded import ensure_gguf

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with LlamaCppServer(ensure_gguf(), n_parallel=1, n_threads=1, port=port) as server:
        assert server.base_url == f"http://127.0.0.1:{port}/v1"
        sampler = APISampler(Endpoint(server.model, server.base_url, "sk-unused", "X"), cache=SampleCache(tmp_path))
        out = sampler.sample([{"role": "user", "content": "Name a colour."}], SamplingParams(k=1, max_tokens=4))
        assert len(out.samples) == 1 and out.usage.requests == 1
        sampler.close()
