"""A fitted calibration: exact JSON round trip, refusal of other settings, the embedded default, application."""

from __future__ import annotations

import asyncio
import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from blackbox_wd.adaptive import Settle
from blackbox_wd.calibration import choice as calibration_module
from blackbox_wd.calibration.choice import default_calibration_path, embedded_calibration
from blackbox_wd.calibration.heads import FittedOn, Head, Isotonic, OperatingPoint, Platt, RoundHeads, ScoreModel
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
from blackbox_wd.clients.local import LocalSampler
from blackbox_wd.doors.batch import BatchRunner
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.detector import Detector
from blackbox_wd.settings import Settings, calibration_fingerprint, covered_settings
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS
from blackbox_wd.teachers.forcing import HFTeacher

REPORTED = {
    "teacher": "smollm2-135m",
    "target": "smollm2-135m",
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
    "device": "cpu",
    "fingerprint": "whatever",
    "bandwidth": 80.0,
}


def make(reported=REPORTED, calibrator=None, threshold=0.5) -> Calibration:
    """A calibration with round numbers: z = (avg - 60) / 15 + (ln eig - 18) / 2, Platt p = sigmoid(z)."""
    model = ScoreModel(
        ("avg_wd", "log_eigen_wd"), (60.0, 18.0), (15.0, 2.0), (1.0, 1.0), 0.0, calibrator or Platt(-1.0, 0.0)
    )
    point = OperatingPoint("target_fpr", 0.1, threshold, 0.1, 0.6, 0.7, 0.65)
    on = FittedOn(
        "results.jsonl",
        {"nq": 300, "sciq": 300},
        "zero-shot",
        "label_em",
        600,
        270,
        0.45,
        5,
        0,
        {"auroc": 0.8, "log_loss": 0.5, "brier": 0.18, "ece": 0.04},
    )
    return Calibration(
        (Head(model, point),), calibration_fingerprint(reported), covered_settings(reported), on, "0.1.0"
    )


@pytest.mark.parametrize(
    "calibrator", [Platt(-1.0634, 0.0123456789012345), Isotonic((-2.0, -0.5, 0.1 + 0.2, 1.75), (0.0, 0.1, 1 / 3, 1.0))]
)
def test_json_round_trips_exactly(tmp_path, calibrator):
    cal = make(calibrator=calibrator)
    text = cal.to_json()
    again = Calibration.from_json(text)
    assert again == cal and again.to_json() == text
    cal.save(tmp_path / "c.json")
    loaded = Calibration.load(tmp_path / "c.json")
    assert loaded == cal and loaded.origin == str(tmp_path / "c.json") and loaded.id == cal.id
    row = {"avg_wd": 75.07, "eigen_wd": 1.17e8}
    assert loaded.verdict(row).p == cal.verdict(row).p
    body = json.loads(text)  # plain JSON: numbers, strings, lists, objects
    assert body["format"] == "bbwd-calibration/1" and body["model"]["calibrator"]["method"] == calibrator.method
    assert "origin" not in body and body["settings"]["k"] == 10 and "seed" not in body["settings"]


