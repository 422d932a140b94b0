"""The page's labelling mode (``bbwd report --suggest N``): the rows it asks about first, and the key the browser
keeps their labels under.

The rows come first as ``bbwd calibrate --suggest N`` picks them (``suggest.suggested_rows``, the one function both
call), then the others by risk; the page's script keeps the labels in the browser's localStorage under a key made
of the scored file's content, so that a reload or another copy of the page finds them and another file's page does
not.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from blackbox_wd.calibration.suggest import suggested_rows
from blackbox_wd.doors.report.rows import ReportRow
from blackbox_wd.errors import BBWDError


@dataclass(frozen=True)
class Labelling:
    """What the page's labelling mode reads: its storage key and the suggested rows."""

    key: str  # 16 hex digits of sha256 over the scored file's bytes
    suggested: list[int]  # indices into the page's rows, increasing (the scored file's order)


def content_key(path: Path) -> str:
    """16 hex digits of sha256 over a file's bytes (read in blocks).

    Parameters
    ----------
    path : Path

    Returns
    -------
    str
    """
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def labelling(scores: Path, rows: list[ReportRow], n: int, seed: int = 0) -> Labelling:
    """The labelling mode of the page of ``rows`` (read from ``scores``) with ``n`` rows suggested.

    Parameters
    ----------
    scores : Path
        The scored file the rows were read from.
    rows : list of ReportRow
        Its rows, in order.
    n : int
        Rows to suggest (``bbwd calibrate --suggest N``'s N).
    seed : int, default=0
        The draw (``bbwd calibrate --suggest``'s).

    Returns
    -------
    Labelling

    Raises
    ------
    BBWDError
        No row has a p_hallucination, or ``n`` is out of range.
    """
    try:
        picks = suggested_rows([r.p if r.error is None else None for r in rows], n, seed)
    except BBWDError as exc:
        raise BBWDError(f"{scores}: {exc}") from None
    return Labelling(content_key(scores), picks)
