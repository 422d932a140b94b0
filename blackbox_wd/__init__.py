"""bbwd: training-free hallucination detection with Wasserstein distances of teacher token states."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blackbox_wd.calibration import Calibration
    from blackbox_wd.errors import BBWDError
    from blackbox_wd.run.detector import Detector
    from blackbox_wd.run.result import Result
    from blackbox_wd.settings import Settings

__all__ = ["BBWDError", "Calibration", "Detector", "Result", "Settings"]
__version__ = "0.1.0"

# The public names, imported on first use (PEP 562): ``import blackbox_wd.doors.cli`` and ``bbwd --help``
# must not pay for torch and transformers, which ``run.detector`` imports.
_LAZY = {
    "BBWDError": "blackbox_wd.errors",
    "Calibration": "blackbox_wd.calibration",
    "Detector": "blackbox_wd.run.detector",
    "Result": "blackbox_wd.run.result",
    "Settings": "blackbox_wd.settings",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'blackbox_wd' has no attribute '{name}'")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