def test_predict_is_the_documented_formula():
    cal = make()
    z = (75.07 - 60) / 15 + (math.log(1.17e8) - 18) / 2
    assert cal.verdict({"avg_wd": 75.07, "eigen_wd": 1.17e8}).p == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-15)
    iso = make(calibrator=Isotonic((-1.0, 1.0), (0.2, 0.8)))
    assert iso.verdict({"avg_wd": 60.0, "eigen_wd": math.exp(18.5)}).p == pytest.approx(0.575)  # z = 0.25
    row = {"avg_wd": 75.07, "eigen_wd": 1.17e8}  # flagged from p = threshold on, not below it
    p = cal.verdict(row).p
    assert make(threshold=p).verdict(row).flag and not make(threshold=math.nextafter(p, 1.0)).verdict(row).flag
    with pytest.raises(BBWDError, match="cannot calibrate: no finite avg_wd"):
        cal.verdict({"avg_wd": None, "eigen_wd": 1e8})


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda b: b.update(format="other"), "field 'format' is not 'bbwd-calibration/2' or 'bbwd-calibration/1'"),
        (lambda b: b["settings"].update(k=4), "field 'fingerprint' must be the fingerprint of its settings"),
        (lambda b: b["model"].update(features=["avg_wd", "bogus"]), r"field 'model.features' .*unknown: \['bogus'\]"),
        (lambda b: b["model"]["calibrator"].update(method="beta"), "'model.calibrator.method' must be one of 'iso"),
        (lambda b: b["model"].update(scale=[15.0, 0.0]), "field 'model.scale' must be positive"),
        (lambda b: b["model"].update(mean=[60.0]), "field 'model.mean' must be one number per feature"),
        (lambda b: b["model"].update(bias=1.0), "field 'model.bias' must be absent: model has the fields features,"),
        (lambda b: b["operating_point"].pop("threshold"), "field 'operating_point.threshold' must be present"),
        (lambda b: b["operating_point"].update(threshold="0.5"), "field 'operating_point.threshold' must be a num"),
        (lambda b: b["fitted_on"].update(n=600.5), "field 'fitted_on.n' must be an integer"),
        (lambda b: b.update(more_heads=[]), "field 'more_heads' must be absent in format 'bbwd-calibration/1'"),
    ],
)
def test_a_bad_file_is_refused_naming_the_field(edit, message):
    body = json.loads(make().to_json())
    edit(body)
    with pytest.raises(BBWDError, match=message) as refused:
        Calibration.from_json(json.dumps(body), origin="c.json")
    assert str(refused.value).startswith("c.json") and "\n" not in str(refused.value)  # one line, the file first


def test_both_formats_are_checked_by_one_table():
    """A head's fields are refused in the same words in a format 1 file and a format 2 one, and another head's under
    its path in the file."""
    cal = make()
    two = replace(cal, heads=(cal.heads[0], replace(cal.heads[0], kind="phrase")))
    first, other = (lambda b: b["model"]), (lambda b: b["more_heads"][0]["model"])
    for made, model, path in ((cal, first, "model"), (two, first, "model"), (two, other, "more_heads[0].model")):
        body = json.loads(made.to_json())
        model(body)["scale"] = [15.0, -2.0]
        with pytest.raises(BBWDError, match=rf"^c.json: field '{re.escape(path)}.scale' must be positive, one number"):
            Calibration.from_json(json.dumps(body), origin="c.json")
    assert json.loads(cal.to_json())["format"] == "bbwd-calibration/1"
    assert json.loads(two.to_json())["format"] == "bbwd-calibration/2"


SHIPPED = sorted(p.name for p in PACKAGE_CALIBRATIONS.glob("*.json"))


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_file_round_trips_to_its_own_bytes(name):
    """Read, written and read again: the same heads (every K's, the sentence and claim heads), and the file's bytes
    as ``bbwd calibrate`` wrote them (so its id, which batch rows name, is the same)."""
    path = PACKAGE_CALIBRATIONS / name
    cal = Calibration.load(path)
    again = Calibration.from_json(cal.to_json())
    assert cal.to_json() == path.read_text() and again.to_json() == path.read_text() and again.id == cal.id
    assert (again.heads, again.rounds, again.sentence, again.claim) == (cal.heads, cal.rounds, cal.sentence, cal.claim)
    assert again == cal and again.fitted_on == cal.fitted_on and again.short_only == cal.short_only


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.parametrize(
    "name,rows,line,p,flag",
    [  # as the calibration read its files before its format had a module of its own
        ("smollm2-135m.json", "report_scores.jsonl", 1, 0.8653051408494992, True),
        ("smollm2-135m.json", "report_scores.jsonl", 2, 0.6782701474490275, False),
        ("smollm2-135m.api.json", "sac3_scores.jsonl", 0, 0.09287313089550676, False),
        ("smollm2-135m.api.json", "sac3_scores.jsonl", 1, 0.5080645161290323, False),
    ],
)
def test_a_shipped_file_judges_as_before(name, rows, line, p, flag):
    row = json.loads((FIXTURES / rows).read_text().splitlines()[line])
    verdict = Calibration.load(PACKAGE_CALIBRATIONS / name).verdict(row)
    assert verdict.p == pytest.approx(p, abs=1e-12) and verdict.flag is flag


