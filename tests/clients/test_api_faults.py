"""Fault injection against a loopback server: retries, Retry-After, fatal 4xx, empty content, refused
optional fields, the retry budget, SamplingError, cache, concurrency."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from api_support import FaultServer

from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.cache import CachedSample, SampleCache, sample_key
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.clients.retry import RetryPolicy
from blackbox_wd.errors import BBWDError, SamplingError
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


TINY = RetryPolicy(attempts=4, initial=0.01, cap=0.02, jitter=0.0)


def cached_texts(sampler: APISampler, params: SamplingParams = PARAMS) -> dict[int, str]:
    """Sample index -> cached text, for the indices the cache holds."""
    keys = [sample_key(sampler.endpoint.host, sampler.endpoint.model, MESSAGES, params, i) for i in range(params.k)]
    hits = {i: sampler.cache.get(key) for i, key in enumerate(keys)}
    return {i: hit.text for i, hit in hits.items() if hit is not None}


@pytest.mark.parametrize("action", ["nullcontent", "blankcontent", "spacecontent"])
def test_empty_content_is_retried_and_never_cached(tmp_path, action):
    with FaultServer(script=[action, action]) as server:
        sampler = sampler_for(server, tmp_path)
        out = sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert [bool(s.text.strip()) for s in out.samples] == [True]
        assert out.usage.requests == 3 == len(server.received) and out.usage.retries == 2
        assert list(cached_texts(sampler, SamplingParams(k=1, seed=0)).values()) == [out.samples[0].text]
        assert len(sampler.cache) == 1
        sampler.close()


def test_empty_choices_of_an_n_request_go_to_single_requests(tmp_path):
    with FaultServer(script=["nullcontent:1", "blankcontent"], honour_n=True) as server:
        sampler = sampler_for(server, tmp_path)
        out = sampler.sample(MESSAGES, PARAMS)
        assert len(out.samples) == 4 and all(s.text.strip() for s in out.samples)
        assert sampler.honours_n is True  # 4 choices came back, one of them empty
        assert [r["body"].get("n") for r in server.received] == [4, None, None]
        assert [r["body"]["seed"] for r in server.received[1:]] == [1, 1]  # sample 1 alone, retried once
        assert out.usage.requests == 3 and out.usage.retries == 1
        texts = cached_texts(sampler)
        assert sorted(texts) == [0, 1, 2, 3] and all(t.strip() for t in texts.values())
        sampler.close()


def test_an_empty_cached_sample_is_a_miss(tmp_path):
    params = SamplingParams(k=1, seed=0)
    with FaultServer() as server:
        sampler = sampler_for(server, tmp_path)
        sampler.cache.put(
            sample_key(sampler.endpoint.host, "served-model", MESSAGES, params, 0), CachedSample("  ", None, "stop", 3)
        )
        out = sampler.sample(MESSAGES, params)
        assert out.usage.cache_hits == 0 and out.usage.requests == 1 and out.samples[0].text.strip()
        assert cached_texts(sampler, params) == {0: out.samples[0].text}
        sampler.close()


def test_persistent_empty_content_names_the_sample_and_keeps_the_rest(tmp_path):
    only_two = lambda body: "blankcontent" if body.get("seed") == 2 else None  # noqa: E731
    with FaultServer(override=only_two) as server:
        sampler = sampler_for(server, tmp_path, retry=TINY)
        with pytest.raises(SamplingError) as err:
            sampler.sample(MESSAGES, PARAMS)
        e = err.value
        assert re.fullmatch(
            rf"sample 2: {re.escape(server.base_url)} \(served-model\) returned empty content 4 times", str(e)
        )
        assert e.transient is True
        assert e.usage.requests == 1 + 2 + 4 == len(server.received) and e.usage.retries == 3
        assert e.usage.completion_tokens > 0 and e.usage.prompt_tokens > 0
        texts = cached_texts(sampler)
        assert sorted(texts) == [0, 1, 3] and all(t.strip() for t in texts.values())
        sampler.close()


@pytest.mark.parametrize("script", [["408"], ["409"], ["408", "409"]])
def test_408_and_409_are_retried(script):
    with FaultServer(script=script) as server:
        sampler = sampler_for(server)
        out = sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert len(out.samples) == 1 and out.usage.retries == len(script)
        assert len(server.received) == len(script) + 1
        sampler.close()


def test_x_should_retry_false_stops_a_500():
    with FaultServer(script=["noretry500"]) as server:
        sampler = sampler_for(server)
        with pytest.raises(SamplingError, match="HTTP 500: injected server error") as err:
            sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert len(server.received) == 1 and err.value.transient is False and err.value.usage.retries == 0
        sampler.close()


def test_x_should_retry_true_retries_a_400():
    with FaultServer(script=["retry400"]) as server:
        sampler = sampler_for(server)
        out = sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert len(out.samples) == 1 and out.usage.retries == 1 and len(server.received) == 2
        sampler.close()


def test_http_date_retry_after_is_honoured():
    with FaultServer(script=["429date:1"]) as server:
        sampler = sampler_for(server, retry=TINY)
        out = sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        waited = server.received[1]["t"] - server.received[0]["t"]
        assert out.usage.retries == 1 and len(out.samples) == 1
        assert 0.9 <= waited < 3.0  # the date is 1 s ahead, rounded up to a whole second
        sampler.close()


def test_small_budget_stops_a_server_that_always_answers_429():
    with FaultServer(then="429") as server:
        sampler = sampler_for(server, retry=RetryPolicy(budget=0.5, initial=0.05, cap=0.1, jitter=0.0))
        t0 = time.monotonic()
        with pytest.raises(SamplingError, match=r"HTTP 429: rate limited \(\d+ attempts in [\d.]+ s\)") as err:
            sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert time.monotonic() - t0 < 2.0
        assert 4 <= len(server.received) <= 12 and err.value.usage.retries == len(server.received) - 1
        assert err.value.transient is True and "\n" not in str(err.value)
        sampler.close()


def test_retry_after_beyond_the_budget_stops_at_once():
    with FaultServer(script=["429:900"]) as server:
        sampler = sampler_for(server, retry=RetryPolicy(budget=300.0, initial=0.01, cap=0.02))
        t0 = time.monotonic()
        with pytest.raises(
            SamplingError,
            match=r"answered HTTP 429: rate limited \(retry after 900 s is beyond "
            r"the retry budget of 300 s, 300 s left\)",
        ) as err:
            sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert time.monotonic() - t0 < 2.0 and len(server.received) == 1
        assert err.value.transient is True and err.value.usage.retries == 0
        sampler.close()


@pytest.mark.parametrize("field", ["logprobs", "top_logprobs", "seed"])
def test_refused_optional_field_is_sent_again_without_it_and_remembered(field):
    dropped = {"seed"} if field == "seed" else {"logprobs", "top_logprobs"}
    with FaultServer(rejects=(field,)) as server:
        sampler = sampler_for(server)
        first = sampler.sample(MESSAGES, PARAMS)
        second = sampler.sample([{"role": "user", "content": "And of Italy?"}], PARAMS)
        assert len(first.samples) == len(second.samples) == 4 and all(s.text for s in first.samples)
        assert server.actions.count(f"reject:{field}") == 1 and server.actions[0] == f"reject:{field}"
        assert field in server.received[0]["body"]
        assert all(not dropped & set(r["body"]) for r in server.received[1:])  # the retry and every later request
        assert len(server.received) == 1 + 4 + 4 and first.usage.retries == 0
        if field != "seed":
            assert all("seed" in r["body"] for r in server.received)
        sampler.close()


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_non_transient_sampling_errors(status):
    with FaultServer(script=[str(status)]) as server:
        sampler = sampler_for(server)
        with pytest.raises(SamplingError, match=f"sample 0: .* answered HTTP {status}") as err:
            sampler.sample(MESSAGES, SamplingParams(k=1, seed=0))
        assert err.value.transient is False and err.value.usage.requests == 1 == len(server.received)
        sampler.close()


def test_exhausted_retries_are_a_transient_sampling_error_with_the_usage():
    with FaultServer(script=["ok"] + ["500"] * 10) as server:  # n=4 -> 1 choice; then the singles fail
        sampler = sampler_for(server, retry=RetryPolicy(attempts=3, initial=0.01, cap=0.02, jitter=0.0), concurrency=1)
        with pytest.raises(SamplingError, match=r"HTTP 500: injected server error \(3 attempts in") as err:
            sampler.sample(MESSAGES, PARAMS)
        assert err.value.transient is True and err.value.usage.completion_tokens > 0
        assert err.value.usage.requests == len(server.received) and err.value.usage.retries >= 2
        sampler.close()


def test_error_message_never_contains_the_key():
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}. Find yours at the dashboard."}}
    with FaultServer(api_key="sk-the-right-key-0000000", error_bodies={401: echo}) as server:
        sampler = sampler_for(server)
        with pytest.raises(SamplingError, match="HTTP 401: Incorrect API key provided") as err:
            sampler.sample(MESSAGES, PARAMS)
        assert KEY not in str(err.value) and "\n" not in str(err.value) and err.value.transient is False
        sampler.close()
