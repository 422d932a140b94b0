"""A run's calibration: which one gives its verdict (a file's, the one shipped for the teacher, or none), what the
run says of it, and whether the run can compute the members its heads read.

``detector.Detector`` asks here when it is built (``Detector.with_calibration``) and checks its calibration's
members on creation.
"""

from __future__ import annotations

from typing import Any

from blackbox_wd.calibration import Calibration, embedded_calibration
from blackbox_wd.calibration.model import ANSWER_LOGPROB_MEMBERS, MEMBERS
from blackbox_wd.errors import BBWDError
from blackbox_wd.settings import Settings

AUTO = "auto"  # the builder's calibration: the one shipped for the teacher, when it applies


def computable_members(*, lne: bool, fixed_bandwidth: bool, target_logprobs: bool) -> set[str]:
    """The members a run can give a result (``calibration.model.MEMBERS``).

    Parameters
    ----------
    lne : bool
        The teacher runs its log-prob pass (``Detector.lne``): LNE, and the judged answer's ``answer_nll`` and
        ``cocoa``.
    fixed_bandwidth : bool
        The teacher has a reference EigenWD bandwidth: ``log_eigen_wd_fixed``.
    target_logprobs : bool
        The samples may come with the target's log-probs (a local llama.cpp sampler's, recorded samples'): LNE.

    Returns
    -------
    set of str
        The answer's members only count for results with a judged answer.
    """
    out = set(MEMBERS) - {"lne", "log_eigen_wd_fixed", *ANSWER_LOGPROB_MEMBERS}
    if fixed_bandwidth:
        out.add("log_eigen_wd_fixed")
    if lne or target_logprobs:
        out.add("lne")  # recorded samples may carry log-probs; a head without LNE serves those that do not
    if lne:
        out.update(ANSWER_LOGPROB_MEMBERS)
    return out


def check_members(calibration: Calibration, computable: set[str]) -> None:
    """Raise BBWDError naming the members when no head of the calibration can be computed from ``computable``."""
    if not any(set(head.members) <= computable for head in calibration.heads):
        missing = sorted({m for head in calibration.heads for m in head.members} - computable)
        name = f"calibration {calibration.origin}" if calibration.origin else "the calibration"
        raise BBWDError(f"{name} needs members this run cannot compute: {', '.join(missing)}")


def choose_calibration(
    calibration: Calibration | str | None, reported: dict[str, Any], settings: Settings
) -> tuple[Calibration | None, str | None]:
    """The calibration a run gives its verdict with, and the one line it says of it.

    Parameters
    ----------
    calibration : Calibration, "auto" or None
        A file's (checked against ``reported``, with its sampling note), "auto" (the one shipped for the teacher
        and the kind of run, when its meaning settings match; else none, with a note) or None (no verdict).
    reported : dict
        The run's reported settings (``ReportedSettings.as_dict``).
    settings : Settings
        The run's settings (its K, and ``-k auto``'s stages).

    Returns
    -------
    tuple of (Calibration or None, str or None)
        The calibration, and its notes joined (fitted on other samples, none ships, a stage below its fitted K,
        ``-k auto`` that cannot settle), None when there is nothing to say.
    """
    chosen: Calibration | None
    if isinstance(calibration, str):
        if calibration != AUTO:
            raise BBWDError(f"calibration must be a Calibration, {AUTO!r} or None (got {calibration!r})")
        chosen, note = embedded_calibration(reported)
    elif calibration is None:
        chosen, note = None, None
    else:
        chosen, note = calibration, calibration.sampling_note(reported)
    notes = [note]
    if chosen is not None:
        chosen.check(reported)  # a K below every fitted K is refused here, with its reason
        notes += [chosen.k_note(k) for k in settings.stages]
    if settings.stop is not None and (chosen is None or chosen.k != settings.k):
        why = "no calibration" if chosen is None else f"no stopping band for --k-max {settings.k}"
        how = f"it has bands for --k-max {chosen.k}" if chosen is not None and chosen.stages else ""
        notes.append(
            f"note: -k auto with {why}{': ' + how if how else ''}: no verdict can settle, so every prompt draws K"
        )
    return chosen, "; ".join(dict.fromkeys(filter(None, notes))) or None