def test_nan_and_pickles_are_not_calibration_files(tmp_path):
    text = make().to_json().replace('"auroc": 0.8', '"auroc": NaN')
    with pytest.raises(BBWDError, match="not a calibration file: NaN is not a number in plain JSON"):
        Calibration.from_json(text)
    (tmp_path / "c.pkl").write_bytes(b"\x80\x04\x95")
    with pytest.raises(BBWDError, match="is not a calibration file"):
        Calibration.load(tmp_path / "c.pkl")
    with pytest.raises(BBWDError, match="calibration file not found"):
        Calibration.load(tmp_path / "missing.json")


def test_a_mismatched_fingerprint_is_refused_naming_what_differs():
    cal = replace(make(), origin="cal.json")
    cal.check({**REPORTED, "seed": 7, "device": "cuda", "protocol": "zero-shot"})  # none of these change the law
    run = {**REPORTED, "norm": "unit", "max_tokens": 64}
    with pytest.raises(BBWDError) as info:
        cal.check(run)
    message = str(info.value)
    assert message.startswith(
        "calibration cal.json does not apply to this run: it is for settings "
        f"{cal.fingerprint}, this run has {calibration_fingerprint(run)} "
    )
    assert message.endswith('(norm: "none" in the calibration, "unit" here)')  # the sampling side is no reason


def test_any_k_at_or_above_a_fitted_k_is_judged_by_the_nearest_lower_heads():
    cal = replace(make(), origin="cal.json")  # heads at K = 10 only
    assert cal.ks == (10,) and cal.k_note(10) is None
    cal.check({**REPORTED, "k": 20})  # accepted: K = 10's heads judge it
    assert cal.fitted_k(20) == 10 and cal.k_note(20) == (
        "note: calibration cal.json has heads for K = 10: K = 20 is judged by the heads of K = 10, the nearest lower"
    )
    with pytest.raises(BBWDError, match="calibration cal.json has heads for K = 10; this run's K = 4 is below them"):
        cal.check({**REPORTED, "k": 4})
    staged = replace(cal, rounds=(RoundHeads(3, cal.heads, Settle(0.2, 0.8)), RoundHeads(20, cal.heads, Settle())))
    assert staged.ks == (3, 10, 20) and [staged.fitted_k(k) for k in (3, 4, 9, 10, 19, 20, 40)] == [
        3,
        3,
        3,
        10,
        10,
        20,
        20,
    ]
    staged.check({**REPORTED, "k": 4})
    with pytest.raises(BBWDError, match='teacher: "smollm2-135m" in the calibration, "gemma3-270m" here'):
        cal.check({**REPORTED, "teacher": "gemma3-270m"})
    for name in ("alpha", "p", "layer", "proj_seed"):  # what a score means: refused
        with pytest.raises(BBWDError, match=f"{name}: "):
            cal.check({**REPORTED, name: 7})


def test_other_sampling_is_accepted_with_a_one_line_note():
    cal = replace(make(), origin="cal.json")
    assert cal.sampling_note(REPORTED) is None
    run = {**REPORTED, "temperature": 1.0, "max_tokens": 64, "target": "gpt-4o-mini", "endpoint": "api.openai.com"}
    cal.check(run)  # accepted
    note = cal.sampling_note(run)
    assert (
        note is not None
        and "\n" not in note
        and note.startswith("note: calibration cal.json was fitted on samples drawn otherwise (")
    )
    for part in (
        'target: "smollm2-135m" in the calibration, "gpt-4o-mini" here',
        'temperature: 0.5 in the calibration, 1.0 here',
        "max_tokens: 128 in the calibration, 64 here",
    ):
        assert part in note
    assert "top_p" not in note  # only what differs


