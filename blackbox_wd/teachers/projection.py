"""The one fixed random projection of hidden states to 128 dimensions.

P has i.i.d. N(0, 1/dim) entries drawn from ``numpy.random.default_rng(seed)`` (PCG64, stable across
NumPy versions), so for a given hidden size it is the same matrix for every prompt, run and
machine. Johnson-Lindenstrauss: squared distances are preserved in expectation.
"""

from __future__ import annotations

import numpy as np

PROJ_DIM = 128
PROJ_SEED = 0


def projection_matrix(hidden_size: int, dim: int = PROJ_DIM, seed: int = PROJ_SEED) -> np.ndarray:
    """The (hidden_size, dim) float64 projection matrix for this seed."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((hidden_size, dim)) / np.sqrt(dim)
