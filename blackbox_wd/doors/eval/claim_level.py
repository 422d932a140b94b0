"""summary.md's claim-level section: how bbwd ranks the judged answer's labelled claims (the numbers:
``calibration.evaluation.claim_level``)."""

from __future__ import annotations

from blackbox_wd.calibration.evaluation.claim_level import claim_level
from blackbox_wd.calibration.evaluation.labels import Rows
from blackbox_wd.calibration.evaluation.metrics import N_BOOTSTRAP, SEED


def claim_lines(results: Rows, n_boot: int = N_BOOTSTRAP, seed: int = SEED) -> list[str]:
    """summary.md's claim-level section; none when no result has claim labels."""
    level = claim_level(results, n_boot, seed)
    if level is None:
        return []
    lines = [
        "## Claim level",
        "",
        f"{level.claims} labelled claims ({level.unsupported} unsupported, `other` left out) of {level.answers} judged "
        "answers (`claims` with their labels). AUROC of unsupported vs supported, 95% percentile bootstrap CI over "
        f"answers (an answer's claims together), {n_boot} resamples, seed {seed}.",
        "",
        "| claim score | AUROC [95% CI] | claims scored |",
        "|---|---|---|",
    ]
    for name, a in level.ours:
        lines.append(f"| {name} | {a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}] | {a.n} |")
    for name, a in level.authors:
        lines.append(f"| authors' {name} | {a.auroc:.3f} [{a.lo:.3f}, {a.hi:.3f}] | {a.n} |")
    if level.differences:
        best_name = level.ours[0][0]
        lines += ["", f"{best_name} minus each of the authors' scores, paired over the same answer resamples:", ""]
        for name, d in level.differences:
            lines.append(f"- {name}: {d.diff:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] ({d.verdict})")
    return [*lines, ""]
