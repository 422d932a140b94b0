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
from blackbox_wd.settings import Settings
from blackbox_wd.signals.decompose import PROMPT, decompose_messages, parse_claims
from blackbox_wd.teachers.embedded import ensure_gguf

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "llamacpp_claims.json"


def claims_settings(meta: dict) -> Settings:
    """The Settings of the fixture's run (its ``args``, replayed on a dead port), with ``claims`` "target"."""
    args = ["-k", "3", "--temperature", "0.7", "--max-tokens", "48", "--seed", "0", "--no-cache", "--device", "cpu"]
    assert meta["args"] == args
    return Settings(
        target=meta["model"],
        base_url="http://127.0.0.1:9/v1",
        k=3,
        temperature=0.7,
        max_tokens=48,
        seed=0,
        cache=False,
        device="cpu",
        claims="target",
    )


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
    # the same claims and flags as when it was recorded, by batch's engine (torch); score's teacher runs in numpy,
    # the same states to float32 rounding (``teachers.array_forcing``): its scores and p to 1e-6
    assert [c["flag"] for c in row["claims"]] == [c["flag"] for c in meta["claims"]]
    for got, want in zip(row["claims"], meta["claims"], strict=True):
        assert (got["score"], got["p_hallucination"]) == pytest.approx((want["score"], want["p_hallucination"]), 1e-6)
    assert all(c["score"] is not None and c["p_hallucination"] is not None for c in row["claims"])
    assert row["usage"]["requests"] == len(fixture["exchanges"]) == 2  # the K samples' request and the claims'


@pytest.mark.slow
def test_batch_lists_the_claims_of_each_answer_as_score_does(tmp_path) -> None:
    """``bbwd batch --claims target`` on a log of the fixture's prompt and answer: the same request, the same claims,
    scores, p and flags as ``bbwd score``'s; a record that brings its own claims keeps them (nothing asked)."""
    fixture = json.loads(FIXTURE.read_text())
    meta = fixture["meta"]
    log = tmp_path / "log.jsonl"
    records = [
        {"id": "listed", "prompt": meta["prompt"], "response": meta["answer"]},
        {"id": "given", "prompt": meta["prompt"], "response": meta["answer"], "claims": ["Ada was born in 1815."]},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "blackbox_wd", "batch", str(log), "-o", str(out), "--target", meta["model"]]
    cmd += ["--base-url", "http://127.0.0.1:9/v1", *meta["args"], "--claims", "target"]
    env = {**os.environ, "BBWD_API_REPLAY": str(FIXTURE)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    listed, given = [json.loads(line) for line in out.read_text().splitlines()]
    assert listed["error"] is None and listed["claims"] == meta["claims"]
    assert listed["usage"]["requests"] == 2  # the samples' request and the claims'
    assert [c["text"] for c in given["claims"]] == ["Ada was born in 1815."] and given["usage"]["requests"] == 1
    settings = proc.stderr.strip().splitlines()[-1]
    assert json.loads(settings.removeprefix("settings: "))["claims"] == "target"  # in the run's settings


def test_serve_lists_the_claims_of_the_answer_it_forwards(monkeypatch) -> None:
    """``bbwd serve --claims target`` (the service in this process, the fixture replayed): the forwarded answer's
    claims as the target lists them, each scored as ``bbwd score`` scores it."""
    import asyncio

    from blackbox_wd.doors.serve.service import Service

    fixture = json.loads(FIXTURE.read_text())
    meta = fixture["meta"]
    monkeypatch.setenv("BBWD_API_REPLAY", str(FIXTURE))
    settings = claims_settings(meta)

    async def serve_one() -> dict:
        service = Service.load(settings)
        await service.start()
        try:
            answer = asyncio.get_running_loop().create_future()
            answer.set_result(meta["answer"])
            return await service.bbwd_object([{"role": "user", "content": meta["prompt"]}], answer)
        finally:
            await service.stop()

    bbwd = asyncio.run(serve_one())
    assert bbwd["claims"] == meta["claims"]


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
    docs = (Path(__file__).resolve().parents[2] / "docs" / "claims.md").read_text(encoding="utf-8")
    assert PROMPT.format(answer="ANSWER") in docs


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["batch", "LOG", "-o", "OUT", "--claims", "target"],
            "error: --claims target needs --target: the model that lists the claims (a recorded log has none)",
        ),
        (["score", "Who?", "--claims", "target"], "error: --claims target lists the claims of the --response"),
        (
            ["score", "Who?", "--response", "Ada.", "--claims", "all"],
            "error: claims must be None or 'target' (got all)",
        ),
    ],
)
def test_claims_target_errors_are_one_line(tmp_path, capsys, args, message) -> None:
    from blackbox_wd.doors.cli import main

    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"prompt": "Who?", "responses": ["A", "B"], "response": "A"}) + "\n")
    args = [str(log) if a == "LOG" else str(tmp_path / "out.jsonl") if a == "OUT" else a for a in args]
    with pytest.raises(SystemExit) as info:
        main(args)
    err = capsys.readouterr().err
    assert info.value.code != 0 and err.startswith(message) and err.count("\n") == 1, err


def test_recorded_samples_cannot_list_claims_in_the_python_api() -> None:
    from blackbox_wd.errors import BBWDError
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings

    with pytest.raises(BBWDError, match="recorded samples have no target to ask"):
        Detector.from_settings(Settings(claims="target", device="cpu"), None, recorded=True)
