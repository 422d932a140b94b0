"""One binning of a probability: the report page's reliability bins and the ECE beside them put every p in the same
bin (p = 0.1 included), as sklearn's ``calibration_curve(strategy="uniform")`` does."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from blackbox_wd.calibration.evaluation.reliability import bin_of, bins_of, expected_calibration_error
from blackbox_wd.calibration.evaluation.verdicts import labelled_verdicts


@dataclass
class Row:
    """The fields ``labelled_verdicts`` reads of a scored row."""

    p: float | None
    label: int | None
    flag: bool | None = None
    avg_wd: float | None = None
    peers: dict[str, float] = field(default_factory=dict)
    members: dict[str, float | None] = field(default_factory=dict)


def test_p_of_one_tenth_is_in_the_same_bin_on_the_page_and_in_the_ece():
    rows = [Row(0.1, 1), Row(0.05, 0)]
    lab = labelled_verdicts(rows, [r.p for r in rows])
    assert lab is not None
    first = lab.reliability[0]
    assert int(bin_of([0.1])[0]) == 0 and first.n == 2 and lab.reliability[1].n == 0
    # one bin of both rows: |1 - (0.1 + 0.05)| / 2; two bins would give (|1 - 0.1| + |0 - 0.05|) / 2
    assert lab.ece == pytest.approx(abs(1 - 0.15) / 2)
    assert lab.ece == pytest.approx(first.n * abs(first.rate - first.p) / 2)


def test_the_page_bins_sum_to_the_ece_with_a_p_on_every_edge():
    rng = np.random.default_rng(0)
    p = np.concatenate([np.linspace(0.0, 1.0, 11), rng.uniform(size=200)])
    y = (rng.uniform(size=p.size) < p).astype(int)
    rows = [Row(float(a), int(b)) for a, b in zip(p, y, strict=True)]
    lab = labelled_verdicts(rows, [r.p for r in rows])
    assert lab is not None and sum(b.n for b in lab.reliability) == p.size
    gaps = sum(b.n * abs(b.rate - b.p) for b in lab.reliability if b.n)
    assert lab.ece == pytest.approx(gaps / p.size)
    assert lab.ece == pytest.approx(expected_calibration_error(y, p))
    assert [int(bin_of([k / 10])[0]) for k in range(11)] == [0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_the_bins_are_sklearns_calibration_curve():
    rng = np.random.default_rng(1)
    p = np.round(rng.uniform(size=300), 1)  # many on the edges
    y = (rng.uniform(size=p.size) < p).astype(int)
    true, pred = calibration_curve(y, p, n_bins=10, strategy="uniform")
    filled = [b for b in bins_of(y, p) if b.n]
    assert [b.rate for b in filled] == pytest.approx(true.tolist())
    assert [b.p for b in filled] == pytest.approx(pred.tolist())
