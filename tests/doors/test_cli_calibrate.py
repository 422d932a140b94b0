"""`bbwd calibrate` on synthetic labelled rows, and `score --calibration` end to end on the embedded model."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration import choice as calibration_module
from blackbox_wd.calibration.fit import CV, fit_calibration
from blackbox_wd.calibration.labelled import read_labelled
from blackbox_wd.doors.cli import main
from blackbox_wd.settings import fingerprint
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS
from tests.calibration.test_calibration_fit import SETTINGS  # the eval settings the fits are read under

BBWD = [sys.executable, "-m", "blackbox_wd"]
PROMPT = "What is the capital of Australia?"
RUN = ["-k", "3", "--max-tokens", "12", "--device", "cpu"]


def labelled_rows(path, settings, n=120, seed=0, fp="auto"):
    """n rows whose label follows a logistic model of AvgWD and ln EigenWD, scored under ``settings``."""
    rng = np.random.default_rng(seed)
    avg, log_eig = rng.normal(60, 15, n), rng.normal(18, 2, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(-15 + 0.1 * avg + 0.5 * log_eig)))).astype(int)
    fp = fingerprint(settings) if fp == "auto" else fp
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": str(i),
                    "source": "synthetic",
                    "avg_wd": float(a),
                    "eigen_wd": float(np.exp(e)),
                    "label_em": int(label),
                    "fingerprint": fp,
                }
            )
            + "\n"
            for i, (a, e, label) in enumerate(zip(avg, log_eig, y, strict=True))
        )
    )


def bbwd(capsys, *args):
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


def calibrate(capsys, tmp_path, out, *args):
    """``bbwd calibrate`` of ``tmp_path``'s results.jsonl by its ``label_em``, written to ``out``, in-process."""
    return bbwd(capsys, "calibrate", str(tmp_path / "results.jsonl"), "--label", "label_em", "-o", str(out), *args)


