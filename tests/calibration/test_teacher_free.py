"""Every teacher gets a verdict (#59): a calibration's heads that read the texts alone (``Calibration.teacher_free``)
judge a run of any teacher, its teacher's settings left out of the check; a teacher without a file of its own, or
whose file does not apply, is judged by the shipped API file's such heads, with one line saying so."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from blackbox_wd.adaptive import Settle
from blackbox_wd.calibration import choice as calibration_module
from blackbox_wd.calibration.choice import embedded_calibration
from blackbox_wd.calibration.heads import FittedOn, Head, OperatingPoint, Platt, RoundHeads, ScoreModel
from blackbox_wd.calibration.members import TEACHER_FREE
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import calibration_fingerprint, covered_settings

REPORTED = {
    "teacher": "smollm2-135m",
    "target": "recorded",
    "white_box": False,
    "layer": 15,
    "k": 10,
    "alpha": 0.001,
    "p": 0.1,
    "proj_dim": 128,
    "proj_seed": 0,
    "norm": "none",
}
OTHER_TEACHER = {**REPORTED, "teacher": "/models/tiny", "layer": 1, "alpha": 0.01, "p": 0.5, "proj_dim": 32}


def head(members: tuple[str, ...], threshold: float = 0.5, kind: str | None = None) -> Head:
    """A head over ``members`` with unit scales around 0, equal weights and p = sigmoid(z)."""
    n = len(members)
    model = ScoreModel(members, (0.0,) * n, (1.0,) * n, (1.0 / n,) * n, 0.0, Platt(-1.0, 0.0))
    return Head(model, OperatingPoint("target_fpr", 0.1, threshold, 0.1, 0.5, 0.6, 0.55), kind)


def calibration(heads: tuple[Head, ...], rounds=(), sentence=None, claim=None, reported=REPORTED) -> Calibration:
    """A calibration of ``heads`` (the first judges every kind) fitted under ``reported``."""
    on = FittedOn("rows.jsonl", {"set": 400}, None, "label", 400, 200, 0.5, 5, 0, {"auroc": 0.7})
    on = replace(on, sentence_base_rate=0.3, sentence_n=50) if sentence is not None else on
    on = replace(on, claim_base_rate=0.4, claim_n=60) if claim is not None else on
    return Calibration(
        heads,
        calibration_fingerprint(reported),
        covered_settings(reported),
        on,
        "0.1.0",
        sentence=sentence,
        claim=claim,
        rounds=tuple(rounds),
    )


MIXED = calibration(
    (head(("avg_wd", "ls")), head(("ls", "dse"), 0.6), head(("answer_disagreement",), 0.7, "phrase"), head(("dse",))),
    rounds=[
        RoundHeads(3, (head(("avg_wd",)), head(("ls",), 0.4)), Settle(0.2, 0.8)),
        RoundHeads(5, (head(("log_eigen_wd",)),), Settle(0.3, 0.7)),
    ],
    sentence=head(("score", "unigram")),
    claim=head(("avg_wd", "score")),
)


def test_teacher_free_keeps_the_heads_of_the_texts_alone_at_every_k():
    texts = MIXED.teacher_free()
    assert texts is not None and texts.is_teacher_free and not MIXED.is_teacher_free
    assert [h.members for h in texts.heads] == [("ls", "dse"), ("answer_disagreement",), ("dse",)]
    assert texts.operating_point.threshold == 0.6 and texts.heads[1].kind == "phrase"
    assert [(s.k, [h.members for h in s.heads]) for s in texts.rounds] == [(3, [("ls",)])]  # K = 5 has none
    assert texts.rounds[0].settle == Settle(0.2, 0.8) and texts.ks == (3, 10)
    assert texts.sentence is None and texts.claim is None  # an OT score, and the answer's AvgWD
    assert texts.fitted_on.sentence_n is None and texts.fitted_on.claim_n is None
    assert all(set(h.members) <= set(TEACHER_FREE) for h in texts.heads)
    assert Calibration.from_json(texts.to_json()) == texts  # a file of its own, checked as any


def test_teacher_free_is_none_without_such_a_head_at_its_own_k():
    assert calibration((head(("avg_wd", "ls")), head(("log_eigen_wd",)))).teacher_free() is None
    only_stage = calibration((head(("avg_wd",)),), rounds=[RoundHeads(3, (head(("ls",)),), Settle())])
    assert only_stage.teacher_free() is None


def test_a_calibration_of_the_texts_alone_judges_any_teacher_and_a_teacher_state_one_is_refused():
    texts = MIXED.teacher_free()
    assert texts.mismatch(OTHER_TEACHER) is None
    texts.check(OTHER_TEACHER)  # accepted: its heads read no teacher state
    texts.check({**OTHER_TEACHER, "k": 3, "stop": "settle"})  # K and -k auto still follow the fitted stages
    with pytest.raises(BBWDError, match="has heads for K = 3, 10; this run's K = 2 is below them"):
        texts.check({**OTHER_TEACHER, "k": 2})
    why = MIXED.mismatch(OTHER_TEACHER)
    assert why is not None and '"teacher": "smollm2-135m"' not in why and "teacher: " in why
    with pytest.raises(BBWDError, match="does not apply to this run"):
        MIXED.check(OTHER_TEACHER)
    # a file fitted under another teacher whose heads read the texts alone: applies as well
    mine = calibration((head(("ls", "dse")),), reported=OTHER_TEACHER)
    assert mine.is_teacher_free and mine.mismatch(REPORTED) is None
    v = texts.verdict({"ls": 0.5, "dse": 0.7}, k=10)
    assert v.members == ("ls", "dse") and v.p == pytest.approx(1 / (1 + math.exp(-0.6)))


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """The shipped files replaced by tmp_path's: an API file whose heads include some of the texts alone."""
    monkeypatch.setattr(calibration_module, "PACKAGE_CALIBRATIONS", tmp_path)
    MIXED.save(tmp_path / "smollm2-135m.api.json")
    return tmp_path


