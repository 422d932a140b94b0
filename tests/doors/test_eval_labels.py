"""QA and MATH correctness labels; hallucination = 1 when the first response is wrong."""

from __future__ import annotations

import pytest

from blackbox_wd.doors.eval.labels import (
    hallucination_label,
    is_correct,
    prompt_labels,
    qa_correct_em,
    qa_correct_rouge,
)
from blackbox_wd.signals.answers.text import max_rouge_l, normalize_answer


def test_normalize_answer_squad_style():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("An apple, a day.") == "apple day"


def test_rouge_label_by_hand():
    # "Paris, France" vs "Paris": LCS 1, P = 1/2, R = 1 -> F1 = 2/3 >= 0.5: correct
    assert max_rouge_l("Paris, France", ["Paris"]) == pytest.approx(2 / 3)
    assert qa_correct_rouge("Paris, France", ["Paris"])
    # "It is Paris in France" vs "Paris": P = 1/5, R = 1 -> F1 = 0.4 / 1.2 = 1/3 < 0.5: wrong
    assert max_rouge_l("It is Paris in France", ["Paris"]) == pytest.approx(1 / 3)
    assert not qa_correct_rouge("It is Paris in France", ["Paris"])
    # the best reference counts: "December 1972" matches the second one exactly
    assert qa_correct_rouge("December 1972", ["14 December 1972 UTC", "December 1972"])
    # exactly 0.5 is correct: "bob scott jr" vs "bob" -> P = 1/3, R = 1, F1 = 0.5
    assert max_rouge_l("bob scott jr", ["bob"]) == pytest.approx(0.5)
    assert qa_correct_rouge("bob scott jr", ["bob"])


def test_exact_match_or_containment():
    assert qa_correct_em("It is Paris in France", ["Paris"])  # contained as a word span
    assert qa_correct_em("the Beatles.", ["Beatles"])
    assert not qa_correct_em("Parisian", ["Paris"])  # not a whole word
    assert not qa_correct_em("London", ["Paris", "City of Light"])
    assert not qa_correct_em("anything", ["the"])  # a reference that normalises to nothing never matches


def test_prompt_labels_of_a_judged_answer():
    answers = ["Paris"]
    assert hallucination_label("qa", "Paris", answers) == 0
    assert hallucination_label("qa", "London", answers) == 1
    assert prompt_labels("qa", "It is Paris in France", answers) == {"label": 1, "label_em": 0}
    assert prompt_labels("qa", "Paris", answers, "_first") == {"label_first": 0, "label_em_first": 0}
    assert prompt_labels("math", r"so $\boxed{\dfrac{5}{6}}$", [r"\frac{5}{6}"]) == {"label": 0}
    assert prompt_labels("math", r"so $\boxed{\frac{6}{5}}$", [r"\frac{5}{6}"]) == {"label": 1}


def test_bad_kind_and_scheme():
    with pytest.raises(ValueError):
        is_correct("poetry", "x", ["x"])
    with pytest.raises(ValueError):
        is_correct("qa", "x", ["x"], scheme="bleu")


def test_references_without_rouge_tokens():
    # rouge-score keeps [a-z0-9] only: Japanese or "---" would score 0 against everything, so such
    # a reference is matched by the exact-match rule; "A+" normalises to "" (the article "a")
    # and is compared lowercased instead
    title = "異世界はスマートフォンとともに"
    assert qa_correct_rouge(title, [title])
    assert not qa_correct_rouge("something else", [title])
    assert qa_correct_em("A+", ["A+", "AB+"])
    assert not qa_correct_em("B+", ["A+", "AB+"])
