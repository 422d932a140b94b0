"""-k auto: the stages, the settle band fitted by hand-checked rules, the loop's draws, and its doors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from blackbox_wd.adaptive import Settle, rounds, stop_round
from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.heads import Head, Verdict
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS
from blackbox_wd.calibration.settle import fit_settle, fit_settles
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Sample, SampleSet
from blackbox_wd.settings import Settings

WHITE_BOX = PACKAGE_CALIBRATIONS / "smollm2-135m.json"
API = PACKAGE_CALIBRATIONS / "smollm2-135m.api.json"
DIFFERENT = [
    "Paris is the capital.",
    "It is Lyon, a city by the Rhone.",
    "Marseille, on the coast of the Mediterranean sea.",
    "Berlin.",
    "I think the answer is Toulouse in the south.",
    "Nice",
    "Bordeaux is the capital of wine and of France.",
    "Strasbourg",
    "Lille, in the north",
    "Nantes, near the Atlantic",
]


def test_rounds_start_at_three_then_five_then_double_up_to_k_max():
    assert rounds(10) == (3, 5, 10) and rounds(20) == (3, 5, 10, 20) and rounds(12) == (3, 5, 10, 12)
    assert rounds(3) == (3,) and rounds(2) == (2,) and rounds(4) == (3, 4) and rounds(40)[-2:] == (20, 40)
    assert Settings(k=20, stop="settle").rounds == (3, 5, 10, 20) and Settings(k=7).rounds == (7,)


def test_the_band_stops_each_side_while_its_pooled_flip_rate_bound_is_under_delta():
    # 40 unflagged prompts at p = 0.01 .. 0.40: the 20 lowest never flip, then one flip in every two
    p = np.arange(1, 41) / 100
    flip = np.zeros(40, dtype=bool)
    flip[21::2] = True
    flag = np.zeros(40, dtype=bool)
    band = fit_settle(p, flag, flag ^ flip, delta=0.05)
    # the isotonic fit pools the 21 flip-free prompts (0.01 .. 0.21): (0 + 1) / (21 + 1) = 0.045 <= 0.05; the next
    # block has flips, so the band's lower edge is halfway between 0.21 and 0.22; no flagged prompt: nothing above
    assert band == Settle(pytest.approx(0.215), 1.0)
    # 18 flip-free prompts are too few for delta 0.05: (0 + 1) / (18 + 1) > 0.05
    assert fit_settle(p[:18], flag[:18], flag[:18], delta=0.05) == Settle(0.0, 1.0)
    # the flagged side, from the top: 30 flagged prompts at 0.71 .. 1.00 that never flip
    high = np.arange(71, 101) / 100
    both = fit_settle(np.r_[p, high], np.r_[flag, np.ones(30, bool)], np.r_[flag ^ flip, np.ones(30, bool)], 0.05)
    # all 30 pool into one flip-free block, (0 + 1) / 31 <= 0.05: every flagged prompt stops (above just under 0.71)
    assert both.below == pytest.approx(0.215) and both.above == pytest.approx(0.71) and both.above < 0.71


def test_a_band_is_fitted_on_the_prompts_earlier_stages_left_open_and_replayed_in_order():
    p = np.array([[0.1, 0.5, 0.9, 0.5], [0.1, 0.2, 0.9, 0.5], [0.1, 0.2, 0.9, 0.6]])
    settles = [Settle(0.3, 0.8), Settle(0.3, 1.0)]
    assert stop_round(p, settles).tolist() == [0, 1, 0, 2]
    flags = p >= 0.5
    assert len(fit_settles(p, flags)) == 2  # one band per stage before the last


def test_a_calibration_with_stages_round_trips_and_judges_each_stage_with_its_own_heads():
    cal = Calibration.load(WHITE_BOX)  # one file serves fixed K and -k auto
    assert [s.k for s in cal.rounds] == [3, 5] and cal.settings.get("stop") is None and cal.k == 10
    assert Calibration.from_json(cal.to_json()) == cal and cal.round_at(3) is cal.rounds[0] and cal.round_at(10) is None
    assert (
        cal.round_at(4) is cal.rounds[0] and cal.round_at(7) is cal.rounds[1] and cal.round_at(20) is None
    )  # nearest lower
    head: Head = cal.rounds[0].heads[-1]  # over avg_wd and log_eigen_wd, which every result has
    row = {"avg_wd": 40.0, "eigen_wd": 3.0}
    at3, at10 = cal.verdict(row, k=3), cal.verdict(row)
    assert at3.head == head and at10.head == cal.heads[-1] and at3.p != at10.p
    band = cal.rounds[0].settle
    for p, settled in [(band.below / 2, True), ((band.below + band.above) / 2, False)]:
        assert cal.settled(Verdict(p, False, head, p), 3, 10) is settled
    assert cal.settled(Verdict(0.5, False, head, 0.5), 10, 10)  # the last stage always stops
    low = band.below / 2  # the band was fitted for --k-max 10: with another k_max nothing settles before it
    assert not cal.settled(Verdict(low, False, head, low), 3, 20) and cal.settled(
        Verdict(low, False, head, low), 20, 20
    )


def test_stop_is_a_score_setting_and_the_number_drawn_is_not():
    from blackbox_wd.settings import fingerprint

    base = {"teacher": "t", "k": 10}
    assert fingerprint(base) == fingerprint({**base, "stop": None})  # fingerprints from before it hold
    assert fingerprint({**base, "stop": "settle"}) != fingerprint(base)
    with pytest.raises(BBWDError, match="stop must be None or 'settle'"):
        Settings(stop="bayes")


class Fixed:
    """A sync target answering ``texts(i)`` as sample i; records each draw's (start, k)."""

    def __init__(self, texts):
        self.texts, self.calls = texts, []

    def sample(self, messages, params):
        self.calls.append((params.start, params.k))
        return SampleSet([Sample(self.texts(params.start + i)) for i in range(params.k)])