def test_default_calibration_path_only_for_registry_names():
    assert default_calibration_path("smollm2-135m") == calibration_module.PACKAGE_CALIBRATIONS / "smollm2-135m.json"
    assert default_calibration_path("/models/x.gguf") is None and default_calibration_path("org/name") is None
    assert default_calibration_path("..") is None
    assert default_calibration_path("smollm2-135m", False).name == "smollm2-135m.api.json"  # fixed K and -k auto
    cal, note = embedded_calibration({**REPORTED, "teacher": "/models/x.gguf"})  # none of its own: the texts' heads
    texts = Calibration.load(default_calibration_path("smollm2-135m", False)).teacher_free()
    assert (cal is None) == (texts is None) and note is not None and "\n" not in note
    assert note.startswith("note: no calibration ships for teacher /models/x.gguf")


def test_the_shipped_calibration_is_valid_for_scores_default_settings():
    cal = Calibration.load(default_calibration_path(Settings().teacher))  # loading runs its field checks
    defaults = Settings()
    cal.check(
        {
            **REPORTED,
            "teacher": defaults.teacher,
            "target": defaults.teacher,
            "k": defaults.k,
            "temperature": defaults.temperature,
            "top_p": defaults.top_p,
            "max_tokens": defaults.max_tokens,
            "alpha": defaults.alpha,
            "p": defaults.p,
        }
    )
    assert cal.fitted_on.n >= 300 and 0.15 <= cal.fitted_on.base_rate <= 0.85
    assert cal.fitted_on.cv["auroc"] > 0.5 and 0 < cal.operating_point.threshold < 1


def test_the_shipped_calibration_serves_score_k_auto_on_the_embedded_model():
    """`bbwd score -k auto` on the embedded model gets `smollm2-135m.json`, the file of fixed K: its settings are
    score's defaults with llama.cpp's samples, and it judges stages 3 and 5 with heads and bands of their own."""
    path = default_calibration_path(Settings().teacher, True)
    cal = Calibration.load(path)
    defaults = Settings(stop="settle")
    reported = {**REPORTED, "k": defaults.k, "stop": defaults.stop, "temperature": defaults.temperature}
    cal.check({**reported, "sampler": "llama.cpp", "max_tokens": defaults.max_tokens})
    cal.check({**reported, "sampler": "llama.cpp", "stop": None})  # and fixed K
    assert [s.k for s in cal.rounds] == [3, 5] and cal.k == 10 and cal.fitted_on.n >= 300
    assert all(0 <= s.settle.below <= s.settle.above <= 1 for s in cal.rounds)


def test_samples_are_stored_only_when_stated():
    plain = make()
    assert "samples" not in json.loads(plain.to_json())["fitted_on"]  # older files keep their bytes and id
    stated = replace(plain, fitted_on=replace(plain.fitted_on, samples="gpt-4o at T=1"))
    assert json.loads(stated.to_json())["fitted_on"]["samples"] == "gpt-4o at T=1"
    assert Calibration.from_json(stated.to_json()) == stated and stated.id != plain.id


