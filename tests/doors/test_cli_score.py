"""`bbwd score` end to end on the real embedded SmolLM2 model, and its one-line errors."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

BBWD = [sys.executable, "-m", "blackbox_wd"]


def run(*args, check=True):
    proc = subprocess.run([*BBWD, *args], capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.slow
def test_score_json_real_model_reproducible():
    args = [
        "score",
        "--json",
        "-k",
        "4",
        "--max-tokens",
        "24",
        "--seed",
        "7",
        "--device",
        "cpu",
        "What is the capital of Australia?",
    ]
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
    # the samples are the same to the token; the teacher's float32 CPU kernels are not bitwise the same across
    # processes (seen once: 42.14184 vs 42.14175), so D agrees to float32 precision and EigenWD near it
    assert second["responses"] == first["responses"]
    assert np.allclose(second["D"], first["D"], rtol=1e-5, atol=1e-6)
    assert second["eigen_wd"] == pytest.approx(first["eigen_wd"], rel=1e-2)  # p = 0.1 weighs the small singular values


@pytest.mark.slow
def test_score_table_output():
    out = run(
        "score", "-k", "2", "--max-tokens", "8", "--device", "cpu", "--response", "Red. Blue is\nnot.", "Name a colour."
    ).stdout
    assert "AvgWD" in out and "EigenWD" in out and "alpha=0.001" in out
    assert "AnswerWD" in out and "SentenceWD" in out and "answer NLL" not in out  # the teacher stopped at the layer
    lines = out.splitlines()
    assert any(line.strip().endswith("  Red.") for line in lines) and any("Blue is not." in line for line in lines)


ANSWER = "The capital of Australia is Sydney. It was founded in 1788.\n\nCanberra is the capital."


@pytest.mark.slow
def test_score_response_gets_answer_wd_and_sentences():
    from blackbox_wd.clients import local_sampler_for
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.hf import placement, ready_teacher

    prompt = "What is the capital of Australia?"
    got = json.loads(
        run(
            "score",
            "--json",
            "-k",
            "3",
            "--max-tokens",
            "16",
            "--seed",
            "7",
            "--device",
            "cpu",
            "--response",
            ANSWER,
            prompt,
        ).stdout
    )
    assert [s["text"] for s in got["sentences"]] == [
        "The capital of Australia is Sydney.",
        "It was founded in 1788.",
        "Canberra is the capital.",
    ]
    assert all(ANSWER[s["start"] : s["end"]] == s["text"] and s["score"] > 0 for s in got["sentences"])
    assert got["sentence_wd"] == pytest.approx(sum(s["score"] for s in got["sentences"]) / 3, rel=1e-12)
    assert got["answer_wd"] > 0 and "p" not in got["sentences"][0]
    # the same samples in this process (white-box samples are seeded; llama.cpp draws them here too), forced as
    # `bbwd score` forces them (in numpy, one_prompt): the same scores
    settings = Settings(k=3, max_tokens=16, seed=7, device="cpu")
    teacher = ready_teacher("smollm2-135m", placement("cpu", "float32", one_prompt=True))
    detector = Detector(teacher, local_sampler_for(settings, teacher), settings, one_prompt=True)
    result = detector.score(prompt, answer=ANSWER)
    assert result.responses == got["responses"]
    assert [s["score"] for s in got["sentences"]] == pytest.approx([s.score for s in result.sentences], rel=1e-5)
    assert got["answer_wd"] == pytest.approx(result.answer_wd, rel=1e-5)
    assert got["answer_nll"] is None and got["cocoa"] is None  # no log-prob pass: LNE comes from llama.cpp


def test_sentences_are_coloured_by_rank_within_the_answer():
    from rich.console import Console

    from blackbox_wd.doors.cli.score import render_answer, risk_colours
    from blackbox_wd.measure.sentences import SentenceScore

    assert risk_colours([3.0, None, 1.0, 2.0]) == ["red", None, "green", "yellow"]
    assert risk_colours([5.0]) == ["yellow"] and risk_colours([1.0, 2.0]) == ["green", "red"]
    assert risk_colours([2.0, 2.0, 1.0]) == ["yellow", "yellow", "green"]

    class Answer:  # what render_answer reads of a Result
        answer_error, answer_wd, sentence_wd, answer_nll, cocoa = None, 12.5, 20.0, 2.0, 25.0
        sentences = [
            SentenceScore("Fine.", 0, 5, 10.0),
            SentenceScore("Wrong [red]x[/red].", 6, 24, 30.0),
            SentenceScore("", 24, 24, None),
        ]

    console = Console(record=True, width=200, force_terminal=True, color_system="standard")
    render_answer(Answer(), console)
    plain = console.export_text(clear=False)
    assert "AnswerWD 12.5" in plain and "SentenceWD 20" in plain
    assert "answer NLL 2 nats/token under the teacher; CoCoA 25   (NLL x AnswerWD)" in plain
    assert "       10  Fine." in plain and "       30  Wrong [red]x[/red]." in plain  # markup in text stays text
    styled = console.export_text(styles=True)
    assert "\x1b[32m       10  Fine." in styled and "\x1b[31m       30  Wrong" in styled


@pytest.mark.parametrize(
    "args,message",
    [
        (["score", ""], "error: prompt is empty"),
        (["score", "-k", "1", "hi"], "error: k must be at least 2 (got 1)"),
        (["score", "--teacher", "gpt-17", "hi"], "error: unknown teacher 'gpt-17'"),
        (
            ["score", "--teacher", "/nonexistent/model.gguf", "hi"],
            "error: GGUF file not found: /nonexistent/model.gguf",
        ),
        (
            ["score", "--layer", "99", "--device", "cpu", "hi"],
            "error: layer 99 out of range: the teacher has layers 1..30",
        ),
        (["score", "--response", " ", "hi"], "error: --response is empty"),
    ],
)
def test_bad_input_is_one_line(args, message):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
