"""The settings a calibration covers: what changes a score (``COVERED``), what a score means (``MEANING``, refused
when it differs), what heads per sample count serve (``PER_K``) and the sampling side (``SAMPLING``, applied with a
note); a run's covered settings and the fingerprint a calibration is valid for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blackbox_wd.settings import LATER_FIELDS, SCORE_FIELDS, fingerprint

# The readable settings a calibration covers: what changes a score, less the seed and the prompt
# protocol (the protocol says where it was fitted, ``FittedOn.protocol``; a scored prompt has none).
COVERED = tuple(name for name in SCORE_FIELDS if name not in ("seed", "protocol"))
# Of those, what a score means: a calibration fitted under other values of these is refused ...
MEANING = ("teacher", "layer", "k", "stop", "alpha", "p", "proj_dim", "proj_seed", "norm")
# ... less these, which a calibration serves with heads per sample count (``Calibration.fitted_k``)
PER_K = ("k", "stop")
# ... and the sampling side: a calibration fitted under other values of these applies, with a note.
SAMPLING = ("target", "sampler", "endpoint", "temperature", "top_p", "max_tokens")
assert sorted(MEANING + SAMPLING) == sorted(COVERED)
# Of the meaning settings, those of the teacher's states: a calibration whose heads read none (``teacher_free``)
# serves a run under any values of them.
TEACHER_SIDE = tuple(name for name in MEANING if name not in PER_K)


def covered_settings(reported: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a run (``Detector.reported_settings()``) that a calibration must match; a setting added
    later (``settings.LATER_FIELDS``) that they lack has the value that gives the behaviour from before it."""
    out = {name: reported.get(name) for name in COVERED}
    for name, before in LATER_FIELDS.items():
        if out.get(name, before) is None:
            out[name] = before
    return out


def calibration_fingerprint(reported: Mapping[str, Any]) -> str:
    """``fingerprint(reported, seed=False)`` over the covered settings (no prompt protocol)."""
    return fingerprint(covered_settings(reported), seed=False)
