"""The OT bench runs from a fresh checkout and its optimised path stays exact."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def test_ot_bench_quick_runs_and_matches_emd2() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "ot.py"), "--quick"], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    rows = [line for line in out.splitlines() if re.match(r"\|\s*(mixed|equal)\s*\|", line)]
    assert len(rows) == 4  # mixed and equal, M = 16 and 64, K = 10
    deviation = float(re.search(r"max relative deviation of D .*: (\S+)", out).group(1))
    assert deviation <= 1e-9


def test_eval_table_reports_base_rate_aurocs_and_paired_verdicts(tmp_path: Path) -> None:
    import json

    run = tmp_path / "toy"
    run.mkdir()
    labels = [1] * 12 + [0] * 8
    rows = []
    for i, y in enumerate(labels):  # EigenWD and DSE separate the classes; AvgWD is reversed; LS is noise
        rows.append(
            {
                "id": str(i),
                "label": y,
                "label_em": 1 - y if i == 0 else y,
                "avg_wd": float(i),
                "eigen_wd": float(y * 100 + i),
                "dse": float(y * 100 + i),
                "ls": float(i % 3),
            }
        )
    rows.append({"id": "bad", "error": "scoring failed: boom"})
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [sys.executable, str(BENCH / "eval_table.py"), str(run), "--label", "label"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    cells = [c.strip() for c in out.splitlines()[2].strip("|").split("|")]
    assert cells[:5] == ["toy", "label", "20", "12/8", "0.600"]  # the error row is left out
    header = [c.strip() for c in out.splitlines()[0].strip("|").split("|")]
    got = dict(zip(header, cells, strict=True))
    assert got["EigenWD"] == "1.000" and got["DSE"] == "1.000*" and got["AvgWD"] == "0.000"
    assert got["LNE"] == "—"
    assert got["EigenWD - best baseline [95% CI]"] == "+0.000 [+0.000, +0.000]"
    assert got["AvgWD - best baseline [95% CI]"].startswith("-1.000 [-1.000, -1.000] **worse**")
    first = subprocess.run(
        [sys.executable, str(BENCH / "eval_table.py"), str(run), "--first", "10"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    assert "| toy (first 10) | label | 10 | 10/0 | 1.000 |" in first  # one class: no AUROC


def test_startup_bench_quick_times_help_against_bare_python() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "startup.py"), "--quick"], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    rows = {
        m.group(1): float(m.group(2)) for m in re.finditer(r"\|\s*(bbwd --help|python -c pass)\s*\|\s*([\d.]+)", out)
    }
    assert set(rows) == {"bbwd --help", "python -c pass"}
    # An interpreter alone is less than one that also imports the CLI; --help loads no model (< 20 s loaded).
    assert 0 < rows["python -c pass"] < rows["bbwd --help"] < 20, rows


def test_score_bench_quick_times_score_against_llamacpps_own_request() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "score.py"), "--quick"], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    rows = {
        m.group(1): (float(m.group(2)), int(m.group(3)))
        for m in re.finditer(
            r"\|\s*(llama.cpp n=10 request|bbwd score \(new process\))\s*\|\s*([\d.]+)\s*\|[^|]*\|[^|]*\|\s*(\d+)\s*\|",
            out,
        )
    }
    assert set(rows) == {"llama.cpp n=10 request", "bbwd score (new process)"}
    assert all(responses == 10 for _, responses in rows.values())
    (request, _), (score, _) = rows["llama.cpp n=10 request"], rows["bbwd score (new process)"]
    stages = {
        k: float(v)
        for k, v in re.findall(r"(\w+) ([\d.]+)", re.search(r"bbwd score stages \(median s\): (.*)", out).group(1))
    }
    # score's stages run inside its process: together less than its wall time; it samples with the same
    # llama.cpp request the reference times, and also starts a process and loads the models: slower, and
    # at most a few minutes even on a loaded CPU
    assert {"sample", "teacher"} <= set(stages) and sum(stages.values()) < score, (stages, score)
    assert 0 < request < score < 300, rows
    ratio = float(re.search(r"bbwd score / reference: ([\d.]+)x", out).group(1))
    assert ratio == pytest.approx(score / request, rel=0.1, abs=0.1)
    assert re.search(r"goal 3 x [\d.]+ \+ 2 = [\d.]+ s: (met|NOT met)", out)


def test_sentences_bench_quick_prints_the_ratio_and_keeps_answer_wd() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCH / "sentences.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    # The prompt with sentences runs the reference's solves (token costs kept) plus the sentence step, a few
    # percent of it (#23's goal is at most 1.20x on the full run): its median over 9 rounds lies near 1, far
    # inside [0.4, 4] on a loaded CPU; a sentence step that reloaded spaCy (~1 s) would put it past 4.
    ratio = float(re.search(r"prompt transport with sentences / before \(median of rounds\): (\S+)", out).group(1))
    assert 0.4 <= ratio <= 4, ratio
    step = float(re.search(r"\|\s*sentence step\s*\|\s*([\d.]+)\s*\|\s*[\d.]+%\s*\|", out).group(1))
    first = float(re.search(r"first call in the process \(import, pipeline\): (\d+) ms", out).group(1))
    assert 0 < step < first / 10, (step, first)  # the pipeline is loaded once per process, not per answer
    deviation = float(re.search(r"max relative deviation of AnswerWD .*: (\S+)", out).group(1))
    assert deviation <= 1e-9


def test_eigen_spectrum_on_equidistant_samples(tmp_path: Path) -> None:
    """Equidistant samples: cv 0, the top singular value's share by formula, EigenWD blind to scale
    with each prompt's median bandwidth and following it with the run's one bandwidth."""
    import json

    import numpy as np

    k, rng = 5, np.random.default_rng(0)
    exact, noisy = tmp_path / "exact", tmp_path / "noisy"
    for folder, noise in ((exact, 0.0), (noisy, 0.02)):
        folder.mkdir()
        rows = []
        for i in range(12):
            scale = 10.0 + 5 * i
            e = rng.normal(size=(k, k))
            d = scale * (1 + noise * (e + e.T)) * (1 - np.eye(k))
            rows.append({"id": str(i), "human_score": scale / 100, "D": d.tolist()})
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = subprocess.run(
        [sys.executable, str(BENCH / "eigen_spectrum.py"), str(exact), str(noisy), "--k", str(k)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    cells = {
        line.split("|")[1].strip(): [c.strip() for c in line.strip("|").split("|")] for line in out.splitlines()[2:]
    }
    share = (1 + 1e-3 + (k - 1) * np.exp(-0.5)) / (k * (1 + 1e-3))
    assert cells["exact"][3] == "0.000" and float(cells["exact"][4]) == round(share, 3)
    assert cells["noisy"][6] == "100.0 / 100.0"  # AvgWD follows the scale
    assert cells["noisy"][8].endswith("/ 100.0") and float(cells["noisy"][8].split("/")[0]) > 95  # so does
    # EigenWD with the run's one bandwidth (Spearman 1, Pearson near it)
    pearson = float(cells["noisy"][7].split("/")[0])
    assert abs(pearson) < 80  # with each prompt's own median bandwidth it does not


def test_fewshot_bench_quick_runs_both_paths_in_their_own_processes() -> None:
    """Few-shot SciQ through eval, the #13 path against the shared prefix: seconds, RSS and ratios printed."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "fewshot.py"), "--quick"], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    rows = {
        m.group(1): (float(m.group(2)), float(m.group(3)), int(m.group(4)))
        for m in re.finditer(
            r"\|\s*(previous|shared prefix)[^|]*\|\s*([\d.]+)\s*\|[^|]*\|\s*([\d.]+)\s*\|\s*(\d+)\s*\|", out
        )
    }
    assert set(rows) == {"previous", "shared prefix"}
    (previous_s, previous_rss, previous_steps), (shared_s, shared_rss, shared_steps) = (
        rows["previous"],
        rows["shared prefix"],
    )
    assert shared_steps <= previous_steps  # finished rows cost no decode steps
    # The shared path reads the exemplars once a group and never copies a prompt's cache per row, a subset of
    # the previous path's work (2.9x faster in the quick run at load 5, 10x on the full one): never slower,
    # and its peak RSS within #24's goal of 2048 MB and not above the previous path's.
    speed_up = float(re.search(r"median (\S+)x", out).group(1))
    assert speed_up == pytest.approx(previous_s / shared_s, rel=0.05, abs=0.02)
    assert 1.0 <= speed_up <= 50, rows
    assert 0 < shared_rss <= min(previous_rss, 2048), rows


