"""Claim-support members (#47): partial transport onto a sample, the key words, the support shares, by hand."""

from __future__ import annotations

import numpy as np
import ot
import pytest

from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.transport import w2
from blackbox_wd.signals.claims import MEMBERS, claim_members, key_words, lexical_members, nearest_costs, partial_costs
from blackbox_wd.signals.lexical import unigram_surprise

SAMPLES = [
    "Marie Curie was born in Warsaw in 1867.",
    "Marie Curie was born in Warsaw and won a Nobel Prize in 1903.",
    "Curie, born in Warsaw, moved to Paris in 1891.",
]
ANSWER = "Marie Curie was born in Warsaw. She won a Nobel Prize in 1903."
PROMPT = "Tell me a paragraph bio of Marie Curie."


def far_states(n: int, rng: np.random.Generator, offset: float) -> np.ndarray:
    return offset + rng.normal(size=(n, 4))


def test_a_claim_one_sample_states_has_a_lower_support_share_than_one_every_sample_states() -> None:
    """The copied claim (sample 1 only) is supported by 1 of 3 samples, the common one by all 3: its share of samples
    that do not support it is 2/3, the common claim's 0, by words alone (the OT test cannot fire here: each claim's
    states are a part of the answer's, so no sample is as close as the answer)."""
    rng = np.random.default_rng(0)
    claims = ["Curie was born in Warsaw.", "Curie won a Nobel Prize in 1903."]
    claim_states = [far_states(5, rng, 0.0), far_states(7, rng, 0.0)]
    sample_states = [far_states(9, rng, 5.0) for _ in SAMPLES]
    answer_states = np.concatenate(claim_states)
    got = claim_members(claim_states, sample_states, answer_states, claims, SAMPLES, ANSWER, PROMPT)
    assert got["lex_share"].tolist() == pytest.approx([0.0, 2 / 3])
    assert got["support_share"].tolist() == pytest.approx([0.0, 2 / 3])
    assert got["lex_share"][1] > got["lex_share"][0]
    # key words: born, warsaw / won, nobel, prize, 1903 (curie is the prompt's; was, in, a are function words)
    assert got["lex_absent"].tolist() == pytest.approx([0.0, 8 / 12])
    assert got["lex_rarest"].tolist() == pytest.approx([0.0, 2 / 3])


def test_the_ot_test_supports_a_sample_as_close_as_the_answer() -> None:
    """support_share counts a sample that lacks a key word as supporting when its states are as near the claim's as
    the answer's are: a sample holding the claim's states verbatim."""
    rng = np.random.default_rng(1)
    claim = far_states(4, rng, 0.0)
    answer = np.concatenate([claim + 0.01, far_states(6, rng, 3.0)])  # each token 0.02 from the claim's
    samples = [np.concatenate([far_states(5, rng, 3.0), claim]), far_states(8, rng, 3.0)]
    texts = ["Nothing of the kind here.", "Nor here."]
    got = claim_members([claim], samples, answer, ["Curie was born in Warsaw."], texts, ANSWER, PROMPT)
    assert got["lex_share"].tolist() == [1.0]  # neither sample has born nor warsaw
    assert got["support_share"].tolist() == [0.5]  # the first sample holds the claim's states: 0 <= 0.02 ** 2
    assert got["ot_gap"][0] == pytest.approx(got["ot_nearest"][0] - 0.02)


def test_partial_transport_of_a_claim_inside_a_sample_costs_nothing() -> None:
    """A claim whose states are tokens of sample 0 (which says much more) has zero nearest and partial cost to it,
    while the full W2 to sample 0 does not vanish and the costs to a sample elsewhere do not either."""
    rng = np.random.default_rng(2)
    sample0 = rng.normal(size=(12, 8))
    claim = sample0[[2, 5, 7]]
    sample1 = rng.normal(size=(12, 8)) + 4.0
    near = nearest_costs([claim], [sample0, sample1])
    part = partial_costs([claim], [sample0, sample1])
    assert near[0, 0] == pytest.approx(0.0, abs=1e-9)
    assert part[0, 0] == pytest.approx(0.0, abs=1e-9)
    assert w2(claim, sample0) > 1.0
    assert near[0, 1] > 10 and part[0, 1] >= near[0, 1]


def test_partial_costs_equal_pots_partial_wasserstein() -> None:
    """With a = b = 1/m and all the claim's mass moved, POT's partial W2 gives the assignment's cost."""
    rng = np.random.default_rng(3)
    claim, sample = rng.normal(size=(5, 3)), rng.normal(size=(9, 3))
    m = len(claim)
    cost = ot.dist(claim, sample)  # squared Euclidean
    want = ot.partial.partial_wasserstein2(np.full(m, 1 / m), np.full(len(sample), 1 / m), cost, m=1.0)
    assert partial_costs([claim], [sample])[0, 0] == pytest.approx(float(want), rel=1e-9)
    assert nearest_costs([claim], [sample])[0, 0] == pytest.approx(cost.min(axis=1).mean(), rel=1e-9)


