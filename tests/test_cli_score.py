"""`bbwd score` end to end on the real embedded SmolLM2 model, and its one-line errors."""

import json
import math
import subprocess
import sys

import pytest

BBWD = [sys.executable, "-m", "blackbox_wd"]


def run(*args, check=True):
    proc = subprocess.run([*BBWD, *args], capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
def test_score_json_real_model_reproducible():
    args = ["score", "--json", "-k", "4", "--max-tokens", "24", "--seed", "7", "--device", "cpu",
            "What is the capital of Australia?"]
    first = json.loads(run(*args).stdout)
    assert set(first) >= {"responses", "D", "avg_wd", "eigen_wd", "settings", "token_counts"}
    assert len(first["responses"]) == 4 and all(r.strip() for r in first["responses"])
    assert all(1 <= n <= 24 for n in first["token_counts"])
    d = first["D"]
    assert len(d) == 4 and all(len(row) == 4 for row in d)
    assert all(d[i][i] == 0 and d[i][j] == d[j][i] for i in range(4) for j in range(4))
    assert math.isfinite(first["avg_wd"]) and first["avg_wd"] >= 0
    assert math.isfinite(first["eigen_wd"]) and first["eigen_wd"] >= 1
    s = first["settings"]
    assert (s["layer"], s["n_layers"], s["k"], s["temperature"], s["alpha"], s["p"]) == (15, 30, 4, 0.5, 1e-3, 0.1)
    assert s["white_box"] and s["target"] == "smollm2-135m" and s["proj_dim"] == 128
    second = json.loads(run(*args).stdout)
    assert second["responses"] == first["responses"] and second["D"] == first["D"]
    assert second["eigen_wd"] == first["eigen_wd"]


@pytest.mark.slow
def test_score_table_output():
    out = run("score", "-k", "2", "--max-tokens", "8", "--device", "cpu", "Name a colour.").stdout
    assert "AvgWD" in out and "EigenWD" in out and "alpha=0.001" in out


@pytest.mark.parametrize("args,message", [
    (["score", ""], "error: prompt is empty"),
    (["score", "-k", "1", "hi"], "error: k must be at least 2 (got 1)"),
    (["score", "--teacher", "gpt-17", "hi"], "error: unknown teacher 'gpt-17'"),
    (["score", "--teacher", "/nonexistent/model.gguf", "hi"], "error: GGUF file not found: /nonexistent/model.gguf"),
    (["score", "--layer", "99", "--device", "cpu", "hi"], "error: layer 99 out of range: the teacher has layers 1..30"),
])
def test_bad_input_is_one_line(args, message):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
