"""``bbwd score --claims target``: the target lists the judged answer's claims (one request, through the run's
sampler), each then scored; replayed from a recorded llama.cpp exchange, and live against a real llama.cpp server
on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import LlamaCppServer
from blackbox_wd.decompose import PROMPT, decompose_messages, parse_claims
from blackbox_wd.teachers.embedded import ensure_gguf

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "llamacpp_claims.json"


def score(base_url: str, meta: dict, env: dict[str, str]) -> dict:
    """``bbwd score --claims target --json`` of the fixture's prompt and answer: its JSON row."""
    cmd = [sys.executable, "-m", "blackbox_wd", "score", meta["prompt"], "--target", meta["model"]]
    cmd += ["--base-url", base_url, *meta["args"], "--response", meta["answer"], "--claims", "target", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_replayed_claims_are_the_targets_reply_each_scored_and_judged() -> None:
    fixture = json.loads(FIXTURE.read_text())
    meta, asked = fixture["meta"], fixture["exchanges"][0]
    # the first request is the decomposition: the documented prompt, at temperature 0, its reply parsed as written
    assert asked["request"]["body"]["messages"] == decompose_messages(meta["answer"])
    assert asked["request"]["body"]["temperature"] == 0.0
    reply = asked["response"]["body"]["choices"][0]["message"]["content"]
    row = score("http://127.0.0.1:9/v1", meta, {**os.environ, "BBWD_API_REPLAY": str(FIXTURE)})
    assert [c["text"] for c in row["claims"]] == list(parse_claims(reply)) == [c["text"] for c in meta["claims"]]
    assert row["claims"] == meta["claims"]  # the same scores, p and flags as when it was recorded
    assert all(c["score"] is not None and c["p_hallucination"] is not None for c in row["claims"])
    assert row["usage"]["requests"] == len(fixture["exchanges"]) == 2  # the K samples' request and the claims'


@pytest.mark.slow
def test_claims_from_a_real_llamacpp_server_on_loopback(tmp_path) -> None:
    meta = json.loads(FIXTURE.read_text())["meta"]
    with LlamaCppServer(ensure_gguf(), n_parallel=4, n_threads=1) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        env = {**os.environ, "BBWD_CACHE_DIR": str(tmp_path)}
        row = score(server.base_url, {**meta, "model": server.model}, env)
    assert row["claims"] and all(c["text"] for c in row["claims"])
    assert all(c["score"] is not None for c in row["claims"])
    assert row["usage"]["requests"] == 2


def test_the_prompt_is_the_documented_one() -> None:
    docs = (Path(__file__).resolve().parents[1] / "docs" / "claims.md").read_text(encoding="utf-8")
    assert PROMPT.format(answer="ANSWER") in docs