# the API calibration for -k auto (round 3 stops below 0.639 or above 0.720, round 5 below 0.675): the loop's tests
# below hold its draws to these bands; the shipped file's own bands are tested apart
LOOP = Path(__file__).resolve().parents[2] / "fixtures" / "calibration-api-auto.json"


def detector_with(smollm_teacher, sampler, calibration=LOOP):
    from blackbox_wd.run.detector import Detector

    settings = Settings(target="fake-model", base_url="http://127.0.0.1:9/v1", stop="settle", device="cpu")
    return Detector(smollm_teacher, sampler, settings, Calibration.load(calibration))


def test_a_target_that_answers_the_same_text_every_time_stops_at_the_first_stage(smollm_teacher):
    target = Fixed(lambda i: "The capital of France is Paris.")
    result = detector_with(smollm_teacher, target).score("What is the capital of France?")
    assert target.calls == [(0, 3)] and len(result.responses) == 3 and result.settled
    assert [(s.k, s.settled) for s in result.rounds] == [(3, True)]
    assert result.p_hallucination < Calibration.load(LOOP).rounds[0].settle.below


def test_a_target_whose_answers_all_differ_is_sampled_to_the_maximum(smollm_teacher):
    target = Fixed(lambda i: DIFFERENT[i])
    result = detector_with(smollm_teacher, target).score("What is the capital of France?")
    assert target.calls == [(0, 3), (3, 2), (5, 5)]  # each stage draws only its new samples, by index
    assert result.responses == DIFFERENT and [(s.k, s.settled) for s in result.rounds] == [
        (3, False),
        (5, False),
        (10, True),
    ]
    assert result.rounds[-1].p_hallucination == result.p_hallucination
    assert result.to_dict()["n_samples"] == 10
    shipped = Fixed(lambda i: "The capital of France is Paris.")  # the shipped bands: one answer is settled at 3
    result = detector_with(smollm_teacher, shipped, API).score("What is the capital of France?")
    assert shipped.calls == [(0, 3)] and result.settled
    assert result.p_hallucination < Calibration.load(API).rounds[0].settle.below


def test_without_a_calibration_with_stages_every_prompt_draws_k_and_says_so(smollm_teacher):
    from blackbox_wd.run.detector import Detector

    target = Fixed(lambda i: "Paris.")
    settings = Settings(target="fake-model", base_url="http://127.0.0.1:9/v1", stop="settle", device="cpu")
    detector = Detector(smollm_teacher, target, settings).with_calibration(None)
    assert "-k auto with no calibration: no verdict can settle, so every prompt draws K" in detector.calibration_note
    result = detector.score("What is the capital of France?")
    assert len(result.responses) == 10 and result.p_hallucination is None


