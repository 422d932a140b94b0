"""Pairwise exact 2-Wasserstein distances between uniform empirical measures."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import ot


def w2(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W2 = sqrt(EMD2) between uniform measures on the rows of ``x`` and ``y``."""
    cost = ot.dist(x, y, metric="sqeuclidean")
    a = np.full(x.shape[0], 1.0 / x.shape[0])
    b = np.full(y.shape[0], 1.0 / y.shape[0])
    return float(np.sqrt(max(ot.emd2(a, b, cost, numItermax=10_000_000), 0.0)))


def pairwise_w2(clouds: Sequence[np.ndarray]) -> np.ndarray:
    """The symmetric K x K matrix of exact W2 distances, zero on the diagonal."""
    k = len(clouds)
    d = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            d[i, j] = d[j, i] = w2(np.asarray(clouds[i], float), np.asarray(clouds[j], float))
    return d
