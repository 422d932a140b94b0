"""AvgWD and EigenWD from a K x K Wasserstein distance matrix; AnswerWD and the sentence scores of a judged answer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

P_NORM = 0.1
BANDWIDTH_EPS = 1e-6
DEFAULT_ALPHA = 1e-3


def avg_wd(d: np.ndarray) -> float:
    """Mean of D over the unordered pairs i < j."""
    iu = np.triu_indices(d.shape[0], k=1)
    return float(d[iu].mean())


def median_bandwidth(d: np.ndarray) -> float:
    """Median of the positive entries of D, or 1 when there are none."""
    pos = d[d > 0]
    return float(np.median(pos)) if pos.size else 1.0


def wd_kernel(d: np.ndarray, alpha: float = DEFAULT_ALPHA, bandwidth: float | None = None) -> np.ndarray:
    """Kmat = exp(-D^2 / (2 (b^2 + 1e-6))) + alpha I with b the given bandwidth, else D's median bandwidth."""
    b = median_bandwidth(d) if bandwidth is None else bandwidth
    return np.exp(-(d**2) / (2.0 * (b**2 + BANDWIDTH_EPS))) + alpha * np.eye(d.shape[0])


def spectrum_ratio(s: np.ndarray, p: float = P_NORM) -> float:
    """||s||_p / ||s||_2 of a non-negative spectrum; 1 for rank one, larger as it spreads.

    Values below the rank tolerance of ``numpy.linalg.matrix_rank`` (len(s) * eps * max(s)) are
    rounding noise of zero singular values and are dropped: with p = 0.1 they would count.
    """
    s = np.asarray(s, dtype=float)
    s = s[s > s.max() * len(s) * np.finfo(float).eps]
    # Scale by the largest value first: (sum s^p)^(1/p) overflows nothing and stays exact.
    t = s / s.max()
    return float(np.sum(t**p) ** (1.0 / p) / np.sqrt(np.sum(t**2)))


def eigen_wd(d: np.ndarray, alpha: float = DEFAULT_ALPHA, p: float = P_NORM, bandwidth: float | None = None) -> float:
    """EigenWD = ||s||_p / ||s||_2 with s the singular values of the W2 kernel matrix.

    The kernel is exp(-D^2 / (2 (b^2 + 1e-6))) + alpha I with b the median of D's positive entries
    (:func:`wd_kernel`); singular values below numpy's rank tolerance are dropped (:func:`spectrum_ratio`).
    Responses that agree give a kernel near rank one and a low score; spread ones a higher score. Scaling D
    hardly changes it (the bandwidth follows D; only the 1e-6 does not).

    Parameters
    ----------
    d : ndarray of shape (K, K)
        The W2 distance matrix of K responses (``transport.pairwise_w2``): symmetric, non-negative, zero
        diagonal, K >= 2; any real dtype.
    alpha : float, default=DEFAULT_ALPHA (1e-3)
        Ridge added to the kernel's diagonal, >= 0.
    p : float, default=P_NORM (0.1)
        The norm's order, > 0; below 2 it counts small singular values more than large ones.
    bandwidth : float or None, default=None
        The kernel's bandwidth b; None: the median of D's positive entries (the paper's). A fixed b (the
        teacher's reference, ``teachers.registry.reference_bandwidth``) keeps the scale of D that the median
        divides out: on passages, where every sample is about equally far from every other, only a fixed b
        tells near from far.

    Returns
    -------
    score : float
        EigenWD: >= 1 for p <= 2, equal to 1 only for a rank-one kernel; higher = more likely hallucinated.

    Examples
    --------
    >>> round(eigen_wd(np.zeros((3, 3))), 2)  # three identical responses: rank one plus alpha I
    606.86
    >>> round(eigen_wd(1.0 - np.eye(3)), 1)  # three equidistant ones
    18750.7
    """
    s = np.linalg.svd(wd_kernel(d, alpha, bandwidth), compute_uv=False)
    return spectrum_ratio(s, p)


def unit_states(states: np.ndarray) -> np.ndarray:
    """Each token state (row) scaled to unit Euclidean length; a zero row stays zero.

    The W2 ground cost is squared-Euclidean, so a token whose state is many times longer than the others
    (a massive activation: Gemma-3's middle layer has tokens at 13x the median norm) dominates every
    distance it takes part in. On the unit sphere each token's cost is at most 4.

    Parameters
    ----------
    states : ndarray of shape (m, d)

    Returns
    -------
    ndarray of shape (m, d), float64

    Examples
    --------
    >>> unit_states(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
    """
    x = np.asarray(states, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def answer_wd(to_samples: np.ndarray) -> float:
    """AnswerWD: the mean exact W2 distance from the judged answer's token cloud to each sample's.

    ``to_samples`` is ``transport.w2_to_each(answer, samples)``. It asks of the answer itself what
    SelfCheckGPT asks in text: is it consistent with what the model would otherwise say? 0 when the
    answer's cloud equals every sample's.
    """
    to_samples = np.asarray(to_samples, dtype=float)
    if to_samples.size == 0:
        raise ValueError("AnswerWD needs at least one sample")
    return float(to_samples.mean())


def answer_nll(logprobs: Sequence[float] | np.ndarray) -> float:
    """The teacher's confidence in the judged answer, as a loss: the mean over its tokens of -log p(token | prompt,
    the tokens before it). Higher = less expected by the teacher; times AnswerWD it is ``cocoa`` (confidence
    times consistency, as CoCoA, Vashurin et al. 2025).

    Parameters
    ----------
    logprobs : array-like of shape (m,)
        The answer's per-token log-probabilities under the teacher (``TokenStates.logprobs``), m >= 1.

    Returns
    -------
    nll : float
        -mean(logprobs), in nats per token.

    Examples
    --------
    >>> answer_nll([-0.5, -1.5, -1.0])
    1.0
    """
    lp = np.asarray(logprobs, dtype=float)
    if lp.size == 0:
        raise ValueError("answer_nll needs at least one token")
    return float(-lp.mean())


def sentence_scores(token_costs: np.ndarray, token_sentence: np.ndarray, n_sentences: int) -> list[float | None]:
    """Each sentence's score sqrt(min_k mean_{t in T_n} c_kt), None for a sentence with no token.

    ``token_costs`` (K, m) is ``transport.token_costs_to_each(answer, samples)``, ``token_sentence`` (m,) the
    sentence of each token (-1: none). The W2-like cost of explaining the sentence by the sample that
    explains it best; higher = more likely unsupported (``blackbox_wd.measure.sentences``).
    """
    costs = np.asarray(token_costs, dtype=float)
    members = np.asarray(token_sentence)[:, None] == np.arange(n_sentences)[None, :]  # (m, n)
    counts = members.sum(axis=0)
    means = (costs @ members) / np.maximum(counts, 1)  # (K, n)
    best = np.sqrt(np.maximum(means.min(axis=0), 0.0))
    return [float(v) if c else None for v, c in zip(best, counts, strict=True)]


def sentence_wd(scores: Sequence[float | None]) -> float | None:
    """The passage's score from its sentences': the mean of those that are not None (None when none is)."""
    known = [s for s in scores if s is not None]
    return float(np.mean(known)) if known else None
