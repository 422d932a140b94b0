"""AvgWD and EigenWD against hand-computed values and known spectra."""

import math

import numpy as np
import pytest

from blackbox_wd.measure.wd import avg_wd, eigen_wd, median_bandwidth, spectrum_ratio, wd_kernel


def random_d(rng, k):
    x = rng.normal(size=(k, 5)) * rng.uniform(0.1, 10)
    return np.linalg.norm(x[:, None] - x[None], axis=-1)


def test_avg_wd_is_mean_over_pairs():
    d = np.array([[0, 1, 2], [1, 0, 4], [2, 4, 0]], float)
    assert avg_wd(d) == pytest.approx((1 + 2 + 4) / 3, abs=1e-15)


def test_median_bandwidth_positive_entries_only():
    d = np.array([[0, 1, 2], [1, 0, 4], [2, 4, 0]], float)
    assert median_bandwidth(d) == 2.0  # median of {1,1,2,2,4,4}
    assert median_bandwidth(np.zeros((3, 3))) == 1.0


@pytest.mark.parametrize("seed", range(20))
def test_eigen_wd_at_least_one(seed):
    rng = np.random.default_rng(seed)
    d = random_d(rng, int(rng.integers(2, 15)))
    for alpha in (0.0, 1e-3, 1.0):
        assert eigen_wd(d, alpha) >= 1.0 - 1e-12


def test_spectrum_ratio_known_spectra():
    assert spectrum_ratio(np.array([5.0])) == pytest.approx(1.0, abs=1e-15)
    assert spectrum_ratio(np.array([3.0, 0.0, 0.0])) == pytest.approx(1.0, abs=1e-15)
    # K equal singular values: (K * 1)^(1/p) / sqrt(K) = K^(10 - 0.5)
    assert spectrum_ratio(np.ones(10)) == pytest.approx(10**9.5, rel=1e-12)
    # two values 1 and 4: (1 + 4^0.1)^10 / sqrt(17)
    assert spectrum_ratio(np.array([1.0, 4.0])) == pytest.approx((1 + 4**0.1) ** 10 / math.sqrt(17), rel=1e-12)


@pytest.mark.parametrize("c", [1e-3, 0.5, 7.0, 1e6])
def test_spectrum_ratio_scale_invariant(c):
    s = np.array([3.0, 1.0, 0.2, 0.01])
    assert spectrum_ratio(c * s) == pytest.approx(spectrum_ratio(s), rel=1e-12)


def test_eigen_wd_scale_invariant_in_d():
    # the median bandwidth scales with D, so the kernel (and score) do not move, up to the 1e-6 eps
    d = random_d(np.random.default_rng(1), 8) * 10
    assert eigen_wd(100 * d) == pytest.approx(eigen_wd(d), rel=1e-6)


def test_rank_one_kernel_gives_one_without_shift():
    assert eigen_wd(np.zeros((6, 6)), alpha=0.0) == pytest.approx(1.0, abs=1e-9)


def test_block_structure_beats_uniform_small_d():
    k = 10
    uniform = np.full((k, k), 1e-6) - 1e-6 * np.eye(k)  # near-identical responses: kernel ~ all ones
    labels = np.array([0] * 5 + [1] * 5)
    block = np.where(labels[:, None] == labels[None], 0.01, 10.0)
    np.fill_diagonal(block, 0)
    # uniform: spectrum ~ {K, alpha x 9}; block: ~ {5(1+e^-1/2), 5(1-e^-1/2), alpha x 8}, about 3x larger
    assert eigen_wd(block) > 2 * eigen_wd(uniform)
    assert eigen_wd(uniform) == pytest.approx(eigen_wd(np.zeros((k, k))), rel=1e-3)


def test_worked_example_3x3():
    d = np.array([[0, 1, 2], [1, 0, 1], [2, 1, 0]], float)
    alpha = 1e-3
    # b = median{1,1,1,1,2,2} = 1; kernel is symmetric Toeplitz [[1+a,k1,k2],[k1,1+a,k1],[k2,k1,1+a]]
    k1 = math.exp(-1 / (2 * (1 + 1e-6)))
    k2 = math.exp(-4 / (2 * (1 + 1e-6)))
    one = 1 + alpha
    # eigenvector (1,0,-1): one - k2; on span{(1,0,1),(0,1,0)}: one + k2/2 +- sqrt(k2^2/4 + 2 k1^2)
    root = math.sqrt(k2**2 / 4 + 2 * k1**2)
    lam = [one - k2, one + k2 / 2 + root, one + k2 / 2 - root]
    assert min(lam) > 0  # PSD here, so singular values = eigenvalues
    expected = sum(v**0.1 for v in lam) ** 10 / math.sqrt(sum(v * v for v in lam))
    assert eigen_wd(d, alpha) == pytest.approx(expected, rel=1e-9, abs=0)
    assert wd_kernel(d, alpha)[0, 2] == pytest.approx(k2, rel=1e-15)


