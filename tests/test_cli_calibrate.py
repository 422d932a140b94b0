"""`bbwd calibrate` on synthetic labelled rows, and `score --calibration` end to end on the embedded model."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from blackbox_wd.calibration import model as calibration_module
from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.fit import fit_calibration, read_labelled
from blackbox_wd.cli import main
from blackbox_wd.settings import fingerprint

BBWD = [sys.executable, "-m", "blackbox_wd"]
PROMPT = "What is the capital of Australia?"
RUN = ["-k", "3", "--max-tokens", "12", "--device", "cpu"]


def labelled_rows(path, settings, n=120, seed=0, fp="auto"):
    """n rows whose label follows a logistic model of AvgWD and ln EigenWD, scored under ``settings``."""
    rng = np.random.default_rng(seed)
    avg, log_eig = rng.normal(60, 15, n), rng.normal(18, 2, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-(-15 + 0.1 * avg + 0.5 * log_eig)))).astype(int)
    fp = fingerprint(settings) if fp == "auto" else fp
    path.write_text("".join(json.dumps({"id": str(i), "source": "synthetic", "avg_wd": float(a),
                                        "eigen_wd": float(np.exp(e)), "label_em": int(label), "fingerprint": fp}) + "\n"
                            for i, (a, e, label) in enumerate(zip(avg, log_eig, y))))


def bbwd(capsys, *args):
    """Run the CLI in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return info.value.code, out.out, out.err


SETTINGS = {"teacher": "smollm2-135m", "target": "smollm2-135m", "endpoint": None, "layer": 15, "k": 10,
            "temperature": 0.5, "top_p": 1.0, "max_tokens": 128, "seed": 0, "alpha": 0.001, "p": 0.1, "proj_dim": 128,
            "proj_seed": 0, "protocol": "zero-shot"}


def test_calibrate_writes_the_calibration_and_its_report(tmp_path, capsys):
    labelled_rows(tmp_path / "results.jsonl", SETTINGS)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    out = tmp_path / "cal.json"
    code, _, err = bbwd(capsys, "calibrate", str(tmp_path / "results.jsonl"), "--label", "label_em", "-o", str(out),
                        "--folds", "4")
    assert code == 0, err
    assert err.startswith(f"wrote {out}, {tmp_path / 'cal.md'}, {tmp_path / 'cal.reliability.png'}: n=120")
    cal = Calibration.load(out)
    assert cal.fitted_on.n == 120 and cal.fitted_on.label == "label_em" and cal.fitted_on.folds == 4
    assert cal.operating_point.rule == "target_fpr" and cal.operating_point.fpr <= 0.1
    report = (tmp_path / "cal.md").read_text()
    for text in ("combined: AvgWD + EigenWD (log) (applied)", "| AvgWD |", "| EigenWD (log) |", "Brier", "ECE",
                 "| hallucination (1) |", "fingerprint `" + cal.fingerprint + "`", "base rate"):
        assert text in report, text
    assert (tmp_path / "cal.reliability.png").read_bytes()[:4] == b"\x89PNG"
    code, _, err = bbwd(capsys, "calibrate", str(tmp_path / "results.jsonl"), "--label", "label_em", "-o",
                        str(tmp_path / "f1.json"), "--folds", "4", "--max-f1")
    assert code == 0 and Calibration.load(tmp_path / "f1.json").operating_point.rule == "max_f1"


@pytest.mark.parametrize("args,message", [
    (["--max-f1", "--target-fpr", "0.2"], "error: give --target-fpr or --max-f1, not both"),
    (["--label", "label"], "error: {results} has no row with a score and field 'label' (30 without it, 0 with"),
    (["--folds", "7"], "error: label 'label_em' has 17 correct and 13 hallucinated prompts; 7-fold cross-validation "
                       "needs at least 14 of each"),
    (["--settings-from", "nowhere.json"], "error: no settings for"),
    (["--target-fpr", "1.5"], "error: target FPR must be in [0, 1) (got 1.5)"),
    (["-o", "/nonexistent/dir/cal.json"], "error: output folder /nonexistent/dir does not exist"),
])
def test_calibrate_errors_are_one_line(tmp_path, capsys, args, message):
    labelled_rows(tmp_path / "results.jsonl", SETTINGS, n=30)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    code, out, err = bbwd(capsys, "calibrate", str(tmp_path / "results.jsonl"), "--label", "label_em",
                          "-o", str(tmp_path / "cal.json"), *args)
    message = message.format(results=tmp_path / "results.jsonl")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and err.startswith(message), err


