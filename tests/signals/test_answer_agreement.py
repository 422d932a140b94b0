"""The judged answer's disagreement with the samples (``answers.text.answer_disagreement``, 1 - self-consistency):
SQuAD normalisation for words, numbers read as numbers; and a scored result carries it with a judged answer only."""

from __future__ import annotations

import numpy as np
import pytest

from blackbox_wd.calibration.members import SHORT_ONLY
from blackbox_wd.signals.answers.text import answer_disagreement, em_key, number_of, same_answer


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("14", "14.0", True),
        ("14", "$14", True),
        ("33 dollars", "$33", True),  # the number, and no other words on one side
        ("1,400", "1400", True),
        ("1/2", "0.5", True),
        ("2", "Two", True),
        ("50%", "50", True),
        ("15.3", "153", False),  # SQuAD normalisation alone would call these equal
        ("27 days", "60 days", False),
        ("27 days", "27 hours", False),  # the same number, other words on both sides
        ("Apollo 11", "Gemini 11", False),
        ("36 dollars + 36 cents", "36", False),  # two numbers: not a number, and not the same words
        ("The Griswolds", "griswolds", True),
        ("Canberra", "Sydney", False),
        ("The One Ring", "1", False),  # a number word counts only as the whole answer
    ],
)
def test_same_answer(a, b, same):
    assert same_answer(a, b) is same and same_answer(b, a) is same


def test_numbers_are_read_out_of_their_text():
    assert number_of("-3.5 degrees") == (-3.5, "degrees")
    assert number_of("about 1,234,567 people") == (1234567.0, "about people")
    assert number_of("no number here") is None and number_of("3/0") is None


def test_disagreement_is_the_share_of_samples_not_giving_the_answer():
    samples = ["12", "12.0", "$12", "twelve", "13", "12 apples", "1.2", "120", "12", "twelve apples"]
    # 12, 12.0, $12, twelve, 12 apples, 12 agree; 13, 1.2, 120 do not; "twelve apples" is words, not a number
    assert answer_disagreement("12", samples) == pytest.approx(0.4)
    # by SQuAD normalisation alone "12", "$12", "12" and "1.2" (read as "12") agree and "12.0" (read as "120") not
    assert np.mean([em_key(s) != em_key("12") for s in samples]) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        answer_disagreement("12", [])


def test_it_is_a_short_answer_member():
    """On a passage nearly every sample disagrees: a calibration fitted on both kinds reads it as missing there."""
    assert "answer_disagreement" in SHORT_ONLY
