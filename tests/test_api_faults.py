"""Fault injection against a loopback server: retries, Retry-After, fatal 4xx, cache, concurrency."""

from __future__ import annotations

import asyncio
import time

import pytest
from api_support import FaultServer

from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.cache import SampleCache
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.clients.retry import RetryPolicy
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams

KEY = "sk-fault-test-key-9d8c7b6a5e4f"
FAST = RetryPolicy(attempts=6, initial=0.05, cap=0.2, jitter=0.05)
MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
PARAMS = SamplingParams(k=4, temperature=0.7, max_tokens=24, seed=0)


def sampler_for(server: FaultServer, tmp_path=None, **kw) -> APISampler:
    """An API sampler pointed at the fault server (cache in tmp_path when given)."""
    endpoint = Endpoint("served-model", server.base_url, KEY, "FAULT_KEY")
    kw.setdefault("retry", FAST)
    kw.setdefault("timeout", 1.0)
    return APISampler(endpoint, cache=SampleCache(tmp_path / "cache") if tmp_path else None, **kw)


def test_all_faults_recover_with_k_samples_and_exact_retry_count(tmp_path):
    with FaultServer(script=["429:0.2", "500", "stall:3", "drop"], api_key=KEY) as server:
        sampler = sampler_for(server, tmp_path)
        out = sampler.sample(MESSAGES, PARAMS)
        assert len(out.samples) == PARAMS.k and all(s.text for s in out.samples)
        assert out.usage.retries == 4
        assert out.usage.requests == 4 + 4 == len(server.received)
        assert out.usage.cache_hits == 0 and out.usage.completion_tokens > 0 and out.usage.prompt_tokens > 0
        assert len(sampler.cache) == PARAMS.k  # one entry per sample, none duplicated
        assert sampler.honours_n is False  # the server answered n=4 with one choice
        seeds = sorted(r["body"].get("seed") for r in server.received if r["body"].get("n") is None)
        assert set(seeds) == {1, 2, 3}

        again = sampler.sample(MESSAGES, PARAMS)  # rerun: zero HTTP requests
        assert len(server.received) == 8 and again.usage.requests == 0
        assert again.usage.cache_hits == PARAMS.k and all(s.cached for s in again.samples)
        assert [s.text for s in again.samples] == [s.text for s in out.samples]
        assert again.usage.cached_completion_tokens == out.usage.completion_tokens
        assert len(sampler.cache) == PARAMS.k
        sampler.close()


def test_retry_after_is_honoured():
    with FaultServer(script=["429:1"]) as server:
        sampler = sampler_for(server, retry=RetryPolicy(attempts=3, initial=0.01, cap=0.05, jitter=0.0))
        t0 = time.monotonic()
        out = sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        waited = server.received[1]["t"] - server.received[0]["t"]
        assert out.usage.retries == 1 and len(out.samples) == 1
        assert 0.95 <= waited < 2.0 and time.monotonic() - t0 >= 0.95
        sampler.close()


def test_401_fails_at_once_with_server_message():
    with FaultServer(api_key="sk-the-right-key-0000000") as server:
        sampler = sampler_for(server)
        with pytest.raises(BBWDError, match="HTTP 401: Invalid API Key") as err:
            sampler.sample(MESSAGES, PARAMS)
        assert len(server.received) == 1 and "\n" not in str(err.value)
        assert KEY not in str(err.value)
        sampler.close()


@pytest.mark.parametrize("status", [400, 403, 404])
def test_other_client_errors_are_not_retried(status):
    with FaultServer(script=[str(status)]) as server:
        sampler = sampler_for(server)
        with pytest.raises(BBWDError, match=f"HTTP {status}"):
            sampler.sample(MESSAGES, SamplingParams(k=1))
        assert len(server.received) == 1
        sampler.close()


def test_retries_stop_at_the_cap():
    with FaultServer(script=["500"] * 10) as server:
        sampler = sampler_for(server, retry=RetryPolicy(attempts=3, initial=0.01, cap=0.02, jitter=0.0))
        with pytest.raises(BBWDError, match="HTTP 500: injected server error"):
            sampler.sample(MESSAGES, SamplingParams(k=1))
        assert len(server.received) == 3
        sampler.close()


def test_provider_honouring_n_gets_one_request():
    with FaultServer(honour_n=True) as server:
        sampler = sampler_for(server)
        out = sampler.sample(MESSAGES, PARAMS)
        assert len(out.samples) == PARAMS.k and len(server.received) == 1 and server.received[0]["body"]["n"] == 4
        assert sampler.honours_n is True
        sampler.close()


def test_concurrency_bound_is_shared_across_prompts():
    with FaultServer(latency=0.2) as server:
        sampler = sampler_for(server, concurrency=3)
        sampler.honours_n = False  # all single requests: 2 prompts x 4 samples = 8 requests

        async def both():
            prompts = [[{"role": "user", "content": f"prompt {i}"}] for i in range(2)]
            return await asyncio.gather(*(sampler.asample(p, PARAMS) for p in prompts))

        t0 = time.monotonic()
        results = asyncio.run(both())
        elapsed = time.monotonic() - t0
        assert [len(r.samples) for r in results] == [4, 4]
        assert server.max_in_flight == 3 and len(server.received) == 8
        assert elapsed >= 0.2 * 3 - 0.05  # ceil(8 / 3) waves of 200 ms


def test_api_key_never_reaches_cache_or_recording(tmp_path):
    from blackbox_wd.clients.replay import Cassette, RecordingTransport

    fixture = tmp_path / "rec.json"
    cassette = Cassette()
    with FaultServer(script=["429:0.1", "drop"], api_key=KEY) as server:
        sampler = sampler_for(server, tmp_path, transport=lambda: RecordingTransport(fixture, cassette, (KEY,)))
        sampler.sample(MESSAGES, PARAMS)
        assert all(r["authorization"] == f"Bearer {KEY}" for r in server.received)  # it was sent...
        sampler.close()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert fixture in files and any(p.parent.name == "cache" for p in files)
    for path in files:  # ...and stored nowhere
        data = path.read_bytes()
        assert KEY.encode() not in data and b"Bearer" not in data, path


def test_n_rejected_with_400_falls_back_to_single_requests():
    capped = {"error": {"message": "Field 'n': Value must be between 1 <= value <= 2, but got 4"}}  # llama.cpp
    with FaultServer(script=["400"], error_bodies={400: capped}) as server:
        sampler = sampler_for(server)
        out = sampler.sample(MESSAGES, PARAMS)
        assert len(out.samples) == 4 and len(server.received) == 5 and sampler.honours_n is False
        assert out.usage.retries == 0
        sampler.close()


def test_partial_failure_keeps_the_samples_that_arrived(tmp_path):
    with FaultServer(script=["ok", "ok", "404"]) as server:  # n=4 -> 1 choice, then 3 singles, one fails
        sampler = sampler_for(server, tmp_path)
        with pytest.raises(BBWDError, match="HTTP 404"):
            sampler.sample(MESSAGES, PARAMS)
        assert len(sampler.cache) == 3
        out = sampler.sample(MESSAGES, PARAMS)  # only the missing sample is asked for
        assert out.usage.cache_hits == 3 and out.usage.requests == 1 and len(out.samples) == 4
        assert len(sampler.cache) == 4
        sampler.close()
