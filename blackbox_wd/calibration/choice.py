"""A run's calibration: which one gives its verdict (a file's, the one shipped for the teacher, or none), what the
run says of it, and whether the run can compute the members its heads read.

``detector.Detector`` asks here when it is built (``Detector.with_calibration``) and checks its calibration's
members on creation.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from blackbox_wd.calibration.members import ANSWER_LOGPROB_MEMBERS, MEMBERS
from blackbox_wd.calibration.model import PACKAGE_CALIBRATIONS, Calibration
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import JSONObject, JSONView
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.registry import EMBEDDED

AUTO = "auto"  # the builder's calibration: the one shipped for the teacher, when it applies


def computable_members(*, lne: bool, fixed_bandwidth: bool, target_logprobs: bool) -> set[str]:
    """The members a run can give a result (``calibration.members.MEMBERS``).

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
        raise BBWDError(f"{calibration.name} needs members this run cannot compute: {', '.join(missing)}")


def choose_calibration(
    calibration: Calibration | str | None, reported: JSONObject, settings: Settings
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
        The run's settings (its K, and ``-k auto``'s rounds).

    Returns
    -------
    tuple of (Calibration or None, str or None)
        The calibration, and its notes joined (fitted on other samples, none ships, a round below its fitted K,
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
        notes += [chosen.k_note(k) for k in settings.rounds]
    if settings.stop is not None and (chosen is None or chosen.k != settings.k):
        why = "no calibration" if chosen is None else f"no stopping band for --k-max {settings.k}"
        how = f"it has bands for --k-max {chosen.k}" if chosen is not None and chosen.rounds else ""
        notes.append(
            f"note: -k auto with {why}{': ' + how if how else ''}: no verdict can settle, so every prompt draws K"
        )
    return chosen, "; ".join(dict.fromkeys(filter(None, notes))) or None


def default_calibration_path(teacher: str, white_box: bool = True) -> Path | None:
    """The calibration shipped with bbwd for a registry teacher (it may not exist): ``<teacher>.json`` for white-box
    runs, ``<teacher>.api.json`` for runs that score another target (an API's samples, or recorded ones); each serves
    fixed K and ``-k auto`` with its heads per K; None for other teachers."""
    if not teacher or Path(teacher).name != teacher or teacher.startswith("."):
        return None
    return PACKAGE_CALIBRATIONS / (f"{teacher}.json" if white_box else f"{teacher}.api.json")


TEXTS_ALONE_FILE = f"{EMBEDDED}.api.json"  # the shipped file whose heads of the texts alone judge any teacher


def embedded_calibration(reported: JSONView) -> tuple[Calibration | None, str | None]:
    """The shipped calibration for the run's teacher and kind (white- or black-box) when its meaning settings match,
    else the heads of the shipped API calibration that read the texts alone (``texts_alone_calibration``).

    Returns (calibration, None) when the teacher's own applies as fitted; (calibration, a one-line note) when it
    applies to samples drawn otherwise (``Calibration.sampling_note``), or when the heads of the texts alone judge
    (the teacher has no file of its own, or its meaning settings differ); (None, a one-line note) when neither
    applies.
    """
    teacher = str(reported.get("teacher"))
    white_box = bool(reported.get("white_box", True))
    path = default_calibration_path(teacher, white_box)
    why: str | None = None
    if path is not None and path.is_file():
        own = replace(Calibration.load(path), origin=f"embedded {path.name}")
        why = _why_not(own, reported)
        if why is None:
            return own, own.sampling_note(reported)
        without = f"the embedded calibration {path.name} does not apply to this run"
    else:
        without = f"no calibration ships for {'' if white_box else 'black-box runs with '}teacher {teacher}"
    texts, why_texts = texts_alone_calibration(reported)
    if texts is not None:
        return texts, (
            f"note: {without}{f' ({why})' if why else ''}: judged by the heads of {TEXTS_ALONE_FILE} that read the "
            "texts alone (no teacher state), fitted on recorded answers of other models: its risk is a probability "
            "on that data"
        )
    nor = f"; nor do the heads of {TEXTS_ALONE_FILE} that read the texts alone: {why_texts}" if why_texts else ""
    if why is not None:
        return None, f"note: {without}, no risk shown: {why}{nor}"
    return None, (
        f"note: {without} yet, so no risk is shown: fit one on labelled results with 'bbwd calibrate' and pass it "
        f"with --calibration{nor}"
    )


def texts_alone_calibration(reported: JSONView) -> tuple[Calibration | None, str | None]:
    """The heads of the shipped API calibration that read the texts alone (``Calibration.teacher_free``), for a run
    of a teacher whose own calibration does not ship or does not apply.

    Returns
    -------
    tuple of (Calibration or None, str or None)
        The calibration and None when it applies to the run; else None and why not (the file has no such heads, or
        the run's K is below its fitted K), or (None, None) when the file has none.
    """
    path = default_calibration_path(EMBEDDED, white_box=False)
    if path is None or not path.is_file():
        return None, None
    texts = Calibration.load(path).teacher_free()
    if texts is None:
        return None, None
    texts = replace(texts, origin=f"embedded {path.name}, its heads of the texts alone")
    why = _why_not(texts, reported)
    return (texts, None) if why is None else (None, why)


def _why_not(cal: Calibration, reported: JSONView) -> str | None:
    """Why ``cal`` does not judge the run (its meaning settings, or a K below its fitted K); None when it does."""
    why = cal.mismatch(reported)
    if why is None:
        try:
            cal.check(reported)
        except BBWDError as exc:
            why = one_line(exc)
    return why
