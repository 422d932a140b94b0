"""summary.md's claim-level section: how bbwd ranks the judged answer's labelled claims (#47).

Over the claims labelled ``supported`` or ``unsupported`` (``other`` left out), the AUROC of unsupported vs
supported for the claim's score (``claims.score_claims``) and, under a calibration with a claim head, its p; each
with a percentile bootstrap CI over answers (an answer's claims resampled together). Where the data carries the
authors' own per-claim scores (``claim_scores``: confidences, higher = supported, so negated), each is shown
beside, with bbwd's p (else its score) minus it, paired on the same resamples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from blackbox_wd.calibration.metrics import N_BOOTSTRAP, SEED, grouped_auroc_ci, grouped_paired_diff

# the authors' per-claim scores a file may carry (``claim_scores``), as the data's README names them
AUTHOR_SCORES = {
    "sc_score_4samples": "self-consistency, 4 samples, gpt-3.5 judge (SC)",
    "breakdown_closeness_centrality_4samples": "closeness centrality (C_C)",
    "breakdown_closeness_centrality_with_node_confidence_4samples": "C_C + verbalised confidence",
    "verbalized_confidence_with_options": "verbalised confidence with options",
}


def claim_columns(results: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """One entry per labelled claim: ``y`` (1 = unsupported), ``answer`` (its row), ``score``, ``p`` (NaN where
    there is none) and each author score present in every labelled row (negated: higher = unsupported)."""
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


def claim_lines(results: Sequence[Mapping[str, Any]], n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> list[str]:
    """summary.md's claim-level section; none when no result has claim labels."""
    rows = [r for r in results if r.get("claim_labels")]
    if not rows:
        return []
    c = claim_columns(rows)
    y, groups = c["y"].astype(int), c["answer"]
    if y.size == 0:
        return []
    ours = [
        ("bbwd claim p (claim head)", c["p"]),
        ("bbwd claim score (share of samples lacking a key word)", c["score"]),
    ]
    ours = [(name, s) for name, s in ours if np.isfinite(s).any()]
    lines = [
        "## Claim level",
        "",
        f"{y.size} labelled claims ({int(y.sum())} unsupported, `other` left out) of {len(rows)} judged answers "
        "(`claims` with their labels). AUROC of unsupported vs supported, 95% percentile bootstrap CI over answers "
        f"(an answer's claims together), {n_boot} resamples, seed {seed}.",
        "",
        "| claim score | AUROC [95% CI] | claims scored |",
        "|---|---|---|",
    ]
    for name, s in ours:
        a = grouped_auroc_ci(y, s, groups, n_boot, seed)
        lines.append(f"| {name} | {a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}] | {a.n} |")
    for key, name in AUTHOR_SCORES.items():
        if key in c:
            a = grouped_auroc_ci(y, c[key], groups, n_boot, seed)
            lines.append(f"| authors' {name} | {a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}] | {a.n} |")
    authors = [(name, c[key]) for key, name in AUTHOR_SCORES.items() if key in c]
    if ours and authors:
        best_name, best = ours[0]
        lines += ["", f"{best_name} minus each of the authors' scores, paired over the same answer resamples:", ""]
        for name, s in authors:
            d = grouped_paired_diff(y, best, s, groups, n_boot, seed)
            lines.append(f"- {name}: {d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] ({d.verdict})")
    return [*lines, ""]
