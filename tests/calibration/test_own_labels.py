"""Your own labels (#54): ``bbwd batch`` -> a label added to some rows -> ``bbwd calibrate`` -> ``bbwd batch`` of the
scored rows with the new file, each with no option beyond the files; the skipped rows and the too-few error; the
FPR's exact interval; the rows picked to label; and a re-judge that runs no teacher pass and gives the rows a fresh
run with that calibration gives."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from cli_support import jsonl, run_cli

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.combine import fpr_interval, labels_to_halve
from blackbox_wd.calibration.heads import FittedOn, Head, OperatingPoint, Platt, ScoreModel
from blackbox_wd.calibration.recalibrate import RefitRows, fit_map, recalibrate
from blackbox_wd.calibration.suggest import spread_picks
from blackbox_wd.settings import calibration_fingerprint

N = 32  # records of the log; LABELLED of them get a label (half of them wrong answers)
LABELLED = 26


def records() -> list[dict]:
    """Sums asked of a model: an even record answered right with samples that mostly agree, an odd one answered
    wrong with samples that scatter (so that the shipped calibration ranks them, and a refit has both classes)."""
    out = []
    for i in range(N):
        a, b = 3 + i, 11 + 2 * i
        right = a + b
        if i % 2 == 0:
            answer, samples = str(right), [str(right)] * 8 + [str(right + 1), f"{right} in all"]
        else:
            answer = str(right + 10)
            samples = [str(right + d) for d in (10, 1, -1, 2, 0, 5, 10, -3, 7, 4)]
        out.append({"id": f"q{i}", "prompt": f"What is {a} + {b}?", "response": answer, "responses": samples})
    return out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    """The log and ``bbwd batch LOG -o scores.jsonl`` (no other option): (folder, rows)."""
    folder = tmp_path_factory.mktemp("own")
    (folder / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records()), encoding="utf-8")
    code, err = run_cli("batch", str(folder / "log.jsonl"), "-o", str(folder / "scores.jsonl"))
    assert code == 0, err
    return folder, jsonl(folder / "scores.jsonl")


@pytest.fixture(scope="module")
def labelled(scored):
    """The scored rows, LABELLED of them with a label added by hand, and ``bbwd calibrate`` of them: (file, stderr)."""
    folder, rows = scored
    with (folder / "labelled.jsonl").open("w", encoding="utf-8") as f:
        for n, row in enumerate(rows):
            f.write(json.dumps({**row, "label": n % 2} if n < LABELLED else row) + "\n")
    code, err = run_cli("calibrate", str(folder / "labelled.jsonl"), "-o", str(folder / "mine.json"))
    assert code == 0, err
    return folder / "mine.json", err


@pytest.mark.slow
def test_every_batch_row_carries_its_settings_and_answer_disagreement(scored):
    _, rows = scored
    for row, record in zip(rows, records(), strict=True):
        assert row["settings"]["target"] == "recorded" and row["settings"]["fingerprint"] == row["fingerprint"]
        agree = sum(s == record["response"] or s == f"{record['response']} in all" for s in record["responses"])
        assert row["answer_disagreement"] == pytest.approx(1 - agree / 10)  # "12 in all" is the number 12


@pytest.mark.slow
def test_calibrate_reads_batch_rows_with_no_option_and_counts_the_unlabelled(labelled):
    path, err = labelled
    cal = Calibration.load(path)
    assert f"{LABELLED} labelled prompts ({N - LABELLED} rows without a label skipped, 0 with an error)" in err, err
    assert cal.fitted_on.n == LABELLED and cal.fitted_on.base_rate == pytest.approx(0.5)
    assert cal.fitted_on.refit is not None and cal.fitted_on.refit.startswith("map of embedded smollm2-135m.api.json")
    point = cal.operating_point
    assert point.rule == "target_fpr_labelled" and point.negatives == LABELLED / 2
    assert point.fpr_interval == pytest.approx(fpr_interval(point.fpr * point.negatives, point.negatives))
    assert "(95%, exact binomial) on 13 correct rows; about" in err


@pytest.mark.slow
def test_rejudged_rows_are_a_fresh_runs_with_that_calibration_and_no_teacher_pass(scored, labelled, monkeypatch):
    import blackbox_wd.run.stages as scoring

    folder, _ = scored
    path, _ = labelled
    passes = []
    real = scoring.teacher_pass
    monkeypatch.setattr(scoring, "teacher_pass", lambda *a, **kw: passes.append(1) or real(*a, **kw))
    code, err = run_cli(
        "batch", str(folder / "scores.jsonl"), "-o", str(folder / "judged.jsonl"), "--calibration", str(path)
    )
    assert code == 0 and passes == [], err
    assert f"{N} rows judged again (0 with an error kept as they were), no teacher pass" in err
    code, err = run_cli(
        "batch", str(folder / "log.jsonl"), "-o", str(folder / "fresh.jsonl"), "--calibration", str(path)
    )
    assert code == 0 and passes == [], err  # short answers under heads of the texts: judged from them (#71)
    code, err = run_cli(
        "batch",
        str(folder / "log.jsonl"),
        "-o",
        str(folder / "forced.jsonl"),
        "--calibration",
        str(path),
        "--all-scores",
    )
    assert code == 0 and passes, err  # the counter counts: a run that forces the samples calls the pass
    judged, fresh = jsonl(folder / "judged.jsonl"), jsonl(folder / "fresh.jsonl")
    for a, b in zip(judged, fresh, strict=True):
        a.pop("timings"), b.pop("timings")
        assert list(a) == list(b) and a == b
    assert {row["calibration"] for row in judged} == {Calibration.load(path).id}


@pytest.mark.slow
def test_rejudging_refuses_options_that_would_change_the_scores(scored):
    folder, _ = scored
    code, err = run_cli("batch", str(folder / "scores.jsonl"), "-o", str(folder / "x.jsonl"), "-k", "5")
    assert code == 2 and "judged again as they were scored: -k would change their scores" in err
    assert not (folder / "x.jsonl").exists()


@pytest.mark.slow
def test_too_few_labelled_rows_of_a_class_is_a_one_line_error(scored):
    folder, rows = scored
    few = folder / "few.jsonl"
    few.write_text("".join(json.dumps({**r, "label": int(n < 3)}) + "\n" for n, r in enumerate(rows)), encoding="utf-8")
    code, err = run_cli("calibrate", str(few), "-o", str(folder / "few.json"))
    assert code == 2 and err.strip() == (
        "error: the labelled rows hold 3 labelled 1; a refit needs at least 10 of each class"
    )
    assert not (folder / "few.json").exists()


@pytest.mark.slow
def test_suggest_writes_rows_spread_over_the_risk(scored):
    folder, rows = scored
    code, err = run_cli("calibrate", "--suggest", "8", str(folder / "scores.jsonl"), "-o", str(folder / "pick.jsonl"))
    assert code == 0 and "8 of 32 scored rows" in err, err
    picked = jsonl(folder / "pick.jsonl")
    ranks = np.argsort(np.argsort([r["p_hallucination"] for r in rows], kind="stable"), kind="stable")
    rank_of = {r["id"]: int(ranks[n]) for n, r in enumerate(rows)}
    assert sorted(rank_of[r["id"]] // 4 for r in picked) == list(range(8))  # one from each eighth of the risk


def test_the_fpr_interval_is_clopper_pearsons():
    # 0 of n flagged: the upper end solves (1 - u)^n = 0.025; n of n: the lower end solves l^n = 0.025
    assert fpr_interval(0, 10) == (0.0, pytest.approx(1 - 0.025 ** (1 / 10)))
    assert fpr_interval(10, 10) == (pytest.approx(0.025 ** (1 / 10)), 1.0)
    lo, hi = fpr_interval(5, 50)
    assert lo < 0.1 < hi and hi - lo == pytest.approx(0.1848, abs=1e-3)
    # about four times the correct rows halve it (fewer: an interval of few rows is wider than 1 / sqrt(n) says)
    more = labels_to_halve(5, 50, 1.0)
    a, b = fpr_interval(0.1 * (50 + more), 50 + more)
    assert 2.5 * 50 <= more <= 3.5 * 50 and b - a <= (hi - lo) / 2


def test_spread_picks_take_one_row_of_each_stratum():
    p = np.linspace(0, 1, 40)[::-1]
    picks = spread_picks(p, 4, seed=3)
    assert sorted((39 - picks) // 10) == [0, 1, 2, 3]
    assert spread_picks(p, 4, seed=3).tolist() == picks.tolist()


def test_a_platt_heads_map_is_exactly_g_of_its_p():
    """recalibrate composes g into a Platt head exactly: every row's new p is expit(a logit p + b) of its old p."""
    model = ScoreModel(("avg_wd", "log_eigen_wd"), (50.0, 18.0), (20.0, 1.0), (0.5, 0.5), 0.0, Platt(-1.5, 0.3))
    head = Head(model, OperatingPoint("target_fpr", 0.1, 0.7, 0.1, 0.5, 0.5, 0.5))
    rng = np.random.default_rng(0)
    rows = [{"avg_wd": float(x), "eigen_wd": math.exp(18 + rng.normal())} for x in rng.normal(50, 20, 60)]
    labels = [float(r["avg_wd"] > 50) if n % 5 else float(r["avg_wd"] <= 50) for n, r in enumerate(rows)]
    settings = {"teacher": "t", "target": "recorded", "k": 10, "layer": 1, "alpha": 0.001, "p": 0.1}
    on = FittedOn("rows", {"set": 100}, None, "label", 100, 40, 0.4, 5, 0, {})
    cal = Calibration((head,), calibration_fingerprint(settings), settings, on, "test")
    new = recalibrate(cal, RefitRows(rows, labels, 10), settings, mode="map", candidates=()).calibration
    p_old = np.array([cal.verdict(r).p for r in rows])
    a, b = fit_map(p_old, np.array(labels, dtype=int), np.ones(len(rows)), "map")
    p_new = np.array([new.verdict(r).p_fitted for r in rows])
    expected = 1 / (1 + np.exp(-(a * np.log(p_old / (1 - p_old)) + b)))
    assert a > 0 and np.allclose(p_new, expected, rtol=1e-9, atol=1e-12)
    assert new.operating_point.rule == "target_fpr_labelled" and new.fitted_on.n == 60


