"""Which members a few labels choose: the candidates a ``map`` refit weighs against the heads that judged the rows.

One fitted verdict cannot rank best on every model; a user's labelled rows are the one source that knows theirs.
Before a ``map`` refit moves p (``recalibrate``), the labelled rows rate a small fixed set of candidates
(``CANDIDATES``, each the standardised mean of its members, oriented as the heads read them) against the heads that
judged them (``SHIPPED``: their p). The best candidate replaces those heads only when its gain is clear: the paired
bootstrap over prompts (``RESAMPLES``, seed 0) of AUROC(best) - AUROC(shipped) has its ``GAIN_QUANTILE`` quantile
above zero. The rule was written before its run (docs/results-notebook.md, "Your labels choose the verdict").

Nothing here is fitted on the labels but the choice: a candidate's scales are its members' mean and spread over the
labelled rows, which ranks them as the members do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from blackbox_wd.calibration.evaluation.metrics import LEVEL  # the printed intervals
from blackbox_wd.signals.baselines.peers import ANSWER_PEERS, PEERS

RESAMPLES = 2000  # bootstrap resamples of the labelled prompts
GAIN_QUANTILE = 0.05  # switch when this quantile of the paired gain is above zero (one-sided 95%)
SHIPPED = "shipped"  # the heads that judged the rows, as they are


@dataclass(frozen=True)
class Candidate:
    """A set of members read as their standardised mean, under a plain name."""

    name: str
    members: tuple[str, ...]


W2 = ("avg_wd", "log_eigen_wd", "log_eigen_wd_fixed", "answer_wd", "sentence_wd")
SINGLES = (*PEERS, *ANSWER_PEERS, "answer_disagreement", "ls", "answer_unigram", *W2)
CANDIDATES: tuple[Candidate, ...] = (
    *(Candidate(m, (m,)) for m in SINGLES),
    Candidate("lexsim", ("lexsim_rouge1", "lexsim_rougel")),
    Candidate("answer", ("answer_rougel", "answer_disagreement")),
    Candidate("phrase", ("lexsim_rouge1", "lexsim_rougel", "answer_rougel", "answer_disagreement")),
    Candidate("peers", (*PEERS, *ANSWER_PEERS, "answer_disagreement")),
    Candidate("w2+lexsim", ("avg_wd", "log_eigen_wd_fixed", "lexsim_rouge1")),
    Candidate("w2", ("avg_wd", "log_eigen_wd", "answer_wd")),
)


@dataclass(frozen=True)
class Rated:
    """A candidate's labelled AUROC and its bootstrap interval (``LEVEL``)."""

    name: str
    members: tuple[str, ...]
    auroc: float
    interval: tuple[float, float]

    def line(self) -> str:
        """e.g. 'answer_rougel 0.861 [0.790, 0.925]'."""
        return f"{self.name} {self.auroc:.3f} [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"


@dataclass(frozen=True)
class MemberChoice:
    """What the labels chose: the shipped heads' rating, every candidate's (best first), the one chosen (None: the
    shipped heads kept) and the paired gain of the best over the shipped heads with its ``GAIN_QUANTILE`` quantile."""

    shipped: Rated
    rated: tuple[Rated, ...]
    chosen: Rated | None
    gain: float
    gain_low: float

    def line(self, top: int = 3) -> str:
        """One line: what the verdict reads and why, and the top candidates beside the shipped heads."""
        best = self.rated[0] if self.rated else None
        others = "; ".join(r.line() for r in self.rated[:top])
        if self.chosen is not None:
            why = (
                f"the labels chose {', '.join(self.chosen.members)}: labelled AUROC {self.chosen.line()} against the "
                f"shipped heads' {self.shipped.line()[len(SHIPPED) + 1 :]}, gain {self.gain:+.3f} (5th percentile "
                f"{self.gain_low:+.3f} > 0)"
            )
        elif best is None:
            why = f"kept the shipped heads (labelled AUROC {self.shipped.line()[len(SHIPPED) + 1 :]}): no candidate"
        else:
            why = (
                f"kept the shipped heads (labelled AUROC {self.shipped.line()[len(SHIPPED) + 1 :]}): the best candidate"
                f", {best.name}, gains {self.gain:+.3f}, not clearly (5th percentile {self.gain_low:+.3f} <= 0)"
            )
        return f"{why}; top candidates: {others}" if others else why


