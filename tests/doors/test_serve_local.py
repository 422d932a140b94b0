"""`bbwd serve` with no --target: the embedded model answers and is scored white-box (the offline demo, no
key, no GPU), through the same pipeline as `bbwd score`; and the command's one-line errors."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from serve_support import REPO, BbwdServe, bbwd_score

MODEL = "smollm2-135m"
PROMPT = "What is the capital of Australia?"


def score_on_cpu(*args: str) -> dict:
    """`bbwd score --json --device cpu ARGS` in a new process (one thread), its result."""
    return bbwd_score("--device", "cpu", *args, env={"OMP_NUM_THREADS": "1"})


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`bbwd serve -k 2 --max-tokens 8` white-box, no token (loopback)."""
    tmp = tmp_path_factory.mktemp("serve_local")
    with BbwdServe(["-k", "2", "--max-tokens", "8", "--seed", "5"], tmp / "serve.log", token=None) as server:
        yield server


@pytest.mark.slow
def test_white_box_answer_and_verdict_are_bbwd_scores(served):
    got = served.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}])
    assert got.model == MODEL and got.object == "chat.completion"
    assert got.choices[0].message.content.strip() and got.choices[0].finish_reason in ("stop", "length")
    assert 1 <= got.usage.completion_tokens <= 8 and got.usage.prompt_tokens > 5
    bbwd = got.model_extra["bbwd"]
    # `bbwd score` with the same settings: white-box samples are seeded per (seed, messages, index)
    result = score_on_cpu("-k", "2", "--max-tokens", "8", "--seed", "5", PROMPT)
    assert bbwd["fingerprint"] == result["settings"]["fingerprint"] and bbwd["k"] == 2
    assert bbwd["avg_wd"] == pytest.approx(result["avg_wd"], rel=1e-5)
    assert bbwd["eigen_wd"] == pytest.approx(result["eigen_wd"], rel=1e-5)
    # with the request's sampling fields left out, the answer is drawn as scoring sample 0 is
    assert got.choices[0].message.content == result["responses"][0]


@pytest.mark.slow
def test_k_auto_served_request_stops_where_bbwd_score_stops(tmp_path):
    """`bbwd serve -k auto` on the embedded model (the shipped white-box calibration with stages): a served
    request draws in stages and stops early, at the stage and with the verdict of `bbwd score -k auto` on the same
    prompt and forwarded answer."""
    tour = "Who won the 1987 Tour de France?"  # its verdict settles at 3 samples (p 0.556 under the band's 0.565)
    with BbwdServe(["-k", "auto", "--max-tokens", "8", "--seed", "5"], tmp_path / "serve.log", token=None) as server:
        got = server.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": tour}])
    bbwd, answer = got.model_extra["bbwd"], got.choices[0].message.content
    result = score_on_cpu("-k", "auto", "--max-tokens", "8", "--seed", "5", "--response", answer, tour)
    assert bbwd["fingerprint"] == result["settings"]["fingerprint"]
    assert [(s["k"], s["settled"]) for s in bbwd["stages"]] == [(s["k"], s["settled"]) for s in result["stages"]]
    assert bbwd["k"] == result["n_samples"] == bbwd["stages"][-1]["k"] == 3  # 3 of --k-max 10 drawn
    assert bbwd["avg_wd"] == pytest.approx(result["avg_wd"], rel=1e-5)
    assert bbwd["p_hallucination"] == pytest.approx(result["p_hallucination"], rel=1e-4)
    assert bbwd["flag"] == result["flag"] and bbwd["target_tokens"] == result["target_tokens"]


@pytest.mark.slow
def test_white_box_stream_and_concurrent_async_requests(served):
    stream = served.client().chat.completions.create(
        model=MODEL, stream=True, n=2, temperature=0, messages=[{"role": "user", "content": PROMPT}]
    )
    *answer, last = list(stream)
    assert sorted({c.choices[0].index for c in answer}) == [0, 1]
    texts = ["".join(c.choices[0].delta.content or "" for c in answer if c.choices[0].index == i) for i in (0, 1)]
    assert texts[0].strip() and texts[0] == texts[1]  # temperature 0 is greedy
    assert last.choices == [] and last.model_extra["bbwd"]["k"] == 2

    async def four():
        async with served.async_client() as client:
            return await asyncio.gather(
                *(
                    client.chat.completions.create(
                        model=MODEL, max_tokens=4, messages=[{"role": "user", "content": f"Count to {i}."}]
                    )
                    for i in range(4)
                )
            )

    for got in asyncio.run(four()):
        assert got.choices[0].message.content and got.model_extra["bbwd"]["k"] == 2


def serve_error(*args: str, env: dict | None = None) -> str:
    """stderr of a `bbwd serve` that must fail at once with exit code 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "blackbox_wd", "serve", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    return lines[0]


def test_calibration_option_fails_in_one_line_before_loading(tmp_path):
    missing = tmp_path / "c.json"
    assert serve_error("--calibration", str(missing)) == f"error: calibration file not found: {missing}"


def test_non_loopback_bind_needs_a_server_token():
    assert serve_error("--host", "0.0.0.0").startswith("error: binding 0.0.0.0 (not loopback) needs a server token")
    assert serve_error("--server-key-env", "BBWD_UNSET_TOKEN_VAR").startswith("error: BBWD_UNSET_TOKEN_VAR is not set")


def test_missing_extra_is_one_line(monkeypatch, capsys):
    from blackbox_wd.doors.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if the serve extra were not installed
    for name in [m for m in sys.modules if m.startswith("blackbox_wd.doors.serve")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SystemExit) as done:
        main(["serve"])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: bbwd serve needs the 'serve' extra (uvicorn is missing): pip install 'blackbox-wd[serve]'"
