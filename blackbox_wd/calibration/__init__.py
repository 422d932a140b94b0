"""Calibration: AvgWD and EigenWD to a probability of hallucination and a flag.

One concept, three modules: ``model`` (a fitted calibration: JSON-safe state, apply, the check
against a run's settings, the embedded default), ``fit`` (fitting it on labelled rows with
scikit-learn) and ``report`` (calibration.md and the reliability plot).
"""

from blackbox_wd.calibration.model import Calibration, embedded_calibration

__all__ = ["Calibration", "embedded_calibration"]
