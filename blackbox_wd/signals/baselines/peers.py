"""The peers: lm-polygraph's model-free estimators over the K samples, and their per-answer variants.

Each needs only the texts. The sample-set scores are lm-polygraph 0.7.0's (``lm_polygraph.estimators``), to the bit
on the same texts (``tests/signals/test_peers.py`` checks them against its values, recorded by
``scripts/record_polygraph.py``):

=====================  ==============================================  ===========================================
key                    lm-polygraph                                    value
=====================  ==============================================  ===========================================
``lexsim_rouge1``      ``LexicalSimilarity("rouge1")``                 1 + its value: 1 - mean pairwise ROUGE-1 F1
``lexsim_rougel``      ``LexicalSimilarity("rougeL")``                 1 + its value: 1 - mean pairwise ROUGE-L F1
``eigval_jaccard``     ``EigValLaplacian("Jaccard_score")``            sum_k max(0, 1 - lambda_k(L)), as it is
``degmat_jaccard``     ``DegMat("Jaccard_score")``                     1 - mean of W, as it is
``ecc_jaccard``        ``Eccentricity("Jaccard_score")``               as it is
=====================  ==============================================  ===========================================

ROUGE is ``rouge-score``'s with its Porter stemmer (``use_stemmer=True``, as lm-polygraph scores it; bbwd's LS has
no stemmer). W is the Jaccard similarity of the samples' sets of lower-cased whitespace words (1 on the diagonal,
0 for two empty texts) and L = I - D^-1/2 W D^-1/2 its normalised Laplacian (Lin, Trivedi & Sun, "Generating with
Confidence", TMLR 2024). lm-polygraph reports the lexical similarity with a minus sign; bbwd adds 1, so that every
score here is in [0, 1] or above 0 and higher means more likely hallucination.

With a judged answer, each has a variant that scores the answer against the samples (Lin et al.'s per-response
confidences, as uncertainties; lm-polygraph has none of them):

=====================  ================================================================================
``answer_rougel``      1 - mean over the samples of ROUGE-L F1(answer, sample), stemmed
``answer_degmat``      1 - mean over the samples of Jaccard(answer, sample): the answer's degree
``answer_ecc``         the answer's eccentricity in the graph of the answer and the samples: the distance of its
                       row of the Laplacian's eigenvectors of eigenvalue below 0.9 from the rows' mean
=====================  ================================================================================
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from blackbox_wd.signals.answers.text import distinct, overlap_f1s, pair_mean, rouge_l_f1s, rouge_tokens

PEERS = ("lexsim_rouge1", "lexsim_rougel", "eigval_jaccard", "degmat_jaccard", "ecc_jaccard")
ANSWER_PEERS = ("answer_rougel", "answer_degmat", "answer_ecc")
ECC_THRESHOLD = 0.9  # lm-polygraph's Eccentricity(thres=0.9): eigenvectors of eigenvalues below it


def word_matrix(words: Sequence[Sequence[str]]) -> np.ndarray:
    """How often each text holds each word: one row per text, one column per word of any of them.

    >>> word_matrix([("a", "b", "a"), ("b",)]).tolist()
    [[2, 1], [0, 1]]
    """
    vocabulary: dict[str, int] = {}
    column = np.array([vocabulary.setdefault(w, len(vocabulary)) for ws in words for w in ws], dtype=np.int64)
    row = np.repeat(np.arange(len(words)), [len(ws) for ws in words])
    size = len(vocabulary)
    return np.bincount(row * size + column, minlength=len(words) * size).reshape(len(words), size)


def jaccard_matrix(texts: Sequence[str]) -> np.ndarray:
    """W: the Jaccard similarity of each pair's sets of lower-cased whitespace words, 1 on the diagonal (0 for two
    texts without a word), as lm-polygraph's ``Jaccard_score``; computed once per pair of distinct texts.

    >>> jaccard_matrix(["a b", "b c", "", ""]).round(3).tolist()
    [[1.0, 0.333, 0.0, 0.0], [0.333, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    """
    unique, which = distinct(texts)
    has = (word_matrix([t.lower().split() for t in unique]) > 0).astype(np.int64)
    both = has @ has.T
    size = has.sum(axis=1)
    union = size[:, None] + size[None, :] - both
    w = np.divide(both, union, out=np.zeros(both.shape), where=union > 0)[which[:, None], which]
    np.fill_diagonal(w, 1.0)
    return w


def laplacian(w: np.ndarray) -> np.ndarray:
    """L = I - D^-1/2 W D^-1/2, D the degrees (row sums) of W."""
    d = 1.0 / np.sqrt(w.sum(axis=1))
    return np.eye(len(w)) - d[:, None] * w * d[None, :]


def eigval_laplacian(w: np.ndarray) -> float:
    """sum_k max(0, 1 - lambda_k) over the eigenvalues of W's Laplacian: a continuous count of meaning sets (K for
    K texts with nothing in common, 1 for K equal ones).

    >>> round(eigval_laplacian(np.ones((4, 4))), 6), round(eigval_laplacian(np.eye(4)), 6)
    (1.0, 4.0)
    """
    return _eigval_sum(np.linalg.eigvalsh(laplacian(w)))


def _eigval_sum(values: np.ndarray) -> float:
    """sum_k max(0, 1 - lambda_k) of the Laplacian's eigenvalues."""
    return float(np.maximum(0.0, 1.0 - values).sum())


def degree_matrix(w: np.ndarray) -> float:
    """1 - the mean of W: lm-polygraph's ``trace(K - D) / K**2``.

    >>> degree_matrix(np.eye(4)), degree_matrix(np.ones((4, 4)))
    (0.75, 0.0)
    """
    return float(1.0 - w.mean())


def _small_eigenvectors(values: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The eigenvectors (columns) of a Laplacian's eigendecomposition whose eigenvalue is below ``ECC_THRESHOLD``."""
    return vectors[:, values < ECC_THRESHOLD]


def eccentricity(w: np.ndarray) -> float:
    """lm-polygraph's ``Eccentricity``: the norm over the Laplacian's eigenvectors of eigenvalue below 0.9 of each
    one's distance from its own mean (0 for K equal texts).

    >>> round(eccentricity(np.ones((4, 4))), 6)
    0.0
    """
    return _eccentricity(*np.linalg.eigh(laplacian(w)))


def _eccentricity(values: np.ndarray, vectors: np.ndarray) -> float:
    """``eccentricity`` from the Laplacian's eigendecomposition (``numpy.linalg.eigh``'s values and vectors)."""
    v = _small_eigenvectors(values, vectors).T
    return float(np.linalg.norm(np.linalg.norm(v - v.mean(axis=1, keepdims=True), axis=1)))


def answer_eccentricity(w: np.ndarray) -> float:
    """The eccentricity of text 0 in the graph W (Lin et al.'s C_Ecc, as an uncertainty): the distance of its row
    of the small eigenvectors (``_small_eigenvectors``) from the mean row."""
    v = _small_eigenvectors(*np.linalg.eigh(laplacian(w)))
    return float(np.linalg.norm(v[0] - v.mean(axis=0)))


def peer_scores(responses: Sequence[str], answer: str | None = None) -> dict[str, float]:
    """The peers of K responses (``PEERS``), and with a judged ``answer`` its variants (``ANSWER_PEERS``).

    Parameters
    ----------
    responses : sequence of str
        The K sampled responses (at least 2).
    answer : str or None, default=None
        The judged answer, scored against the samples.

    Returns
    -------
    dict of str to float
        Higher = more likely hallucination.

    Examples
    --------
    >>> s = peer_scores(["Canberra", "Canberra", "Sydney"], answer="Sydney")
    >>> round(s["lexsim_rouge1"], 4), round(s["degmat_jaccard"], 4), round(s["answer_degmat"], 4)
    (0.6667, 0.4444, 0.6667)
    """
    if len(responses) < 2:
        raise ValueError("the peers need at least 2 responses")
    texts = list(responses) if answer is None else [answer, *responses]
    unique, which = distinct(texts)
    tokens = [rouge_tokens(t, stem=True) for t in unique]
    n = np.array([len(t) for t in tokens])
    counts = word_matrix(tokens)
    # ROUGE-1's clipped unigram overlap and ROUGE-L's longest common subsequence (RapidFuzz), per distinct pair
    rouge_1 = overlap_f1s(np.minimum(counts[:, None, :], counts[None, :, :]).sum(axis=-1), n)
    rouge_l = rouge_l_f1s(tokens)
    samples = which[-len(responses) :]
    # the answer's graph holds the samples' as its lower block: computed once
    w_answer = None if answer is None else jaccard_matrix(texts)
    w = jaccard_matrix(responses) if w_answer is None else w_answer[1:, 1:]
    spectrum = np.linalg.eigh(laplacian(w))  # one decomposition for EigValLaplacian and Eccentricity
    out = {
        "lexsim_rouge1": 1.0 - pair_mean(rouge_1, samples),
        "lexsim_rougel": 1.0 - pair_mean(rouge_l, samples),
        "eigval_jaccard": _eigval_sum(spectrum[0]),
        "degmat_jaccard": degree_matrix(w),
        "ecc_jaccard": _eccentricity(*spectrum),
    }
    if answer is not None and w_answer is not None:
        out["answer_rougel"] = 1.0 - float(np.mean(rouge_l[which[0], samples]))
        out["answer_degmat"] = 1.0 - float(w_answer[0, 1:].mean())
        out["answer_ecc"] = answer_eccentricity(w_answer)
    return out
