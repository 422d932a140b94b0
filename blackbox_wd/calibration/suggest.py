"""Which scored rows to label (``bbwd calibrate --suggest N``): a sample spread evenly over the risk.

The rows are ranked by the risk their calibration gave them (``p_hallucination``), cut into N strata of equal size,
and one row is drawn from each (seeded): every row has the same chance to be picked, as in a random sample, so the
labelled rows still estimate the log's own rates without weights (the FPR at a threshold, the base rate), while no
part of the risk's range is left without labels by chance. A random sample of N rows leaves whole stretches of the
range unlabelled about as often as a stratum is skipped here never.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from blackbox_wd.errors import BBWDError


def spread_picks(p: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """Indices of ``n`` rows, one drawn from each of ``n`` strata of equal size along p (ties in input order),
    increasing.

    Parameters
    ----------
    p : ndarray
        Each row's risk.
    n : int
        Rows to pick, 1 <= n <= len(p).
    seed : int, default=0
        The draw within each stratum.

    Returns
    -------
    ndarray of int

    Examples
    --------
    >>> spread_picks(np.array([0.9, 0.1, 0.5, 0.3]), 2, seed=0).tolist()
    [0, 3]
    """
    if not 1 <= n <= p.size:
        raise BBWDError(f"--suggest {n}: pick between 1 and the {p.size} rows with a risk")
    order = np.argsort(p, kind="stable")
    edges = np.floor(np.arange(n + 1) * p.size / n).astype(int)
    rng = np.random.default_rng(seed)
    picks = [order[rng.integers(lo, hi)] for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    return np.sort(np.array(picks, dtype=int))


def suggested_rows(risk: Sequence[float | None], n: int, seed: int = 0) -> list[int]:
    """The rows to label, as ``bbwd calibrate --suggest N`` and ``bbwd report --suggest N`` pick them: ``spread_picks``
    over the rows that have a risk, as indices into all the rows, increasing.

    Parameters
    ----------
    risk : sequence of float or None
        Each row's ``p_hallucination``; None for a row without one, or with an error (never picked).
    n : int
        Rows to pick, 1 <= n <= the rows with a risk.
    seed : int, default=0

    Returns
    -------
    list of int

    Raises
    ------
    BBWDError
        No row has a risk, or n is out of range.

    Examples
    --------
    >>> suggested_rows([None, 0.9, 0.1, None, 0.5, 0.3], 2)
    [1, 5]
    """
    known = [i for i, p in enumerate(risk) if p is not None]
    if not known:
        raise BBWDError(
            "no row with a p_hallucination to spread the picks over (score the log with a calibration: bbwd batch "
            "gives the shipped one by default)"
        )
    picks = spread_picks(np.array([risk[i] for i in known], dtype=float), n, seed)
    return [known[i] for i in picks.tolist()]