@pytest.mark.slow
def test_a_replayed_api_fixture_makes_exactly_the_requests_each_row_reports(tmp_path):
    fixture = json.loads(Path("fixtures/llamacpp_auto.json").read_text())
    meta = fixture["meta"]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps({"id": f"a{i}", "prompt": p}) + "\n" for i, p in enumerate(meta["prompts"])))
    cmd = [sys.executable, "-m", "blackbox_wd", "batch", str(src), "-o", str(dst)]
    cmd += ["--target", meta["model"], "--base-url", "http://127.0.0.1:9/v1", *meta["args"]]
    cmd += ["--calibration", "fixtures/calibration-api-auto.json"]  # the bands the fixture was recorded under
    env = {**os.environ, "BBWD_API_REPLAY": "fixtures/llamacpp_auto.json"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    assert {r["id"]: [r["n_samples"], r["usage"]["requests"]] for r in rows} == meta["drawn"]
    assert sum(r["usage"]["requests"] for r in rows) == len(fixture["exchanges"])
    assert min(r["n_samples"] for r in rows) < 10  # the rule stopped one early, as recorded
    for r in rows:  # each row says where it stopped and why
        assert r["stages"][-1]["k"] == r["n_samples"] and r["stages"][-1]["settled"]
        assert not any(s["settled"] for s in r["stages"][:-1])
        assert r["target_tokens"] == r["usage"]["completion_tokens"] > 0
    assert f"API: {len(fixture['exchanges'])} requests" in proc.stderr and "(-k auto)" in proc.stderr


WHITE_BOX_DRAWS = """
import json, sys
from blackbox_wd.clients.llamacpp import LlamaCppSampler
from blackbox_wd.records import SamplingParams
from blackbox_wd.teachers.embedded import ensure_gguf
from blackbox_wd.teachers.hf import load_teacher

teacher = load_teacher("smollm2-135m", "cpu", "float32", None, 16384)
sampler = LlamaCppSampler(teacher, ensure_gguf())
shots = [
    {"role": "user", "content": "Name a noble gas."},
    {"role": "assistant", "content": "Neon"},
    {"role": "user", "content": "Name an alkali metal."},
    {"role": "assistant", "content": "Sodium"},
]
target = [{"role": "user", "content": "Name a chemical element."}]
params = SamplingParams(k=3, temperature=1.0, max_tokens=8, seed=0)
out = []
for step in json.loads(sys.argv[1]):
    messages = target if step["prompt"] is None else [{"role": "user", "content": step["prompt"]}]
    messages = shots + messages if step.get("turns") else messages
    got = sampler.sample_many([(messages, step["k"])], SamplingParams(step["k"], 1.0, 1.0, 8, 0, step["start"]))
    if step["prompt"] is None:
        out += [s.token_ids for s in got[0].samples]
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_white_box_prompts_samples_do_not_depend_on_what_the_process_drew_before(tmp_path):
    """A prompt drawn first in a fresh process, and drawn after other prompts that share its chat template, in
    another round of its stages, gets the same samples; so does a prompt after few-shot turns shared with the
    prompts drawn before it (its earlier turns are restored from their own reading, the rest read afresh)."""
    first = [{"prompt": None, "start": 0, "k": 3}, {"prompt": None, "start": 3, "k": 2}]
    after = [
        {"prompt": "What is the capital of Spain?", "start": 0, "k": 3},
        {"prompt": "Name a chemical compound.", "start": 0, "k": 3},
        {"prompt": None, "start": 0, "k": 3},
        {"prompt": "Name a chemical process.", "start": 3, "k": 2},
        {"prompt": None, "start": 3, "k": 2},
    ]
    script = tmp_path / "draws.py"
    script.write_text(WHITE_BOX_DRAWS)
    run = lambda steps: json.loads(  # noqa: E731
        subprocess.run(
            [sys.executable, str(script), json.dumps(steps)], capture_output=True, text=True, check=True, timeout=600
        ).stdout
    )
    alone, later = run(first), run(after)
    assert len(alone) == 5 and alone == later
    # after few-shot exemplars as earlier turns, which llama.cpp's cache would read from another prompt's request
    turns = lambda steps: [{**step, "turns": True} for step in steps]  # noqa: E731
    alone, later = run(turns(first)), run(turns(after))
    assert len(alone) == 5 and alone == later


@pytest.mark.slow
def test_an_adaptive_batch_killed_with_kill_9_and_resumed_equals_an_uninterrupted_one(tmp_path):
    """White-box -k auto (llama.cpp draws each stage), calibrated by the API calibration's stages (its meaning
    settings are these): killed after a group, then resumed, every row equals the clean run's."""
    questions = [
        "What is the capital of France?",
        "Name a primary colour.",
        "What is H2O?",
        "Who painted the Mona Lisa?",
        "What is 2 + 2?",
        "Name a planet.",
        "Who wrote Hamlet?",
        "What is the largest ocean?",
        "Name a chemical element.",
        "What colour is the sky?",
        "How many legs has a cat?",
        "What is the capital of Japan?",
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"q{i}", "prompt": q}) + "\n" for i, q in enumerate(questions)))
    cmd = [sys.executable, "-m", "blackbox_wd", "batch", str(src), "--target", "smollm2-135m", "-k", "auto"]
    cmd += ["--max-tokens", "8", "--device", "cpu", "--group-size", "4", "--calibration", str(API)]
    killed_and_resumed(cmd, tmp_path, 12)


