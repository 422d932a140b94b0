"""``bbwd calibrate``: labelled rows -> a calibration file, and the rows worth labelling.

The rows are ``bbwd eval``'s (``settings.json`` beside them) or ``bbwd batch``'s, ``score --json``'s (their settings
in every row), with a label added to some: the others are skipped and counted. How many parameters the labels refit
(``refit``): below ``FULL_FROM`` labelled prompts of one sample count, the map and threshold of the calibration that
judged the rows (``recalibrate``, ``FEW`` by default: the members the labels choose, ``choose``, else its heads kept);
from there, or with rows of several sample counts, the full fit (``fit.fit_calibration``: every head's scales,
calibrator and threshold), unless the rows skipped the teacher pass (``bbwd batch``'s default on short answers: no W2
member to fit), which are refitted the few-label way at any count. ``FULL_FROM``
and ``FEW`` were chosen on the learning curve of the recorded dev sets (docs/calibration.md, "With your own labels";
``FEW``: bench/RESULTS.md, "Which refit under 200 labels"). Rows of a teacher with no calibration of its own refit the
shipped heads that read the texts alone (``choice.embedded_calibration``). Every threshold prints its FPR with the exact
binomial interval of the correct rows it was measured on, and how many more labels would halve that interval; rows
that lack members the refitted heads read, and a fit that judges the rows worse than their base rate out of fold
(``worse_than_base_rate``, unless ``force``), are refused.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from blackbox_wd.calibration import combine, fit, fit_summary, labelled, labels_file, recalibrate
from blackbox_wd.calibration.choice import embedded_calibration
from blackbox_wd.calibration.choose import labels_to_settle
from blackbox_wd.calibration.heads import OperatingPoint
from blackbox_wd.calibration.members import KINDS
from blackbox_wd.calibration.model import Calibration
from blackbox_wd.calibration.suggest import suggested_rows
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject

REFITS = ("auto", "map", "prior", "full")
FULL_FROM = 200  # labelled prompts from which ``auto`` fits every head (the learning curve)
# below it, ``auto`` refits this much of the calibration that judged the rows (bench/RESULTS.md, "Which refit under
# 200 labels")
FEW = "map"


def calibrate(
    results: Sequence[Path],
    output: Path,
    *,
    label: str = "label",
    settings_from: Path | None = None,
    samples: str | None = None,
    combiner: str | None = None,
    folds: int = 5,
    target_fpr: float = 0.1,
    refit: str = "auto",
    base: Path | None = None,
    force: bool = False,
    source: str | None = None,
) -> str:
    """Fit a calibration on the labelled rows of ``results`` and save it to ``output``; return the line to print.

    Parameters
    ----------
    results : sequence of Path
        JSONL files of scored rows, some with a label.
    output : Path
        The calibration file (a full fit writes its summary beside it).
    label, settings_from, samples, combiner, folds, target_fpr
        As ``bbwd calibrate``'s options (``fit.fit_files``).
    refit : {"auto", "map", "prior", "full"}
        How much the labels refit (the module's docstring).
    base : Path or None
        The calibration a map refits; None: the one that judged the rows, when it is the one shipped for them.
    force : bool
        Write a calibration that judges worse than the labelled base rate out of fold (``worse_than_base_rate``),
        which is refused otherwise.
    source : str or None
        Where the labelled rows came from, as the file stores it (``fitted_on.source``); None: the ``results``.

    Returns
    -------
    str
        What was fitted on what, with the threshold's FPR and its interval.
    """
    if refit not in REFITS:
        raise BBWDError(f"unknown --refit '{refit}': use one of {', '.join(REFITS)}")
    if combiner is not None and combiner not in combine.COMBINERS:
        raise BBWDError(f"unknown combiner '{combiner}': use one of {', '.join(combine.COMBINERS)}")
    rows = labelled.read_labelled(results, label)
    settings = labelled.read_settings(results[0], settings_from, rows.fingerprint, rows.k, rows.settings)
    n = len(set(rows.answers.groups.tolist()))
    skipped = (
        f"{n} labelled prompts ({rows.skipped_unlabelled} rows without a label skipped, {rows.skipped_errors} with "
        "an error)"
    )
    # rows that skipped the teacher pass (bbwd batch's default on short answers) lack the W2 members a full fit reads:
    # from FULL_FROM too, ``auto`` refits the few-label way on them (the labels choose the members, the map moves)
    full = (n >= FULL_FROM and not rows.teacherless) or bool(rows.rounds)
    mode = refit if refit != "auto" else "full" if full else FEW
    if refit == "auto" and n >= FULL_FROM and rows.teacherless and not rows.rounds:
        skipped += (
            f"; {rows.teacherless} of their rows skipped the teacher pass, so not the full fit: score the log with "
            "bbwd batch --all-scores for it"
        )
    if mode == "full":
        fitted = fit.fit_calibration(
            rows,
            settings,
            source=source or ", ".join(map(str, results)),
            label=label,
            samples=samples,
            cv=combine.CrossValidation(combiner=combiner or combine.COMBINER, folds=folds, target_fpr=target_fpr),
        )
        forced = refuse_worse(fitted.calibration, "full fit", force)
        fitted.calibration.save(output)
        paths = fit_summary.write_fit_summary(fitted, output)
        point = fitted.calibration.operating_point
        return (
            f"wrote {output}, {paths['summary']}, {paths['reliability']}: full fit on {skipped}; "
            f"{fit_summary.summary_line(fitted)}; {interval_line(point, rows.answers.y, rows.answers.w)}{forced}"
        )
    if rows.rounds:
        raise BBWDError(
            f"--refit {mode} refits the rows of one sample count; these have K = "
            f"{', '.join(map(str, sorted({rows.k or 0, *rows.rounds})))}: label rows of one run, or --refit full"
        )
    judged, labels, k = labelled_at_k(results, label, rows.k or int(settings["k"]))
    named = source or ", ".join(map(str, results))
    refit_rows = recalibrate.RefitRows(judged, labels, k, named, label, rows.data, samples)
    refitted = recalibrate.recalibrate(
        base_calibration(base, settings, judged), refit_rows, settings, mode=mode, target_fpr=target_fpr
    )
    cal = refitted.calibration
    forced = refuse_worse(cal, f"{mode} refit", force)
    cal.save(output)
    stage = cal.round_at(k)
    point = (cal.heads if stage is None else stage.heads)[0].operating_point
    on = cal.fitted_on
    reads = f"\n{reads_line(cal, k)}"
    choice = "" if refitted.choice is None else f"\n{refitted.choice.line()}"
    return (
        f"wrote {output}: {on.refit} on {skipped}, base rate {on.base_rate:.3f}, "
        f"p' = expit({on.cv['slope']:.3f} logit p {on.cv['intercept']:+.3f}); threshold {point.threshold:.4f}: "
        f"{interval_line(point, rows.answers.y, rows.answers.w)}, TPR {point.tpr:.3f}{forced}{reads}{choice}"
    )


def reads_line(cal: Calibration, k: int) -> str:
    """What the verdict reads at ``k`` samples: the members of the first head of each kind of answer, then of the
    heads over every kind, e.g. 'the verdict reads: phrase: lexsim_rouge1, ...; sentence: ...; any other: ...', or
    one set when every kind reads the same."""
    stage = cal.round_at(k)
    heads = cal.heads if stage is None else stage.heads
    firsts = {kind: h.members for kind in (*KINDS, None) if (h := next((h for h in heads if h.kind == kind), None))}
    if len(set(firsts.values())) == 1:
        return f"the verdict reads: {', '.join(next(iter(firsts.values())))}"
    parts = (f"{kind or 'any other'}: {', '.join(members)}" for kind, members in firsts.items())
    return f"the verdict reads, by kind of answer: {'; '.join(parts)}"


def worse_than_base_rate(cal: Calibration) -> str | None:
    """None when a fitted calibration judges its labelled rows out of fold at least as well as p = their base rate on
    every row, by log-loss and by Brier score; else its figures and the base rate's (one line).

    The out-of-fold figures are a refit's ``log_loss_oof`` and ``brier_oof`` (``recalibrate.out_of_fold``), a full
    fit's ``log_loss`` and ``brier`` (its first head's); the base rate's are its entropy and r (1 - r).
    """
    cv, rate = cal.fitted_on.cv, cal.fitted_on.base_rate
    log_loss, brier = (cv["log_loss_oof"], cv["brier_oof"]) if "log_loss_oof" in cv else (cv["log_loss"], cv["brier"])
    entropy = -(rate * math.log(rate) + (1 - rate) * math.log(1 - rate))
    spread = rate * (1 - rate)
    if log_loss <= entropy and brier <= spread:
        return None
    gap = f" (log-loss gap 95% [{cv['log_loss_gap_low']:+.3f}, {cv['log_loss_gap_high']:+.3f}])" if noisy(cv) else ""
    return (
        f"out-of-fold log-loss {log_loss:.3f} and Brier {brier:.3f}, against {entropy:.3f} and {spread:.3f} for "
        f"p = {rate:.3f} (the labelled base rate) on every row{gap}"
    )


def noisy(cv: dict[str, float]) -> bool:
    """True for a refit judged worse than the base rate only inside the noise of its labels: the bootstrap interval of
    its out-of-fold log-loss less the base rate's holds 0, or the labels show no clear ranking (the verdict's labelled
    AUROC interval holds 0.5), where that gap measures how a map fitted on a fold's few rows fits noise, not the file.
    Labels that rank the rows one way or the other, beyond the noise, and still judge the refit worse refuse it."""
    if "log_loss_gap_low" not in cv:
        return False
    return cv["log_loss_gap_low"] <= 0 or cv["auroc_low"] <= 0.5 <= cv["auroc_high"]


def little_ranking(cal: Calibration) -> str:
    """The line a refit judged worse than the base rate inside the noise adds: the labelled AUROC of the verdict
    with its interval, and about how many more labels would settle it (``choose.labels_to_settle``)."""
    cv, n = cal.fitted_on.cv, cal.fitted_on.n
    auroc, lo, hi = cv["auroc"], cv["auroc_low"], cv["auroc_high"]
    more = labels_to_settle(auroc, (lo, hi), n)
    settle = (
        f"about {more} more labelled rows would likely settle it"
        if more is not None
        else "more labels are unlikely to show a ranking"
    )
    return (
        f"; written: the labels show little ranking (labelled AUROC {auroc:.3f} [{lo:.3f}, {hi:.3f}]), and the "
        f"refit is worse than their base rate only inside the noise of {n} rows: {worse_than_base_rate(cal)}; {settle}"
    )


def refuse_worse(cal: Calibration, what: str, force: bool) -> str:
    """Raise BBWDError when ``cal`` judges worse than the base rate out of fold (``worse_than_base_rate``) beyond the
    noise (a full fit: at all; a refit: its log-loss gap's interval wholly above 0), unless ``force``; return what
    the printed line adds (empty when it judges at least as well)."""
    why = worse_than_base_rate(cal)
    if why is None:
        return ""
    if noisy(cal.fitted_on.cv):
        return little_ranking(cal)
    if not force:
        raise BBWDError(
            f"the {what} judges the labelled rows worse than their base rate, so nothing was written: {why}; label "
            "more rows, or --force to write it anyway"
        )
    return f"; written with --force although it judges worse than the base rate: {why}"


def interval_line(point: OperatingPoint, y: np.ndarray, w: np.ndarray) -> str:
    """The threshold's FPR with its interval and how many more labels would halve it, e.g. 'FPR 0.096 [0.050, 0.170]
    (95%, exact binomial) on 52 correct rows; about 150 more labelled rows halve the interval'."""
    if point.fpr_interval is None or point.negatives is None:
        return f"FPR {point.fpr:.3f}"
    lo, hi = point.fpr_interval
    share = float(np.sum(w * (y == 0)) / np.sum(w)) if np.sum(w) else 0.0
    more = combine.labels_to_halve(point.fpr * point.negatives, point.negatives, share)
    return (
        f"FPR {point.fpr:.3f} [{lo:.3f}, {hi:.3f}] (95%, exact binomial) on {point.negatives:g} correct rows; about "
        f"{more} more labelled rows halve the interval"
    )


def labelled_at_k(results: Sequence[Path], label: str, k: int | None) -> tuple[list[dict[str, Any]], list[float], int]:
    """The labelled rows of ``results`` scored on ``k`` samples (no error), their labels, and that K."""
    rows, labels = [], []
    for path, n, row in labelled.file_rows(results):
        where = f"{path} line {n}"
        if row.get("error") is not None or (k is not None and labelled.row_k(row, where) not in (k, 0)):
            continue
        y = labelled.row_label(row, label, where)
        if y is not None:
            rows.append(row)
            labels.append(y)
    return rows, labels, int(k or labelled.row_k(rows[0], str(results[0])))


def base_calibration(path: Path | None, settings: JSONObject, rows: Sequence[JSONObject]) -> Calibration:
    """The calibration a map refits: ``path``'s, else the one shipped for the rows' settings (for a teacher without
    one of its own, the shipped heads that read the texts alone: ``choice.embedded_calibration``), when the rows were
    judged by it or by none; BBWDError naming the one that judged them otherwise."""
    if path is not None:
        cal = Calibration.load(path)
        why = cal.mismatch(settings)
        if why is not None:
            raise BBWDError(f"calibration {path} does not apply to the rows: {why}")
        return cal
    shipped, note = embedded_calibration(settings)
    if shipped is None:
        raise BBWDError(
            f"no calibration ships for the rows' settings ({note or 'another teacher'}): give the one to refit with "
            "--base FILE, or --refit full"
        )
    judged = {str(r["calibration"]) for r in rows if isinstance(r.get("calibration"), str)}
    if judged - {shipped.id}:
        raise BBWDError(
            f"the rows were judged by calibration {', '.join(sorted(judged))}, not the shipped {shipped.origin} "
            f"({shipped.id}): give it with --base FILE"
        )
    return shipped


def write_suggestion(results: Sequence[Path], n: int, output: Path, seed: int = 0) -> str:
    """Write ``n`` rows of ``results`` to label (``suggest.suggested_rows``: the rows ``bbwd report --suggest N``
    puts first), in input order; return the line to print."""
    rows = [row for _, _, row in labelled.file_rows(results)]
    risk = [risk_of(row) for row in rows]
    try:
        picks = suggested_rows(risk, n, seed)
    except BBWDError as exc:
        raise BBWDError(f"{', '.join(map(str, results))}: {exc}") from None
    output.write_text("".join(json.dumps(rows[i]) + "\n" for i in picks), encoding="utf-8")
    return (
        f"wrote {output}: {len(picks)} of {sum(p is not None for p in risk)} scored rows, spread evenly over their "
        "risk; add \"label\": 1 (hallucinated) or 0 to each, then bbwd calibrate it (or label them in bbwd report "
        "--suggest N's page, then bbwd calibrate --labels)"
    )


def risk_of(row: JSONObject) -> float | None:
    """A row's p_hallucination, the risk the rows to label are spread over; None with an error or without one."""
    p = row.get("p_hallucination")
    return float(p) if row.get("error") is None and isinstance(p, (int, float)) else None


def calibrate_labels(results: Sequence[Path], output: Path, *, labels: Path, **options: Any) -> str:
    """``calibrate`` on the rows of ``results`` with the labels of ``labels`` joined by id (``labels_file``: its
    labels are the rows' only ones), written to a temporary folder; return the line to print.

    Parameters
    ----------
    results : sequence of Path
        JSONL files of scored rows.
    output : Path
        The calibration file.
    labels : Path
        ``{"id": ..., "label": 0 or 1}`` a line (``bbwd report --suggest N``'s "Download labels").
    **options
        ``calibrate``'s other options.

    Returns
    -------
    str
    """
    joined = labels_file.join_labels(results, labels, options.get("label", "label"))
    beside = results[0].parent / "settings.json"  # bbwd eval's, which the joined copy no longer sits beside
    if options.get("settings_from") is None and beside.is_file():
        options["settings_from"] = beside
    source = f"{', '.join(map(str, results))} with the labels of {labels}"
    with tempfile.TemporaryDirectory(prefix="bbwd-labels-") as folder:
        line = calibrate(joined.write(Path(folder)), output, source=source, **options)
    return f"{line}; labels: {joined.ids} ids of {labels} on {joined.rows} rows"
