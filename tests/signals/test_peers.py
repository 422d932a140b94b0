"""The peers (baselines.peers): lm-polygraph 0.7.0's own values on recorded samples, and hand-computed spectra."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from blackbox_wd.signals.answers.text import overlap_f1, overlap_f1s, rouge_tokens, token_rouge_l_f1
from blackbox_wd.signals.baselines import compute_baselines
from blackbox_wd.signals.baselines.peers import (
    ANSWER_PEERS,
    PEERS,
    answer_eccentricity,
    eccentricity,
    eigval_laplacian,
    jaccard_matrix,
    peer_scores,
)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "polygraph_peers.json"
RECORDED = json.loads(FIXTURE.read_text())


def test_the_fixture_was_recorded_by_lm_polygraph_070_on_real_samples() -> None:
    assert RECORDED["lm_polygraph"] == "0.7.0"
    assert set(RECORDED["estimators"]) == set(PEERS)
    assert sum(r["from"].startswith("sac3_nq_open") for r in RECORDED["records"]) == 24
    assert sum(r["from"].startswith("wikibio") for r in RECORDED["records"]) == 2


@pytest.mark.parametrize("record", RECORDED["records"], ids=[r["from"] for r in RECORDED["records"]])
def test_each_peer_is_lm_polygraphs_value(record: dict) -> None:
    ours = peer_scores(record["sample_texts"])
    for key, theirs in record["lm_polygraph"].items():
        # lm-polygraph reports the lexical similarity with a minus sign; bbwd adds 1 (1 - mean similarity)
        expected = 1.0 + theirs if key.startswith("lexsim") else theirs
        assert ours[key] == pytest.approx(expected, abs=1e-12), key


def test_the_recorded_values_differ_between_records() -> None:
    """The check above is not of a constant: the estimators spread over the recorded samples."""
    for key in PEERS:
        values = {round(r["lm_polygraph"][key], 9) for r in RECORDED["records"]}
        assert len(values) > 5, key


def test_known_spectra_of_the_jaccard_graph() -> None:
    # K equal answers: one meaning set, W all ones; L = I - 11'/K has eigenvalues 0 and 1 (K - 1 times)
    same = peer_scores(["Canberra"] * 5)
    assert same["eigval_jaccard"] == pytest.approx(1.0)
    assert same["degmat_jaccard"] == pytest.approx(0.0)
    assert same["ecc_jaccard"] == pytest.approx(0.0, abs=1e-12)
    assert same["lexsim_rouge1"] == same["lexsim_rougel"] == 0.0
    # K answers with no word in common: W = I, L = 0, K meaning sets; DegMat 1 - 1/K
    apart = peer_scores(["alpha", "beta", "gamma", "delta"])
    assert apart["eigval_jaccard"] == pytest.approx(4.0)
    assert apart["degmat_jaccard"] == pytest.approx(0.75)
    assert apart["lexsim_rouge1"] == 1.0
    # every eigenvector kept (eigenvalues 0 < 0.9): the centred norms of an orthonormal basis of R^4 sum to 4 - 1
    assert apart["ecc_jaccard"] == pytest.approx(np.sqrt(3.0))


def test_two_meaning_sets_by_hand() -> None:
    # two pairs of equal answers: W block-diagonal of ones, L's eigenvalues 0, 0, 1, 1 -> two meaning sets
    w = jaccard_matrix(["a b", "a b", "c d", "c d"])
    assert w.tolist() == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]]
    assert eigval_laplacian(w) == pytest.approx(2.0)
    # the eigenvalue-0 eigenvectors span the two blocks' indicators / sqrt 2; centred, each has norm 1 in total
    assert eccentricity(w) == pytest.approx(1.0)


def test_the_answers_peers_score_it_against_the_samples() -> None:
    samples = ["Canberra", "Canberra", "Canberra", "Sydney"]
    with_it = peer_scores(samples, answer="Canberra")
    against = peer_scores(samples, answer="Sydney")
    assert set(ANSWER_PEERS) <= set(with_it)
    assert with_it["answer_rougel"] == pytest.approx(0.25) and against["answer_rougel"] == pytest.approx(0.75)
    assert with_it["answer_degmat"] == pytest.approx(0.25) and against["answer_degmat"] == pytest.approx(0.75)
    assert with_it["answer_ecc"] < against["answer_ecc"]
    assert "answer_rougel" not in peer_scores(samples)  # the sample-set scores alone without an answer
    # the samples' own scores do not depend on the answer
    assert all(with_it[k] == against[k] for k in PEERS)


def test_an_answer_equal_to_every_sample_is_at_the_centre() -> None:
    w = jaccard_matrix(["x y", "x y", "x y"])
    assert answer_eccentricity(w) == pytest.approx(0.0, abs=1e-12)


def test_rouge_is_stemmed_as_lm_polygraph_scores_it() -> None:
    # "running" and "runs" share the Porter stem "run": equal under lm-polygraph's ROUGE, unlike bbwd's LS
    s = peer_scores(["He runs fast", "He running fast"])
    assert s["lexsim_rouge1"] == 0.0
    assert compute_baselines(["He runs fast", "He running fast"])["ls"] == pytest.approx(1 - 2 / 3)


def test_every_result_carries_the_peers_in_its_baselines() -> None:
    out = compute_baselines(["Paris", "Paris", "Lyon"], answer="Lyon")
    assert {*PEERS, *ANSWER_PEERS, "ls"} <= set(out)
    assert out["answer_degmat"] == pytest.approx(2 / 3)


def test_fewer_than_two_responses_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        peer_scores(["only one"])


def test_the_doors_name_every_peer():
    from blackbox_wd.calibration.members import MEMBER_NAMES
    from blackbox_wd.signals.names import PEER_SHORT_NAMES

    assert tuple(PEER_SHORT_NAMES) == (*PEERS, *ANSWER_PEERS) and set(PEER_SHORT_NAMES) <= set(MEMBER_NAMES)


def every_pair(texts: list[str]) -> tuple[float, float, np.ndarray, np.ndarray]:
    """ROUGE-1 and ROUGE-L's mean F1 over every pair, each answer's ROUGE-L to the others and the Jaccard graph,
    pair by pair as rouge-score and lm-polygraph compute them (no pair shared)."""
    tokens = [rouge_tokens(t, stem=True) for t in texts]
    pairs = list(combinations(range(len(texts)), 2))
    rouge1 = np.mean(
        [
            overlap_f1(sum((Counter(tokens[i]) & Counter(tokens[j])).values()), len(tokens[i]), len(tokens[j]))
            for i, j in pairs
        ]
    )
    rougel = np.mean([token_rouge_l_f1(tokens[i], tokens[j]) for i, j in pairs])
    to_first = np.array([token_rouge_l_f1(tokens[0], t) for t in tokens[1:]])
    sets = [set(t.lower().split()) for t in texts]
    w = np.eye(len(texts))
    for i, j in pairs:
        union = len(sets[i] | sets[j])
        w[i, j] = w[j, i] = len(sets[i] & sets[j]) / union if union else 0.0
    return rouge1, rougel, to_first, w


@pytest.mark.parametrize("record", RECORDED["records"][:12], ids=[r["from"] for r in RECORDED["records"][:12]])
def test_each_distinct_pair_once_is_every_pair(record: dict) -> None:
    """The peers score each pair of distinct texts once and spread it over the repeats: the same values as every
    pair scored on its own, with repeats, an empty text and the answer among the samples."""
    samples = [*record["sample_texts"], record["sample_texts"][0], "", ""]
    answer = record["sample_texts"][-1]
    ours = peer_scores(samples, answer=answer)
    rouge1, rougel, _, w = every_pair(samples)
    _, _, to_answer, w_answer = every_pair([answer, *samples])
    assert ours["lexsim_rouge1"] == pytest.approx(1 - rouge1, abs=1e-12)
    assert ours["lexsim_rougel"] == pytest.approx(1 - rougel, abs=1e-12)
    assert ours["answer_rougel"] == pytest.approx(1 - to_answer.mean(), abs=1e-12)
    assert np.array_equal(jaccard_matrix(samples), w)
    assert np.array_equal(jaccard_matrix([answer, *samples]), w_answer)
    assert ours["degmat_jaccard"] == pytest.approx(1 - w.mean(), abs=1e-12)
    assert len(set(samples)) < len(samples)  # repeats, so the sharing is exercised


def test_overlap_f1s_is_overlap_f1_entry_by_entry() -> None:
    rng = np.random.default_rng(0)
    n = rng.integers(0, 30, 12)
    overlap = np.minimum.outer(n, n) * rng.random((12, 12)) // 1
    overlap = np.minimum(overlap, overlap.T)
    f1 = overlap_f1s(overlap, n)
    assert (overlap == 0).any() and (overlap > 0).any()
    for a in range(12):
        for b in range(12):
            assert f1[a, b] == overlap_f1(int(overlap[a, b]), int(n[a]), int(n[b]))  # the same floating-point steps
