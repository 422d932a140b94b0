"""Where bbwd keeps its files: one user cache directory, overridable by BBWD_CACHE_DIR."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def cache_dir() -> Path:
    """The root cache directory (models, API responses)."""
    root = os.environ.get("BBWD_CACHE_DIR") or platformdirs.user_cache_dir("bbwd")
    path = Path(root).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
