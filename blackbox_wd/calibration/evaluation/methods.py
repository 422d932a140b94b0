"""The methods' numbers on labelled rows (``bbwd eval``'s summary.md): AUROC with its CI, AUPRC and PRR under a 0/1
label, the paired difference of ours to the best baseline, Pearson and Spearman under a continuous one.

A method's score in a row is ``r[m]``, else ``r["baselines"][m]``, else ``r["scores"][m]`` (``get_score``; missing or
None: NaN, and the row is left out of that method's numbers).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from blackbox_wd.calibration.evaluation.labels import Rows, label_array
from blackbox_wd.calibration.evaluation.metrics import (
    N_BOOTSTRAP,
    SEED,
    CorrelationResult,
    PairedDiff,
    auprc,
    auroc_with_ci,
    correlation_with_ci,
    paired_auroc_diff,
    prr,
)
from blackbox_wd.signals.baselines import ANSWER_PEERS, BASELINES, PEERS

METHODS = ("avg_wd", "eigen_wd", "answer_wd", "sentence_wd", "lne", "ls", "es", "er", "dse", *PEERS, *ANSWER_PEERS)
OURS = ("avg_wd", "eigen_wd", "answer_wd", "sentence_wd")
# tabulated only when a row has it (runs before sentence scores or the peers do not; the answer's peers need one)
SHOWN_IF_SCORED = ("sentence_wd", *PEERS, *ANSWER_PEERS)


@dataclass(frozen=True)
class MethodSummary:
    """One method under one label, on the n prompts with a finite score: AUROC with CI, AUPRC, PRR."""

    auroc: float
    lo: float
    hi: float
    auprc: float
    prr: float
    n: int
    n_pos: int


def get_score(result: Mapping[str, Any], method: str) -> float:
    """The method's score in a result dict (top level, then 'baselines', then 'scores').

    Parameters
    ----------
    result : mapping
        A scored row.
    method : str
        A method's key (``METHODS``).

    Returns
    -------
    float
        NaN when the row has none (or a list or an object there).
    """
    for where in (result, result.get("baselines") or {}, result.get("scores") or {}):
        value = where.get(method)
        if value is not None and not isinstance(value, (dict, list)):
            return float(value)
    return float("nan")


def score_array(results: Rows, method: str) -> np.ndarray:
    """Scores of one method over all results.

    Parameters
    ----------
    results : Rows
    method : str

    Returns
    -------
    ndarray of float
        One per row (``get_score``), NaN where missing.
    """
    return np.array([get_score(r, method) for r in results], dtype=float)


def finite_scores(results: Rows, methods: Sequence[str]) -> Iterator[tuple[str, np.ndarray]]:
    """Each method with at least one finite score, and its :func:`score_array`.

    Parameters
    ----------
    results : Rows
    methods : sequence of str

    Returns
    -------
    iterator of (str, ndarray)
        In the order of ``methods``.
    """
    for m in methods:
        s = score_array(results, m)
        if np.isfinite(s).any():
            yield m, s


def shown(results: Rows, methods: Sequence[str]) -> list[str]:
    """The methods to tabulate: all given, one of ``SHOWN_IF_SCORED`` only when a result has a finite score of it.

    Parameters
    ----------
    results : Rows
    methods : sequence of str

    Returns
    -------
    list of str
    """
    return [m for m in methods if m not in SHOWN_IF_SCORED or np.isfinite(score_array(results, m)).any()]


def method_table(
    results: Rows,
    methods: Sequence[str] = METHODS,
    label_key: str = "label",
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> dict[str, MethodSummary]:
    """AUROC with 95% bootstrap CI, AUPRC and PRR of every method that has at least one finite score.

    Parameters
    ----------
    results : Rows
        Rows that all carry ``label_key``.
    methods : sequence of str, default=METHODS
    label_key : str, default="label"
    n_boot : int, default=N_BOOTSTRAP
    seed : int, default=SEED

    Returns
    -------
    dict of str to MethodSummary
        By method, in the order of ``methods``.
    """
    y = label_array(results, label_key)
    out = {}
    for m, s in finite_scores(results, methods):
        a = auroc_with_ci(y, s, n_boot=n_boot, seed=seed)
        out[m] = MethodSummary(a.auroc, a.lo, a.hi, auprc(y, s), prr(y, s), a.n, a.n_pos)
    return out


def best_baseline(table: Mapping[str, MethodSummary]) -> str | None:
    """The baseline or peer with the highest AUROC.

    Parameters
    ----------
    table : mapping of str to MethodSummary
        A :func:`method_table`.

    Returns
    -------
    str or None
        None when no baseline nor peer has a finite AUROC.
    """
    scored = [m for m in (*BASELINES, *PEERS, *ANSWER_PEERS) if m in table and math.isfinite(table[m].auroc)]
    return max(scored, key=lambda m: table[m].auroc, default=None)


def compare(
    results: Rows, method: str, baseline: str, label_key: str = "label", n_boot: int = N_BOOTSTRAP, seed: int = SEED
) -> PairedDiff:
    """AUROC(method) - AUROC(baseline) with its paired bootstrap CI, on the prompts where both are finite.

    Parameters
    ----------
    results : Rows
        Rows that all carry ``label_key``.
    method, baseline : str
    label_key : str, default="label"
    n_boot : int, default=N_BOOTSTRAP
    seed : int, default=SEED

    Returns
    -------
    PairedDiff
    """
    return paired_auroc_diff(
        label_array(results, label_key),
        score_array(results, method),
        score_array(results, baseline),
        n_boot=n_boot,
        seed=seed,
    )


def correlations(
    results: Rows,
    methods: Sequence[str] = METHODS,
    key: str = "human_score",
    n_boot: int = N_BOOTSTRAP,
    seed: int = SEED,
) -> dict[str, tuple[CorrelationResult, CorrelationResult]]:
    """(Pearson, Spearman) with bootstrap CIs of every method that has a finite score, against label ``key``.

    Parameters
    ----------
    results : Rows
        Rows that all carry ``key``.
    methods : sequence of str, default=METHODS
    key : str, default="human_score"
        A continuous label (``labels.CONTINUOUS_KEYS``).
    n_boot : int, default=N_BOOTSTRAP
    seed : int, default=SEED

    Returns
    -------
    dict of str to (CorrelationResult, CorrelationResult)
    """
    y = np.array([float(r[key]) for r in results], dtype=float)
    out: dict[str, tuple[CorrelationResult, CorrelationResult]] = {}
    for m, s in finite_scores(results, methods):
        out[m] = (
            correlation_with_ci(y, s, "pearson", n_boot, seed),
            correlation_with_ci(y, s, "spearman", n_boot, seed),
        )
    return out