def test_partial_costs_fall_back_to_full_w2_on_a_shorter_sample() -> None:
    rng = np.random.default_rng(4)
    claim, sample = rng.normal(size=(6, 3)), rng.normal(size=(4, 3))
    assert partial_costs([claim], [sample])[0, 0] == pytest.approx(w2(claim, sample) ** 2, rel=1e-9)


def test_hand_computed_costs_in_one_dimension() -> None:
    """Claim tokens at 0 and 1; sample A at 0, 0.5, 10; sample B at 3; the answer at 0 and 1.

    nearest: A (0 + 0.25) / 2 = 0.125, B (9 + 4) / 2 = 6.5; partial: A assigns 0 -> 0, 1 -> 0.5: 0.125, B (one
    token, fewer than the claim's) full EMD2 6.5; ot_nearest = (sqrt 0.125 + sqrt 6.5) / 2, ot_gap the same minus 0.
    """
    x = lambda *v: np.array(v, dtype=float).reshape(-1, 1)  # noqa: E731
    claim, a, b = x(0, 1), x(0, 0.5, 10), x(3)
    assert nearest_costs([claim], [a, b])[0].tolist() == pytest.approx([0.125, 6.5])
    assert partial_costs([claim], [a, b])[0].tolist() == pytest.approx([0.125, 6.5])
    got = claim_members([claim], [a, b], x(0, 1), ["Zed"], ["Zed", "Zed"], "Zed", "Zed")
    want = (np.sqrt(0.125) + np.sqrt(6.5)) / 2
    assert got["ot_nearest"][0] == pytest.approx(want)
    assert got["ot_partial"][0] == pytest.approx(want)
    assert got["ot_gap"][0] == pytest.approx(want, abs=1e-6)


def test_key_words_leave_out_function_words_the_prompts_and_the_decomposers() -> None:
    assert key_words("Curie won a Nobel Prize in 1903.", ANSWER, PROMPT) == ["won", "nobel", "prize", "1903"]
    # "the physicist" is the decomposer's (the answer says "She"): left out while the answer has other key words
    assert key_words("The physicist won the Nobel Prize.", ANSWER, PROMPT) == ["won", "nobel", "prize"]
    assert key_words("The physicist.", ANSWER, PROMPT) == ["physicist"]  # none in the answer: all of its own
    assert key_words("She is Marie Curie.", ANSWER, PROMPT) == []


def test_a_claim_with_no_key_word_has_nothing_missing() -> None:
    members, holds = lexical_members(["She is Marie Curie."], SAMPLES, ANSWER, PROMPT)
    assert all(v.tolist() == [0.0] for v in members.values())
    assert holds.tolist() == [[False, False, False]]


def test_members_come_in_order_with_the_unigram_anchor() -> None:
    rng = np.random.default_rng(5)
    claims = ["Curie was born in Warsaw.", "Curie won a Nobel Prize in 1903.", "..."]
    got = claim_members(
        [rng.normal(size=(n, 4)) for n in (5, 7, 1)],
        [rng.normal(size=(9, 4)) for _ in SAMPLES],
        rng.normal(size=(14, 4)),
        claims,
        SAMPLES,
        ANSWER,
        PROMPT,
    )
    assert tuple(got) == MEMBERS and all(v.shape == (3,) for v in got.values())
    want = unigram_surprise(claims, SAMPLES, ANSWER)
    assert got["unigram"][:2].tolist() == pytest.approx(want[:2]) and np.isnan(got["unigram"][2])
    skipped = claim_members(
        [rng.normal(size=(2, 4))], [rng.normal(size=(3, 4))] * 3, rng.normal(size=(2, 4)), claims[:1], SAMPLES,
        ANSWER, PROMPT, partial=False,
    )  # fmt: skip
    assert np.isnan(skipped["ot_partial"][0]) and np.isfinite(skipped["ot_nearest"][0])


def test_no_claims_and_bad_input() -> None:
    states = [np.zeros((2, 4))] * 3
    assert all(v.size == 0 for v in claim_members([], states, np.zeros((2, 4)), [], SAMPLES, ANSWER, PROMPT).values())
    with pytest.raises(BBWDError, match="claim states"):
        claim_members([np.zeros((2, 4))], states, np.zeros((2, 4)), [], SAMPLES, ANSWER, PROMPT)
    with pytest.raises(BBWDError, match="dimension"):
        nearest_costs([np.zeros((2, 4))], [np.zeros((2, 3))])
    with pytest.raises(BBWDError, match="non-empty"):
        nearest_costs([np.zeros((0, 4))], [np.zeros((2, 4))])
