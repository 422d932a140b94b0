"""Fitting a calibration: coefficients, calibrators, ECE/Brier, thresholds, input checks, report bootstrap."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, roc_auc_score

from blackbox_wd.calibration.combine import (
    CrossValidation,
    Table,
    fit_head,
    group_folds,
    head_sets,
    per_source_auroc,
    table_from,
)
from blackbox_wd.calibration.evaluation.metrics import paired_auroc_diff
from blackbox_wd.calibration.evaluation.reliability import expected_calibration_error
from blackbox_wd.calibration.fit import CV, fit_calibration
from blackbox_wd.calibration.heads import Isotonic, Platt
from blackbox_wd.calibration.labelled import prompt_of, read_labelled, read_settings
from blackbox_wd.calibration.members import FEATURES
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import fingerprint

SETTINGS = {
    "teacher": "smollm2-135m",
    "target": "smollm2-135m",
    "sampler": "llama.cpp",
    "endpoint": None,
    "layer": 15,
    "k": 10,
    "temperature": 0.5,
    "top_p": 1.0,
    "max_tokens": 128,
    "seed": 0,
    "alpha": 0.001,
    "p": 0.1,
    "proj_dim": 128,
    "proj_seed": 0,
    "protocol": "zero-shot",
}
TRUE_INTERCEPT, TRUE_COEF = -15.0, np.array([0.1, 0.5])  # logit of hallucination on [AvgWD, ln EigenWD]


def draw(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features [AvgWD, ln EigenWD], labels drawn from the known logistic model, and the true p."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.normal(60, 15, n), rng.normal(18, 2, n)])
    p = 1 / (1 + np.exp(-(TRUE_INTERCEPT + X @ TRUE_COEF)))
    return X, (rng.random(n) < p).astype(int), p


def write_rows(path, X, y, fp="auto", extra=None):
    fp = fingerprint(SETTINGS) if fp == "auto" else fp
    with open(path, "w") as f:
        for i, ((avg, log_eig), label) in enumerate(zip(X, y, strict=True)):
            row = {
                "id": str(i),
                "source": "nq" if i % 3 else "sciq",
                "avg_wd": avg,
                "eigen_wd": float(np.exp(log_eig)),
                "label": int(label),
                "fingerprint": fp,
                **(extra or {}),
            }
            f.write(json.dumps(row) + "\n")


def table(X: np.ndarray, y: np.ndarray, names=FEATURES) -> Table:
    return table_from({n: X[:, i] for i, n in enumerate(names)}, y, [str(i) for i in range(len(y))], ["t"] * len(y))


def test_fit_recovers_the_logistic_coefficients():
    X, y, _ = draw(4000, seed=1)
    fit = fit_head(table(X, y), FEATURES, CrossValidation(combiner="logistic"), methods=("platt",))
    m = fit.head.model
    coef = np.array(m.coef) / np.array(m.scale)  # back to the raw features' scale
    assert coef == pytest.approx(TRUE_COEF, rel=0.15)
    assert m.intercept - float(np.dot(coef, m.mean)) == pytest.approx(TRUE_INTERCEPT, rel=0.15)


def test_the_mean_combiner_weighs_standardised_members_equally():
    X, y, _ = draw(300, seed=2)
    m = fit_head(table(X, y), FEATURES, CrossValidation(combiner="mean"), methods=("platt",)).head.model
    assert m.coef == (0.5, 0.5) and m.intercept == 0.0
    assert m.mean == pytest.approx(tuple(X.mean(axis=0))) and m.scale == pytest.approx(tuple(X.std(axis=0)))


def test_the_select_combiner_keeps_the_members_that_help_in_each_data_set():
    """Two data sets: member a ranks set 1 only, b ranks set 2 only, noise ranks neither. The mean of a and b
    ranks both; forward selection by the mean over sets of the AUROC within each keeps exactly a and b."""
    rng = np.random.default_rng(3)
    n = 400
    y = rng.integers(0, 2, n)
    first = np.arange(n) < n // 2
    a = np.where(first, y + rng.normal(0, 0.7, n), rng.normal(0, 1, n))
    b = np.where(first, rng.normal(0, 1, n), y + rng.normal(0, 0.7, n))
    noise = rng.normal(0, 1, n)
    t = table_from(
        {"a": a, "b": b, "noise": noise}, y, [str(i) for i in range(n)], np.where(first, "one", "two").tolist()
    )
    m = fit_head(t, ("a", "b", "noise"), CrossValidation(combiner="select"), methods=("platt",)).head.model
    assert m.coef == (0.5, 0.5, 0.0) and m.intercept == 0.0
    score = lambda x: per_source_auroc(x, y, np.ones(n), t.source[:n])  # noqa: E731
    assert score((a + b) / 2) > max(score(a), score(b), score((a + b + noise) / 3))


def test_a_continuous_label_is_two_weighted_rows_of_one_prompt():
    t = table_from({"avg_wd": [1.0, 2.0, 3.0]}, [0.0, 0.25, 1.0], ["a", "b", "c"], ["s"] * 3)
    assert t.y.tolist() == [0, 1, 1, 0] and t.w.tolist() == [1.0, 0.25, 1.0, 0.75]
    assert t.groups.tolist() == ["a", "b", "c", "b"] and t.members["avg_wd"].tolist() == [1.0, 2.0, 3.0, 2.0]
    with pytest.raises(BBWDError, match="labels must be in"):
        table_from({"avg_wd": [1.0]}, [1.5], ["a"], ["s"])


def test_folds_never_split_a_prompt():
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(60), 2)
    y = rng.integers(0, 2, 120)
    for train, test in group_folds(y, groups, 5, 0):
        assert not set(groups[train]) & set(groups[test])


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_probability_from_the_stored_numbers_is_the_calibrator_of_z(method):
    X, y, _ = draw(300, seed=3)
    fit = fit_head(table(X, y), FEATURES, methods=(method,))
    m = fit.head.model
    z = m.decision(X)
    expected = (
        np.interp(z, m.calibrator.x, m.calibrator.y)
        if method == "isotonic"
        else 1 / (1 + np.exp(m.calibrator.a * z + m.calibrator.b))
    )
    assert m.probability(X) == pytest.approx(expected, abs=1e-12) and m.method == method


def test_isotonic_output_is_monotone_in_each_score():
    X, y, _ = draw(400, seed=4)
    model = fit_head(table(X, y), FEATURES, methods=("isotonic",)).head.model
    grid = np.linspace(20, 100, 50)
    p = model.probability(np.column_stack([grid, np.full(50, 18.0)]))
    assert np.all(np.diff(p) >= 0) and isinstance(model.calibrator, Isotonic)


def test_the_calibrator_is_chosen_by_cross_validated_log_loss():
    X, y, _ = draw(300, seed=5)
    fit = fit_head(table(X, y), FEATURES)
    assert set(fit.log_loss) == {"isotonic", "platt"}
    assert fit.head.model.method == min(fit.log_loss, key=fit.log_loss.__getitem__)
    assert isinstance(fit.head.model.calibrator, Platt if fit.head.model.method == "platt" else Isotonic)


def test_ece_and_brier_match_a_hand_worked_example():
    y = np.array([0, 0, 1, 1, 1])
    p = np.array([0.1, 0.4, 0.35, 0.8, 0.9])
    # bins of width 0.1: [0.1] -> bin 0 (0.1 <= 0.1), 0.4 and 0.35 -> bin 3, 0.8 -> 7, 0.9 -> 8
    # |0 - 0.1| + |1 - 0.75| + |1 - 0.8| + |1 - 0.9| = 0.1 + 0.25 + 0.2 + 0.1 = 0.65, / 5
    assert expected_calibration_error(y, p) == pytest.approx(0.13)
    true, pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    counts = np.array([1, 2, 1, 1])
    assert expected_calibration_error(y, p) == pytest.approx(float(np.sum(counts * np.abs(true - pred)) / 5))
    assert brier_score_loss(y, p) == pytest.approx(np.mean((p - y) ** 2))


@pytest.mark.parametrize("target", [0.05, 0.1, 0.2])
def test_threshold_meets_the_target_fpr_on_the_fitting_data(target):
    X, y, _ = draw(500, seed=6)
    fit = fit_head(table(X, y), FEATURES, CrossValidation(target_fpr=target))
    op = fit.head.operating_point
    flagged = fit.p >= op.threshold
    assert op.fpr == pytest.approx(flagged[y == 0].mean()) and op.fpr <= target
    lower = fit.p[fit.p < op.threshold]
    if lower.size:  # the next lower threshold would break the target
        assert (fit.p[y == 0] >= lower.max()).mean() > target


def test_a_threshold_is_chosen_set_by_set_only_where_three_sets_can_measure_an_fpr():
    """One large set and three of 8 rows each (too few correct answers to measure an FPR): the threshold is the
    out-of-fold one, at the target on the rows; three large sets: chosen on each set left out, with its range."""
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, 424)
    y = (rng.random(424) < 1 / (1 + np.exp(-2 * x))).astype(int)
    few = np.array(["big"] * 400 + ["a"] * 8 + ["b"] * 8 + ["c"] * 8)
    t = table_from({"x": x}, y, [str(i) for i in range(424)], few)
    fit = fit_head(t, ("x",), CrossValidation(combiner="mean"), methods=("platt",))
    op = fit.head.operating_point
    assert op.rule == "target_fpr" and op.fpr_range is None and op.fpr <= 0.1
    assert op.fpr == pytest.approx(np.mean(fit.p[y == 0] >= op.threshold))
    many = replace(t, source=np.array(["a", "b", "c", "d"] * 106))
    op = fit_head(many, ("x",), CrossValidation(combiner="mean"), methods=("platt",)).head.operating_point
    assert op.rule == "target_fpr_by_set" and op.fpr_range is not None


def test_head_sets_drop_each_optional_group_down_to_the_smallest():
    heads = head_sets(["avg_wd", "log_eigen_wd", "answer_wd", "lne"], [["answer_wd"], ["lne"]])
    assert heads == [
        ("avg_wd", "log_eigen_wd", "answer_wd", "lne"),
        ("avg_wd", "log_eigen_wd", "lne"),
        ("avg_wd", "log_eigen_wd", "answer_wd"),
        ("avg_wd", "log_eigen_wd"),
    ]


def test_fit_calibration_records_where_and_how_it_was_fitted(tmp_path):
    X, y, _ = draw(200, seed=6)
    write_rows(tmp_path / "r.jsonl", X, y, extra={"ls": 0.5})
    labelled = read_labelled([tmp_path / "r.jsonl"])
    fit = fit_calibration(labelled, SETTINGS, source="r.jsonl", cv=replace(CV, folds=4))
    cal = fit.calibration
    on = cal.fitted_on
    assert (on.n, on.positives, on.folds, on.protocol, on.label) == (200, int(y.sum()), 4, "zero-shot", "label")
    assert on.data == {"sciq": 67, "nq": 133} and on.base_rate == pytest.approx(y.mean())
    # every row has LS; last, the head over the members read from the texts alone (a run of another teacher's), here
    # LS alone: constant, it can never flag, so it is left out, saying why
    assert [h.head.members for h in fit.heads] == [("avg_wd", "log_eigen_wd", "ls"), FEATURES]
    assert fit.left_out == ("the head over ls cannot flag at FPR 0.1: under every calibrator (isotonic, platt) its "
                            "highest p holds more than that share of the correct answers",)  # fmt: skip
    # no combiner gives the constant LS weight: the applied heads leave it out, and the head that is then the same as
    # the next is kept once
    assert [h.members for h in cal.heads] == [FEATURES] and all(c != 0 for c in cal.model.coef)
    assert on.cv["auroc"] == pytest.approx(roc_auc_score(y, fit.heads[0].z))
    assert on.cv["brier"] == pytest.approx(brier_score_loss(y, fit.heads[0].p))
    assert all(h.operating_point.fpr <= 0.1 for h in cal.heads) and cal.sentence is None
    assert "seed" not in cal.settings and "protocol" not in cal.settings and cal.settings["k"] == 10
    assert cal.fingerprint == fingerprint({**SETTINGS, "seed": 123, "protocol": None}, seed=False)


def test_read_labelled_skips_errors_and_unlabelled_rows_and_refuses_bad_ones(tmp_path):
    path = tmp_path / "r.jsonl"
    X, y, _ = draw(4)
    write_rows(path, X, y)
    with open(path, "a") as f:
        f.write(json.dumps({"id": "e", "error": "boom", "fingerprint": fingerprint(SETTINGS)}) + "\n\n")
        f.write(json.dumps({"id": "m", "avg_wd": 1.0, "eigen_wd": 2.0, "fingerprint": fingerprint(SETTINGS)}) + "\n")
    s = read_labelled([path])
    assert s.answers.y.tolist() == y.tolist() and (s.skipped_errors, s.skipped_unlabelled) == (1, 1)
    assert s.answers.members["log_eigen_wd"] == pytest.approx(X[:, 1]) and np.isnan(s.answers.members["lne"]).all()
    for bad, message in [
        ({"label": 2}, "line 1: field 'label' must be 0 or 1"),
        ({"eigen_wd": 0.0}, "line 1: field 'eigen_wd' must be a finite number"),
        ({"avg_wd": None}, "line 1: field 'avg_wd' must be a finite number"),
        ({"label": None, "human_score": 1.5}, "line 1: field 'human_score' must be a number in \\[0, 1\\]"),
    ]:
        write_rows(path, X, y, extra=bad)
        with pytest.raises(BBWDError, match=message):
            read_labelled([path])


def write_passages(path: Path) -> None:
    """80 labelled passages of 4 sentences each, both sentence parts and AvgWD higher where inaccurate."""
    rng = np.random.default_rng(9)
    with open(path, "w") as f:
        for i in range(80):
            tags = rng.choice(["accurate", "minor_inaccurate", "major_inaccurate"], size=4)
            sentences = [
                {
                    "text": f"s{j}",
                    "score": float(rng.normal(50 + 20 * (t != "accurate"), 10)),
                    "unigram": float(rng.normal(6 + 2 * (t != "accurate"), 1)),
                }
                for j, t in enumerate(tags)
            ]
            h = float(np.mean([{"accurate": 0, "minor_inaccurate": 0.5, "major_inaccurate": 1}[t] for t in tags]))
            row = {
                "id": str(i),
                "source": "wikibio",
                "avg_wd": float(rng.normal(60 + 30 * h, 5)),
                "eigen_wd": 1e8,
                "human_score": h,
                "sentences": sentences,
                "sentence_labels": tags.tolist(),
            }
            f.write(json.dumps(row) + "\n")


def test_passages_and_their_sentences_fit_a_sentence_head(tmp_path):
    path = tmp_path / "r.jsonl"
    write_passages(path)
    labelled = read_labelled([path])
    assert labelled.sentences is not None and labelled.sentences.y.size == 320
    fit = fit_calibration(labelled, SETTINGS, cv=replace(CV, folds=4))
    cal = fit.calibration
    assert cal.sentence is not None and cal.sentence.members == ("score", "unigram")
    assert all(c > 0 for c in cal.sentence.model.coef)  # both parts point to inaccurate sentences
    assert cal.fitted_on.sentence_n == 320 and 0 < cal.fitted_on.sentence_base_rate < 1
    assert cal.fitted_on.base_rate == pytest.approx(
        np.mean([json.loads(r)["human_score"] for r in path.read_text().splitlines()])
    )


def test_each_answer_gets_the_mean_of_its_sentences_z_before_the_answer_heads_are_fitted(tmp_path):
    path = tmp_path / "r.jsonl"
    write_passages(path)
    fit = fit_calibration(read_labelled([path]), SETTINGS, cv=replace(CV, folds=4))
    cal = fit.calibration
    model = cal.sentence.model
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    by_hand = [
        np.mean(
            [
                (
                    (s["score"] - model.mean[0]) / model.scale[0] * model.coef[0]
                    + (s["unigram"] - model.mean[1]) / model.scale[1] * model.coef[1]
                )
                + model.intercept
                for s in r["sentences"]
            ]
        )
        for r in rows
    ]
    assert "sentence_verdict" in fit.heads[0].head.members
    t = fit.labelled.answers  # what the report reads
    by_prompt = dict(zip(t.groups, t.members["sentence_verdict"], strict=True))
    assert [by_prompt[prompt_of(str(path), 0, r)] for r in rows] == pytest.approx(by_hand)
    assert [cal.member(r, "sentence_verdict") for r in rows] == pytest.approx(by_hand)
    assert "sentence_verdict" in cal.verdict(rows[0]).members
    assert "sentence_verdict" not in cal.verdict({**rows[0], "sentences": []}).members  # none: the next head


def test_settings_must_be_found_complete_and_those_of_the_rows(tmp_path):
    results = tmp_path / "results.jsonl"
    with pytest.raises(BBWDError, match="settings.json not found .*--settings-from"):
        read_settings(results, None, None)
    (tmp_path / "settings.json").write_text(json.dumps(SETTINGS))
    assert read_settings(results, None, fingerprint(SETTINGS)) == SETTINGS
    with pytest.raises(BBWDError, match=f"does not describe .* fingerprint {fingerprint(SETTINGS)}, the rows ffff"):
        read_settings(results, None, "ffff")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({k: v for k, v in SETTINGS.items() if k not in ("k", "alpha")}))
    with pytest.raises(BBWDError, match="lacks the setting\\(s\\) k, alpha"):
        read_settings(results, partial, None)


def test_too_few_prompts_of_a_class_for_the_folds_is_an_error(tmp_path):
    X, y, _ = draw(40, seed=7)
    y[:] = 1
    y[:9] = 0
    write_rows(tmp_path / "r.jsonl", X, y)
    with pytest.raises(BBWDError, match="have 9 prompts labelled 0; 5-fold cross-validation needs at least 10"):
        fit_calibration(read_labelled([tmp_path / "r.jsonl"]), SETTINGS)


def test_paired_bootstrap_equals_a_loop_over_the_same_resamples():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 2, 60)
    a = y + rng.normal(0, 1, 60)
    b = y + rng.normal(0, 2, 60)
    d = paired_auroc_diff(y, a, b, n_boot=200, seed=3)
    idx = np.random.default_rng(3).integers(0, 60, (200, 60))
    loop = [roc_auc_score(y[i], a[i]) - roc_auc_score(y[i], b[i]) for i in idx if 0 < y[i].sum() < 60]
    assert d.n_boot == len(loop)
    assert (d.lo, d.hi) == pytest.approx(tuple(np.percentile(loop, [2.5, 97.5])), abs=1e-12)
    assert d.diff == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b))
    same = paired_auroc_diff(y, a, a, n_boot=50)
    assert (same.diff, same.lo, same.hi) == (0.0, 0.0, 0.0)


def test_eval_writes_the_settings_its_rows_were_scored_with(tiny_llama, tmp_path):
    from blackbox_wd.clients.local import LocalSampler
    from blackbox_wd.doors.eval.data import load
    from blackbox_wd.doors.eval.run import evaluate
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings
    from blackbox_wd.teachers.forcing import HFTeacher

    teacher = HFTeacher(*tiny_llama, name="tiny")
    detector = Detector(teacher, LocalSampler(teacher), Settings(k=2, max_tokens=4, device="cpu"))
    data = load(Path(__file__).resolve().parents[2] / "fixtures" / "tiny_qa.jsonl", "zero-shot", limit=2)
    rows = evaluate(detector, data, tmp_path, dse="none")
    settings = json.loads((tmp_path / "settings.json").read_text())
    assert settings["protocol"]["prompts"] == "zero-shot" and settings["k"] == 2 and settings["layer"] == teacher.layer
    assert fingerprint(settings) == settings["fingerprint"] == rows[0]["fingerprint"] == rows[1]["fingerprint"]
    assert read_settings(tmp_path / "results.jsonl", None, rows[0]["fingerprint"]) == settings


def test_rows_from_different_settings_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    X, y, _ = draw(6)
    write_rows(path, X[:3], y[:3], fp="aaaa")
    with open(path, "a") as f:
        f.write(json.dumps({"avg_wd": 50.0, "eigen_wd": 1e8, "label": 1, "fingerprint": "bbbb"}) + "\n")
    with pytest.raises(
        BBWDError,
        match=r"the rows of one K mix settings \(fingerprints aaaa \(first at .*r.jsonl line 1\), bbbb \(first at ",
    ):
        read_labelled([path])


def test_a_result_without_the_teachers_log_probs_keeps_the_answers_other_members():
    """The second head drops only answer_nll and cocoa; the one after it every member of the judged answer."""
    from blackbox_wd.calibration.combine import head_sets
    from blackbox_wd.calibration.fit import OPTIONAL_GROUPS

    heads = head_sets(["avg_wd", "answer_wd", "answer_nll", "cocoa", "lne"], OPTIONAL_GROUPS)
    assert heads[:3] == [
        ("avg_wd", "answer_wd", "answer_nll", "cocoa", "lne"),
        ("avg_wd", "answer_wd", "lne"),
        ("avg_wd", "lne"),
    ]
    without = head_sets(["avg_wd", "answer_wd", "lne"], OPTIONAL_GROUPS)  # rows without them: the heads as before
    assert without[:2] == [("avg_wd", "answer_wd", "lne"), ("avg_wd", "lne")]


def test_rows_mixing_short_answers_and_passages_fit_a_head_without_the_short_only_members(tmp_path):
    """On a passage ln EigenWD, ES and ER are missing: the first head is fitted on the short answers, and the head
    without them on every row; rows of one kind leave every member as it is."""
    rng = np.random.default_rng(4)
    n = 120
    passage = np.arange(n) % 3 == 0  # 40 passages
    y = rng.random(n) < 0.5
    path = tmp_path / "r.jsonl"
    with open(path, "w") as f:
        for i in range(n):
            row = {
                "id": str(i),
                "avg_wd": float(rng.normal(60 + 20 * y[i], 10)),
                "eigen_wd": float(np.exp(rng.normal(18 + y[i], 1))),
                "ls": float(rng.normal(0.4 + 0.2 * y[i], 0.1)),
                "es": float(rng.normal(-2 + y[i], 1)),
                "er": float(rng.normal(3 + y[i], 1)),
                "token_counts": [200 if passage[i] else 20] * 10,
                "label": int(y[i]),
                "fingerprint": fingerprint(SETTINGS),
            }
            f.write(json.dumps(row) + "\n")
    labelled = read_labelled([path])
    assert labelled.short_only == ("log_eigen_wd", "es", "er")
    assert (
        np.isnan(labelled.answers.members["es"][passage]).all()
        and np.isfinite(labelled.answers.members["es"][~passage]).all()
    )
    fit = fit_calibration(labelled, SETTINGS, cv=replace(CV, folds=4))
    cal = fit.calibration
    assert cal.short_only == ("log_eigen_wd", "es", "er")
    assert fit.heads[0].head.members == ("avg_wd", "log_eigen_wd", "ls", "es", "er") and fit.heads[0].rows.sum() == 80
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert {cal.verdict(r).members for r in rows if r["token_counts"][0] == 200} == {("avg_wd", "ls")}
    assert {cal.verdict(r).members for r in rows if r["token_counts"][0] == 20} == {cal.heads[0].members}
    for counts in (20, 200):  # one kind: nothing is missing
        path.write_text("".join(json.dumps({**r, "token_counts": [counts] * 10}) + "\n" for r in rows))
        one_kind = read_labelled([path])
        assert one_kind.short_only == () and np.isfinite(one_kind.answers.members["es"]).all()


def test_a_design_names_its_heads():
    """A misspelt heads design (the bench's ``Heads``) is refused, not read as no head of a kind."""
    from bench.designs import HEADS, Heads
    from blackbox_wd.calibration.fit import Design

    assert [Heads(("ls",), ("avg_wd",), heads=heads).heads for heads in HEADS] == list(HEADS)
    with pytest.raises(ValueError, match="Design.heads is 'pool'; one of kinds, pooled, short, one"):
        Heads(("ls",), ("avg_wd",), heads="pool")
    phrase = Design(("ls",), ("avg_wd",), phrase=("lexsim_rouge1",))
    assert [phrase.of_kind(k) for k in ("phrase", "sentence", "passage")] == [("lexsim_rouge1",), ("ls",), ("avg_wd",)]
    with pytest.raises(ValueError, match="Design.phrase needs heads of each kind"):
        Heads(("ls",), ("avg_wd",), heads="pooled", phrase=("lexsim_rouge1",))
    from bench.designs import PACKAGE_FIT_HEADS, fitting
    from blackbox_wd.calibration import fit

    with fitting(Heads(("ls",), ("avg_wd",), heads="one")):
        assert fit.fit_heads is not PACKAGE_FIT_HEADS
    with fitting(phrase):
        assert fit.fit_heads is PACKAGE_FIT_HEADS
    assert fit.fit_heads is PACKAGE_FIT_HEADS


def test_pooled_short_heads_rank_every_short_answer_by_one_score():
    """The bench's pooled heads (``Heads.heads == "pooled"``): the phrase and sentence answers hold the same head,
    fitted on both kinds' rows with a Platt calibrator, so p rises with z across both kinds; fitted apart (the
    package's heads), two kinds of different base rates get heads whose p interleave."""
    from bench.designs import fit_heads as heads_of
    from blackbox_wd.calibration.fit import SHORT_KINDS, fit_heads

    rng = np.random.default_rng(7)
    n = 240
    kinds = np.array(["phrase"] * n + ["sentence"] * n + ["passage"] * n)
    shift = np.where(kinds == "sentence", 1.5, 0.0)  # the sentences hallucinate more at the same score
    x = rng.normal(0, 1, 3 * n)
    y = (rng.random(3 * n) < 1 / (1 + np.exp(-(2 * x + shift - 0.5)))).astype(int)
    members = {"ls": x, "avg_wd": rng.normal(0, 1, 3 * n)}
    t = table_from(members, y, [str(i) for i in range(3 * n)], ["s"] * 3 * n, kinds)
    cv = CrossValidation(combiner="mean")
    both = {"phrase": [("ls",)], "sentence": [("ls",)]}
    pooled = heads_of("pooled")(t, [("ls",)], cv, both)
    by_kind = {h.head.kind: h.head for h in pooled if h.head.kind is not None}
    assert set(by_kind) == {*SHORT_KINDS, "passage"}
    assert by_kind["phrase"].model == by_kind["sentence"].model and by_kind["phrase"].model.method == "platt"
    assert by_kind["passage"].model != by_kind["phrase"].model
    short = np.isin(kinds, SHORT_KINDS)
    z = by_kind["phrase"].model.decision(x[short].reshape(-1, 1))
    p = np.concatenate([by_kind[k].model.probability(x[kinds == k].reshape(-1, 1)) for k in SHORT_KINDS])
    assert roc_auc_score(y[short], p) == pytest.approx(roc_auc_score(y[short], z))  # one score, no interleaving
    apart = {h.head.kind: h.head for h in fit_heads(t, [("ls",)], cv, both) if h.head.kind is not None}
    assert apart["phrase"].model != apart["sentence"].model  # what pooling replaces
    # each kind's heads over its own members (``Design.phrase``): the others' heads are over every row's
    own = fit_heads(t, [("avg_wd",)], cv, {"phrase": [("ls",)], "sentence": [("avg_wd", "ls")]})
    assert {(h.head.kind, h.head.members) for h in own} == {
        (None, ("avg_wd",)),
        ("phrase", ("ls",)),
        ("sentence", ("avg_wd", "ls")),
        ("passage", ("avg_wd",)),
    }


def shifted_set_table() -> Table:
    """Three sets of 150 rows, each hallucinating above its own 75th percentile of x (5% of labels flipped); the third
    set's x is shifted up by 1. Left out, it lies above every x of the other two, where their isotonic calibrator is
    flat at 1: every one of its rows gets p = 1, its correct answers too, so no threshold below 1 holds FPR 0.1 (the
    shipped file's seven passage heads of threshold 1); Platt, strictly increasing, still orders them."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(0, 1, 150), rng.uniform(0, 1, 150), rng.uniform(0, 1, 150) + 1.0])
    y = (((x % 1.0) > 0.75) ^ (rng.random(450) < 0.05)).astype(int)
    return table_from({"x": x}, y, [str(i) for i in range(450)], ["a"] * 150 + ["b"] * 150 + ["c"] * 150)


def test_a_head_that_cannot_flag_is_never_fitted():
    """A head whose threshold flags nothing (threshold 1, TPR 0) is refused, naming it; with Platt beside it, the fit
    takes Platt, whose threshold flags at the target, though isotonic's log-loss is lower."""
    from blackbox_wd.calibration.combine import CannotFlag

    t, cv = shifted_set_table(), CrossValidation(combiner="mean")
    with pytest.raises(
        CannotFlag, match=r"^the head over x cannot flag at FPR 0\.1: under every calibrator \(isotonic\)"
    ):
        fit_head(t, ("x",), cv, methods=("isotonic",))
    fit = fit_head(t, ("x",), cv, methods=("isotonic", "platt"))
    op = fit.head.operating_point
    assert fit.log_loss["isotonic"] < fit.log_loss["platt"]  # isotonic would have been chosen by its log-loss
    assert fit.head.model.method == "platt" and op.rule == "target_fpr_by_set"
    assert op.threshold < 1 and op.tpr == pytest.approx(0.285, abs=0.001) and op.fpr <= 0.1