def test_the_shipped_api_calibration_is_valid_for_api_runs_at_scores_defaults():
    cal = Calibration.load(default_calibration_path("smollm2-135m", white_box=False))
    defaults = Settings()
    run = {
        **REPORTED,
        "target": "gpt-4o-mini",
        "endpoint": "api.openai.com",
        "k": defaults.k,
        "temperature": defaults.temperature,
        "alpha": defaults.alpha,
        "p": defaults.p,
    }
    cal.check(run)
    assert cal.settings["target"] == "recorded" and cal.fitted_on.samples.startswith("gpt-3.5-turbo (SAC3 NQ-open;")
    # prompts at K = 10: the kk sets' first 500 records, 3 of which have 6-9 samples (scored at K = 3 and 5 only)
    kk = {"kk_llama31_8b_triviaqa": 498, "kk_llama31_8b_sciq": 500, "kk_llama31_8b_math": 499}
    kk |= {"kk_mistral_7b_triviaqa": 500, "kk_mistral_7b_sciq": 500, "kk_mistral_7b_math": 500}
    assert cal.fitted_on.data == {
        "sac3_nq_open": 250,
        "wikibio_gpt3": 119,
        "gbu_factscore_gpt35": 100,
        "gbu_factscore_llama3_70b": 88,
        "gbu_popqa_gpt35": 93,
        "gbu_popqa_llama3_70b": 94,
        **kk,
    }
    assert cal.fitted_on.n == 3741 and cal.k == 10  # K = 10: every prompt but the 3 short of 10 samples
    assert 0.40 < cal.fitted_on.base_rate < 0.50 and cal.sentence is not None and cal.fitted_on.sentence_n == 959
    assert cal.ks == (3, 5, 10, 20)  # every K, one file
    # the answer's disagreement is a short-answer member; heads of their own for phrases, sentences and passages
    assert "answer_disagreement" in cal.model.features and "answer_disagreement" in cal.short_only
    assert {h.kind for h in cal.heads} == {None, "phrase", "sentence", "passage"}
    # #58's design: a sentence's first head reads the peers, the answer's peers and its disagreement, a phrase's
    # LexicalSimilarity ROUGE-1 and ROUGE-L, the answer's ROUGE-L and its disagreement; no W2 member
    first = next(h for h in cal.heads if h.kind == "sentence")
    assert set(first.members) == {*PEERS, *ANSWER_PEERS, "answer_disagreement"}, first.members
    first = next(h for h in cal.heads if h.kind == "phrase")
    assert set(first.members) == {"lexsim_rouge1", "lexsim_rougel", "answer_rougel", "answer_disagreement"}
    passage = [h for h in cal.heads if h.kind == "passage"]
    assert passage[0].members[0] == "avg_wd" and not set(passage[0].members) & set(cal.short_only)
    # a threshold is chosen leave-one-set-out where three of its sets can measure an FPR: not the sentences' (SAC3)
    for head in cal.heads:
        by_set = head.kind != "sentence"
        assert head.operating_point.rule == ("target_fpr_by_set" if by_set else "target_fpr"), head
    assert all(s.settle.below > 0 for s in cal.rounds if s.k < cal.k)  # -k auto stops at 3 and 5 up to K = 10
    cal.check({**run, "k": 20})
    cal.check({**run, "stop": "settle"})
    assert cal.fitted_on.cv["auroc"] > 0.5 and 0 < cal.operating_point.threshold < 1
    assert "temperature 0.5" in cal.sampling_note(run)


def test_embedded_calibration_applies_only_when_it_matches(tmp_path, monkeypatch):
    path = tmp_path / "smollm2-135m.json"
    monkeypatch.setattr(calibration_module, "default_calibration_path", lambda teacher, white_box=True: path)
    cal, note = embedded_calibration(REPORTED)  # none shipped
    assert cal is None and note.startswith(
        "note: no calibration ships for teacher smollm2-135m yet, so no risk is shown"
    )
    make().save(path)
    cal, note = embedded_calibration({**REPORTED, "seed": 3})
    assert note is None and cal == make() and cal.origin == "embedded smollm2-135m.json"
    cal, note = embedded_calibration({**REPORTED, "k": 3})
    assert cal is None and note.startswith("note: the embedded calibration smollm2-135m.json does not apply")
    assert note.endswith("has heads for K = 10; this run's K = 3 is below them")
    cal, note = embedded_calibration({**REPORTED, "temperature": 1.0})  # the sampling side: applied, with a note
    assert cal == make() and note.startswith(
        "note: calibration embedded smollm2-135m.json was fitted on samples drawn otherwise"
    )
    assert "temperature: 0.5 in the calibration, 1.0 here" in note


