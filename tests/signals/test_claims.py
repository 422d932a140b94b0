"""A claim's support among the samples by its key words (``lex_share``, the shipped claim score), by hand."""

from __future__ import annotations

import pytest

from blackbox_wd.signals.claims import key_words, lex_shares

SAMPLES = [
    "Marie Curie was born in Warsaw in 1867.",
    "Marie Curie was born in Warsaw and won a Nobel Prize in 1903.",
    "Curie, born in Warsaw, moved to Paris in 1891.",
]
ANSWER = "Marie Curie was born in Warsaw. She won a Nobel Prize in 1903."
PROMPT = "Tell me a paragraph bio of Marie Curie."


def test_a_claim_one_sample_states_has_a_higher_share_than_one_every_sample_states() -> None:
    """The copied claim (sample 1 only) lacks support in 2 of 3 samples, the common one in none."""
    claims = ["Curie was born in Warsaw.", "Curie won a Nobel Prize in 1903."]
    assert lex_shares(claims, SAMPLES, ANSWER, PROMPT).tolist() == pytest.approx([0.0, 2 / 3])


def test_a_sample_lacking_one_key_word_does_not_support_the_claim() -> None:
    claim = ["Curie was born in Warsaw."]
    assert lex_shares(claim, ["Nothing of the kind here.", "Nor here."], ANSWER, PROMPT).tolist() == [1.0]
    assert lex_shares(claim, ["Born in Warsaw.", "Born in Lyon."], ANSWER, PROMPT).tolist() == [0.5]


def test_key_words_leave_out_function_words_the_prompts_and_the_decomposers() -> None:
    assert key_words("Curie won a Nobel Prize in 1903.", ANSWER, PROMPT) == ["won", "nobel", "prize", "1903"]
    # "the physicist" is the decomposer's (the answer says "She"): left out while the answer has other key words
    assert key_words("The physicist won the Nobel Prize.", ANSWER, PROMPT) == ["won", "nobel", "prize"]
    assert key_words("The physicist.", ANSWER, PROMPT) == ["physicist"]  # none in the answer: all of its own
    assert key_words("She is Marie Curie.", ANSWER, PROMPT) == []


def test_a_claim_with_no_key_word_or_no_sample_has_nothing_missing() -> None:
    assert lex_shares(["She is Marie Curie."], SAMPLES, ANSWER, PROMPT).tolist() == [0.0]
    assert lex_shares(["Curie was born in Warsaw."], [], ANSWER, PROMPT).tolist() == [0.0]
    assert lex_shares([], SAMPLES, ANSWER, PROMPT).size == 0