def test_a_refit_keeps_each_heads_kind_of_answer():
    """A calibration with heads per kind of answer, refitted: each row is judged by the same head as before (a phrase
    by the phrase head, read first), its p the map of its old p."""
    general = ScoreModel(("avg_wd", "log_eigen_wd"), (50.0, 18.0), (20.0, 1.0), (0.5, 0.5), 0.0, Platt(-1.5, 0.3))
    phrase = ScoreModel(("avg_wd",), (40.0,), (10.0,), (1.0,), 0.0, Platt(-2.0, 0.1))
    point = OperatingPoint("target_fpr", 0.1, 0.7, 0.1, 0.5, 0.5, 0.5)
    rng = np.random.default_rng(1)
    rows = [
        {"avg_wd": float(x), "eigen_wd": math.exp(18 + rng.normal()), "token_counts": [3 if n % 2 else 30] * 10}
        for n, x in enumerate(rng.normal(50, 20, 60))
    ]
    labels = [float(r["avg_wd"] > 50) if n % 5 else float(r["avg_wd"] <= 50) for n, r in enumerate(rows)]
    settings = {"teacher": "t", "target": "recorded", "k": 10, "layer": 1, "alpha": 0.001, "p": 0.1}
    on = FittedOn("rows", {"set": 100}, None, "label", 100, 40, 0.4, 5, 0, {})
    heads = (Head(general, point), Head(phrase, point, "phrase"))
    cal = Calibration(heads, calibration_fingerprint(settings), settings, on, "test")
    new = recalibrate(cal, RefitRows(rows, labels, 10), settings, mode="map", candidates=()).calibration
    assert [h.kind for h in new.heads] == [None, "phrase"]
    before, after = [cal.verdict(r) for r in rows], [new.verdict(r) for r in rows]
    assert [v.members for v in after] == [v.members for v in before]
    assert {v.members for v, r in zip(after, rows, strict=True) if r["token_counts"][0] == 3} == {("avg_wd",)}
    a, b = new.fitted_on.cv["slope"], new.fitted_on.cv["intercept"]
    p_old = np.array([v.p_fitted for v in before])
    expected = 1 / (1 + np.exp(-(a * np.log(p_old / (1 - p_old)) + b)))
    assert np.allclose([v.p_fitted for v in after], expected, rtol=1e-9, atol=1e-12)