def test_the_embedded_calibration_is_chosen_by_the_kind_of_run():
    assert (
        default_calibration_path("smollm2-135m", white_box=False)
        == calibration_module.PACKAGE_CALIBRATIONS / "smollm2-135m.api.json"
    )
    assert default_calibration_path("smollm2-135m", white_box=True).name == "smollm2-135m.json"


def tiny_detector(tiny_llama, calibration=None, **settings) -> Detector:
    teacher = HFTeacher(*tiny_llama, name="tiny")
    return Detector(teacher, LocalSampler(teacher), Settings(**{"k": 2, "device": "cpu", **settings}), calibration)


def test_detector_adds_probability_and_flag_and_refuses_other_settings(tiny_llama):
    plain = tiny_detector(tiny_llama)
    cal = make(plain.reported_settings(), threshold=0.3)
    detector = plain.with_calibration(cal)
    result = detector.score("what is the capital of france", responses=["paris", "it is rome"])
    assert result.p_hallucination == cal.verdict({"avg_wd": result.avg_wd, "eigen_wd": result.eigen_wd}).p
    assert 0 < result.p_hallucination < 1 and result.flag == (result.p_hallucination >= 0.3)
    assert result.calibration["fingerprint"] == cal.fingerprint and result.calibration["n"] == 600
    assert result.to_dict()["p_hallucination"] == result.p_hallucination
    assert plain.score("is rome big", responses=["yes", "no"]).p_hallucination is None
    with pytest.raises(BBWDError, match=r"does not apply to this run: .*\(alpha: 0.001 in the calibration, 0.5 here\)"):
        tiny_detector(tiny_llama, cal, alpha=0.5)
    assert tiny_detector(tiny_llama, cal, k=3).calibration is cal  # another K: judged by the nearest lower K's heads


def test_batch_rows_carry_probability_flag_and_calibration(tiny_llama, tmp_path):
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in [
                {"prompt": "what is the capital of france", "responses": ["paris", "it is rome"]},
                {"prompt": "bad", "responses": "not a list"},
                {"prompt": "is rome big", "responses": ["yes", "no a small city"]},
            ]
        )
    )
    detector = tiny_detector(tiny_llama)
    cal = make(detector.reported_settings(), threshold=0.3)
    asyncio.run(BatchRunner(replace(detector.with_calibration(cal), group_size=2), sample_missing=False).run(src, dst))
    rows = [json.loads(line) for line in dst.read_text().splitlines()]
    for row in (rows[0], rows[2]):
        assert row["p_hallucination"] == cal.verdict(row).p and row["flag"] == (row["p_hallucination"] >= 0.3)
        assert row["calibration"] == cal.id
    assert rows[1]["error"] and rows[1]["p_hallucination"] is None and rows[1]["flag"] is None
    other = make(detector.reported_settings(), threshold=0.9)
    for resume in (detector.with_calibration(other), detector):
        with pytest.raises(BBWDError, match="was written with another calibration"):
            asyncio.run(BatchRunner(replace(resume, group_size=2), sample_missing=False).run(src, dst))
    assert np.isfinite([rows[0]["p_hallucination"], rows[2]["p_hallucination"]]).all()


@pytest.mark.parametrize("name", ["smollm2-135m.json", "smollm2-135m.api.json"])
def test_no_shipped_head_can_never_flag(name):
    """Every head of a shipped file, at every K, and its sentence and claim heads, has a threshold below 1 that
    flagged some hallucinations of its data (TPR above 0): none is silent by construction."""
    from blackbox_wd.calibration.choice import PACKAGE_CALIBRATIONS
    from blackbox_wd.calibration.combine import can_flag

    cal = Calibration.load(PACKAGE_CALIBRATIONS / name)
    every = [*cal.heads, *(h for s in cal.rounds for h in s.heads), *(h for h in (cal.sentence, cal.claim) if h)]
    silent = [(h.kind, h.members) for h in every if not can_flag(h.operating_point)]
    assert len(every) >= 8 and silent == []
