"""A probability against 0/1 labels: its reliability bins and its ECE, over one binning.

``bin_of`` is the one binning: ``bins`` equal-width bins of p, [0, 1/bins], (1/bins, 2/bins], ..., (1 - 1/bins, 1],
those of ``sklearn.calibration.calibration_curve(strategy="uniform")`` (p = 0.1 falls in the first of ten). The
reliability bins (``bins_of``: ``bbwd report``'s chart, ``bbwd calibrate``'s plot) and the ECE
(``expected_calibration_error``: ``bbwd report``, a calibration's ``cv``, ``bbwd calibrate``'s summary) both bin
through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from blackbox_wd.calibration.evaluation.metrics import Floats

BINS = 10


@dataclass(frozen=True)
class Bin:
    """One reliability bin: its centre, its mean p and its share of label 1 (None when empty), its count."""

    x: float
    p: float | None
    rate: float | None
    n: int


def bin_of(p: Floats, bins: int = BINS) -> np.ndarray:
    """Each probability's bin, 0 to ``bins`` - 1 (a p below 0 or above 1 in the first or last).

    Parameters
    ----------
    p : sequence of float or ndarray
        Probabilities.
    bins : int, default=BINS
        Equal-width bins over [0, 1].

    Returns
    -------
    ndarray of int
        The bin of each p: b where b / bins < p <= (b + 1) / bins (the first also holds 0).

    Examples
    --------
    >>> bin_of([0.0, 0.1, 0.1000001, 0.95, 1.0]).tolist()
    [0, 0, 1, 9, 9]
    """
    return np.searchsorted(np.linspace(0.0, 1.0, bins + 1)[1:-1], np.asarray(p, dtype=float).reshape(-1))


def bins_of(y: Floats, p: Floats, bins: int = BINS) -> list[Bin]:
    """The reliability bins of p against the labels ``y``: per bin of ``bin_of``, its mean p and share of label 1.

    Parameters
    ----------
    y : sequence of float or ndarray
        The labels, 1 = hallucination.
    p : sequence of float or ndarray
        The probabilities of hallucination, one per label.
    bins : int, default=BINS

    Returns
    -------
    list of Bin
        Every bin, in order (an empty one with its count 0 and no mean).
    """
    y = np.asarray(y, dtype=float).reshape(-1)
    p = np.asarray(p, dtype=float).reshape(-1)
    which = bin_of(p, bins)
    n = np.bincount(which, minlength=bins)
    mean_p = np.bincount(which, weights=p, minlength=bins)
    rate = np.bincount(which, weights=y, minlength=bins)
    return [
        Bin(
            (b + 0.5) / bins,
            float(mean_p[b] / n[b]) if n[b] else None,
            float(rate[b] / n[b]) if n[b] else None,
            int(n[b]),
        )
        for b in range(bins)
    ]


def expected_calibration_error(y: Floats, p: Floats, bins: int = BINS, w: Floats | None = None) -> float:
    """ECE = sum over the bins b of ``bin_of`` of |sum_b w y - sum_b w p| / sum w.

    Parameters
    ----------
    y : sequence of float or ndarray
        The labels, 1 = hallucination (a weighted row may hold a share).
    p : sequence of float or ndarray
        The probabilities of hallucination.
    bins : int, default=BINS
    w : sequence of float or ndarray, optional
        Each row's weight (default 1).

    Returns
    -------
    float
    """
    y = np.asarray(y, dtype=float)
    p = np.asarray(p, dtype=float)
    w = np.ones_like(p) if w is None else np.asarray(w, dtype=float)
    which = bin_of(p, bins)
    gap = np.bincount(which, weights=w * y, minlength=bins) - np.bincount(which, weights=w * p, minlength=bins)
    return float(np.abs(gap).sum() / w.sum())