@pytest.mark.slow
def test_an_adaptive_batch_of_a_recorded_log_killed_and_resumed_stops_where_an_uninterrupted_one_did(tmp_path):
    """A log of recorded answers (SAC3's first 12 questions, their 10 samples as responses and the judged answer),
    no --target: -k auto scores each record's first 3, 5, then 10 responses under the shipped API calibration's
    stages; killed after a group and resumed, every row (where it stopped included) equals the clean run's."""
    from blackbox_wd.doors.eval.data import data_dir

    records = [json.loads(line) for line in (data_dir() / "sac3_nq_open.jsonl").read_text().splitlines()[:12]]
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": r["id"], "prompt": r["question"], "response": r["response"], "responses": r["samples"]})
            + "\n"
            for r in records
        )
    )
    cmd = [sys.executable, "-m", "blackbox_wd", "batch", str(src), "-k", "auto", "--device", "cpu"]
    # --all-scores: every row forced, so that the teacher's passes space the groups and the kill lands between them
    # (short answers skip the teacher by default, and the 12 rows then come out faster than the kill can land)
    cmd += ["--group-size", "4", "--all-scores"]
    clean = killed_and_resumed(cmd, tmp_path, 12)
    assert {r["n_samples"] for r in clean} <= {3, 5, 10} and all(r["p_hallucination"] is not None for r in clean)
    assert all(r["stages"][-1]["settled"] for r in clean)


def killed_and_resumed(cmd: list[str], tmp_path: Path, n: int) -> list[dict]:
    """Run ``cmd -o full``; run it again into another file, SIGKILL it after a group, resume it, and check that the
    resumed rows equal the clean ones (timings aside); the clean rows."""
    import signal
    import time

    full, crashed = tmp_path / "full.jsonl", tmp_path / "crashed.jsonl"
    subprocess.run([*cmd, "-o", str(full)], check=True, capture_output=True, timeout=600)
    clean = [{k: v for k, v in json.loads(line).items() if k != "timings"} for line in full.read_text().splitlines()]
    assert len(clean) == n and all(r["error"] is None for r in clean)
    assert all(r["n_samples"] == r["stages"][-1]["k"] in (3, 5, 10) for r in clean)
    p = subprocess.Popen([*cmd, "-o", str(crashed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline and (not crashed.exists() or crashed.read_text().count("\n") < 4):
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    before = crashed.read_text().count("\n")
    assert 4 <= before < n, "the kill must land between groups"
    subprocess.run([*cmd, "-o", str(crashed)], check=True, capture_output=True, timeout=600)
    resumed = [
        {k: v for k, v in json.loads(line).items() if k != "timings"} for line in crashed.read_text().splitlines()
    ]
    assert resumed == clean
    return clean


def test_the_paired_pearson_difference_is_scipys_and_zero_for_one_score():
    from scipy.stats import pearsonr

    from blackbox_wd.calibration.evaluation.metrics import paired_pearson_diff

    rng = np.random.default_rng(0)
    h = rng.random(120)
    a, b = h + rng.normal(0, 0.3, 120), h + rng.normal(0, 0.6, 120)
    diff, lo, hi = paired_pearson_diff(h, a, b)
    assert diff == pytest.approx(pearsonr(a, h)[0] - pearsonr(b, h)[0], rel=1e-12) and lo < diff < hi and lo > 0
    assert paired_pearson_diff(h, a, a) == (0.0, 0.0, 0.0)


def test_evals_summary_replays_the_rule_from_the_rows_stages():
    from blackbox_wd.doors.eval.summary import adaptive_lines

    def row(label, stop_at, p_stop, p_last):
        ks = [3, 5, 10]
        stages = [
            {"k": k, "p_hallucination": p_stop if k == stop_at else p_last, "flag": False, "settled": k >= stop_at}
            for k in ks
        ]
        stages[-1]["p_hallucination"] = p_last
        return {"label": label, "stages": stages, "token_counts": [1] * 10, "flag": False}

    rows = [row(0, 3, 0.1, 0.2), row(1, 10, 0.9, 0.9), row(0, 5, 0.3, 0.1), row(1, 3, 0.8, 0.7)]
    text = "\n".join(adaptive_lines(rows, n_boot=50))
    assert "mean 5.25 of 10; prompts stopped at each stage: 3: 2, 5: 1, 10: 1" in text
    assert "target tokens saved: 47.5%" in text  # (7 + 5 + 0 + 7) of 40 tokens not drawn
    assert "AUROC (`label`): adaptive 1.000" in text and "fixed K 1.000" in text