def test_a_teacher_without_its_own_file_is_judged_by_the_api_files_heads_of_the_texts_alone(shipped):
    cal, note = embedded_calibration(OTHER_TEACHER)
    assert cal == MIXED.teacher_free() and cal.origin == "embedded smollm2-135m.api.json, its heads of the texts alone"
    assert note == (
        "note: no calibration ships for black-box runs with teacher /models/tiny: judged by the heads of "
        "smollm2-135m.api.json that read the texts alone (no teacher state), fitted on recorded answers of other "
        "models: its risk is a probability on that data"
    )
    cal, note = embedded_calibration({**OTHER_TEACHER, "white_box": True, "teacher": "gemma3-270m"})
    assert cal is not None and note.startswith("note: no calibration ships for teacher gemma3-270m: judged by")
    # the default teacher's own file, as fitted: kept, no note
    cal, note = embedded_calibration(REPORTED)
    assert cal == MIXED and note is None and cal.origin == "embedded smollm2-135m.api.json"
    # its own file under other meaning settings: the heads of the texts alone, the reason in the same line
    cal, note = embedded_calibration({**REPORTED, "layer": 3})
    assert cal == MIXED.teacher_free() and "\n" not in note
    assert note.startswith(
        "note: the embedded calibration smollm2-135m.api.json does not apply to this run (it is for settings "
    )
    assert "(layer: 15 in the calibration, 3 here)): judged by the heads of smollm2-135m.api.json" in note
    # below every fitted K: neither applies, and the line says why for both
    cal, note = embedded_calibration({**OTHER_TEACHER, "k": 2})
    assert cal is None and note.startswith("note: no calibration ships for black-box runs with teacher /models/tiny")
    assert note.endswith("this run's K = 2 is below them") and "nor do the heads of smollm2-135m.api.json" in note


def test_without_heads_of_the_texts_alone_no_risk_is_shown(tmp_path, monkeypatch):
    monkeypatch.setattr(calibration_module, "PACKAGE_CALIBRATIONS", tmp_path)
    calibration((head(("avg_wd", "ls")),)).save(tmp_path / "smollm2-135m.api.json")
    cal, note = embedded_calibration(OTHER_TEACHER)
    assert cal is None and note == (
        "note: no calibration ships for black-box runs with teacher /models/tiny yet, so no risk is shown: fit one "
        "on labelled results with 'bbwd calibrate' and pass it with --calibration"
    )


def test_a_folder_teacher_gets_a_verdict_through_the_builder(shipped, tiny_folder):
    """The wiring every door builds (``Detector.from_settings``): a folder teacher, recorded samples, the shipped API
    file's heads of the texts alone (here ``MIXED``'s); the members they read are ones such a run computes."""
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.settings import Settings

    detector = Detector.from_settings(Settings(teacher=tiny_folder, device="cpu", k=10), recorded=True)
    assert detector.calibration == MIXED.teacher_free()
    assert detector.calibration_note is not None and detector.calibration_note.startswith(
        f"note: no calibration ships for black-box runs with teacher {tiny_folder}: judged by the heads of"
    )
    agree = detector.score("What is 2 + 2?", responses=["4"] * 9 + ["5"], answer="4")
    scatter = detector.score("What is 2 + 2?", responses=list("abcdefghij"), answer="4")
    for result in (agree, scatter):
        assert result.flag is not None and result.calibration["members"] == ["answer_disagreement"]
    assert agree.answer_disagreement == pytest.approx(0.1) and scatter.answer_disagreement == 1.0
    assert agree.p_hallucination == pytest.approx(1 / (1 + math.exp(-0.1)))  # sigmoid of the phrase head's z
    assert (agree.flag, scatter.flag) == (False, True)  # threshold 0.7
