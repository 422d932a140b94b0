"""Replay of fixtures recorded from real OpenAI-compatible servers (see scripts/record_fixtures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.clients.replay import RECORDING_KEY, Cassette, ReplayMiss, ReplayTransport
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
RECORDED = ["transformers_serve.json", "llamacpp.json"]


def replayer(name: str, **kw) -> tuple[APISampler, Cassette, ReplayTransport]:
    """A sampler that replays a fixture (base URL host is irrelevant: nothing is contacted)."""
    cassette = Cassette.load(FIXTURES / name)
    transport = ReplayTransport(cassette, name)
    endpoint = Endpoint(cassette.meta["model"], "http://127.0.0.1:9/v1", "replay-key", None)
    return (
        APISampler(endpoint, concurrency=cassette.meta["concurrency"], transport=lambda: transport, **kw),
        cassette,
        transport,
    )


def recorded_texts(cassette: Cassette) -> set[str]:
    """Every choice text in the fixture."""
    return {
        c["message"]["content"]
        for ex in cassette.exchanges
        if ex["response"]["status"] == 200
        for c in ex["response"]["body"]["choices"]
    }


def test_provider_ignoring_n_fans_out_single_requests():
    sampler, cassette, transport = replayer("transformers_serve.json")
    params = SamplingParams(**cassette.meta["params"])
    first = sampler.sample([{"role": "user", "content": cassette.meta["prompts"][0]}], params)
    assert len(first.samples) == params.k and first.usage.requests == params.k
    assert sampler.honours_n is False and all(s.token_logprobs is None for s in first.samples)
    second = sampler.sample([{"role": "user", "content": cassette.meta["prompts"][1]}], params)
    assert len(second.samples) == params.k and second.usage.requests == params.k
    assert {s.text for s in first.samples + second.samples} <= recorded_texts(cassette)
    assert transport.served == len(cassette.exchanges)
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0
    sampler.close()


def test_provider_honouring_n_keeps_per_choice_logprobs():
    sampler, cassette, transport = replayer("llamacpp.json")
    params = SamplingParams(**cassette.meta["params"])
    for prompt in cassette.meta["prompts"]:
        out = sampler.sample([{"role": "user", "content": prompt}], params)
        assert len(out.samples) == params.k and out.usage.requests == 1
        assert len({s.text for s in out.samples}) > 1
        for s in out.samples:
            assert s.token_logprobs and all(lp <= 0 for lp in s.token_logprobs)
        assert out.usage.completion_tokens == sum(len(s.token_logprobs) for s in out.samples)
    assert sampler.honours_n is True
    sampler.close()


def test_recorded_401_fails_at_once_with_server_message():
    sampler, cassette, transport = replayer("llamacpp.json")
    with pytest.raises(BBWDError, match="HTTP 401: Invalid API Key"):
        sampler.sample(
            [{"role": "user", "content": cassette.meta["unauthorized_prompt"]}],
            SamplingParams(k=1, max_tokens=4, seed=0),
        )
    assert transport.served == 1
    sampler.close()


def test_replay_miss_fails_loudly_without_retry():
    sampler, cassette, transport = replayer("transformers_serve.json")
    params = SamplingParams(**{**cassette.meta["params"], "temperature": 0.123})
    with pytest.raises(ReplayMiss, match="replay miss in transformers_serve.json"):
        sampler.sample([{"role": "user", "content": cassette.meta["prompts"][0]}], params)
    assert transport.served == 0
    sampler.close()


@pytest.mark.parametrize("name", RECORDED)
def test_fixtures_are_real_and_scrubbed(name):
    text = (FIXTURES / name).read_text()
    data = json.loads(text)
    assert data["meta"]["server"].split()[0] in ("transformers", "llama.cpp")
    assert RECORDING_KEY not in text and "Bearer" not in text and "authorization" not in text.lower()
    assert all(
        set(ex["response"]["headers"]) <= {"content-type", "retry-after", "retry-after-ms"} for ex in data["exchanges"]
    )


def test_every_fixture_file_is_free_of_keys():
    for path in FIXTURES.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert RECORDING_KEY.encode() not in data and b"Bearer " not in data, path


def test_env_record_then_replay_without_network(tmp_path, monkeypatch):
    from api_support import FaultServer

    from blackbox_wd.clients.api import make_api_sampler
    from blackbox_wd.settings import Settings

    key = "sk-env-record-test-key-2718281828"
    fixture = tmp_path / "recorded.json"
    monkeypatch.setenv("REC_KEY", key)
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    with FaultServer(script=["500"], api_key=key) as server:
        settings = Settings(target="served-model", base_url=server.base_url, api_key_env="REC_KEY", k=3, cache=False)
        monkeypatch.setenv("BBWD_API_RECORD", str(fixture))
        monkeypatch.setenv("BBWD_API_BACKOFF_CAP", "0.05")
        sampler = make_api_sampler(settings)
        recorded = sampler.sample(messages, settings.sampling())
        sampler.close()
        url = server.base_url
    assert recorded.usage.retries == 1 and key.encode() not in fixture.read_bytes()
    monkeypatch.delenv("BBWD_API_RECORD")
    monkeypatch.delenv("REC_KEY")  # replay needs no key and no server
    monkeypatch.setenv("BBWD_API_REPLAY", str(fixture))
    replayed = make_api_sampler(Settings(target="served-model", base_url=url, api_key_env="REC_KEY", k=3, cache=False))
    again = replayed.sample(messages, settings.sampling())
    assert [s.text for s in again.samples] == [s.text for s in recorded.samples]
    assert again.usage.retries == 1  # the recorded 500 is replayed too
    replayed.close()
