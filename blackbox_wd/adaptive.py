"""Adaptive K (``-k auto``): draw a prompt's samples in stages and stop once its verdict is settled.

The rule, ``settle``:

* **Stages.** The samples come in stages of 3, 5, 10, 20, 40, ... samples, up to ``k_max`` (:func:`stages`):
  ``k_max`` 10 draws 3, then 2 more, then 5 more. Sample i is the same whichever stage draws it (its seed
  depends on the prompt, the seed and i only), so a prompt stopped at 5 holds the first 5 samples of a run at 10.
* **A verdict at each stage.** Every score's scale may depend on how many samples it was computed from
  (EigenWD's does), so each stage has its own heads, fitted on the first k samples of the calibration's data:
  p_k is a probability of hallucination whatever k is, and verdicts of prompts stopped at other stages compare.
* **Settled.** Stage k < k_max stops when p_k is below ``below`` or above ``above`` (:class:`Settle`): where the
  remaining samples are unlikely to move the verdict across its threshold. The band is fitted on the
  calibration's data (:func:`fit_settle`): on each side of the threshold, the chance that a prompt's flag at
  ``k_max`` differs from its flag at this stage is fitted monotone in p, and the band's edge is where it
  passes ``DELTA`` = 5%, each pooled block of prompts counted conservatively as (flips + 1) / (n + 1), so that
  a stage fitted on few prompts stops few or none. The last stage always stops.

The rule's settings (``k_max`` and the rule's name) are part of the fingerprint; the number of samples drawn is
not, nor the band, which the calibration holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RULE = "settle"  # the one stopping rule (``Settings.stop``)
START = 3  # samples of the first stage
DELTA = 0.05  # of the prompts a stage stops, the share whose flag may differ at k_max


def stages(k_max: int, start: int = START) -> tuple[int, ...]:
    """The sample counts at which a prompt's verdict is looked at: 3, 5, then doubling, up to ``k_max``.

    >>> stages(10), stages(20), stages(4), stages(2)
    ((3, 5, 10), (3, 5, 10, 20), (3, 4), (2,))
    """
    ladder = [start, 5] + [5 * 2**i for i in range(1, max(k_max, 2).bit_length() + 1)]
    return (*sorted({k for k in ladder if k < k_max}), k_max)


@dataclass(frozen=True)
class Settle:
    """A stage's band: its verdict is settled when p < ``below`` or p > ``above`` (0 and 1: never)."""

    below: float = 0.0
    above: float = 1.0

    def settled(self, p: float) -> bool:
        """True when p is outside the band."""
        return bool(p < self.below or p > self.above)


def _far_end(p: np.ndarray, flip: np.ndarray, delta: float) -> float | None:
    """From the lowest p inward: the p under which every prompt is settled, or None when the lowest is not.

    The flip rate is fitted increasing in p (``IsotonicRegression``: pooled blocks of prompts); a block counts as
    settled when (flips + 1) / (n + 1) <= delta, and the cut stops at the first block that is not. The cut lies
    halfway between the last settled prompt and the next one (past the last prompt when all are settled).
    """
    from sklearn.isotonic import IsotonicRegression  # only where a calibration is fitted

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
    """The band outside which a prompt's flag at ``k_max`` differs from this stage's with probability <= ``delta``.

    On each side of the stage's threshold (the unflagged prompts, then the flagged ones), the probability that
    the flag changes by ``k_max`` is fitted monotone in p, rising toward the threshold (isotonic regression), and
    the prompts far from the threshold stop while their pooled block's rate, counted conservatively as
    (flips + 1) / (n + 1), is at most ``delta``.

    Parameters
    ----------
    p : ndarray of shape (n,)
        Each prompt's probability at this stage (out-of-fold).
    flag : ndarray of shape (n,)
        Each prompt's flag at this stage.
    final : ndarray of shape (n,)
        Each prompt's flag at the last stage.
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


def stop_stage(p: np.ndarray, settles: Sequence[Settle]) -> np.ndarray:
    """The stage at which each prompt stops, replaying the rule over p of shape (stages, prompts); the last
    stage (which has no band) stops every prompt still open."""
    n_stages, n = p.shape
    out = np.full(n, n_stages - 1)
    open_ = np.ones(n, dtype=bool)
    for s, settle in enumerate(settles[: n_stages - 1]):
        stop = open_ & ((p[s] < settle.below) | (p[s] > settle.above))
        out[stop] = s
        open_ &= ~stop
    return out


def fit_settles(p: np.ndarray, flags: np.ndarray, delta: float = DELTA) -> list[Settle]:
    """Each stage's band but the last's, in order, each fitted on the prompts the stages before left open.

    Parameters
    ----------
    p, flags : ndarray of shape (stages, prompts)
        Each prompt's probability (out-of-fold) and flag at each stage; the last row is ``k_max``'s.
    delta : float, default=DELTA

    Returns
    -------
    list of Settle
        One per stage before the last.
    """
    open_ = np.ones(p.shape[1], dtype=bool)
    out = []
    for s in range(p.shape[0] - 1):
        settle = fit_settle(p[s, open_], flags[s, open_], flags[-1, open_], delta)
        out.append(settle)
        open_ &= ~((p[s] < settle.below) | (p[s] > settle.above))
    return out
