"""ES: EigenScore of INSIDE (Chen et al., "INSIDE: LLMs' Internal States Retain the Power of
Hallucination Detection", ICLR 2024, Eqs. 4-5; reference code alibaba/eigenscore
``func/metric.py:getEigenIndicator_v0``).

Pinned variant. Let Z = [z_1, ..., z_K] in R^{d x K} hold the K sentence embeddings as columns:
the unprojected mid-layer state of each response's last token (``TokenStates.last``, shape (d,)).
With J_d = I_d - (1/d) 1_d 1_d^T (centring of every embedding over its d dimensions)::

    Sigma = Z^T J_d Z / (d - 1)                       (K x K; equals ``np.cov(Z^T)``)
    ES    = (1/K) * log det(Sigma + alpha I_K) = (1/K) * sum_i log lambda_i,   alpha = 1e-3

lambda_i are the eigenvalues (= singular values, the matrix being symmetric PSD + alpha I) of
Sigma + alpha I_K. The 1/(d-1) normalisation is the reference code's ``np.cov``; the paper writes
Sigma without it. We use the natural log as in the paper; the reference code takes log10, which
divides ES by ln 10 and leaves every AUROC unchanged. Higher = more semantic diversity = more
likely hallucination.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ES_ALPHA = 1e-3


def embedding_covariance(embeddings: Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    """Sigma = Z^T J_d Z / (d - 1) for K embeddings of dimension d given as a (K, d) array."""
    z = np.asarray(embeddings, dtype=float)
    if z.ndim != 2 or z.shape[0] < 2 or z.shape[1] < 2:
        raise ValueError(f"need a (K, d) array of K >= 2 embeddings of dimension d >= 2, got {z.shape}")
    zc = z - z.mean(axis=1, keepdims=True)  # J_d applied to every embedding
    return zc @ zc.T / (z.shape[1] - 1)


def eigenscore(embeddings: Sequence[np.ndarray] | np.ndarray, alpha: float = ES_ALPHA) -> float:
    """ES = mean_i ln(lambda_i(Sigma + alpha I_K)) of the K x K embedding covariance."""
    cov = embedding_covariance(embeddings)
    s = np.linalg.svd(cov + alpha * np.eye(cov.shape[0]), compute_uv=False)
    return float(np.mean(np.log(s)))
