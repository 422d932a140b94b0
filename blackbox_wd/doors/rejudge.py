"""Scored rows judged again by a calibration: no teacher pass, no sampling (``bbwd batch SCORES --calibration FILE``).

A row that ``bbwd batch`` wrote carries every member a verdict reads (the scores, the sentences' and claims'), its
sample count and the settings it was scored under. Given such rows as input, ``batch`` gives each the verdict of the
calibration (a file's, or the one shipped for the rows' settings): its ``p_hallucination``, ``flag`` and ``members``,
each sentence's and claim's p and flag, and the calibration's id, in the order a fresh run writes them, so that the
row is the one a run of the log with that calibration would write (but for its timings). A row with an error is
written as it was. A row that skipped the teacher pass (its W2 members null) is refused, naming ``--all-scores``,
where the calibration's verdict of it may read a teacher member. A ``-k auto`` row is judged at the samples it
drew; its ``stages`` keep the verdicts they were drawn under.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.choice import embedded_calibration
from blackbox_wd.calibration.labelled import json_objects
from blackbox_wd.doors.batch import BATCH_FIELDS, CALIBRATED, OPTIONAL, SCORED, read_done
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import JSONView
from blackbox_wd.run.texts import row_reads_teacher

ROW_END = ("label", "error", "transient", "settings", "fingerprint", "input_hash")  # after the verdict, in a row


@dataclass
class Rejudged:
    """What a re-judge did: rows judged, rows with an error kept as they were, and the notes on the calibration."""

    judged: int = 0
    errors: int = 0
    notes: tuple[str, ...] = ()

    def line(self) -> str:
        """One human-readable summary line."""
        return f"{self.judged} rows judged again ({self.errors} with an error kept as they were), no teacher pass"


def scored_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, row) of every scored row; BBWDError naming the first line that is not one."""
    for n, row in json_objects(path):
        missing = [key for key in SCORED if key not in row]
        if missing:
            raise BBWDError(
                f"{path} line {n}: not a scored row (field '{missing[0]}' missing): give a log of records, or only "
                "rows that bbwd batch wrote"
            )
        yield n, row


def judged_row(row: JSONView, calibration: Calibration) -> dict[str, Any]:
    """The row with the calibration's verdict (``Calibration.verdict`` at its sample count, each sentence's and
    claim's), its fields in the order of a fresh ``batch`` row (``batch.output_row``)."""
    if row.get("error") is not None:
        return dict(row)
    if row_reads_teacher(calibration, row):
        raise BBWDError(
            "the row skipped the teacher pass (its verdict read the texts alone), and this calibration's verdict may "
            "read a teacher member: score the log with bbwd batch --all-scores"
        )
    base_rate = (row.get("settings") or {}).get("base_rate")
    verdict = calibration.verdict(row, base_rate, k=int(row["n_samples"]))
    out = dict(row)
    if out.get("sentences") is not None and calibration.sentence is not None:
        judged = calibration.sentence_verdicts(out["sentences"], base_rate)
        out["sentences"] = [
            s if v is None else {**s, "p_hallucination": v.p, "flag": v.flag}
            for s, v in zip(out["sentences"], judged, strict=True)
        ]
    if out.get("claims") is not None and calibration.claim is not None:
        claimed = calibration.claim_verdicts(out["claims"], row)
        out["claims"] = [
            c if v is None else {**c, "p_hallucination": v.p, "flag": v.flag}
            for c, v in zip(out["claims"], claimed, strict=True)
        ]
    out.update(p_hallucination=verdict.p, flag=verdict.flag, members=list(verdict.members), calibration=calibration.id)
    order = ("id", "line", *BATCH_FIELDS, "D", *OPTIONAL, *CALIBRATED, "calibration", *ROW_END)
    return {key: out[key] for key in (*order, *out) if key in out}


def rejudge(src: Path, dst: Path, calibration: Calibration | str, base_rate: float | None = None) -> Rejudged:
    """Judge every scored row of ``src`` again with ``calibration`` (a file's, or "auto": the one shipped for the
    rows' settings) and write them to ``dst`` (whole, at once: a rerun writes it again).

    Parameters
    ----------
    src : Path
        Rows that ``bbwd batch`` wrote (``is_scored``).
    dst : Path
        The output; an existing file is replaced only when it is bbwd output.
    calibration : Calibration or "auto"
        The calibration to judge with.
    base_rate : float or None, default=None
        ``--base-rate``: p moved to it (``heads.shift_prior``), and the rows' settings say so; None: the base rate
        the rows were judged at (their settings').

    Returns
    -------
    Rejudged
    """
    read_done(dst)  # not bbwd output: never replaced
    out: list[dict[str, Any]] = []
    summary = Rejudged()
    notes: dict[str, None] = {}
    chosen: dict[str, Calibration] = {}
    for n, row in scored_rows(src):
        if row.get("error") is not None:
            summary.errors += 1
            out.append(dict(row))
            continue
        if base_rate is not None:
            row["settings"] = {**row["settings"], "base_rate": base_rate}
        settings = row["settings"]
        key = str(row["fingerprint"])
        if key not in chosen:
            cal, note = _calibration_for(calibration, settings, f"{src} line {n}")
            chosen[key] = cal
            notes.update(dict.fromkeys([note] if note else []))
        try:
            out.append(judged_row(row, chosen[key]))
        except BBWDError as exc:
            raise BBWDError(f"{src} line {n}: {one_line(exc)}") from None
        summary.judged += 1
    summary.notes = tuple(notes)
    fd, tmp = tempfile.mkstemp(dir=dst.parent, prefix=f".{dst.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in out)
    os.replace(tmp, dst)
    return summary


def _calibration_for(
    calibration: Calibration | str, settings: Mapping[str, Any], where: str
) -> tuple[Calibration, str | None]:
    """The calibration that judges rows of these settings, and its note; BBWDError when none applies."""
    if isinstance(calibration, Calibration):
        why = calibration.mismatch(settings)
        if why is not None:
            name = f"calibration {calibration.origin}" if calibration.origin else "the calibration"
            raise BBWDError(f"{name} does not apply to the rows ({where}): {why}")
        return calibration, calibration.sampling_note(settings)
    chosen, note = embedded_calibration(settings)
    if chosen is None:
        raise BBWDError(f"no calibration applies to the rows ({where}): {note or 'none ships'}; give --calibration")
    return chosen, note
