"""ER: effective rank of the K sentence embeddings.

Pinned variant (Roy & Vetterli, "The effective rank: a measure of effective dimensionality",
EUSIPCO 2007): for the (K, d) matrix Z whose rows are the K embeddings (the unprojected mid-layer
state of each response's last token, ``TokenStates.last``), with singular values sigma_1..sigma_r::

    p_i = sigma_i / sum_j sigma_j,      ER = exp(-sum_i p_i ln p_i)

The embeddings are NOT centred (Z as is; the definition of Roy & Vetterli applies to the matrix
itself). ER is in [1, min(K, d)]: 1 when all K embeddings are parallel (consistent answers), K
when they are orthogonal with equal norms. Zero singular values contribute nothing (0 ln 0 = 0).
Higher = more likely hallucination.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def effective_rank_of_spectrum(s: Sequence[float] | np.ndarray) -> float:
    """exp of the Shannon entropy (natural log) of the L1-normalised non-negative spectrum s."""
    s = np.asarray(s, dtype=float)
    if np.any(s < 0):
        raise ValueError("singular values must be non-negative")
    total = s.sum()
    if total <= 0:
        raise ValueError("effective rank of an all-zero matrix is undefined")
    p = s[s > 0] / total
    return float(np.exp(-np.sum(p * np.log(p))))


def effective_rank(embeddings: Sequence[np.ndarray] | np.ndarray) -> float:
    """Effective rank (Roy & Vetterli 2007) of the uncentred (K, d) embedding matrix."""
    z = np.asarray(embeddings, dtype=float)
    if z.ndim != 2 or z.shape[0] < 1:
        raise ValueError(f"need a (K, d) array of embeddings, got shape {z.shape}")
    # Z's singular values are those of R in Z^T = QR (K x K for K <= d): half the time of Z's own SVD, equal to rounding
    return effective_rank_of_spectrum(np.linalg.svd(np.linalg.qr(z.T, mode="r"), compute_uv=False))