def test_teacher_cpu_bench_quick_times_variants_against_padded() -> None:
    """The padded pass is its own reference; today's pass moves the states by at most 1e-5 of the largest value
    on every workload; int8 is timed."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "teacher_cpu.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 9 and cells[0] in ("synthetic", "sac3", "wikibio"):
            rows[cells[0], cells[1]] = cells
    assert {v for _, v in rows} == {"padded", "fp32", "int8"} and ("synthetic", "fp32") in rows
    for (_, variant), cells in rows.items():
        tokens, ms, per_s, speed_up = int(cells[2]), float(cells[3]), float(cells[4]), float(cells[5].rstrip("x"))
        rel, token_rel = float(cells[7]), float(cells[8])  # max |d| over the largest |value|; median per token
        assert tokens > 0 and per_s == pytest.approx(tokens / ms * 1e3, rel=0.02, abs=1), cells
        # one pass over the same tokens as the reference, timed in the same rounds: within 10x either way even
        # on a loaded CPU (the quick run has seen 0.5x-8.7x at load 6)
        assert 0.1 <= speed_up <= 10, cells
        if variant == "padded":
            assert cells[5] == "1.00x" and rel == 0.0
        if variant == "fp32":
            assert rel <= 1e-5 and token_rel <= 1e-5
        if variant == "int8":  # quantised for real (states move, ~0.4 of the largest value), not garbage
            assert 0.05 <= rel <= 1 and 0.05 <= token_rel <= 1, cells


@pytest.mark.slow
def test_verdict_cost_bench_quick_bounds_what_the_verdict_adds() -> None:
    """The verdict's members and heads after the teacher pass, against the scores before them, on real recorded
    rows: #32's goal is at most 0.20 on the full run; the quick run on a loaded CPU stays far inside 1 (a verdict
    that re-read its calibration or rebuilt ROUGE's pure-Python LCS per pair would pass it on passages)."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "verdict_cost.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    ratios = {m.group(1): float(m.group(2)) for m in re.finditer(r"\|\s*(\w+)\s*\|(?:[^|]*\|){4}\s*([\d.]+)\s*\|", out)}
    assert set(ratios) == {"sac3_nq_open", "wikibio_gpt3_dev"}, out
    assert all(0 < r < 1 for r in ratios.values()), ratios


