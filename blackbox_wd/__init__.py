"""bbwd: training-free hallucination detection with Wasserstein distances of teacher token states."""

from blackbox_wd.calibration import Calibration
from blackbox_wd.errors import BBWDError
from blackbox_wd.pipeline import Detector, Result
from blackbox_wd.settings import Settings

__all__ = ["BBWDError", "Calibration", "Detector", "Result", "Settings"]
__version__ = "0.1.0"
