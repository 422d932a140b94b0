"""A scored file's verdicts in numbers (``bbwd report``'s page): each row's risk, the risk histogram, and with labels
on the rows how the verdicts did against them, beside lm-polygraph's estimators on the same rows.

A row is anything with the fields of ``Judged`` (``doors.report.rows.ReportRow``).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from blackbox_wd.calibration.evaluation.metrics import auroc
from blackbox_wd.calibration.evaluation.reliability import Bin, bins_of, expected_calibration_error
from blackbox_wd.calibration.members import MEMBER_NAMES
from blackbox_wd.signals.baselines import ANSWER_PEERS, PEERS
from blackbox_wd.signals.names import PEER_SHORT_NAMES

HISTOGRAM_BINS = 20  # the risk histogram's bins over [0, 1]


class Judged(Protocol):
    """What the numbers read of a scored row."""

    @property
    def p(self) -> float | None: ...  # p_hallucination

    @property
    def flag(self) -> bool | None: ...

    @property
    def label(self) -> int | None: ...  # 1 = hallucination

    @property
    def avg_wd(self) -> float | None: ...

    @property
    def peers(self) -> Mapping[str, float]: ...  # lm-polygraph's estimators the row has

    @property
    def members(self) -> Mapping[str, float | None]: ...  # the verdict's members and their values


@dataclass
class Beside:
    """One of lm-polygraph's model-free estimators, ranked against the same labels on the same rows."""

    key: str  # its field in a row's ``baselines``
    name: str  # its short name (``signals.names.PEER_SHORT_NAMES``)
    title: str  # its name in full (``calibration.members.MEMBER_NAMES``)
    auroc: float


@dataclass
class LabelledVerdicts:
    """With labels on the rows: how the verdicts did against them, and the estimators beside on the same rows."""

    n: int
    positives: int
    auroc: float | None
    fpr_seen: float | None  # flagged share of label 0
    tpr_seen: float | None  # flagged share of label 1
    reliability: list[Bin]  # per p bin (``reliability.bin_of``): its centre, mean p, share of label 1, count
    ece: float | None = None  # of p (None where the risk is not a probability)
    beside: list[Beside] = field(default_factory=list)  # each estimator that every labelled row has
    reads: list[tuple[str, int]] = field(default_factory=list)  # the members the verdict read, and on how many rows


def risks(rows: Sequence[Judged]) -> tuple[list[float | None], str]:
    """Each row's risk: its p_hallucination, or where no row has one its AvgWD's rank in [0, 1].

    Parameters
    ----------
    rows : sequence of Judged

    Returns
    -------
    tuple of (list of float or None, str)
        The risks, in the rows' order (None for a row without one), and what they are: "p_hallucination" or
        "avg_wd rank".
    """
    if any(r.p is not None for r in rows):
        return [r.p for r in rows], "p_hallucination"
    known = sorted(r.avg_wd for r in rows if r.avg_wd is not None)
    if not known:
        return [None] * len(rows), "p_hallucination"

    def rank(v: float) -> float:
        return (bisect_left(known, v) + bisect_right(known, v)) / 2 / len(known)

    return [None if r.avg_wd is None else rank(r.avg_wd) for r in rows], "avg_wd rank"


def histogram(risk: Sequence[float | None], rows: Sequence[Judged]) -> dict[str, list[float | int]]:
    """The risks in ``HISTOGRAM_BINS`` equal bins over [0, 1]: all rows and the flagged ones.

    Parameters
    ----------
    risk : sequence of float or None
        Each row's risk (``risks``); a row without one is left out.
    rows : sequence of Judged

    Returns
    -------
    dict
        ``x`` (the bins' centres), ``all`` and ``flagged`` (the rows in each).
    """
    all_: list[float | int] = [0] * HISTOGRAM_BINS
    flagged: list[float | int] = [0] * HISTOGRAM_BINS
    for p, r in zip(risk, rows, strict=True):
        if p is None:
            continue
        b = min(HISTOGRAM_BINS - 1, max(0, int(p * HISTOGRAM_BINS)))
        all_[b] += 1
        flagged[b] += bool(r.flag)
    return {"x": [(b + 0.5) / HISTOGRAM_BINS for b in range(HISTOGRAM_BINS)], "all": all_, "flagged": flagged}


def beside(rows: Sequence[Judged], y: Sequence[int]) -> list[Beside]:
    """lm-polygraph's estimators (``baselines.PEERS``, then ``ANSWER_PEERS``) ranked against the labels ``y`` of
    ``rows``: each that every one of the rows has and whose AUROC is defined, in that order.

    Parameters
    ----------
    rows : sequence of Judged
    y : sequence of int
        The rows' labels, 1 = hallucination.

    Returns
    -------
    list of Beside
    """
    found = []
    for key in (*PEERS, *ANSWER_PEERS):
        if rows and all(key in r.peers for r in rows):
            area = auroc(y, [r.peers[key] for r in rows])
            if not math.isnan(area):
                found.append(Beside(key, PEER_SHORT_NAMES[key], MEMBER_NAMES[key], area))
    return found


def labelled_verdicts(
    rows: Sequence[Judged], risk: Sequence[float | None], probability: bool = True
) -> LabelledVerdicts | None:
    """AUROC, ECE, the reliability bins and the seen FPR and TPR of the flag, over the rows with a label and a risk,
    and lm-polygraph's estimators on the same rows (``beside``).

    Parameters
    ----------
    rows : sequence of Judged
    risk : sequence of float or None
        Each row's risk (``risks``).
    probability : bool, default=True
        Whether the risk is p_hallucination (else it has no ECE).

    Returns
    -------
    LabelledVerdicts or None
        None when no row has both.
    """
    kept = [(r.label, p, r) for r, p in zip(rows, risk, strict=True) if r.label is not None and p is not None]
    if not kept:
        return None
    y = [int(label) for label, _, _ in kept]
    ps = [p for _, p, _ in kept]
    area = auroc(y, ps)
    flags = [(label, r.flag) for label, _, r in kept if r.flag is not None]
    neg = [bool(f) for lab, f in flags if lab == 0]
    pos = [bool(f) for lab, f in flags if lab == 1]
    return LabelledVerdicts(
        n=len(kept),
        positives=sum(y),
        auroc=None if math.isnan(area) else area,
        fpr_seen=sum(neg) / len(neg) if neg else None,
        tpr_seen=sum(pos) / len(pos) if pos else None,
        reliability=bins_of(y, ps),
        ece=expected_calibration_error(y, ps) if probability else None,
        beside=beside([r for _, _, r in kept], y),
        reads=Counter(", ".join(r.members) for _, _, r in kept if r.members).most_common(3),
    )
