"""The combined verdict: heads by the members a result has, the prior correction, the sentence head, old files,
refusals; and its new members: EigenWD with a fixed bandwidth, unit token states, the lexical surprise."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from blackbox_wd.calibration.heads import Head, OperatingPoint, Platt, ScoreModel, shift_prior
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.sentences import SentenceScore
from blackbox_wd.measure.transport import pairwise_w2
from blackbox_wd.measure.wd import avg_wd, eigen_wd, median_bandwidth, unit_states
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings
from blackbox_wd.signals.lexical import unigram_surprise
from tests.calibration.test_calibration import make

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def point(threshold: float) -> OperatingPoint:
    return OperatingPoint("target_fpr", 0.1, threshold, 0.1, 0.5, 0.6, 0.55)


def two_heads() -> Calibration:
    """Head 1 over [AvgWD, ln EigenWD, AnswerWD]: z = (avg - 60)/15 + (answer - 50)/10; head 2: ``make``'s.
    Sentence head: z = (score - 40)/20 + (unigram - 6)/2. Platt p = sigmoid(z) throughout."""
    base = make()
    first = ScoreModel(
        ("avg_wd", "log_eigen_wd", "answer_wd"),
        (60.0, 18.0, 50.0),
        (15.0, 2.0, 10.0),
        (1.0, 0.0, 1.0),
        0.0,
        Platt(-1.0, 0.0),
    )
    sentence = ScoreModel(("score", "unigram"), (40.0, 6.0), (20.0, 2.0), (1.0, 1.0), 0.0, Platt(-1.0, 0.0))
    on = replace(base.fitted_on, base_rate=0.5, sentence_base_rate=0.4, sentence_n=100)
    return replace(
        base, heads=(Head(first, point(0.6)), *base.heads), fitted_on=on, sentence=Head(sentence, point(0.7))
    )


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


def test_a_result_is_judged_by_the_first_head_whose_members_it_has():
    cal = two_heads()
    full = cal.verdict({"avg_wd": 75.0, "eigen_wd": math.exp(18.0), "answer_wd": 60.0})
    assert full.members == ("avg_wd", "log_eigen_wd", "answer_wd")
    assert full.p == pytest.approx(sigmoid(1.0 + 1.0)) and full.flag and full.threshold == 0.6
    short = cal.verdict({"avg_wd": 75.0, "eigen_wd": math.exp(18.0), "answer_wd": None})  # no judged answer
    assert short.members == ("avg_wd", "log_eigen_wd")
    assert short.p == pytest.approx(sigmoid(1.0)) and short.flag == (short.p >= 0.5)
    summary = cal.summary(short)
    assert summary["members"] == ["avg_wd", "log_eigen_wd"] and summary["threshold"] == 0.5
    with pytest.raises(BBWDError, match="cannot calibrate: no finite log_eigen_wd"):
        cal.verdict({"avg_wd": 75.0, "eigen_wd": 0.0})


def test_the_prior_correction_by_hand():
    assert shift_prior(0.5, 0.5, 0.75) == pytest.approx(0.75)  # odds 1 * 3 / 1
    assert shift_prior(0.75, 0.75, 0.5) == pytest.approx(0.5)
    assert shift_prior(0.2, 0.5, 0.2) == pytest.approx(1 / 17)  # odds 1/4 * 1/4
    assert shift_prior(0.0, 0.5, 0.9) == 0.0 and shift_prior(1.0, 0.5, 0.1) == 1.0
    cal = two_heads()  # fitted at base rate 0.5
    row = {"avg_wd": 60.0, "eigen_wd": math.exp(18.0), "answer_wd": 50.0}  # z = 0: p = 0.5
    at_fit, at_user = cal.verdict(row), cal.verdict(row, base_rate=0.75)
    assert at_fit.p == pytest.approx(0.5) and at_user.p == pytest.approx(0.75)
    assert at_user.flag == at_fit.flag is False and at_user.p_fitted == at_fit.p  # the flag keeps its FPR


def test_each_sentence_gets_its_own_verdict():
    cal = two_heads()
    sentences = [
        SentenceScore("a.", 0, 2, 60.0, 8.0),  # z = 1 + 1
        SentenceScore("b.", 3, 5, 40.0, 6.0),  # z = 0
        SentenceScore("c.", 6, 8, None, 6.0),  # no token: no verdict
    ]
    got = cal.sentence_verdicts(sentences)
    assert got[0].p == pytest.approx(sigmoid(2.0)) and got[0].flag
    assert got[1].p == pytest.approx(0.5) and not got[1].flag and got[2] is None
    assert cal.sentence_verdicts(sentences, base_rate=0.8)[1].p == pytest.approx(shift_prior(0.5, 0.4, 0.8))


def test_the_sentence_verdicts_aggregated_over_the_answer_by_hand(tmp_path):
    """A head over [AvgWD, sentence_verdict]: the member is the mean of the sentences' z under the sentence head
    (z = (score - 40)/20 + (unigram - 6)/2); a sentence without a part is left out, an answer without a sentence
    has none and falls to the next head, and a file whose heads read it without a sentence head is refused."""
    first = ScoreModel(("avg_wd", "sentence_verdict"), (60.0, 0.0), (15.0, 1.0), (1.0, 1.0), 0.0, Platt(-1.0, 0.0))
    cal = replace(two_heads(), heads=(Head(first, point(0.6)), *two_heads().heads[1:]))
    sentences = [
        SentenceScore("a.", 0, 2, 60.0, 8.0),  # z = 1 + 1
        SentenceScore("b.", 3, 5, 40.0, 5.0),  # z = 0 - 0.5
        SentenceScore("c.", 6, 8, None, 9.0),  # no OT score: left out
    ]
    assert cal.member({"sentences": sentences}, "sentence_verdict") == pytest.approx(0.75)
    row = {"avg_wd": 75.0, "eigen_wd": math.exp(18.0), "sentences": sentences}
    got = cal.verdict(row)
    assert got.members == ("avg_wd", "sentence_verdict") and got.p == pytest.approx(sigmoid(1.0 + 0.75))
    assert cal.verdict({**row, "sentences": sentences[2:]}).members == ("avg_wd", "log_eigen_wd")
    assert replace(cal, sentence=None).verdict(row).members == ("avg_wd", "log_eigen_wd")
    body = json.loads(cal.to_json())
    body["sentence"] = None
    (tmp_path / "c.json").write_text(json.dumps(body))
    with pytest.raises(BBWDError, match="field 'sentence' must be a head when another head reads sentence_verdict"):
        Calibration.load(tmp_path / "c.json")


def test_a_format_2_calibration_round_trips_and_a_format_1_file_keeps_its_bytes(tmp_path):
    cal = two_heads()
    cal.save(tmp_path / "c.json")
    loaded = Calibration.load(tmp_path / "c.json")
    assert loaded == cal and json.loads(loaded.to_json())["format"] == "bbwd-calibration/2"
    old = FIXTURES / "calibration-format1.json"  # the first embedded calibration, as shipped before heads
    first = Calibration.load(old)
    assert first.to_json() == old.read_text() and first.heads[0].members == ("avg_wd", "log_eigen_wd")
    m = first.model
    avg, log_eig = 40.0, math.log(3e7)
    z = (avg - m.mean[0]) / m.scale[0] * m.coef[0] + (log_eig - m.mean[1]) / m.scale[1] * m.coef[1] + m.intercept
    assert first.verdict({"avg_wd": avg, "eigen_wd": 3e7}).p == pytest.approx(
        float(np.interp(z, m.calibrator.x, m.calibrator.y))
    )


def test_a_file_with_an_unknown_member_is_refused_naming_it(tmp_path):
    body = json.loads(two_heads().to_json())
    body["more_heads"][0]["model"]["features"] = ["avg_wd", "nli"]
    (tmp_path / "c.json").write_text(json.dumps(body))
    with pytest.raises(
        BBWDError, match=r"field 'more_heads\[0\].model.features' must be members of .*unknown: \['nli'\]"
    ):
        Calibration.load(tmp_path / "c.json")


def test_a_passage_is_judged_without_the_members_defined_for_short_answers(tmp_path):
    """Head 1 reads ln EigenWD (short-only); head 2 (AvgWD alone) judges a passage when the calibration says so."""
    only_avg = ScoreModel(("avg_wd",), (60.0,), (15.0,), (1.0,), 0.0, Platt(-1.0, 0.0))
    cal = replace(two_heads(), heads=(two_heads().heads[0], Head(only_avg, point(0.5))), short_only=("log_eigen_wd",))
    row = {"avg_wd": 75.0, "eigen_wd": math.exp(20.0), "answer_wd": 60.0}
    short = cal.verdict({**row, "token_counts": [40, 127, 300]})  # median 127 < 128 tokens
    passage = cal.verdict({**row, "token_counts": [40, 128, 300]})
    assert short.members == ("avg_wd", "log_eigen_wd", "answer_wd") and short.p == pytest.approx(sigmoid(2.0))
    assert passage.members == ("avg_wd",) and passage.p == pytest.approx(sigmoid(1.0))
    assert replace(cal, short_only=()).verdict({**row, "token_counts": [200]}).members == short.members
    cal.save(tmp_path / "c.json")
    assert Calibration.load(tmp_path / "c.json") == cal and "short_only" not in two_heads().to_json()
    with pytest.raises(BBWDError, match="reads log_eigen_wd as missing on a passage"):
        replace(cal, heads=cal.heads[:1]).verdict({**row, "token_counts": [200]})
    body = json.loads(cal.to_json())
    body["short_only"] = ["avg_wd"]
    (tmp_path / "c.json").write_text(json.dumps(body))
    with pytest.raises(BBWDError, match="field 'short_only' must be members of"):
        Calibration.load(tmp_path / "c.json")


def test_a_calibration_whose_members_the_run_cannot_compute_is_refused(smollm_teacher, monkeypatch):
    from blackbox_wd.teachers import registry

    monkeypatch.setattr(registry, "REFERENCE_BANDWIDTHS", {})  # this teacher has no fixed bandwidth here
    fixed = ScoreModel(("avg_wd", "log_eigen_wd_fixed"), (60.0, 18.0), (15.0, 2.0), (1.0, 1.0), 0.0, Platt(-1.0, 0.0))
    cal = replace(make(), heads=(replace(make().heads[0], model=fixed),), origin="fixed.json")
    with pytest.raises(
        BBWDError, match="^calibration fixed.json needs members this run cannot compute: log_eigen_wd_fixed$"
    ):
        Detector(smollm_teacher, None, Settings(device="cpu"), cal, device="cpu")
    both = replace(cal, heads=(*cal.heads, *make().heads))  # a head it can compute: accepted
    assert Detector(smollm_teacher, None, Settings(device="cpu"), both, device="cpu").calibration is both


def test_answer_nll_is_computable_only_with_the_teachers_log_prob_pass(smollm_teacher):
    """A head over the teacher's NLL of the answer needs the whole-model pass that LNE runs: refused without it."""
    nll = ScoreModel(("avg_wd", "answer_nll"), (60.0, 2.0), (15.0, 1.0), (1.0, -1.0), 0.0, Platt(-1.0, 0.0))
    cal = replace(make(), heads=(replace(make().heads[0], model=nll),), origin="nll.json")
    with pytest.raises(BBWDError, match="^calibration nll.json needs members this run cannot compute: answer_nll$"):
        Detector(smollm_teacher, None, Settings(device="cpu"), cal, device="cpu", lne=False)
    assert Detector(smollm_teacher, None, Settings(device="cpu"), cal, device="cpu", lne=True).calibration is cal


