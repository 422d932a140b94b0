"""The optional LLM label (``--judge``), through the API client against a real llama.cpp server on loopback."""

import json
import subprocess
import sys

import pytest

from bench.common import LlamaCppServer
from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.cache import SampleCache
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.doors.eval.labeller import LABEL_PARAMS, LABEL_PROMPT, LLMLabeller, parse_label


@pytest.mark.parametrize(
    "reply,label",
    [
        ("Yes.", 0),
        ("yes, it is", 0),
        ("**Yes**", 0),
        ("No", 1),
        ("no - the answer is Lyon", 1),
        ("Maybe", None),
        ("", None),
    ],
)
def test_parse_label(reply, label):
    assert parse_label(reply) == label


@pytest.mark.slow
def test_llm_label_is_the_servers_reply_and_cached(tmp_path):
    from blackbox_wd.teachers.embedded import ensure_gguf

    with LlamaCppServer(ensure_gguf(), n_parallel=2, n_threads=1) as server:
        sampler = APISampler(
            Endpoint(server.model, server.base_url, "sk-none", None), cache=SampleCache(tmp_path / "c")
        )
        labeller = LLMLabeller(sampler)
        label = labeller.label("What is the capital of France?", ["Paris"], "Paris")
        prompt = LABEL_PROMPT.format(question="What is the capital of France?", answers="Paris", response="Paris")
        again = sampler.sample([{"role": "user", "content": prompt}], LABEL_PARAMS)
        assert again.usage.requests == 0 and again.usage.cache_hits == 1  # the labeller's own call was cached
        assert label == parse_label(again.samples[0].text)
        sampler.close()

        out = tmp_path / "report"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "blackbox_wd",
                "eval",
                "--data",
                "fixtures/tiny_qa.jsonl",
                "--limit",
                "2",
                "-o",
                str(out),
                "-k",
                "2",
                "--max-tokens",
                "8",
                "--dse",
                "none",
                "--device",
                "cpu",
                "--judge",
                server.model,
                "--judge-base-url",
                server.base_url,
                "--cache-dir",
                str(tmp_path / "c2"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["label_judge"] in (0, 1, None) and "dse" not in r for r in rows)
    assert f'label_judge: `"{server.model}"`' in (out / "summary.md").read_text()
