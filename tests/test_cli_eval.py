"""`bbwd eval` end to end on the tiny fixture dataset with the real embedded model."""

import json
import math
import subprocess
import sys

import pytest

METHODS = ("avg_wd", "eigen_wd", "lne", "ls", "es", "er", "dse")


@pytest.mark.slow
def test_eval_tiny_dataset_writes_report(tmp_path):
    out = tmp_path / "report"
    args = [sys.executable, "-m", "blackbox_wd", "eval", "--data", "fixtures/tiny_qa.jsonl", "-o", str(out),
            "-k", "3", "--max-tokens", "12", "--device", "cpu"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["tiny-1", "tiny-2", "tiny-3", "tiny-4", "tiny-5"]
    for r in rows:
        assert len(r["responses"]) == 3 and len(r["D"]) == 3
        assert all(math.isfinite(r[m]) for m in METHODS), r
        assert r["label"] in (0, 1) and r["lne_source"] == "teacher"
        assert 0 <= r["dse"] <= math.log(3) + 1e-12 and r["eigen_wd"] >= 1
    summary = (out / "summary.md").read_text()
    for name in ("AvgWD", "EigenWD", "LNE", "LS", "ES", "ER", "DSE", "base rate", "alpha: `0.001`"):
        assert name in summary, name
    assert (out / "roc.png").read_bytes()[:4] == b"\x89PNG" and (out / "heatmaps.png").read_bytes()[:4] == b"\x89PNG"
    # a rerun resumes: nothing is scored twice
    again = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0 and "[" not in again.stderr.split("wrote")[0]
    assert len((out / "results.jsonl").read_text().splitlines()) == 5
