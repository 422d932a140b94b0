"""Small helpers shared by the bench scripts: timing and plain-text tables."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

DIM = 128
NORM = 30.0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock milliseconds of one call and its result."""
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table with right-aligned columns."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def token_clouds(rng: np.random.Generator, k: int, m: int, equal: bool) -> list[np.ndarray]:
    """K token-state clouds of one synthetic prompt: 128-d, norms ~30 (a shared prompt offset, a per-response
    shift and per-token spread); m_i ~ U[0.5M, 1.5M], or M each when ``equal``."""
    offset = rng.normal(size=DIM)
    offset *= NORM / np.linalg.norm(offset)
    sizes = [m] * k if equal else rng.integers(max(1, m // 2), 3 * m // 2 + 1, size=k)
    spread = 0.5 * NORM / np.sqrt(DIM)
    return [offset + 0.3 * spread * rng.normal(size=DIM) + spread * rng.normal(size=(n, DIM)) for n in sizes]
