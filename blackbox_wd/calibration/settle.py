"""Fitting the ``-k auto`` band of each round (``adaptive``'s rule ``settle``) on a calibration's data."""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

from blackbox_wd.adaptive import DELTA, Settle


def _far_end(p: np.ndarray, flip: np.ndarray, delta: float) -> float | None:
    """From the lowest p inward: the p under which every prompt is settled, or None when the lowest is not.

    The flip rate is fitted increasing in p (``IsotonicRegression``: pooled blocks of prompts); a block counts as
    settled when (flips + 1) / (n + 1) <= delta, and the cut stops at the first block that is not. The cut lies
    halfway between the last settled prompt and the next one (past the last prompt when all are settled).
    """
    if p.size == 0:
        return None
    order = np.argsort(p, kind="stable")
    ps, fs = p[order], flip[order].astype(float)
    rate = IsotonicRegression(increasing=True).fit(ps, fs).predict(ps)
    cut = None
    start = 0
    while start < ps.size:
        end = start + int(np.searchsorted(rate[start:] != rate[start], True))  # this block: same fitted rate
        end = end if end > start else ps.size
        n, flips = end - start, fs[start:end].sum()
        if (flips + 1) / (n + 1) > delta:
            break
        cut = float((ps[end - 1] + ps[end]) / 2) if end < ps.size else float(np.nextafter(ps[-1], np.inf))
        start = end
    return cut


def fit_settle(p: np.ndarray, flag: np.ndarray, final: np.ndarray, delta: float = DELTA) -> Settle:
    """The band outside which a prompt's flag at ``k_max`` differs from this round's with probability <= ``delta``.

    On each side of the round's threshold (the unflagged prompts, then the flagged ones), the probability that
    the flag changes by ``k_max`` is fitted monotone in p, rising toward the threshold (isotonic regression), and
    the prompts far from the threshold stop while their pooled block's rate, counted conservatively as
    (flips + 1) / (n + 1), is at most ``delta``.

    Parameters
    ----------
    p : ndarray of shape (n,)
        Each prompt's probability at this round (out-of-fold).
    flag : ndarray of shape (n,)
        Each prompt's flag at this round.
    final : ndarray of shape (n,)
        Each prompt's flag at the last round.
    delta : float, default=DELTA

    Returns
    -------
    Settle
        ``below``: prompts under it stop; ``above``: prompts over it stop (0 and 1: none).
    """
    p = np.asarray(p, dtype=float)
    flag = np.asarray(flag, dtype=bool)
    flip = flag != np.asarray(final, dtype=bool)
    below = _far_end(p[~flag], flip[~flag], delta)
    above = _far_end(-p[flag], flip[flag], delta)  # the flagged side from the highest p down
    lo = 0.0 if below is None else float(np.clip(below, 0.0, 1.0))
    hi = 1.0 if above is None else float(np.clip(-above, 0.0, 1.0))
    return Settle(lo, max(hi, lo))


def fit_settles(p: np.ndarray, flags: np.ndarray, delta: float = DELTA) -> list[Settle]:
    """Each round's band but the last's, in order, each fitted on the prompts the rounds before left open.

    Parameters
    ----------
    p, flags : ndarray of shape (rounds, prompts)
        Each prompt's probability (out-of-fold) and flag at each round; the last row is ``k_max``'s.
    delta : float, default=DELTA

    Returns
    -------
    list of Settle
        One per round before the last.
    """
    open_ = np.ones(p.shape[1], dtype=bool)
    out = []
    for s in range(p.shape[0] - 1):
        settle = fit_settle(p[s, open_], flags[s, open_], flags[-1, open_], delta)
        out.append(settle)
        open_ &= ~((p[s] < settle.below) | (p[s] > settle.above))
    return out
