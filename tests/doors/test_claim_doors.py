"""Claims through the doors, without a model: a record's ``claims`` read and checked, each claim's score (the share of
samples that lack one of its key words), an empty claim's own error, the claim head's verdict (read from the claim
and its answer's AvgWD), its file round trip, the claim table ``bbwd calibrate`` fits it on, and serve's request
option ``bbwd.claims`` (checked, and not forwarded to the target)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from blackbox_wd.calibration.evaluation.claim_level import claim_columns
from blackbox_wd.calibration.heads import Head, OperatingPoint, Platt, ScoreModel
from blackbox_wd.calibration.labelled import claim_table
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
from blackbox_wd.doors.eval.claim_level import claim_lines
from blackbox_wd.doors.serve.protocol import ServeError, forwarded, parse_request
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.inputs import parse_line
from blackbox_wd.signals.claims import ClaimScore, claim_dicts, read_claims, score_claims

PROMPT = "Tell me about Ada Lovelace."
ANSWER = "Ada Lovelace was born in London in 1815. She wrote the first program for the Analytical Engine."
SAMPLES = [
    "Ada Lovelace was born in London in 1815 and worked with Babbage on the Analytical Engine.",
    "Born in London in 1815, Ada Lovelace wrote notes on the Analytical Engine.",
    "Ada Lovelace, born 1815 in London, is called the first programmer.",
    "Ada Lovelace (born in London, 1815) was a mathematician; she was fond of horses.",
]


def test_a_claim_one_sample_states_scores_above_a_claim_every_sample_states() -> None:
    # "born in London in 1815": key words born, london, 1815 (ada and lovelace are the prompt's), in every sample;
    # "fond of horses": key words fond, horses, only in the last sample (kept: the answer lacks both)
    every, one = score_claims(["Ada was born in London in 1815.", "Ada was fond of horses."], SAMPLES, ANSWER, PROMPT)
    assert every.score == 0.0  # no sample lacks a key word
    assert one.score == pytest.approx(3 / 4)  # three of the four samples lack them
    assert every.error is None and one.error is None


def test_an_empty_claim_gets_its_own_error_and_the_others_keep_their_scores() -> None:
    got = score_claims(["Ada was born in London.", "   ", "Ada was fond of horses."], SAMPLES, ANSWER, PROMPT)
    assert [c.text for c in got] == ["Ada was born in London.", "   ", "Ada was fond of horses."]
    assert got[1].score is None and got[1].error == "claim 1 is empty"
    assert got[0].score == 0.0 and got[2].score == pytest.approx(3 / 4)
    rows = claim_dicts(got)
    assert rows[0] == {"text": "Ada was born in London.", "score": 0.0, "p_hallucination": None, "flag": None}
    assert rows[1]["error"] == "claim 1 is empty"  # the key only where a claim has an error


def test_a_record_reads_claims_as_strings_or_objects_and_names_a_bad_one() -> None:
    line = {"prompt": PROMPT, "responses": SAMPLES, "response": ANSWER}
    rec = parse_line(json.dumps({**line, "claims": ["Ada was born in 1815.", {"text": "She wrote a program."}]}), 3)
    assert rec.error is None and rec.claims == ("Ada was born in 1815.", "She wrote a program.")
    assert parse_line(json.dumps(line), 4).claims is None
    bad = parse_line(json.dumps({**line, "claims": "Ada was born in 1815."}), 5)
    assert bad.error == "line 5: field 'claims' must be a list of strings or of objects with 'text' (got str)"
    worse = parse_line(json.dumps({**line, "claims": ["fine", {"label": "supported"}]}), 6)
    assert worse.error == "line 6: field 'claims' item 1 must be a string or an object with a string 'text'"
    with pytest.raises(ValueError, match="item 0"):
        read_claims([3])


def claim_head(threshold: float = 0.5) -> Head:
    """z = (avg_wd - 10) / 2 + (score - 0.5) / 0.25, halved (a mean of two); p = sigmoid(z)."""
    model = ScoreModel(("avg_wd", "score"), (10.0, 0.5), (2.0, 0.25), (0.5, 0.5), 0.0, Platt(-1.0, 0.0))
    return Head(model, OperatingPoint("target_fpr", 0.1, threshold, 0.1, 0.5, 0.5, 0.5))


def test_the_claim_head_reads_the_claim_and_its_answers_avg_wd_and_round_trips() -> None:
    shipped = Calibration.load(PACKAGE_CALIBRATIONS / "smollm2-135m.json")
    on = replace(shipped.fitted_on, claim_base_rate=0.3, claim_n=100)
    cal = replace(shipped, claim=claim_head(), fitted_on=on)
    again = Calibration.from_json(cal.to_json())
    assert again.claim == cal.claim and again.fitted_on.claim_base_rate == 0.3 and again.id == cal.id
    assert Calibration.from_json(shipped.to_json()).id == shipped.id  # a file without a claim head keeps its id
    claims = [ClaimScore("a", 0.75), ClaimScore("b", 0.25), ClaimScore("c", None, error="claim 2 is empty")]
    high, low, none = cal.claim_verdicts(claims, {"avg_wd": 12.0})
    # z = ((12 - 10) / 2 + (0.75 - 0.5) / 0.25) / 2 = 1.0; ((12 - 10) / 2 + (0.25 - 0.5) / 0.25) / 2 = 0.0
    assert high.p == pytest.approx(1 / (1 + np.exp(-1.0))) and high.flag
    assert low.p == pytest.approx(0.5) and low.flag  # at the threshold: flagged
    assert none is None
    assert shipped.claim_verdicts(claims, {"avg_wd": 12.0}) == [None, None, None]  # no claim head: no verdict
    with pytest.raises(BBWDError, match="field 'fitted_on.claim_base_rate' must be in"):
        Calibration.from_json(replace(shipped, claim=claim_head()).to_json())


def test_the_claim_table_takes_labelled_claims_with_their_answers_avg_wd() -> None:
    rows = [
        ("a.jsonl", 1, {"avg_wd": 9.0, "claims": [{"score": 0.1}, {"score": 0.9}, {"score": 0.5}]}, 0.0),
        ("a.jsonl", 2, {"avg_wd": 11.0, "claims": [{"score": 0.2}], "claim_labels": ["unsupported"]}, 1.0),
        ("a.jsonl", 3, {"avg_wd": 5.0, "claims": [{"score": 0.3}]}, 0.0),  # no labels: not read
    ]
    rows[0][2]["claim_labels"] = ["supported", "unsupported", "other"]  # other: left out
    t = claim_table(rows, ["s:1", "s:2", "s:3"], ["s", "s", "t"])
    assert t is not None
    assert t.members["avg_wd"].tolist() == [9.0, 9.0, 11.0] and t.members["score"].tolist() == [0.1, 0.9, 0.2]
    assert t.y.tolist() == [0, 1, 1] and t.groups.tolist() == ["s:1", "s:1", "s:2"]
    assert claim_table(rows[2:], ["s:3"], ["t"]) is None


def test_serve_takes_claims_in_the_bbwd_object_and_does_not_forward_it() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "bbwd": {"claims": ["Ada was born."]}}
    raw = json.dumps(body).encode()
    request = parse_request(raw, "m")
    assert request.bbwd is not None and request.bbwd.claims == ["Ada was born."]
    assert json.loads(forwarded(raw, request)) == {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    plain = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    assert forwarded(plain, parse_request(plain, "m")) == plain  # byte for byte
    with pytest.raises(ServeError) as info:
        parse_request(json.dumps({**body, "bbwd": {"claims": "Ada was born."}}).encode(), "m")
    assert info.value.status == 400 and "bbwd.claims" in info.value.body()["error"]["message"]
    with pytest.raises(ServeError):
        parse_request(json.dumps({**body, "bbwd": {"claim": ["x"]}}).encode(), "m")  # an unknown option


def test_eval_reports_the_claim_auroc_grouped_by_answer_beside_the_authors_scores() -> None:
    rows = [
        {  # unsupported claims score higher: bbwd ranks all three pairs right; the authors' confidence two of three
            "claims": [{"score": 0.9, "p_hallucination": None}, {"score": 0.1, "p_hallucination": None}],
            "claim_labels": ["unsupported", "supported"],
            "claim_scores": {"sc_score_4samples": [0.5, 1.0]},
        },
        {
            "claims": [{"score": 0.2}, {"score": 0.8}, {"score": 0.5}],
            "claim_labels": ["supported", "other", "supported"],
            "claim_scores": {"sc_score_4samples": [0.25, 0.0, 1.0]},
        },
        {"claims": [{"score": 0.3}]},  # no labels: not read
    ]
    c = claim_columns(rows)
    assert c["y"].tolist() == [1, 0, 0, 0] and c["answer"].tolist() == [0, 0, 1, 1]
    assert c["sc_score_4samples"].tolist() == [-0.5, -1.0, -0.25, -1.0]
    text = "\n".join(claim_lines(rows, n_boot=200))
    assert "4 labelled claims (1 unsupported, `other` left out) of 2 judged answers" in text
    assert "| bbwd claim score (share of samples lacking a key word) | 1.000 [" in text
    assert (
        "| authors' self-consistency, 4 samples, gpt-3.5 judge (SC) | 0.667 [" in text
    )  # -0.5 above -1, -1, but not -0.25
    assert "claim p" not in text  # no claim head: no p to report
    assert "- self-consistency, 4 samples, gpt-3.5 judge (SC): +0.333 [" in text
    assert claim_lines([{"claims": []}]) == []
