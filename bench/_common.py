"""Small helpers shared by the bench scripts: timing and plain-text tables."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall-clock milliseconds of one call and its result."""
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1e3, out


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table with right-aligned columns."""
    cells = [[str(h) for h in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"] + [line(r) for r in cells[1:]])
