"""The one resumable run log of ``batch`` and ``eval``: a JSONL file of rows that survives ``kill -9``.

Every row is appended, flushed and fsynced; a rewrite (to recompute or drop rows) goes through a
temporary file, fsync and ``os.replace``, so a crash leaves the old file or the new one. On resume
the file is read first: a file that is not bbwd output is refused and never touched, a torn last
line (a crash mid-write) is cut off, and rows written with other settings (another fingerprint or
calibration) or from another input (another ``input_hash``) are refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from blackbox_wd.errors import BBWDError

Row = dict[str, Any]


class RunLog:
    """A run's JSONL output at ``path``: ``kind`` output, whose rows (``row``, as messages name them) pass
    ``is_row(n, row)`` at line n."""

    def __init__(self, path: Path, kind: str, row: str, is_row: Callable[[int, Row], bool]) -> None:
        self.path, self.kind, self.row, self.is_row = path, kind, row, is_row

    def _refused(self, why: str) -> BBWDError:
        return BBWDError(
            f"{self.path} is not bbwd {self.kind} output ({why}): refusing to resume into it; "
            "remove it or choose another -o"
        )

    def read(self) -> list[Row]:
        """The complete rows of an earlier run; a torn last line is cut off.

        Nothing is written unless every complete line is a row: a file that is not bbwd output (or
        holds only a fragment) is refused and left as it is.
        """
        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        data = self.path.read_bytes()
        keep = data.rfind(b"\n") + 1
        rows = []
        for n, raw in enumerate(data[:keep].splitlines(), start=1):
            try:
                row = json.loads(raw)
            except ValueError:
                raise self._refused(f"line {n} is not JSON") from None
            if not isinstance(row, dict) or not self.is_row(n, row):
                raise self._refused(f"line {n} is not {self.row}")
            rows.append(row)
        if keep != len(data):
            if not rows:
                raise self._refused("it holds no complete line")
            with open(self.path, "rb+") as f:  # a crash mid-write left a partial last line
                f.truncate(keep)
                os.fsync(f.fileno())
        return rows

    def check_settings(self, rows: list[Row], fingerprint: str, calibration: str | None = None) -> None:
        """Raise BBWDError unless every row has this run's fingerprint and calibration id."""
        for row in rows:
            if row["fingerprint"] != fingerprint:
                raise BBWDError(
                    f"{self.path} was written with other settings (fingerprint {row['fingerprint']}, this "
                    f"run {fingerprint}): resume with the same settings, or choose another -o"
                )
            if row.get("calibration") != calibration:
                raise BBWDError(
                    f"{self.path} was written with another calibration "
                    f"({row.get('calibration') or 'none'}, "
                    f"this run {calibration or 'none'}): resume with the same --calibration, or choose "
                    "another -o"
                )

    @staticmethod
    def transient(rows: list[Row]) -> list[Row]:
        """The rows whose error was transient (network, 5xx, 429): a resume recomputes them in place."""
        return [row for row in rows if row.get("error") is not None and row.get("transient")]

    @staticmethod
    def other_input(rows: list[Row], key: str, hashes: Mapping[Any, str]) -> tuple[int, Row] | None:
        """The first row (with its line number) whose ``input_hash`` is not that of its input ``hashes[row[key]]``."""
        return next(
            ((n, row) for n, row in enumerate(rows, start=1) if hashes.get(row[key]) != row["input_hash"]), None
        )

    def rewrite(self, rows: list[Row]) -> None:
        """Replace the file by ``rows`` atomically (a crash leaves the old file or the new one)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    @contextmanager
    def appending(self) -> Iterator[Callable[[Row], None]]:
        """A function that appends one row, flushed and fsynced, for the block."""
        with open(self.path, "a", encoding="utf-8") as out:

            def append(row: Row) -> None:
                out.write(json.dumps(row) + "\n")
                out.flush()
                os.fsync(out.fileno())

            yield append
