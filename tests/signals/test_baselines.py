"""Baselines against hand-computed examples (numbers worked out in the comments)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from blackbox_wd.signals.answers.text import rouge_l_f1, rouge_tokens, token_rouge_l_f1
from blackbox_wd.signals.baselines import (
    ANSWER_PEERS,
    PEERS,
    compute_baselines,
    discrete_semantic_entropy,
    effective_rank,
    eigenscore,
    exact_match_entails,
    lexical_similarity,
    lne,
    semantic_ids,
)
from blackbox_wd.signals.baselines.dse import cluster_entropy
from blackbox_wd.signals.baselines.entailment import TeacherEntailment, entailment_prompt
from blackbox_wd.signals.baselines.er import effective_rank_of_spectrum
from blackbox_wd.signals.baselines.es import embedding_covariance
from blackbox_wd.signals.baselines.ls import mean_pairwise_rouge_l

PEERS_FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "polygraph_peers.json"  # real samples

# --- LNE ----------------------------------------------------------------------------------


def test_lne_worked_example():
    # response 1: mean(-1, -3) = -2; response 2: mean(-0.5) = -0.5; LNE = -mean(-2, -0.5) = 1.25
    assert lne([[-1.0, -3.0], [-0.5]]) == pytest.approx(1.25)


def test_lne_is_length_normalised():
    # the same per-token log-prob at any length gives the same LNE: -mean(-0.2, -0.2) = 0.2
    assert lne([np.full(3, -0.2), np.full(30, -0.2)]) == pytest.approx(0.2)
    # a sum-based (unnormalised) score would be 0.5 * (0.6 + 6.0) = 3.3; LNE is not
    assert lne([np.full(3, -0.2), np.full(30, -0.2)]) != pytest.approx(3.3)


def test_lne_rejects_empty_and_nan():
    with pytest.raises(ValueError):
        lne([[-1.0], []])
    with pytest.raises(ValueError):
        lne([[-1.0, float("nan")]])
    with pytest.raises(ValueError):
        lne([])


# --- LS -----------------------------------------------------------------------------------


def test_rouge_l_by_hand():
    # "the cat sat on the mat" vs "the cat lay on the mat": LCS = the cat on the mat = 5 of 6 tokens
    # P = R = 5/6, F1 = 5/6
    assert rouge_l_f1("the cat sat on the mat", "the cat lay on the mat") == pytest.approx(5 / 6)
    # "paris" vs "paris france": LCS = 1, P = 1/2, R = 1 (or swapped): F1 = 2 * 0.5 / 1.5 = 2/3
    assert rouge_l_f1("paris", "Paris, France") == pytest.approx(2 / 3)


def test_rouge_l_equals_rouge_score_on_random_token_strings():
    """RapidFuzz's LCS gives rouge-score's own F1, to the bit, over random texts of a small vocabulary
    (many repeats, empty and token-less strings included) and over long passages (more than 64 tokens)."""
    from rouge_score.rouge_scorer import RougeScorer

    scorer, rng = RougeScorer(["rougeL"], use_stemmer=False), np.random.default_rng(0)
    words = ["a", "b", "Cat", "cat,", "sat", "7", "on", "the", "---"]
    texts = ["", "---", *(" ".join(rng.choice(words, rng.integers(1, 12))) for _ in range(40))]
    texts += [" ".join(rng.choice(words, 150)) for _ in range(3)]
    for a in texts:
        for b in texts:
            assert rouge_l_f1(a, b) == scorer.score(a, b)["rougeL"].fmeasure, (a, b)
    assert token_rouge_l_f1(list("ABCBDAB"), list("BDCABA")) == pytest.approx(8 / 13)  # CLRS: LCS 4 of 7 and 6
    assert token_rouge_l_f1([], ["a"]) == token_rouge_l_f1(["a"], []) == token_rouge_l_f1([], []) == 0.0


def test_rouge_tokens_are_rouge_scores_tokens():
    """bbwd's tokens are rouge-score's own (its DefaultTokenizer, with and without the Porter stemmer), over random
    texts of words, punctuation, digits and letters that lower-case into ASCII or out of it, and real samples."""
    from rouge_score.tokenizers import DefaultTokenizer

    rng = np.random.default_rng(1)
    words = [
        "The",
        "cats'",
        "running",
        "ran",
        "İstanbul",
        "Kelvin",
        "\u212a",
        "naïve",
        "2,000",
        "U.S.",
        "-",
        "x1y",
        "generously",
        "happiness",
        "ÉCOLE",
        "ﬁne",
        "agreed",
        "",
    ]
    texts = [" ".join(rng.choice(words, rng.integers(0, 12))) for _ in range(300)]
    texts += [s for r in json.loads(PEERS_FIXTURE.read_text())["records"] for s in r["sample_texts"]]
    for stem in (False, True):
        theirs = DefaultTokenizer(use_stemmer=stem)
        for text in texts:
            assert rouge_tokens(text, stem=stem) == tuple(theirs.tokenize(text)), (stem, text)


def test_lexical_similarity_worked_example():
    a, b, c = "the cat sat on the mat", "the cat lay on the mat", "a dog barked"
    # pairs: (a, b) = 5/6, (a, c) = 0, (b, c) = 0 -> mean 5/18 -> LS = 1 - 5/18 = 13/18
    assert mean_pairwise_rouge_l([a, b, c]) == pytest.approx(5 / 18)
    assert lexical_similarity([a, b, c]) == pytest.approx(13 / 18)


def test_lexical_similarity_orientation():
    same = lexical_similarity(["Paris", "Paris", "paris"])
    diff = lexical_similarity(["Paris", "London", "Rome"])
    assert same == pytest.approx(0.0)  # identical after rouge-score's lowercasing
    assert diff == pytest.approx(1.0)  # no token in common
    with pytest.raises(ValueError):
        lexical_similarity(["only one"])


# --- ES -----------------------------------------------------------------------------------


def _es_example() -> np.ndarray:
    # d = 4; every row already has zero mean, rows orthogonal:
    # z1 = sqrt(3/2) (1, -1, 0, 0):   |z1|^2 / (d-1) = 3 / 3 = 1
    # z2 = sqrt(3)   (0, 0, 1, -1):   |z2|^2 / 3 = 6 / 3 = 2
    # z3 = sqrt(3)   (1, 1, -1, -1):  |z3|^2 / 3 = 12 / 3 = 4
    return np.array(
        [
            np.sqrt(1.5) * np.array([1, -1, 0, 0]),
            np.sqrt(3.0) * np.array([0, 0, 1, -1]),
            np.sqrt(3.0) * np.array([1, 1, -1, -1]),
        ],
        dtype=float,
    )


def test_eigenscore_known_spectrum():
    z = _es_example()
    np.testing.assert_allclose(embedding_covariance(z), np.diag([1.0, 2.0, 4.0]), atol=1e-12)
    # Sigma + 1e-3 I has eigenvalues 1.001, 2.001, 4.001; ES = mean of their natural logs
    # = (0.0009995 + 0.6936468 + 1.3865442) / 3 = 0.693730 (about ln(8) / 3 = ln 2)
    expected = (math.log(1.001) + math.log(2.001) + math.log(4.001)) / 3
    assert eigenscore(z) == pytest.approx(expected, rel=1e-12)
    assert eigenscore(z) == pytest.approx(0.693730, abs=1e-6)


def test_eigenscore_centres_each_embedding_over_its_dimensions():
    # J_d removes a constant added to all coordinates of an embedding: ES is unchanged
    z = _es_example()
    shifted = z + np.array([[5.0], [-2.0], [7.0]])
    assert eigenscore(shifted) == pytest.approx(eigenscore(z), rel=1e-10)


def test_eigenscore_identical_embeddings():
    # three copies of v = (1, -1, 1, -1): |v|^2 / 3 = 4/3, Sigma = 4/3 * ones(3, 3)
    # eigenvalues 4 (= 3 * 4/3), 0, 0 -> ES = (ln(4.001) + 2 ln(0.001)) / 3
    v = np.array([1.0, -1.0, 1.0, -1.0])
    expected = (math.log(4.001) + 2 * math.log(1e-3)) / 3
    assert eigenscore(np.stack([v, v, v])) == pytest.approx(expected, rel=1e-9)
    assert eigenscore(np.stack([v, v, v])) < eigenscore(_es_example())


# --- ER -----------------------------------------------------------------------------------


def test_effective_rank_orthogonal_equal_norm_is_k():
    z = 2.0 * np.eye(5)[:3]  # three orthogonal rows of norm 2 in d = 5: singular values 2, 2, 2
    assert effective_rank(z) == pytest.approx(3.0)


def test_effective_rank_known_spectrum():
    # singular values (3, 1): p = (3/4, 1/4), H = -(0.75 ln 0.75 + 0.25 ln 0.25) = 0.562335
    # ER = exp(H) = 1.754765
    assert effective_rank(np.array([[3.0, 0.0], [0.0, 1.0]])) == pytest.approx(1.754765, abs=1e-6)
    assert effective_rank_of_spectrum([3.0, 1.0, 0.0]) == pytest.approx(1.754765, abs=1e-6)


def test_effective_rank_parallel_is_one_and_uncentred():
    v = np.array([1.0, 2.0, 3.0])
    # parallel rows: rank one -> 1 (a centred version would be the zero matrix)
    assert effective_rank(np.stack([v, 2 * v, -v])) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        effective_rank(np.zeros((3, 4)))


# --- DSE ----------------------------------------------------------------------------------


def test_dse_two_clusters():
    # clusters {Paris, paris.} and {London}: p = (2/3, 1/3)
    # DSE = -(2/3 ln 2/3 + 1/3 ln 1/3) = 0.636514
    responses = ["Paris", "paris.", "London"]
    assert semantic_ids(responses, exact_match_entails) == [0, 0, 1]
    assert discrete_semantic_entropy(responses, exact_match_entails) == pytest.approx(0.636514, abs=1e-6)


def test_dse_extremes():
    assert discrete_semantic_entropy(["Rome", "rome", "The Rome"], exact_match_entails) == pytest.approx(0.0)
    # four different meanings: ln 4
    assert discrete_semantic_entropy(["a1", "b2", "c3", "d4"], exact_match_entails) == pytest.approx(math.log(4))
    assert cluster_entropy([0, 0, 1, 2]) == pytest.approx(-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)))


def test_dse_needs_both_directions():
    # "x" entails "x y" but not the reverse: not the same meaning
    def one_way(premise, hypothesis):
        return premise == "x"

    assert semantic_ids(["x", "x y"], one_way) == [0, 1]


def test_dse_greedy_compares_with_the_cluster_representative():
    # a~b and b~c but not a~c: b joins a's cluster, c is compared with a only -> new cluster
    equiv = {frozenset("ab"), frozenset("bc")}
    calls = []

    def judge(p, h):
        calls.append((p, h))
        return frozenset((p, h)) in equiv

    assert semantic_ids(["a", "b", "c"], judge) == [0, 0, 1]
    assert ("b", "c") not in calls  # b is already assigned, never a representative


def test_prefetch_asks_only_for_responses_not_yet_clustered():
    # a~a2, b~b2: after a's cluster takes a2, b's batch holds b2 only (not a2)
    asked = []

    class Judge:
        def prefetch(self, pairs):
            asked.extend(pairs)

        def __call__(self, p, h):
            return p[0] == h[0]

    assert semantic_ids(["a", "b", "a2", "b2"], Judge()) == [0, 1, 0, 1]
    assert ("b", "a2") not in asked and ("b", "b2") in asked


class _FakeTokenizer:
    VOCAB = {
        "yes": [1],
        "Yes": [2],
        " yes": [1],
        " Yes": [2],
        "YES": [3],
        "no": [4],
        "No": [5],
        " no": [4],
        " No": [5],
        "NO": [6, 9],
    }  # "NO" is two tokens: not used

    pad_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return self.VOCAB[text]


class _FakeModel:
    """Returns 'yes' logits when the two answers share their first word, else 'no' logits."""

    def __init__(self, teacher):
        self.teacher = teacher

    def __call__(self, input_ids, **kwargs):
        logits = torch.zeros(input_ids.shape[0], input_ids.shape[1], 8)
        for row, text in enumerate(self.teacher.prompts[-input_ids.shape[0] :]):
            a = text.split("Answer A: ")[1].split("\n")[0].split()[0].lower()
            b = text.split("Answer B: ")[1].split("\n")[0].split()[0].lower()
            logits[row, -1, [1, 2, 3] if a == b else [4, 5, 6]] = 3.0
        return SimpleNamespace(logits=logits)


class _FakeTeacher:
    device = torch.device("cpu")

    def __init__(self):
        self.tokenizer = _FakeTokenizer()
        self.model = _FakeModel(self)
        self.prompts = []

    @property
    def last_prompt(self):
        return self.prompts[-1]

    def prompt_ids(self, messages):
        self.prompts.append(messages[-1]["content"])
        return [0, 7, 7]


def test_teacher_entailment_judge_reads_yes_no_logits():
    teacher = _FakeTeacher()
    judge = TeacherEntailment(teacher, question="Capital of France?")
    assert judge.yes_ids == [1, 2, 3] and judge.no_ids == [4, 5]
    assert judge("Paris is the capital", "paris of course")
    # logsumexp(3, 3, 3) - logsumexp(0, 0) = 3 + ln 3 - ln 2 = 3.405465
    assert judge.margin("Paris is the capital", "paris of course") == pytest.approx(3.405465, abs=1e-6)
    assert not judge("Paris", "London")
    # logsumexp(0, 0, 0) - logsumexp(3, 3) = ln 3 - 3 - ln 2 = -2.594535
    assert judge.margin("Paris", "London") == pytest.approx(-2.594535, abs=1e-6)
    strict = TeacherEntailment(teacher, question="Capital of France?", threshold=4.0)
    assert not strict("Paris is the capital", "paris of course")  # 3.41 is under the threshold
    assert 'question "Capital of France?"' in teacher.last_prompt
    calls = judge.calls
    judge("Paris", "London")  # cached
    assert judge.calls == calls
    # clusters {Paris.., paris..} and {London}
    ids = semantic_ids(["Paris it is", "paris indeed", "London"], judge)
    assert ids == [0, 0, 1]


def test_entailment_prompt_without_question():
    text = entailment_prompt("A1", "B1")
    assert text.startswith("Answer A: A1\nAnswer B: B1\n") and "yes or no" in text


# --- all at once --------------------------------------------------------------------------


def test_compute_baselines_keys_and_values():
    responses = ["Paris", "paris.", "London"]
    out = compute_baselines(
        responses, logprobs=[[-1.0, -3.0], [-0.5], [-1.25]], embeddings=list(_es_example()), entails=exact_match_entails
    )
    assert set(out) == {"lne", "ls", "es", "er", "dse", *PEERS}
    assert out["lne"] == pytest.approx((2.0 + 0.5 + 1.25) / 3)
    assert out["ls"] == pytest.approx(1 - 1 / 3)  # only (Paris, paris.) match: mean 1/3
    assert out["dse"] == pytest.approx(0.636514, abs=1e-6)
    assert set(compute_baselines(responses)) == {"ls", *PEERS}
    assert set(compute_baselines(responses, answer="Paris")) == {"ls", *PEERS, *ANSWER_PEERS}


def test_teacher_entailment_on_a_real_tiny_llama(tiny_llama):
    # A real HFTeacher forward pass: the judge's margin is the yes-vs-no logit gap at the first
    # reply position, recomputed here from the model's logits.
    from blackbox_wd.teachers.forcing import HFTeacher

    model, tok = tiny_llama
    teacher = HFTeacher(model, tok, name="tiny")
    judge = TeacherEntailment(teacher, question="what is the capital of france")
    yes_id, no_id = tok.convert_tokens_to_ids("yes"), tok.convert_tokens_to_ids("no")
    assert judge.yes_ids == [yes_id] and judge.no_ids == [no_id]  # "Yes", "NO" ... are unknown here
    messages = [{"role": "user", "content": entailment_prompt("paris", "paris city", judge.question)}]
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([teacher.prompt_ids(messages)])).logits[0, -1]
    expected = float(logits[yes_id] - logits[no_id])
    assert judge.margin("paris", "paris city") == pytest.approx(expected, abs=1e-5)
    assert judge("paris", "paris city") == (expected > 0)


def test_exact_match_judge_on_strings_without_words():
    # "A+" and "---" both normalise to "" under SQuAD rules; the judge must still tell them apart
    assert not exact_match_entails("A+", "---")
    assert exact_match_entails("The Beatles!", "beatles")


def test_teacher_judge_prefetch_matches_one_by_one(tiny_llama):
    from blackbox_wd.signals.baselines.entailment import TeacherEntailment
    from blackbox_wd.teachers.forcing import HFTeacher

    teacher = HFTeacher(*tiny_llama)
    responses = ["paris", "it is paris", "rome is a big city", "paris"]
    lazy, batched = TeacherEntailment(teacher, "what is the capital"), TeacherEntailment(teacher, "what is the capital")
    pairs = [(a, b) for a in responses for b in responses if a != b]
    batched.prefetch(pairs, batch_size=3)  # left-padded batches of unequal lengths
    assert batched.calls == 6  # ordered pairs of the 3 distinct strings
    assert semantic_ids(responses, batched) == semantic_ids(responses, lazy)
    for a in responses:
        for b in responses:
            if a != b:
                assert batched.cache[(a, b)] == pytest.approx(lazy.margin(a, b), abs=1e-4)


def test_final_answer_judge_clusters_math_solutions():
    from blackbox_wd.signals.baselines.entailment import final_answer_entails

    sols = ["so x = \\boxed{\\frac{1}{2}}", "hence \\boxed{0.5}", "the answer is \\boxed{2}", "I am not sure"]
    assert final_answer_entails(sols[0], sols[1]) and not final_answer_entails(sols[0], sols[2])
    assert not final_answer_entails(sols[3], sols[0]) and final_answer_entails(sols[3], " I am not sure ")
    # clusters {1/2, 0.5}, {2}, {unsure}: -(1/2 ln 1/2 + 2 * 1/4 ln 1/4) = 1.0397208
    assert discrete_semantic_entropy(sols, final_answer_entails) == pytest.approx(1.0397208, abs=1e-7)


def test_effective_rank_reads_zs_singular_values_through_its_r():
    """ER takes Z's singular values from the R of Z^T = QR: those of Z's own SVD, for full rank, rank 1 (equal
    answers, equal states) and more answers than dimensions."""
    rng = np.random.default_rng(3)
    for k, d in [(10, 576), (5, 3), (2, 64)]:
        for rank in (1, 2, k):
            z = rng.normal(size=(k, rank)) @ rng.normal(size=(rank, d))
            s = np.linalg.svd(z, compute_uv=False)
            assert effective_rank(z) == pytest.approx(effective_rank_of_spectrum(s), abs=1e-12)
    assert effective_rank(np.tile(rng.normal(size=(1, 576)), (10, 1))) == pytest.approx(1.0, abs=1e-12)
