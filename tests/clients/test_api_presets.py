"""API target resolution: presets, base URLs, missing keys, and the white-box path staying local."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from blackbox_wd.clients import api_sampler_for, local_sampler_for, target_kind
from blackbox_wd.clients.api import APISampler, make_api_sampler
from blackbox_wd.clients.cache import sample_key
from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.clients.presets import LOCAL_DUMMY_KEY, resolve_endpoint
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import SamplingParams
from blackbox_wd.settings import Settings

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_target_kind(tmp_path):
    kind = lambda **kw: target_kind(Settings(**kw))  # noqa: E731
    assert kind(target="gpt-4o-mini") == kind(target="deepseek-chat") == "api"
    assert kind(target="anything", base_url="http://127.0.0.1:8000/v1") == "api"
    assert kind(target="org/name", base_url="http://127.0.0.1:8000/v1") == "api"
    assert kind() == kind(target="smollm2-135m") == kind(target="org/name", teacher="org/name") == "white-box"
    assert kind(target="gemma3-270m") == kind(target="llama-2-7b") == "local"
    (tmp_path / "m.gguf").write_bytes(b"")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "config.json").write_text("{}")
    assert kind(target=str(tmp_path / "m.gguf")) == kind(target=str(tmp_path / "folder")) == "local"
    for unknown in ("gpt-4o", "org/name", str(tmp_path / "missing.gguf"), str(tmp_path)):
        with pytest.raises(BBWDError, match=f"unknown target '{unknown}': API presets are gpt-4o-mini, deepseek-chat"):
            kind(target=unknown)


@pytest.mark.parametrize("target,var", [("gpt-4o-mini", "OPENAI_API_KEY"), ("deepseek-chat", "DEEPSEEK_API_KEY")])
def test_missing_key_names_the_variable(monkeypatch, target, var):
    monkeypatch.delenv(var, raising=False)
    with pytest.raises(BBWDError) as err:
        make_api_sampler(Settings(target=target, cache=False))
    assert var in str(err.value) and "\n" not in str(err.value)


def test_presets_resolve(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-000000000")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-test-00000000")
    oa = make_api_sampler(Settings(target="gpt-4o-mini", cache_dir=str(tmp_path), concurrency=5))
    assert isinstance(oa, APISampler) and oa.endpoint.base_url == "https://api.openai.com/v1"
    assert oa.concurrency == 5 and oa.cache is not None and "sk-openai" not in repr(oa)
    ds = make_api_sampler(Settings(target="deepseek-chat", cache=False))
    assert ds.endpoint.base_url == "https://api.deepseek.com" and ds.cache is None
    assert ds.honours_n is False  # DeepSeek ignores n: fan out from the start
    body = ds._body([{"role": "user", "content": "x"}], SamplingParams(k=3, seed=5), 1, 2)
    assert "seed" not in body and "n" not in body and body["model"] == "deepseek-chat"
    oa.close()
    ds.close()


def test_base_url_targets(monkeypatch):
    local = resolve_endpoint("my-model", "http://127.0.0.1:8000/v1/", None)
    assert local.api_key == LOCAL_DUMMY_KEY and local.base_url == "http://127.0.0.1:8000/v1"
    assert local.honours_n is None and local.host == "127.0.0.1:8000/v1"
    with pytest.raises(BBWDError, match="--api-key-env"):
        resolve_endpoint("my-model", "https://example.invalid/v1", None)
    monkeypatch.delenv("MY_KEY", raising=False)
    with pytest.raises(BBWDError, match="MY_KEY is not set"):
        resolve_endpoint("my-model", "http://127.0.0.1:8000/v1", "MY_KEY")
    monkeypatch.setenv("MY_KEY", "secret-value-123")
    assert resolve_endpoint("my-model", "https://example.invalid/v1", "MY_KEY").api_key == "secret-value-123"
    with pytest.raises(BBWDError, match="not an API preset"):
        resolve_endpoint("other-model", None, None)


def test_cache_key_covers_the_request_and_never_the_key():
    msgs = [{"role": "user", "content": "q"}]
    p = SamplingParams(k=4, temperature=0.5, top_p=1.0, max_tokens=16, seed=0)
    base = sample_key("h:1/v1", "m", msgs, p, 0)
    assert (
        len(
            {
                base,
                sample_key("h:2/v1", "m", msgs, p, 0),
                sample_key("h:1/v1", "n", msgs, p, 0),
                sample_key("h:1/v1", "m", msgs, SamplingParams(4, 0.6, 1.0, 16, 0), 0),
                sample_key("h:1/v1", "m", msgs, SamplingParams(4, 0.5, 0.9, 16, 0), 0),
                sample_key("h:1/v1", "m", msgs, SamplingParams(4, 0.5, 1.0, 17, 0), 0),
                sample_key("h:1/v1", "m", msgs, SamplingParams(4, 0.5, 1.0, 16, 1), 0),
                sample_key("h:1/v1", "m", msgs, p, 1),
            }
        )
        == 8
    )
    assert sample_key("h:1/v1", "m", msgs, SamplingParams(9, 0.5, 1.0, 16, 0), 0) == base  # K is not the sample


def test_white_box_stays_local():
    """The embedded model on CPU is drawn by llama.cpp, on GPU by transformers; neither through an API."""
    from types import SimpleNamespace

    import torch

    from blackbox_wd.clients.llamacpp import LlamaCppSampler

    teacher = SimpleNamespace(device=torch.device("cpu"))
    for settings in (Settings(), Settings(target="smollm2-135m", teacher="smollm2-135m")):
        assert api_sampler_for(settings) is None
        sampler = local_sampler_for(settings, teacher)
        assert isinstance(sampler, LlamaCppSampler) and sampler.teacher is teacher
    gpu = SimpleNamespace(device=torch.device("cuda"))
    sampler = local_sampler_for(Settings(), gpu)
    assert isinstance(sampler, LocalSampler) and sampler.teacher is gpu


def _bbwd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "blackbox_wd", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.slow
def test_cli_missing_key_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run(
        [sys.executable, "-m", "blackbox_wd", "score", "q", "--target", "gpt-4o-mini", "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "OPENAI_API_KEY" in proc.stderr


@pytest.mark.slow
def test_cli_score_replays_recorded_server(tmp_path):
    meta = json.loads((FIXTURES / "transformers_serve.json").read_text())["meta"]
    p = meta["params"]
    proc = _bbwd(
        "score",
        meta["prompts"][0],
        "--target",
        meta["model"],
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--teacher",
        "smollm2-135m",
        "-k",
        str(p["k"]),
        "--temperature",
        str(p["temperature"]),
        "--max-tokens",
        str(p["max_tokens"]),
        "--seed",
        str(p["seed"]),
        "--device",
        "cpu",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
        env={"BBWD_API_REPLAY": str(FIXTURES / "transformers_serve.json")},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert len(out["responses"]) == p["k"] and out["usage"]["requests"] == p["k"]
    assert not out["settings"]["white_box"] and out["eigen_wd"] >= 1


def test_api_options_are_read_once_and_build_the_sampler_elsewhere(monkeypatch, tmp_path):
    """What a Ray actor gets: the key (a value, never printed), timeout, retries and cache folder read on the driver;
    a sampler built from them reads nothing from its own environment."""
    import pickle

    from blackbox_wd.clients.api import api_options

    monkeypatch.setenv("OPTIONS_TEST_KEY", "sk-options-key-0123456789")
    monkeypatch.setenv("BBWD_API_TIMEOUT", "12")
    monkeypatch.setenv("BBWD_API_ATTEMPTS", "3")
    monkeypatch.setenv("BBWD_CACHE_DIR", str(tmp_path / "root"))
    settings = Settings(target="served", base_url="https://example.test/v1", api_key_env="OPTIONS_TEST_KEY")
    options = pickle.loads(pickle.dumps(api_options(settings)))  # as it travels to an actor
    assert "sk-options-key" not in repr(options)
    for name in ("OPTIONS_TEST_KEY", "BBWD_API_TIMEOUT", "BBWD_API_ATTEMPTS", "BBWD_CACHE_DIR"):
        monkeypatch.delenv(name)
    sampler = api_sampler_for(settings, options)
    assert isinstance(sampler, APISampler) and sampler.endpoint.api_key == "sk-options-key-0123456789"
    assert (sampler.timeout, sampler.retry.attempts) == (12.0, 3)
    assert sampler.cache is not None and sampler.cache.directory == tmp_path / "root" / "api"
    with pytest.raises(BBWDError, match="OPTIONS_TEST_KEY is not set"):
        api_sampler_for(settings)  # without them: this process's environment, which has no key
