"""`bbwd eval` end to end on the tiny fixture dataset with the real embedded model."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import save_tiny_nli

from blackbox_wd.doors.cli import main

METHODS = ("avg_wd", "eigen_wd", "lne", "ls", "es", "er", "dse")
FIXTURE = str(Path(__file__).resolve().parents[2] / "fixtures" / "tiny_qa.jsonl")


@pytest.mark.slow
def test_eval_tiny_dataset_writes_report(tmp_path):
    out = tmp_path / "report"
    args = [
        sys.executable,
        "-m",
        "blackbox_wd",
        "eval",
        "--data",
        "fixtures/tiny_qa.jsonl",
        "-o",
        str(out),
        "-k",
        "3",
        "--max-tokens",
        "12",
        "--device",
        "cpu",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["tiny-1", "tiny-2", "tiny-3", "tiny-4", "tiny-5"]  # exemplars not scored
    for r in rows:
        assert len(r["responses"]) == 3 and len(r["D"]) == 3 and len(r["finish_reasons"]) == 3
        assert all(math.isfinite(r[m]) for m in METHODS), r
        assert r["lne_source"] == "target" and r["label_from"] == "greedy" and isinstance(r["answer"], str)
        assert r["label"] in (0, 1) and r["label_first"] in (0, 1)
        assert set(r["timings"]) == {"sample", "teacher", "teacher_tokens", "transport", "baselines", "dse"}
        assert 0 <= r["dse"] <= math.log(3) + 1e-12 and r["eigen_wd"] >= 1
    math_row = rows[3]
    assert (math_row["kind"], math_row["protocol"], math_row["dse_judge"]) == ("math", "zero-shot", "final-answer")
    assert "label_em" not in math_row
    for r in rows[:3] + rows[4:]:
        assert r["protocol"] == "few-shot" and r["dse_judge"] == "answer"
        assert r["label_em"] in (0, 1) and r["label_em_first"] in (0, 1)
    summary = (out / "summary.md").read_text()
    for text in (
        "AvgWD",
        "EigenWD",
        "LNE",
        "LS",
        "ES",
        "ER",
        "DSE",
        "base rate",
        "alpha: `0.001`",
        "- prompt protocol: few-shot (4), zero-shot (1)",
        "a separate greedy answer (temperature 0)",
        "- DSE judge: answer (4), final-answer (1)",
        "DSE share of a prompt's time",
        "- MATH (1 prompts)",
        '"exemplars": {"closed-book": ["tiny-6", "tiny-7", "tiny-8", "tiny-9", "tiny-10"]',
        "## Label `label_first`",
    ):
        assert text in summary, text
    assert (out / "roc.png").read_bytes()[:4] == b"\x89PNG" and (out / "heatmaps.png").read_bytes()[:4] == b"\x89PNG"
    # a rerun resumes: nothing is scored again, no progress is printed (stderr is not a terminal)
    before = (out / "results.jsonl").read_bytes()
    again = subprocess.run(args, capture_output=True, text=True, timeout=900)
    before_wrote = again.stderr.split("wrote ", 1)[0]  # at most the calibration's one note (sampled otherwise)
    assert again.returncode == 0 and "wrote " in again.stderr, again.stderr
    assert before_wrote == "" or before_wrote.startswith("note: calibration embedded "), again.stderr
    assert before_wrote.count("note:") <= 1, again.stderr
    assert "s/prompt" not in again.stderr
    assert (out / "results.jsonl").read_bytes() == before
    # on a terminal (forced), a progress bar: the last prompt is scored again after its row is removed
    (out / "results.jsonl").write_bytes(b"".join(before.splitlines(keepends=True)[:4]))
    bar = subprocess.run(args, capture_output=True, text=True, timeout=900, env={**os.environ, "FORCE_COLOR": "1"})
    assert bar.returncode == 0 and "bbwd eval" in bar.stderr and "5/5" in bar.stderr and " s/prompt" in bar.stderr
    assert "ETA" in bar.stderr and "wrote " in bar.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 5


@pytest.mark.slow
def test_eval_with_an_nli_judge_and_the_first_sample_as_label(tmp_path):
    # The tiny random NLI model with +50 on its ENTAILMENT logit says every pair entails: DSE = 0
    model = save_tiny_nli(tmp_path / "nli", entailment_bias=50.0)
    out = tmp_path / "report"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "blackbox_wd",
            "eval",
            "--data",
            "fixtures/tiny_qa.jsonl",
            "-o",
            str(out),
            "-k",
            "3",
            "--max-tokens",
            "8",
            "--device",
            "cpu",
            "--dse",
            "nli",
            "--nli",
            str(model),
            "--label-from",
            "first",
            "--limit",
            "4",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["tiny-1", "tiny-2", "tiny-3", "tiny-4"]
    for r in rows:
        assert r["dse_judge"] == f"nli:{model}" and r["dse"] == 0.0
        assert r["answer"] == r["responses"][0] and "label_first" not in r and "greedy" not in r["timings"]
    summary = (out / "summary.md").read_text()
    assert f"- DSE judge: nli:{model} (4)" in summary and "the first of the K samples" in summary
    assert f'"dse": "nli:{model}"' in summary and '"label_from": "first"' in summary


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--dse", "nli"], "error: --dse nli needs --nli MODEL, and --nli is used only with --dse nli"),
        (["--nli", "some/model"], "error: --dse nli needs --nli MODEL"),
        (["--dse", "bert"], "error: unknown DSE judge 'bert': use one of answer, nli, teacher, none"),
        (["--label-from", "last"], "error: unknown label source 'last': use one of greedy, first"),
        (["--protocol", "one-shot"], "error: unknown protocol 'one-shot': use one of few-shot, zero-shot"),
        (["--limit", "0"], "error: nothing to score in"),
    ],
)
def test_bad_eval_options_are_one_line_before_any_model_loads(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as done:
        main(["eval", "--data", FIXTURE, "-o", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.strip().splitlines()) == 1 and err.startswith(message), err
    assert not (tmp_path / "out").exists()