def test_calibrate_refuses_settings_that_are_not_those_of_the_rows(tmp_path, capsys):
    labelled_rows(tmp_path / "results.jsonl", {**SETTINGS, "k": 5})
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    code, _, err = bbwd(capsys, "calibrate", str(tmp_path / "results.jsonl"), "--label", "label_em")
    assert code == 2 and "settings.json does not describe" in err and not (tmp_path / "calibration.json").exists()


@pytest.fixture(scope="module")
def embedded_calibration_file(tmp_path_factory, smollm_teacher):
    """A calibration for the embedded model run with RUN, fitted on synthetic rows scored under its real settings."""
    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.pipeline import Detector
    from blackbox_wd.settings import Settings

    reported = Detector(smollm_teacher, LocalSampler(smollm_teacher),
                        Settings(k=3, max_tokens=12, device="cpu")).reported_settings()
    folder = tmp_path_factory.mktemp("embedded")
    labelled_rows(folder / "rows.jsonl", reported)
    fit = fit_calibration(read_labelled(folder / "rows.jsonl", "label_em"), reported, label="label_em", folds=4)
    path = folder / "smollm2-135m.json"
    fit.calibration.save(path)
    return path


@pytest.mark.slow
def test_score_with_calibration_end_to_end(embedded_calibration_file):
    cal = Calibration.load(embedded_calibration_file)
    run = subprocess.run([*BBWD, "score", *RUN, "--json", "--calibration", str(embedded_calibration_file), PROMPT],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["p_hallucination"] == pytest.approx(cal.predict(result), abs=1e-12)
    assert result["flag"] == (result["p_hallucination"] >= cal.threshold)
    assert result["calibration"]["fingerprint"] == cal.fingerprint and result["calibration"]["n"] == 120
    table = subprocess.run([*BBWD, "score", *RUN, "--calibration", str(embedded_calibration_file), PROMPT],
                           capture_output=True, text=True, timeout=600)
    assert table.returncode == 0, table.stderr
    verdict = "flagged" if result["flag"] else "not flagged"
    line = (f"risk {result['p_hallucination']:.2f} - {verdict} (threshold {cal.threshold:.2f}, "
            f"FPR {cal.operating_point.fpr:.0%} on 120 labelled prompts)")
    assert line in table.stdout, table.stdout
    other = subprocess.run([*BBWD, "score", "-k", "4", "--max-tokens", "12", "--device", "cpu",
                            "--calibration", str(embedded_calibration_file), PROMPT],
                           capture_output=True, text=True, timeout=600)
    assert other.returncode == 2 and other.stdout == ""
    assert re.fullmatch(r"error: calibration \S+ does not apply to this run: it is for settings [0-9a-f]{16}, this run "
                        r"has [0-9a-f]{16} \(k: 3 in the calibration, 4 here\)\n", other.stderr), other.stderr


@pytest.mark.slow
def test_score_uses_the_embedded_calibration_when_it_matches(embedded_calibration_file, monkeypatch, capsys):
    monkeypatch.setattr(calibration_module, "default_calibration_path", lambda teacher, white_box=True: embedded_calibration_file)
    code, out, err = bbwd(capsys, "score", *RUN, PROMPT)
    assert code == 0, err
    assert "calibration: embedded smollm2-135m.json (label label_em" in out
    assert re.search(r"risk 0\.\d\d - (flagged|not flagged) \(threshold", out) and err == ""
    code, out, err = bbwd(capsys, "score", "-k", "2", "--max-tokens", "12", "--device", "cpu", PROMPT)
    assert code == 0 and "risk" not in out and "AvgWD" in out
    assert err.startswith("note: the embedded calibration smollm2-135m.json does not apply to this run, no risk shown")
    assert "(k: 3 in the calibration, 2 here)" in err
