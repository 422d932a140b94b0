"""Adaptive K (``-k auto``): draw a prompt's samples in rounds and stop once its verdict is settled.

The rule, ``settle``:

* **Rounds.** The samples come in rounds of 3, 5, 10, 20, 40, ... samples, up to ``k_max`` (:func:`rounds`):
  ``k_max`` 10 draws 3, then 2 more, then 5 more. Sample i is the same whichever round draws it (its seed
  depends on the prompt, the seed and i only), so a prompt stopped at 5 holds the first 5 samples of a run at 10.
* **A verdict at each round.** Every score's scale may depend on how many samples it was computed from
  (EigenWD's does), so each round has its own heads, fitted on the first k samples of the calibration's data:
  p_k is a probability of hallucination whatever k is, and verdicts of prompts stopped at other rounds compare.
* **Settled.** Round k < k_max stops when p_k is below ``below`` or above ``above`` (:class:`Settle`): where the
  remaining samples are unlikely to move the verdict across its threshold. The band is fitted on the
  calibration's data (``calibration.settle.fit_settle``): on each side of the threshold, the chance that a
  prompt's flag at ``k_max`` differs from its flag at this round is fitted monotone in p, and the band's edge is
  where it passes ``DELTA`` = 5%, each pooled block of prompts counted conservatively as (flips + 1) / (n + 1), so
  that a round fitted on few prompts stops few or none. The last round always stops.

The rule's settings (``k_max`` and the rule's name) are part of the fingerprint; the number of samples drawn is
not, nor the band, which the calibration holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

RULE: Literal["settle"] = "settle"  # the one stopping rule (``Settings.stop``)
START = 3  # samples of the first round
DELTA = 0.05  # of the prompts a round stops, the share whose flag may differ at k_max


def rounds(k_max: int, start: int = START) -> tuple[int, ...]:
    """The sample counts at which a prompt's verdict is looked at: 3, 5, then doubling, up to ``k_max``.

    >>> rounds(10), rounds(20), rounds(4), rounds(2)
    ((3, 5, 10), (3, 5, 10, 20), (3, 4), (2,))
    """
    ladder = [start, 5] + [5 * 2**i for i in range(1, max(k_max, 2).bit_length() + 1)]
    return (*sorted({k for k in ladder if k < k_max}), k_max)


@dataclass(frozen=True)
class Settle:
    """A round's band: its verdict is settled when p < ``below`` or p > ``above`` (0 and 1: never)."""

    below: float = 0.0
    above: float = 1.0

    def settled(self, p: float) -> bool:
        """True when p is outside the band."""
        return bool(p < self.below or p > self.above)


def stop_round(p: np.ndarray, settles: Sequence[Settle]) -> np.ndarray:
    """The round at which each prompt stops, replaying the rule over p of shape (rounds, prompts); the last
    round (which has no band) stops every prompt still open."""
    n_rounds, n = p.shape
    out = np.full(n, n_rounds - 1)
    open_ = np.ones(n, dtype=bool)
    for s, settle in enumerate(settles[: n_rounds - 1]):
        stop = open_ & ((p[s] < settle.below) | (p[s] > settle.above))
        out[stop] = s
        open_ &= ~stop
    return out