def test_calibrate_writes_the_calibration_and_its_report(tmp_path, capsys):
    labelled_rows(tmp_path / "results.jsonl", SETTINGS)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    out = tmp_path / "cal.json"
    # 120 labelled prompts: below FULL_FROM, auto would refit the shipped file's map
    code, _, err = calibrate(capsys, tmp_path, out, "--folds", "4", "--refit", "full")
    assert code == 0, err
    assert err.startswith(
        f"wrote {out}, {tmp_path / 'cal.md'}, {tmp_path / 'cal.reliability.png'}: full fit on 120 labelled prompts"
    )
    assert re.search(r"1 heads applied of 1 fitted, the first over [a-z_, ]+: CV AUROC 0\.", err), err
    cal = Calibration.load(out)
    assert cal.fitted_on.n == 120 and cal.fitted_on.label == "label_em" and cal.fitted_on.folds == 4
    assert cal.operating_point.rule == "target_fpr" and cal.operating_point.fpr <= 0.1
    report = (tmp_path / "cal.md").read_text()
    for text in (
        "### Head 1: AvgWD, EigenWD (log)",
        "| AvgWD | 61.",
        "| EigenWD (log) | 17.",
        "Brier",
        "ECE",
        "**Threshold ",
        "fingerprint `" + cal.fingerprint + "`",
        "hallucination base rate 0.483",
    ):
        assert text in report, text
    assert (tmp_path / "cal.reliability.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("combiner", [None, "mean", "logistic"])
def test_calibrate_combiner_sets_the_answer_heads_weights(tmp_path, capsys, combiner):
    """``mean`` (also with no ``--combiner``: the shipped files' combiner): every member of a head weighs the same;
    ``logistic``: the fitted weights, which differ here."""
    labelled_rows(tmp_path / "results.jsonl", SETTINGS)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    out = tmp_path / "cal.json"
    args = ["--folds", "4", "--refit", "full", *(["--combiner", combiner] if combiner else [])]
    code, _, err = calibrate(capsys, tmp_path, out, *args)
    assert code == 0, err
    coef = Calibration.load(out).model.coef
    assert len(coef) == 2 and (coef[0] == coef[1]) == (combiner != "logistic")


@pytest.mark.parametrize(
    "args,message",
    [
        (
            ["--label", "label"],
            "error: {results}: no row with scores and field 'label' or 'human_score' or 'unsupported_share' "
            "(30 without, 0 with an error)",
        ),
        (
            ["--folds", "7", "--refit", "full"],
            "error: the rows with avg_wd, log_eigen_wd have 13 prompts labelled 1; 7-fold cross-validation needs "
            "at least 14",
        ),
        (["--settings-from", "nowhere.json"], "error: no settings for"),
        (["--target-fpr", "1.5", "--refit", "full"], "error: target FPR must be in [0, 1) (got 1.5)"),
        (["-o", "/nonexistent/dir/cal.json"], "error: output folder /nonexistent/dir does not exist"),
        (["--combiner", "median"], "error: unknown combiner 'median': use one of logistic, mean, select"),
    ],
)
def test_calibrate_errors_are_one_line(tmp_path, capsys, args, message):
    labelled_rows(tmp_path / "results.jsonl", SETTINGS, n=30)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    code, out, err = calibrate(capsys, tmp_path, tmp_path / "cal.json", *args)
    message = message.format(results=tmp_path / "results.jsonl")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith(message), err


RECORDED_SETTINGS = {
    **SETTINGS,
    "target": "recorded",
    "sampler": None,
    "temperature": None,
    "top_p": None,
    "max_tokens": None,
    "seed": None,
    "protocol": {"prompts": "recorded", "label_from": "recorded", "dse": "answer"},
}
SAMPLES = "gpt-3.5-turbo at T=1.0, recorded in the data"


def test_calibrate_stores_and_prints_who_drew_the_samples(tmp_path, capsys):
    labelled_rows(tmp_path / "results.jsonl", RECORDED_SETTINGS)
    (tmp_path / "settings.json").write_text(json.dumps(RECORDED_SETTINGS))
    out = tmp_path / "cal.json"
    code, _, err = calibrate(capsys, tmp_path, out, "--folds", "4", "--samples", SAMPLES, "--refit", "full")
    assert code == 0, err
    assert json.loads(out.read_text())["fitted_on"]["samples"] == SAMPLES
    cal = Calibration.load(out)
    assert cal.fitted_on.samples == SAMPLES and cal.settings["target"] == "recorded"
    assert f"\n- samples: {SAMPLES}\n" in (tmp_path / "cal.md").read_text()
    note = cal.sampling_note({**SETTINGS, "target": "gpt-4o-mini", "sampler": None, "endpoint": "api.openai.com"})
    assert note == (
        f"note: calibration {out} was fitted on recorded samples ({SAMPLES}; synthetic (120)); this run: "
        'target "gpt-4o-mini", endpoint "api.openai.com", temperature 0.5, top_p 1.0, max_tokens 128: '
        "its risk is a probability on that data"
    )


def test_calibrate_fits_recorded_samples_of_unstated_origin_and_its_note_says_so(tmp_path, capsys):
    labelled_rows(tmp_path / "results.jsonl", RECORDED_SETTINGS, n=120)  # rows of AvgWD and EigenWD: a full fit
    (tmp_path / "settings.json").write_text(json.dumps(RECORDED_SETTINGS))
    code, out, err = calibrate(capsys, tmp_path, tmp_path / "cal.json", "--folds", "2", "--refit", "full")
    assert code == 0, err
    cal = Calibration.load(tmp_path / "cal.json")
    assert cal.fitted_on.samples is None
    note = cal.sampling_note({**RECORDED_SETTINGS, "target": "gpt-4o-mini", "endpoint": "api.openai.com"})
    assert note is not None and "fitted on recorded samples (origin not stated; synthetic (120))" in note, note


def test_calibrate_refuses_settings_that_are_not_those_of_the_rows(tmp_path, capsys):
    labelled_rows(tmp_path / "results.jsonl", {**SETTINGS, "k": 5})
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    code, _, err = bbwd(capsys, "calibrate", str(tmp_path / "results.jsonl"), "--label", "label_em")
    assert code == 2 and "settings.json does not describe" in err and not (tmp_path / "calibration.json").exists()


@pytest.fixture(scope="module")
def embedded_calibration_file(tmp_path_factory, smollm_teacher):
    """A calibration for the embedded model run with RUN, fitted on synthetic rows scored under its real settings."""
    from blackbox_wd.clients import local_sampler_for
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings

    settings = Settings(k=3, max_tokens=12, device="cpu")
    reported = Detector(smollm_teacher, local_sampler_for(settings, smollm_teacher), settings).reported_settings()
    folder = tmp_path_factory.mktemp("embedded")
    labelled_rows(folder / "rows.jsonl", reported)
    fit = fit_calibration(
        read_labelled([folder / "rows.jsonl"], "label_em"), reported, label="label_em", cv=replace(CV, folds=4)
    )
    path = folder / "smollm2-135m.json"
    fit.calibration.save(path)
    return path


@pytest.mark.slow
def test_score_with_calibration_end_to_end(embedded_calibration_file):
    cal = Calibration.load(embedded_calibration_file)
    run = subprocess.run(
        [*BBWD, "score", *RUN, "--json", "--calibration", str(embedded_calibration_file), PROMPT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    judged = cal.verdict(result)
    assert result["p_hallucination"] == pytest.approx(judged.p, abs=1e-12)
    assert result["flag"] == (result["p_hallucination"] >= judged.threshold)
    assert result["calibration"]["fingerprint"] == cal.fingerprint and result["calibration"]["n"] == 120
    table = subprocess.run(
        [*BBWD, "score", *RUN, "--calibration", str(embedded_calibration_file), PROMPT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert table.returncode == 0, table.stderr
    verdict = "flagged" if result["flag"] else "not flagged"
    line = (
        f"risk {result['p_hallucination']:.2f} - {verdict} (threshold {judged.threshold:.2f} at "
        f"FPR {cal.operating_point.fpr:.0%} on 120 labelled prompts; p at base rate 0.48 of its data (--base-rate"
    )
    assert line in " ".join(table.stdout.split()), table.stdout
    assert "from: avg_wd, log_eigen_wd" in table.stdout
    other = subprocess.run(
        [
            *BBWD,
            "score",
            "-k",
            "2",
            "--max-tokens",
            "12",
            "--device",
            "cpu",
            "--calibration",
            str(embedded_calibration_file),
            PROMPT,
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert other.returncode == 2 and other.stdout == ""
    assert re.fullmatch(
        r"error: calibration \S+ has heads for K = 3; this run's K = 2 is below them\n", other.stderr
    ), other.stderr


@pytest.mark.slow
def test_score_uses_the_embedded_calibration_when_it_matches(embedded_calibration_file, monkeypatch, capsys):
    monkeypatch.setattr(
        calibration_module, "default_calibration_path", lambda teacher, white_box=True: embedded_calibration_file
    )
    code, out, err = bbwd(capsys, "score", *RUN, PROMPT)
    assert code == 0, err
    assert "calibration: embedded smollm2-135m.json, fitted on synthetic (120) (label label_em" in " ".join(out.split())
    assert re.search(r"risk 0\.\d\d - (flagged|not flagged) \(threshold", out) and err == ""
    code, out, err = bbwd(capsys, "score", "-k", "2", "--max-tokens", "12", "--device", "cpu", PROMPT)
    assert code == 0 and "risk" not in out and "AvgWD" in out
    assert err.startswith("note: the embedded calibration smollm2-135m.json does not apply to this run, no risk shown")
    assert err.strip().endswith("has heads for K = 3; this run's K = 2 is below them"), err


SHIPPED_API = calibration_module.PACKAGE_CALIBRATIONS / "smollm2-135m.api.json"
MOBY = "Who wrote the novel Moby-Dick?"


def z_by_hand(model: dict, x: list[float]) -> float:
    """z of a stored head's model: standardised, weighted, plus the intercept."""
    terms = zip(model["coef"], x, model["mean"], model["scale"], strict=True)
    return sum(c * (v - mu) / s for c, v, mu, s in terms) + model["intercept"]


def by_hand(body: dict, result: dict) -> tuple[float, float]:
    """p from a calibration file: the first head of the result's kind of answer (a phrase under 8 tokens, a sentence,
    a passage from 128, by the samples' median token count), else of every kind, whose members the result has (ln for
    EigenWD; with a judged answer, its members and the mean of its sentences' z under the sentence head), through
    the Platt calibrator: (p, that head's threshold)."""
    values = {
        "avg_wd": result["avg_wd"],
        "log_eigen_wd": math.log(result["eigen_wd"]),
        "log_eigen_wd_fixed": math.log(result["eigen_wd_fixed"]),
        **result["baselines"],
    }
    if result.get("sentences"):
        values |= {n: result[n] for n in ("answer_wd", "sentence_wd", "answer_unigram", "answer_disagreement")}
        s = body["sentence"]["model"]
        values["sentence_verdict"] = sum(z_by_hand(s, [x["score"], x["unigram"]]) for x in result["sentences"]) / len(
            result["sentences"]
        )
    median = float(np.median(result["token_counts"]))
    kind = "passage" if median >= 128 else "sentence" if median >= 8 else "phrase"
    heads = [body, *body["more_heads"]]
    for head in [h for h in heads if h.get("kind") == kind] + [h for h in heads if h.get("kind") is None]:
        m = head["model"]
        if all(f in values for f in m["features"]):
            break
    assert m["features"] == result["calibration"]["members"]
    z = z_by_hand(m, [values[f] for f in m["features"]])
    c = m["calibrator"]
    if c["method"] == "isotonic":  # linear between the fitted points, constant beyond them
        return float(np.interp(z, c["x"], c["y"])), head["operating_point"]["threshold"]
    return 1 / (1 + math.exp(c["a"] * z + c["b"])), head["operating_point"]["threshold"]


@pytest.mark.slow
def test_the_shipped_api_calibration_scores_a_replayed_api_target(capsys, monkeypatch):
    from api_support import FaultServer, recorded_bodies

    body = json.loads(SHIPPED_API.read_text())
    assert body["settings"]["target"] == "recorded" and body["settings"]["k"] == 10
    # llama.cpp's recorded answers to the prompt, one per body, served n=10 at a time (the recording has K=4)
    moby = next(b for b in recorded_bodies("llamacpp.json") if "Moby" in b["choices"][0]["message"]["content"])
    bodies = [{**moby, "choices": [{**c, "index": 0}]} for c in moby["choices"]]
    monkeypatch.setenv("BBWD_TEST_KEY", "sk-test-key-00000000")
    with FaultServer(bodies=bodies, honour_n=True) as server:
        code, out, err = bbwd(
            capsys,
            "score",
            "--target",
            "smollm2-135m",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "BBWD_TEST_KEY",
            "--no-cache",
            "-k",
            "10",
            "--temperature",
            "0.7",
            "--max-tokens",
            "24",
            "--device",
            "cpu",
            "--json",
            MOBY,
        )
        args = ["score", "--target", "smollm2-135m", "--base-url", server.base_url, "--api-key-env", "BBWD_TEST_KEY"]
        args += ["--no-cache", "-k", "10", "--temperature", "0.7", "--max-tokens", "24", "--device", "cpu", "--json"]
        answered = bbwd(capsys, *args, "--response", "Herman Melville wrote it. He was born in New York.", MOBY)
    assert answered[0] == 0, answered[2]
    judged = json.loads(answered[1])  # a sentence's first head: the peers, the answer's and its disagreement (#58)
    assert set(judged["calibration"]["members"]) == {*PEERS, *ANSWER_PEERS, "answer_disagreement"}
    assert len(judged["sentences"]) == 2
    assert judged["p_hallucination"] == pytest.approx(by_hand(body, judged)[0], rel=1e-12, abs=1e-12)
    assert all(0 < s["p_hallucination"] < 1 for s in judged["sentences"])
    assert code == 0, err
    result = json.loads(out)
    recorded = {c["message"]["content"] for c in moby["choices"]}
    assert not result["settings"]["white_box"] and len(result["responses"]) == 10
    assert set(result["responses"]) == recorded
    p = result["p_hallucination"]
    p_by_hand, threshold = by_hand(body, result)
    assert p == pytest.approx(p_by_hand, rel=1e-12, abs=1e-12) and 0 < p < 1 and result["flag"] == (p >= threshold)
    assert result["calibration"]["origin"] == "embedded smollm2-135m.api.json"
    assert result["calibration"]["id"] == Calibration.load(SHIPPED_API).id and result["calibration"]["n"] == 3741
    assert len(err.strip().splitlines()) == 1 and err.startswith(
        "note: calibration embedded smollm2-135m.api.json was fitted on recorded samples (gpt-3.5-turbo (SAC3 "
        "NQ-open; FActScore bios, PopQA entities), text-davinci-003 (WikiBio), Llama-3-70B-Instruct (FActScore, "
        "PopQA), Llama-3.1-8B-Instruct and Mistral-7B-Instruct-v0.3 (TriviaQA, SciQ, math word problems) at "
        "T=0.7-1.0, recorded in the data; sac3_nq_open (250), wikibio_gpt3 (119), gbu_factscore_gpt35 (100), "
        "gbu_factscore_llama3_70b (88), gbu_popqa_gpt35 (93), gbu_popqa_llama3_70b (94), kk_llama31_8b_triviaqa "
        "(498), kk_llama31_8b_sciq (500), kk_llama31_8b_math (499), kk_mistral_7b_triviaqa (500), "
        "kk_mistral_7b_sciq (500), kk_mistral_7b_math (500)); this run: target \"smollm2-135m\", endpoint "
    ), err
    assert "temperature 0.7, top_p 1.0, max_tokens 24: its risk is a probability on that data" in err

    # the llama.cpp transcript as recorded (K=4) is judged by the shipped file's K = 3 heads, with a note
    monkeypatch.setenv("BBWD_API_REPLAY", str(SHIPPED_API.parents[3] / "fixtures" / "llamacpp.json"))
    code, out, err = bbwd(
        capsys,
        "score",
        "--target",
        "smollm2-135m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--no-cache",
        "-k",
        "4",
        "--temperature",
        "0.7",
        "--max-tokens",
        "24",
        "--seed",
        "0",
        "--device",
        "cpu",
        "--json",
        MOBY,
    )
    assert code == 0, err
    result = json.loads(out)
    assert sorted(result["responses"]) == sorted(recorded) and result["settings"]["k"] == 4
    assert result["p_hallucination"] is not None and result["flag"] is not None  # K = 3's heads judge K = 4
    assert "K = 4 is judged by the heads of K = 3, the nearest lower" in err, err
    Calibration.load(SHIPPED_API).check(result["settings"])