def test_teacher_gpu_bench_counts_flops_by_hand() -> None:
    """MFU's numerator on a hand-sized model (hidden 2, MLP 3, one head, vocabulary 5): one prompt of 2 tokens and
    responses of 1 and 2 tokens, read once each (bbwd) or as prompt + response each (the plain reference)."""
    spec = importlib.util.spec_from_file_location("teacher_gpu", BENCH / "teacher_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    cfg = dict(hidden_size=2, intermediate_size=3, num_attention_heads=1, num_key_value_heads=1, vocab_size=5)
    pairs = [([1, 2], [3]), ([1, 2], [4, 5])]
    # 68 FLOPs a token for the weights (2 x (q, o 8 + k, v 8 + MLP 18)); keys seen, causal: 13 (floor), 16 (plain)
    assert bench.flops(pairs, cfg, layers=1, head=False, floor=True) == 68 * 5 + 4 * 2 * 13
    assert bench.flops(pairs, cfg, layers=1, head=True, floor=False) == 68 * 7 + 4 * 2 * 16 + 2 * 2 * 5 * 7
    spec_ = {"shared": 3, "records": [[5, [2, 4]], [4, [1, 1]]]}
    got = bench.workload(spec_, 2, vocab=50)
    assert [(len(p), len(r)) for p, r in got] == [(5, 2), (5, 4), (4, 1), (4, 1)]
    assert got[0][0][:3] == got[2][0][:3] and got[0][0] is not got[2][0]  # the set's shared head, then its own


def test_teacher_gpu_bench_quick_runs_on_cpu(tmp_path: Path) -> None:
    """The GPU bench's paths on a 4-layer model on CPU: both tables, every set, no GPU needed."""
    shapes = {
        "sac3": {"k": 10, "shared": 6, "records": [[12, [5 + i for i in range(10)]]] * 4},
        "wikibio": {"k": 20, "shared": 8, "records": [[14, [30 + i for i in range(20)]]] * 2},
    }
    (tmp_path / "shapes.json").write_text(json.dumps(shapes))
    cmd = [sys.executable, str(BENCH / "teacher_gpu.py"), "run", "--shapes", str(tmp_path / "shapes.json")]
    out = subprocess.run([*cmd, "--quick", "--device", "cpu"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("|") and "---" not in line]
    assert len(rows) == 2 + 2 + 2  # two headers, one row per set in each table
    assert re.search(r"\|\s+sac3 \|\s+4 \|\s+40 \|\s+2048 \|", out.stdout), out.stdout
    assert re.search(r"\|\s+wikibio \|\s+2 \|\s+20 \|\s+\d+ \|\s+[\d.]+ \|\s+[\d.]+ \|", out.stdout), out.stdout
    assert len(re.findall(r"\|\s+(teacher \(GPU\)|exact OT \(CPU\)) \|", out.stdout)) == 2
