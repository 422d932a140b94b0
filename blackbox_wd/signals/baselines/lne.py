"""LNE: length-normalised (predictive) entropy over the K sampled responses.

Pinned variant (Malinin & Gales, "Uncertainty Estimation in Autoregressive Structured Prediction",
ICLR 2021, the length-normalised Monte-Carlo estimate; used as "LN-Entropy" by Chen et al., INSIDE,
ICLR 2024)::

    LNE = -(1/K) * sum_k  (1/|y_k|) * sum_t log p(y_k,t | y_k,<t, x)

i.e. minus the mean over responses of the per-token average log-probability. Higher = more
likely hallucination. The log-probabilities are natural-log token log-probs of each response: the
target API's when it returned them, else the teacher's teacher-forced ones (the caller decides;
this function only takes the arrays).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def lne(logprobs: Sequence[Sequence[float] | np.ndarray]) -> float:
    """-mean_k(mean_t log p(y_k,t)) over K per-response arrays of token log-probs."""
    if len(logprobs) == 0:
        raise ValueError("LNE needs at least one response")
    per_response = []
    for k, lp in enumerate(logprobs):
        arr = np.asarray(lp, dtype=float).reshape(-1)
        if arr.size == 0:
            raise ValueError(f"response {k} has no token log-probs")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"response {k} has non-finite token log-probs")
        per_response.append(arr.mean())
    return float(-np.mean(per_response))