def standardised_mean(values: np.ndarray) -> np.ndarray:
    """The mean over members (columns) of each member standardised over the rows (its mean and spread)."""
    return np.mean((values - values.mean(axis=0)) / values.std(axis=0), axis=1)


def resample_counts(n_rows: int, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """How often each row is drawn in each bootstrap resample of the rows, (resamples, n_rows); the first row of the
    array is the rows themselves (each once)."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_rows, size=(resamples, n_rows))
    counts = np.zeros((resamples + 1, n_rows))
    counts[0] = 1.0
    np.add.at(counts, (np.repeat(np.arange(1, resamples + 1), n_rows), draws.ravel()), 1.0)
    return counts


def aurocs(scores: np.ndarray, y: np.ndarray, w: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The weighted AUROC of ``scores`` (entries) under each row of ``counts`` (resamples, entries): each entry's
    weight is its own ``w`` times its row's count; ties count half, as ``roc_auc_score`` counts them.

    >>> aurocs(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1]), np.ones(4), np.ones((1, 4)))
    array([0.75])
    """
    pos, neg = y == 1, y == 0
    diff = scores[pos][:, None] - scores[neg][None, :]
    wins = (diff > 0) + 0.5 * (diff == 0)
    wp, wn = counts[:, pos] * w[pos], counts[:, neg] * w[neg]
    total = wp.sum(axis=1) * wn.sum(axis=1)
    out = np.sum((wp @ wins) * wn, axis=1)
    return np.divide(out, total, out=np.full(out.shape, 0.5), where=total > 0)


def rate(name: str, members: tuple[str, ...], draws: np.ndarray) -> Rated:
    """A candidate rated from its AUROC under each resample (the first: the rows themselves)."""
    tail = (1 - LEVEL) / 2
    lo, hi = np.quantile(draws[1:], [tail, 1 - tail])
    return Rated(name, members, float(draws[0]), (float(lo), float(hi)))


def choose(
    shipped: np.ndarray,
    values: Mapping[str, np.ndarray],
    y: np.ndarray,
    w: np.ndarray,
    of: np.ndarray,
    candidates: Sequence[Candidate] = CANDIDATES,
    seed: int = 0,
) -> MemberChoice:
    """Rate the candidates against the shipped heads on the labelled rows and choose (the module's rule).

    Parameters
    ----------
    shipped : ndarray
        The shipped heads' p of each entry (``recalibrate.entries``: a passage's soft label is two entries).
    values : mapping of str to ndarray
        Each member's value on each labelled row (NaN where a row lacks it); a candidate enters only where every row
        has each of its members and none is constant.
    y, w, of : ndarray
        Each entry's label, weight and row.
    candidates : sequence of Candidate
        The candidates, in order (a tie goes to the earlier).
    seed : int
        The bootstrap's seed.

    Returns
    -------
    MemberChoice
    """
    counts = resample_counts(int(of.max()) + 1, seed=seed)[:, of]
    base = aurocs(shipped, y, w, counts)
    rated, draws = [], []
    for c in candidates:
        x = np.column_stack([values[m] for m in c.members]) if all(m in values for m in c.members) else None
        if x is None or not np.isfinite(x).all() or np.any(x.std(axis=0) == 0):
            continue
        d = aurocs(standardised_mean(x)[of], y, w, counts)
        rated.append(rate(c.name, c.members, d))
        draws.append(d)
    order = sorted(range(len(rated)), key=lambda i: -rated[i].auroc)  # stable: ties to the earlier
    shipped_rated = rate(SHIPPED, (), base)
    if not order:
        return MemberChoice(shipped_rated, (), None, 0.0, 0.0)
    best = order[0]
    gains = draws[best] - base
    low = float(np.quantile(gains[1:], GAIN_QUANTILE))
    chosen = rated[best] if low > 0 else None
    return MemberChoice(shipped_rated, tuple(rated[i] for i in order), chosen, float(gains[0]), low)


def labels_to_settle(auroc: float, interval: tuple[float, float], n: int) -> int | None:
    """About how many more labelled rows would bring an AUROC's interval clear of 0.5 (its half-width shrinks as
    1 / sqrt(n)); None when the AUROC is within 0.005 of 0.5 (no count would).

    >>> labels_to_settle(0.6, (0.5, 0.7), 100)
    1
    >>> labels_to_settle(0.55, (0.43, 0.67), 100)
    476
    """
    off = abs(auroc - 0.5)
    if off < 0.005:
        return None
    half = (interval[1] - interval[0]) / 2
    return max(1, math.ceil(n * (half / off) ** 2 - n))
