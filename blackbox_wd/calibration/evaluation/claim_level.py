"""The claim level: how bbwd ranks the judged answer's labelled claims.

Over the claims labelled ``supported`` or ``unsupported`` (``other`` left out), the AUROC of unsupported vs
supported for the claim's score (``claims.score_claims``) and, under a calibration with a claim head, its p; each
with a percentile bootstrap CI over answers (an answer's claims resampled together). Where the data carries the
authors' own per-claim scores (``claim_scores``: confidences, higher = supported, so negated), each is ranked
beside, with bbwd's p (else its score) minus it, paired on the same resamples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from blackbox_wd.calibration.evaluation.labels import Rows
from blackbox_wd.calibration.evaluation.metrics import (
    N_BOOTSTRAP,
    SEED,
    AurocResult,
    PairedDiff,
    grouped_auroc_ci,
    grouped_paired_diff,
)

# the authors' per-claim scores a file may carry (``claim_scores``), as the data's README names them
AUTHOR_SCORES = {
    "sc_score_4samples": "self-consistency, 4 samples, gpt-3.5 judge (SC)",
    "breakdown_closeness_centrality_4samples": "closeness centrality (C_C)",
    "breakdown_closeness_centrality_with_node_confidence_4samples": "C_C + verbalised confidence",
    "verbalized_confidence_with_options": "verbalised confidence with options",
}
BBWD_SCORES = (("p", "bbwd claim p (claim head)"), ("score", "bbwd claim score (share of samples lacking a key word)"))


@dataclass(frozen=True)
class ClaimLevel:
    """The labelled claims' AUROCs: bbwd's (``ours``: its p and score, each with one), the authors' (``authors``),
    and bbwd's first minus each of the authors' (``differences``), by name."""

    claims: int
    unsupported: int
    answers: int
    ours: list[tuple[str, AurocResult]]
    authors: list[tuple[str, AurocResult]]
    differences: list[tuple[str, PairedDiff]]


def claim_columns(results: Rows) -> dict[str, np.ndarray]:
    """The labelled claims (``supported`` or ``unsupported``) of the rows as columns.

    Parameters
    ----------
    results : Rows

    Returns
    -------
    dict of str to ndarray
        One entry per labelled claim: ``y`` (1 = unsupported), ``answer`` (its row), ``score``, ``p`` (NaN where
        there is none) and each author score present in every labelled row (negated: higher = unsupported).
    """
    cols: dict[str, list[float]] = {"y": [], "answer": [], "score": [], "p": []}
    labelled = [r for r in results if r.get("claim_labels")]
    present = [k for k in AUTHOR_SCORES if labelled and all(k in (r.get("claim_scores") or {}) for r in labelled)]
    cols.update({k: [] for k in present})
    for n, row in enumerate(results):
        scored = row.get("claims") or []
        for i, label in enumerate(row.get("claim_labels") or []):
            if label not in ("supported", "unsupported"):
                continue
            claim = scored[i] if i < len(scored) else {}
            cols["y"].append(float(label == "unsupported"))
            cols["answer"].append(n)
            for key, name in (("score", "score"), ("p", "p_hallucination")):
                value = claim.get(name)
                cols[key].append(math.nan if value is None else float(value))
            for k in present:
                cols[k].append(-float(row["claim_scores"][k][i]))
    return {k: np.array(v, dtype=float) for k, v in cols.items()}


def claim_level(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> ClaimLevel | None:
    """The AUROCs of the labelled claims of the rows with claim labels.

    Parameters
    ----------
    results : Rows
        Scored rows; those with ``claim_labels`` count.
    n_boot : int, default=N_BOOTSTRAP
    seed : int, default=SEED

    Returns
    -------
    ClaimLevel or None
        None when no row has a claim labelled supported or unsupported.
    """
    rows = [r for r in results if r.get("claim_labels")]
    if not rows:
        return None
    c = claim_columns(rows)
    y, groups = c["y"].astype(int), c["answer"]
    if y.size == 0:
        return None
    ours = [(name, c[key]) for key, name in BBWD_SCORES if np.isfinite(c[key]).any()]
    authors = [(name, c[key]) for key, name in AUTHOR_SCORES.items() if key in c]
    differences = (
        [(name, grouped_paired_diff(y, ours[0][1], s, groups, n_boot, seed)) for name, s in authors] if ours else []
    )
    return ClaimLevel(
        claims=int(y.size),
        unsupported=int(y.sum()),
        answers=len(rows),
        ours=[(name, grouped_auroc_ci(y, s, groups, n_boot, seed)) for name, s in ours],
        authors=[(name, grouped_auroc_ci(y, s, groups, n_boot, seed)) for name, s in authors],
        differences=differences,
    )
