"""Calibration: a result's members to a probability of hallucination and a flag.

``members`` (what a head reads, how from a result, and what tables call it), ``heads`` (a head: z, its calibrator,
threshold and verdict; the heads of another K, where they were fitted), ``model`` (a fitted calibration: apply, the
check against a run's settings), ``fileformat`` (its file: formats 1 and 2 read, checked and written), ``combine``
(members -> one head), ``labelled`` (labelled rows read for a fit), ``labels_file`` (labels kept apart from the rows,
joined to them by id: ``bbwd calibrate --labels``), ``fit`` (every head, fitted on labelled rows with scikit-learn),
``recalibrate`` (a calibration's map and threshold refitted on a few labelled rows), ``choose`` (the members those
rows choose for the verdict), ``suggest`` (which rows to label), ``settle`` (``-k auto``'s bands), ``fit_summary`` (a
full fit's ``<name>.md``, its reliability plot and ``bbwd calibrate``'s line), ``evaluation/`` (scores and verdicts
against labels: the metrics, the label vocabulary, the reliability bins and ECE, and the numbers ``bbwd eval``'s
summary.md, ``bbwd report``'s page, ``bbwd calibrate`` and bench/ show), ``choice`` (a run's calibration: the shipped
one, a file's or none; its notes; the members a run can compute) and ``shipped/`` (the
shipped calibrations, package data). ``bbwd calibrate`` is a door (``doors.calibrate``).
"""

from blackbox_wd.calibration.model import Calibration

__all__ = ["Calibration"]
