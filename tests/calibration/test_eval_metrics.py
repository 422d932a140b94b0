"""AUROC (sklearn) and its bootstrap CI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from blackbox_wd.calibration.evaluation.metrics import auroc, auroc_with_ci, bootstrap_ci


def test_hand_cases():
    y = [0, 0, 1, 1]
    assert auroc(y, [0.1, 0.2, 0.8, 0.9]) == 1.0  # perfect separation
    assert auroc(y, [0.9, 0.8, 0.2, 0.1]) == 0.0  # reversed
    assert auroc(y, [0.5, 0.5, 0.5, 0.5]) == 0.5  # all tied
    # labels (0, 1, 0, 1), scores (0.1, 0.3, 0.35, 0.8): of the 4 (pos, neg) pairs only
    # (0.3, 0.35) is misordered -> 3/4
    assert auroc([0, 1, 0, 1], [0.1, 0.3, 0.35, 0.8]) == pytest.approx(0.75)
    # one tie between a pos and a neg counts 1/2: pairs (0.5 vs 0.5) = 1/2, (0.9 vs 0.5) = 1 -> 3/4
    assert auroc([0, 1, 1], [0.5, 0.5, 0.9]) == pytest.approx(0.75)


def test_matches_sklearn_and_drops_nan():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 200)
    s = y * 0.5 + rng.normal(size=200)
    assert auroc(y, s) == pytest.approx(roc_auc_score(y, s))
    s_nan = s.copy()
    s_nan[:10] = np.nan
    assert auroc(y, s_nan) == pytest.approx(roc_auc_score(y[10:], s[10:]))
    assert auroc_with_ci(y, s_nan).n == 190


def test_one_class_is_nan():
    assert math.isnan(auroc([1, 1, 1], [0.1, 0.2, 0.3]))
    lo, hi, used = bootstrap_ci([0, 0], [0.1, 0.2])
    assert math.isnan(lo) and math.isnan(hi) and used == 0


def test_bootstrap_ci_properties():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 300)
    s = y * 0.8 + rng.normal(size=300)
    r = auroc_with_ci(y, s, n_boot=500, seed=1)
    assert r.lo < r.auroc < r.hi
    assert r.lo >= 0.0 and r.hi <= 1.0
    assert r.n == 300 and r.n_pos == int(y.sum()) and r.n_boot == 500
    # fixed seed: the same interval again; another seed: a (slightly) different one
    assert auroc_with_ci(y, s, n_boot=500, seed=1) == r
    assert auroc_with_ci(y, s, n_boot=500, seed=2).lo != r.lo
    # more data -> narrower interval
    y4, s4 = np.tile(y, 4), np.tile(s, 4)
    r4 = auroc_with_ci(y4, s4, n_boot=500, seed=1)
    assert (r4.hi - r4.lo) < (r.hi - r.lo)


def test_bootstrap_skips_one_class_resamples():
    # 1 positive in 4: P(a resample holds no positive) = (3/4)^4 = 0.316, so about 32% are skipped
    lo, hi, used = bootstrap_ci([0, 0, 0, 1], [0.1, 0.2, 0.3, 0.9], n_boot=1000, seed=0)
    assert 600 < used < 760
    assert lo == hi == 1.0  # every usable resample is perfectly separated


def test_length_and_label_checks():
    with pytest.raises(ValueError):
        auroc([0, 1], [0.1])
    with pytest.raises(ValueError):
        auroc([0, 2], [0.1, 0.2])


def test_rank_auroc_equals_sklearn_with_ties():
    from blackbox_wd.calibration.evaluation.metrics import rank_auroc

    rng = np.random.default_rng(7)
    y = rng.integers(0, 2, (50, 30))
    y[:, 0], y[:, 1] = 0, 1  # both classes in every row
    s = rng.integers(0, 5, (50, 30)).astype(float)  # many ties
    expected = [roc_auc_score(y[b], s[b]) for b in range(50)]
    np.testing.assert_allclose(rank_auroc(y, s), expected, rtol=0, atol=1e-12)
    assert rank_auroc(np.array([[0, 0, 1, 1]]), np.array([[0.5, 0.5, 0.5, 0.5]]))[0] == 0.5


def test_auprc_by_hand():
    from blackbox_wd.calibration.evaluation.metrics import auprc

    # ranked by score: 0.8 (hallucination), 0.35 (correct), 0.3 (hallucination), 0.1 (correct);
    # AP = sum over hallucinations of the recall step 1/2 times the precision there: 1/2 * 1 + 1/2 * 2/3 = 5/6
    assert auprc([0, 1, 0, 1], [0.1, 0.3, 0.35, 0.8]) == pytest.approx(5 / 6)
    assert auprc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert auprc([0, 1, 1, 1], [np.nan, 0.5, 0.5, 0.5]) != auprc([0, 1, 1, 1], [0.1, 0.5, 0.5, 0.5])
    assert math.isnan(auprc([1, 1], [0.1, 0.2]))


def test_prr_by_hand():
    from blackbox_wd.calibration.evaluation.metrics import prr, rejection_area

    # quality q = 1 - label. Perfect order (correct first): prefix means 1, 1, 2/3, 1/2 -> PRA = 19/24 = oracle;
    # random = mean(q) = 1/2, so PRR = 1. Reversed: prefix means 0, 0, 1/3, 1/2 -> PRA = 5/24 ->
    # PRR = (5/24 - 12/24) / (19/24 - 12/24) = -1.
    assert rejection_area(np.array([1.0, 1.0, 0.0, 0.0])) == pytest.approx(19 / 24)
    assert prr([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == pytest.approx(1.0)
    assert prr([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == pytest.approx(-1.0)
    # order by score: q = 1, 0, 1, 0 -> prefix means 1, 1/2, 2/3, 1/2 -> PRA = 2/3 = 16/24
    # PRR = (16/24 - 12/24) / (19/24 - 12/24) = 4/7
    assert prr([0, 1, 0, 1], [0.1, 0.2, 0.3, 0.9]) == pytest.approx(4 / 7)
    # all tied: every position counts the mean quality -> PRA = random -> PRR = 0
    assert prr([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == pytest.approx(0.0)
    # a tie of the two middle prompts (q = 0 and 1): both count 1/2 -> prefix means 1, 3/4, 2/3, 1/2
    # -> PRA = 35/48; PRR = (35/48 - 24/48) / (38/48 - 24/48) = 11/14
    assert prr([0, 1, 0, 1], [0.1, 0.5, 0.5, 0.9]) == pytest.approx(11 / 14)
    assert math.isnan(prr([0, 0], [0.1, 0.2]))


def test_paired_difference_of_identical_methods_is_zero():
    from blackbox_wd.calibration.evaluation.metrics import paired_auroc_diff

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    s = y * 0.5 + rng.normal(size=200)
    d = paired_auroc_diff(y, s, s.copy())
    assert (d.diff, d.lo, d.hi) == (0.0, 0.0, 0.0) and d.verdict == "no difference" and d.n_boot == 1000


def test_paired_difference_perfect_against_random():
    from blackbox_wd.calibration.evaluation.metrics import auroc, paired_auroc_diff

    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 100)
    perfect, noise = y + 0.1 * rng.random(100), rng.random(100)
    d = paired_auroc_diff(y, perfect, noise, seed=3)
    assert d.diff == pytest.approx(1.0 - auroc(y, noise))
    assert 0 < d.lo < d.diff < d.hi and d.verdict == "better"
    assert paired_auroc_diff(y, noise, perfect, seed=3).verdict == "worse"
    # the same resamples for both: the difference's CI is the CI of the per-resample differences,
    # narrower than what two independent CIs would suggest
    close = paired_auroc_diff(y, noise + 1e-3 * y, noise, seed=3)
    assert close.lo >= 0 and close.hi - close.lo < 0.05


def test_paired_difference_uses_prompts_where_both_are_finite():
    from blackbox_wd.calibration.evaluation.metrics import paired_auroc_diff

    y = [0, 1, 0, 1, 1]
    d = paired_auroc_diff(y, [0.1, 0.9, 0.2, 0.8, np.nan], [0.2, 0.1, 0.3, np.nan, 0.4], n_boot=200)
    # kept: prompts 0, 1, 2 -> AUROC 1 and 0
    assert d.n == 3 and d.diff == pytest.approx(1.0)
    assert paired_auroc_diff([1, 1], [0.1, 0.2], [0.3, 0.4]).verdict == "not computable"


@pytest.mark.parametrize("method", ["pearson", "spearman"])
def test_correlation_equals_scipy_and_its_ci_holds_it(method):
    from scipy.stats import pearsonr, spearmanr

    from blackbox_wd.calibration.evaluation.metrics import correlation_with_ci

    rng = np.random.default_rng(3)
    human = rng.choice([0.0, 0.25, 0.5, 0.75, 1.0], size=80)  # tied, like WikiBio's human_score
    score = human + rng.normal(0, 0.4, 80)
    score[5] = np.nan  # dropped with its label
    res = correlation_with_ci(human, score, method)
    keep = np.isfinite(score)
    ref = (pearsonr if method == "pearson" else spearmanr)(score[keep], human[keep])[0]
    assert res.r == pytest.approx(ref, abs=1e-12)
    assert res.n == 79 and res.n_boot == 1000
    assert res.lo < res.r < res.hi and res.lo > 0.3  # a real correlation
    # a higher score must mean more hallucination: the negated score correlates negatively
    assert correlation_with_ci(human, -score, method).r == pytest.approx(-res.r, abs=1e-12)


def test_correlation_of_a_constant_score_is_nan():
    from blackbox_wd.calibration.evaluation.metrics import correlation_with_ci

    res = correlation_with_ci([0.1, 0.5, 0.9, 0.3], [1.0, 1.0, 1.0, 1.0])
    assert math.isnan(res.r) and res.n_boot == 0
    with pytest.raises(ValueError, match="unknown correlation"):
        correlation_with_ci([0.1, 0.5, 0.9], [1, 2, 3], "kendall")


def test_auc_pr_by_hand_is_the_trapezoid_not_average_precision():
    from sklearn.metrics import auc, precision_recall_curve

    from blackbox_wd.calibration.evaluation.metrics import auc_pr, auprc

    # ranked: 0.9 (+), 0.8 (-), 0.7 (+), 0.3 (+), 0.1 (-); (recall, precision) from (0, 1):
    # (1/3, 1), (1/3, 1/2), (2/3, 2/3), (1, 3/4), (1, 3/5) -> trapezoids 1/3 + 0 + 7/36 + 17/72 + 0 = 55/72
    y, s = [1, 0, 1, 1, 0], [0.9, 0.8, 0.7, 0.3, 0.1]
    assert auc_pr(y, s) == pytest.approx(55 / 72, abs=1e-12)
    precision, recall, _ = precision_recall_curve(y, s)
    assert auc_pr(y, s) == pytest.approx(auc(recall, precision), abs=1e-15)
    assert auprc(y, s) == pytest.approx(29 / 36)  # average precision is another number
    # a tie of a positive and a negative is one threshold: (1/2, 1/2), then (1, 2/3) -> 3/8 + 7/24 = 2/3
    assert auc_pr([1, 0, 1], [0.5, 0.5, 0.2]) == pytest.approx(2 / 3, abs=1e-12)
    # a negative on top: sklearn's curve goes (0, 1), (0, 0), (1, 1/2) -> 1 * (0 + 1/2) / 2 = 1/4
    assert auc_pr([0, 1], [0.9, 0.1]) == pytest.approx(1 / 4, abs=1e-12)
    assert auc_pr([*y, 1], [*s, np.nan]) == pytest.approx(55 / 72, abs=1e-12)  # an unscored sentence is left out
    assert math.isnan(auc_pr([1, 1], [0.1, 0.2]))


def test_weighted_auc_pr_equals_sklearn_on_the_resampled_sentences():
    from blackbox_wd.calibration.evaluation.metrics import auc_pr, passage_weights, weighted_auc_pr

    rng = np.random.default_rng(1)
    passage = np.sort(rng.integers(0, 40, 300))
    y = rng.integers(0, 2, 300)
    s = np.round(y * 0.5 + rng.normal(size=300), 1)  # many ties, within and across passages
    w = passage_weights(passage, 60, seed=3)
    ids, which = np.unique(passage, return_inverse=True)
    draws = np.random.default_rng(3).integers(0, ids.size, (60, ids.size))  # the passages each resample drew
    for b in range(60):
        idx = np.concatenate([np.flatnonzero(which == j) for j in draws[b]])
        assert w[b].sum() == idx.size
        assert weighted_auc_pr(y, s, w[b])[0] == pytest.approx(auc_pr(y[idx], s[idx]), abs=1e-12)
    assert weighted_auc_pr(y, s, np.ones(300))[0] == pytest.approx(auc_pr(y, s), abs=1e-12)
    # a passage's sentences are drawn together
    assert all(len(set(w[b, which == j])) == 1 for b in range(5) for j in range(ids.size))


# Three passages: P0 wholly major, P1 (accurate, major, minor unscored), P2 (minor, accurate).
SEVERITY = [2, 2, 0, 2, 1, 1, 0]
SCORES = [0.9, 0.8, 0.1, 0.15, np.nan, 0.05, 0.2]
PASSAGE = [0, 0, 1, 1, 1, 2, 2]


def test_sentence_auc_pr_by_hand():
    from blackbox_wd.calibration.evaluation.metrics import sentence_auc_pr

    r = sentence_auc_pr(SEVERITY, SCORES, PASSAGE, n_boot=200)
    # NonFact (minor or major): ranked 0.9 +, 0.8 +, 0.2 -, 0.15 +, 0.1 -, 0.05 +: (recall, precision)
    # (1/4, 1), (1/2, 1), (1/2, 2/3), (3/4, 3/4), (3/4, 3/5), (1, 2/3) -> 1/2 + 17/96 + 19/120 = 401/480
    assert r.nonfact.auc_pr == pytest.approx(401 / 480, abs=1e-12)
    assert (r.nonfact.random, r.nonfact.n, r.nonfact.n_pos, r.nonfact.n_passages, r.nonfact.n_unscored) == (
        pytest.approx(4 / 6),
        6,
        4,
        3,
        1,
    )
    # NonFact* (major) leaves P0 out: 0.2 -, 0.15 +, 0.1 -, 0.05 - -> (0, 0), (1, 1/2) -> 1/4
    assert r.nonfact_star.auc_pr == pytest.approx(1 / 4, abs=1e-12)
    assert (r.nonfact_star.random, r.nonfact_star.n, r.nonfact_star.n_passages, r.nonfact_star.n_unscored) == (
        pytest.approx(1 / 4),
        4,
        2,
        1,
    )
    # Factual (accurate) ranks by the negated score, lowest first: 0.05 -, 0.1 +, 0.15 -, 0.2 +, 0.8 -, 0.9 -
    # -> (0, 0), (1/2, 1/2), (1/2, 1/3), (1, 1/2), ... -> 1/8 + 5/24 = 1/3; the plain score would give 59/240
    assert r.factual.auc_pr == pytest.approx(1 / 3, abs=1e-12)
    assert r.factual.random == pytest.approx(2 / 6) and r.factual.n_pos == 2
    from blackbox_wd.calibration.evaluation.metrics import auc_pr

    plain = auc_pr([0, 0, 1, 0, 0, 1], [0.9, 0.8, 0.1, 0.15, 0.05, 0.2])
    assert plain == pytest.approx(59 / 240, abs=1e-12) and plain != pytest.approx(r.factual.auc_pr)


def test_nonfact_star_keeps_only_passages_not_wholly_major():
    from blackbox_wd.calibration.evaluation.metrics import sentence_task

    y, s, p = sentence_task(np.array(SEVERITY), np.array(SCORES), np.array(PASSAGE), "nonfact_star")
    assert p.tolist() == [1, 1, 1, 2, 2] and y.tolist() == [0, 1, 0, 0, 0]
    y, s, _ = sentence_task(np.array(SEVERITY), np.array(SCORES), np.array(PASSAGE), "factual")
    assert y.tolist() == [0, 0, 1, 0, 0, 0, 1] and np.array_equal(s, -np.array(SCORES), equal_nan=True)
    with pytest.raises(ValueError, match="unknown sentence task"):
        sentence_task(np.array(SEVERITY), np.array(SCORES), np.array(PASSAGE), "nonfact*")


def test_sentence_auc_pr_ci_over_passages():
    from blackbox_wd.calibration.evaluation.metrics import sentence_auc_pr

    rng = np.random.default_rng(4)
    passage = np.repeat(np.arange(60), 8)
    severity = rng.integers(0, 3, passage.size)
    scores = severity + rng.normal(0, 1.5, passage.size)
    r = sentence_auc_pr(severity, scores, passage, n_boot=300, seed=2)
    for task in (r.nonfact, r.nonfact_star, r.factual):
        assert task.lo < task.auc_pr < task.hi and task.n_boot == 300
        assert task.auc_pr > task.random  # the score carries the severity
    assert sentence_auc_pr(severity, scores, passage, n_boot=300, seed=2) == r
    one = sentence_auc_pr([1, 2], [0.3, 0.4], [0, 0], n_boot=50)  # no accurate sentence: NonFact undefined
    assert math.isnan(one.nonfact.auc_pr) and one.nonfact.random == 1.0 and one.nonfact.n_boot == 0
    with pytest.raises(ValueError, match="severities must be"):
        sentence_auc_pr([3], [0.1], [0])
    with pytest.raises(ValueError, match="2 severities, 1 scores"):
        sentence_auc_pr([0, 1], [0.1], [0, 0])