def test_the_fixed_bandwidth_does_not_follow_the_prompts_d():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 6))
    d = np.abs(x + x.T)
    np.fill_diagonal(d, 0.0)
    # the paper's EigenWD divides D's own scale out (up to the 1e-6 in its bandwidth): unchanged
    assert eigen_wd(3 * d) == pytest.approx(eigen_wd(d), rel=1e-6)
    assert eigen_wd(d, bandwidth=median_bandwidth(d)) == eigen_wd(d)  # the median is its default
    near, far = eigen_wd(d, bandwidth=2.0), eigen_wd(3 * d, bandwidth=2.0)
    assert far > near  # a fixed b sees that 3D is farther apart
    assert round(eigen_wd(np.zeros((3, 3))), 2) == 606.86 and round(eigen_wd(1.0 - np.eye(3)), 1) == 18750.7


def test_unit_states_tame_one_massive_token():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(8, 16))
    b = a + 0.1 * rng.normal(size=(8, 16))
    a_massive = a.copy()
    a_massive[0] *= 13.0  # one token at 13x the norm of the others, as Gemma-3's middle layer has
    raw = pairwise_w2([a, a_massive, b])
    unit = pairwise_w2([unit_states(a), unit_states(a_massive), unit_states(b)])
    assert raw[0, 1] > 5 * raw[0, 2]  # raw: the one token dominates the distance
    assert unit[0, 1] == pytest.approx(0.0, abs=1e-6)  # scaling a token does not move it on the unit sphere
    assert np.linalg.norm(unit_states(a_massive), axis=1) == pytest.approx(np.ones(8))
    assert avg_wd(unit) < avg_wd(raw)


def test_the_unigram_surprise_by_hand():
    # counted: "tom was born in 1900" x2 (samples) + "tom was born in 1850" (answer): 15 words, 6 distinct
    got = unigram_surprise(
        ["Tom was born in 1850."], ["Tom was born in 1900.", "Tom was born in 1900."], "Tom was born in 1850."
    )
    assert got == [pytest.approx(math.log(21 / 2))]  # p(1850) = (1 + 1) / (15 + 6)
    assert unigram_surprise(["..."], ["a"], "...") == [None]
