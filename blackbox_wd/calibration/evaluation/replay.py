"""``-k auto`` replayed over the samples drawn (rows with ``stages``): the samples drawn, the adaptive verdict beside
the fixed-K one (AUROC on ``label``, Pearson on a passage label, paired bootstrap CIs) and the target tokens saved
(the samples' tokens by the teacher's tokenizer beyond the stop).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from blackbox_wd.calibration.evaluation.labels import CONTINUOUS_KEYS, Rows
from blackbox_wd.calibration.evaluation.metrics import (
    N_BOOTSTRAP,
    SEED,
    AurocResult,
    CorrelationResult,
    PairedDiff,
    auroc_with_ci,
    correlation_with_ci,
    paired_auroc_diff,
    paired_pearson_diff,
)


@dataclass(frozen=True)
class PearsonPair:
    """Pearson's r of the adaptive and the fixed-K p with a continuous label, and their paired difference
    (r, lo, hi)."""

    key: str
    adaptive: CorrelationResult
    fixed: CorrelationResult
    difference: tuple[float, float, float]


@dataclass(frozen=True)
class Replay:
    """``-k auto``'s stops over the rows with stages, and its verdict beside the fixed-K one.

    ``flags_differ`` is None when no stop has a verdict (no calibration with stages); ``auroc`` (adaptive, fixed K,
    their paired difference) is None without a row labelled ``label``.
    """

    k_max: int
    mean_drawn: float
    stopped: dict[int, int]  # prompts stopped at each stage's k, by k ascending
    saved: int  # target tokens not drawn
    tokens: int  # target tokens of every sample
    flags_differ: int | None = None
    auroc: tuple[AurocResult, AurocResult, PairedDiff] | None = None
    pearson: list[PearsonPair] = field(default_factory=list)


def stop_of(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stage where ``-k auto`` stopped a row: its first settled one.

    Parameters
    ----------
    row : mapping
        A scored row, with ``stages`` or without.

    Returns
    -------
    mapping or None
        None for a row without a settled stage.
    """
    return next((s for s in row.get("stages") or [] if s["settled"]), None)


def replay(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> Replay | None:
    """``-k auto`` replayed over the rows with ``stages``.

    Parameters
    ----------
    results : Rows
    n_boot : int, default=N_BOOTSTRAP
    seed : int, default=SEED

    Returns
    -------
    Replay or None
        None when no row has stages.
    """
    rows = [r for r in results if r.get("stages")]
    if not rows:
        return None
    stops = [stop_of(r) for r in rows]
    drawn = np.array([s["k"] for s in stops if s is not None])
    counts = Counter(int(k) for k in drawn)
    stopped = {k: counts[k] for k in sorted(counts)}
    saved = sum(sum(r["token_counts"][s["k"] :]) for r, s in zip(rows, stops, strict=True) if s is not None)
    base = Replay(
        k_max=max(len(r["token_counts"]) for r in rows),
        mean_drawn=float(drawn.mean()),
        stopped=stopped,
        saved=int(saved),
        tokens=int(sum(sum(r["token_counts"]) for r in rows)),
    )
    verdicts = [(r, s) for r, s in zip(rows, stops, strict=True) if s is not None and s["p_hallucination"] is not None]
    if not verdicts:
        return base
    adaptive = np.array([s["p_hallucination"] for _, s in verdicts], dtype=float)
    fixed = np.array([r["stages"][-1]["p_hallucination"] for r, _ in verdicts], dtype=float)
    auroc = None
    labelled_rows = [(n, r) for n, (r, _) in enumerate(verdicts) if r.get("label") is not None]
    if labelled_rows:
        idx = [n for n, _ in labelled_rows]
        y = np.array([r["label"] for _, r in labelled_rows], dtype=float)
        auroc = (
            auroc_with_ci(y, adaptive[idx], n_boot, seed),
            auroc_with_ci(y, fixed[idx], n_boot, seed),
            paired_auroc_diff(y, adaptive[idx], fixed[idx], n_boot, seed),
        )
    pearson = []
    for key in CONTINUOUS_KEYS:
        scored = [(n, r) for n, (r, _) in enumerate(verdicts) if r.get(key) is not None]
        if not scored:
            continue
        idx = [n for n, _ in scored]
        h = np.array([r[key] for _, r in scored], dtype=float)
        pearson.append(
            PearsonPair(
                key,
                correlation_with_ci(h, adaptive[idx], "pearson", n_boot, seed),
                correlation_with_ci(h, fixed[idx], "pearson", n_boot, seed),
                paired_pearson_diff(h, adaptive[idx], fixed[idx], n_boot, seed),
            )
        )
    differ = sum(s["flag"] != r["flag"] for r, s in verdicts)
    return replace(base, flags_differ=differ, auroc=auroc, pearson=pearson)