def test_uses_singular_values_of_non_psd_kernel():
    # a 4-cycle with near sides and far diagonals: the Gaussian kernel of such D is indefinite
    d = np.array([[0, 0.1, 0.1, 4], [0.1, 0, 4, 0.1], [0.1, 4, 0, 0.1], [4, 0.1, 0.1, 0.0]])
    kmat = wd_kernel(d, 1e-3)
    eig = np.linalg.eigvalsh(kmat)
    assert eig.min() < 0
    s = np.abs(eig)
    expected = np.sum(s**0.1) ** 10 / np.sqrt(np.sum(s**2))
    assert eigen_wd(d, 1e-3) == pytest.approx(expected, rel=1e-9)


def test_answer_wd_is_the_mean_distance_to_the_samples():
    from blackbox_wd.measure.transport import w2_to_each
    from blackbox_wd.measure.wd import answer_wd

    # answer {(0,0)}; samples {(3,4)}, {(0,0)}, {(6,8)}: distances 5, 0, 10 -> AnswerWD 5.
    answer = np.zeros((1, 2))
    samples = [np.array([[3.0, 4.0]]), np.zeros((1, 2)), np.array([[6.0, 8.0]])]
    assert answer_wd(w2_to_each(answer, samples)) == pytest.approx(5.0, abs=1e-12)
    # an answer far from samples that agree with each other scores higher than one among them
    near = answer_wd(w2_to_each(np.array([[0.1, 0.0]]), [np.zeros((2, 2)), np.full((3, 2), 0.05)]))
    far = answer_wd(w2_to_each(np.array([[9.0, 0.0]]), [np.zeros((2, 2)), np.full((3, 2), 0.05)]))
    assert far > 50 * near
    with pytest.raises(ValueError):
        answer_wd(np.zeros(0))


def test_the_sentence_far_from_every_sample_scores_highest():
    from blackbox_wd.measure.transport import token_costs_to_each
    from blackbox_wd.measure.wd import sentence_scores, sentence_wd

    # Points on a line: between equal-size measures the one optimal plan is the sorted matching.
    # Answer tokens 0, 1 (sentence 0) and 10, 11 (sentence 1); a third sentence holds no token.
    #   sample [0, 1, 2, 3]:  costs 0, 0, 64, 64   -> sentence means 0, 64
    #   sample [0, 1, 1, 2]:  costs 0, 0, 81, 81   -> 0, 81
    #   sample [-1, 0, 1, 4]: costs 1, 1, 81, 49   -> 1, 65
    # score_0 = sqrt(min(0, 0, 1)) = 0, score_1 = sqrt(min(64, 81, 65)) = 8.
    line = lambda *v: np.array([[x, 0.0] for x in v])  # noqa: E731
    answer = line(0, 1, 10, 11)
    samples = [line(0, 1, 2, 3), line(0, 1, 1, 2), line(-1, 0, 1, 4)]
    costs = token_costs_to_each(answer, samples)
    np.testing.assert_allclose(costs, [[0, 0, 64, 64], [0, 0, 81, 81], [1, 1, 81, 49]], atol=1e-9)
    scores = sentence_scores(costs, np.array([0, 0, 1, 1]), 3)
    assert scores[0] == pytest.approx(0.0, abs=1e-6) and scores[1] == pytest.approx(8.0, rel=1e-12)
    assert scores[2] is None
    assert sentence_wd(scores) == pytest.approx(4.0, rel=1e-9)
    assert sentence_wd([None, None]) is None


def test_sentence_scores_skip_tokens_of_no_sentence():
    from blackbox_wd.measure.wd import sentence_scores

    costs = np.array([[1.0, 4.0, 100.0, 9.0], [4.0, 1.0, 0.0, 16.0]])
    # token 2 belongs to no sentence: sentence 0 = mean(1, 4) or mean(4, 1), sentence 1 = min(9, 16)
    assert sentence_scores(costs, np.array([0, 0, -1, 1]), 2) == pytest.approx([np.sqrt(2.5), 3.0], rel=1e-12)


def test_one_sentence_holding_every_token_scores_the_nearest_sample():
    from blackbox_wd.measure.transport import token_costs_to_each, w2_to_each
    from blackbox_wd.measure.wd import sentence_scores

    rng = np.random.default_rng(3)
    answer, *samples = [rng.normal(size=(m, 8)) * 3 for m in (12, 9, 12, 20)]
    (score,) = sentence_scores(token_costs_to_each(answer, samples), np.zeros(12, dtype=int), 1)
    assert score == pytest.approx(w2_to_each(answer, samples).min(), rel=1e-9)
