"""bbwd: training-free hallucination detection with Wasserstein distances of teacher token states."""

from blackbox_wd.errors import BBWDError
from blackbox_wd.pipeline import Detector, Result
from blackbox_wd.settings import Settings

__all__ = ["BBWDError", "Detector", "Result", "Settings"]
__version__ = "0.1.0"
