"""The one resumable run log of ``batch`` and ``eval``, and the one driver that resumes into it.

:class:`RunLog` is a JSONL file of rows that survives ``kill -9``. Every row is appended, flushed and
fsynced; a rewrite (to recompute or drop rows) goes through a temporary file, fsync and
``os.replace``, so a crash leaves the old file or the new one. On resume the file is read first: a
file that is not bbwd output is refused and never touched, a torn last line (a crash mid-write) is
cut off, and rows written with other settings (another fingerprint or calibration) or from another
input (another ``input_hash``) are refused.

:class:`Resume` is the one resume loop, used by ``batch`` (both engines) and ``eval``: read and check
the earlier rows, compute again the inputs whose error was transient (in groups of their own) and
rewrite their rows in place, then compute from the start of the first group with an input not done
(groups are fixed by input position, so that a resumed run batches exactly as an uninterrupted one)
and append the rows not written yet. It asks the caller's engine for each computation as a
:class:`Step` (:meth:`Resume.steps`), so that a synchronous engine (eval: :meth:`Resume.run`) and an
asynchronous one (batch and Ray: :meth:`Resume.arun`) share it. Batch's rows are read and written as
:class:`~blackbox_wd.scored_row.ScoredRow` (:meth:`RunLog.read_scored`; an engine emits them), eval's as JSON objects.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Generic, TypeVar

from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject
from blackbox_wd.scored_row import ScoredRow

Row = JSONObject  # a row as the log holds it
K = TypeVar("K", int, str)  # what names a row's input: batch's line, eval's id
# A computed row (batch: a ScoredRow), and what the engine gives beside it (batch: the record's samples, whose API
# usage it counts).
Emit = Callable[[Row | ScoredRow, object], None]
# Called with each row the log takes (as the log holds it) and what the engine gave beside it.
Taken = Callable[[Row, object], None]


def as_row(row: Row | ScoredRow) -> Row:
    """The row as the log holds it: a ScoredRow's ``to_dict``."""
    return row.to_dict() if isinstance(row, ScoredRow) else row


def check_output_path(dst: Path) -> None:
    """Raise BBWDError unless ``dst`` can be written: its folder exists and it is not a folder."""
    if dst.is_dir():
        raise BBWDError(f"output {dst} is a folder: give a file path with -o")
    if not dst.parent.is_dir():
        raise BBWDError(f"output folder {dst.parent} does not exist: create it first")


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

    def read_scored(self) -> list[ScoredRow]:
        """The complete rows of an earlier batch run, as :class:`ScoredRow` (:meth:`read`)."""
        return [ScoredRow.from_dict(row) for row in self.read()]

    def check_settings(self, rows: Sequence[Row], fingerprint: str, calibration: str | None = None) -> None:
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
    def transient(rows: Sequence[Row]) -> list[Row]:
        """The rows whose error was transient (network, 5xx, 429): a resume recomputes them in place."""
        return [row for row in rows if row.get("error") is not None and row.get("transient")]

    @staticmethod
    def other_input(rows: Sequence[Row], key: str, hashes: Mapping[K, str]) -> tuple[int, Row] | None:
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


@dataclass(frozen=True)
class Step(Generic[K]):
    """One computation a resume asks of its engine: the inputs after the first ``skip``, only those of ``only``
    when given, in consecutive groups of the run's group size among them; each one's row goes to ``emit``, in
    input order."""

    skip: int
    only: frozenset[K] | None
    emit: Emit


def resume_point(keys: Iterable[K], done: set[K], group_size: int) -> int:
    """How many inputs come before the first group with an input not ``done``.

    Parameters
    ----------
    keys : iterable
        The inputs' keys in input order (may be endless: it is read up to that group).
    done : set
        The keys that have a row.
    group_size : int
        Inputs per group, groups fixed by input position.

    Returns
    -------
    int
        Where a resume starts computing, so that an unfinished group is computed again from its start.
    """
    keys, skip = iter(keys), 0
    while group := list(islice(keys, group_size)):
        if not all(key in done for key in group):
            break
        skip += len(group)
    return skip


class Resume:
    """A run resumed into its log: the earlier rows read and checked on creation, then the computations to
    finish it (:meth:`steps`), each row written once.

    Parameters
    ----------
    log : RunLog
        The run's output.
    key : str
        The row field that names its input (batch: ``line``, eval: ``id``).
    check : callable or None
        Raises BBWDError for earlier rows of other settings, calibration or input.

    Attributes
    ----------
    rows : list of dict
        The earlier rows (a torn last line cut off); after the retry, with the transient ones recomputed.
    retry : frozenset
        The keys of the earlier rows whose error was transient: computed again, in place.
    """

    def __init__(self, log: RunLog, key: str, check: Callable[[list[Row]], None] | None = None) -> None:
        self.log, self.key = log, key
        self.rows = log.read()
        if check is not None:
            check(self.rows)
        self.retry = frozenset(row[key] for row in RunLog.transient(self.rows))

    def steps(
        self, keys: Iterable[K], group_size: int, retried: Taken | None = None, appended: Taken | None = None
    ) -> Generator[Step[K], None, None]:
        """The computations that finish the run, in order; the caller's engine runs each before the next is taken.

        First the inputs of :attr:`retry`, in groups of their own: their rows replace the earlier ones in place
        and the log is rewritten (atomically). Then every input from the start of the first group with an input
        not done (``resume_point``): the rows of the inputs not done are appended (flushed and fsynced), the
        others dropped (rows are written in input order, so the inputs done come first).

        Parameters
        ----------
        keys : iterable
            The inputs' keys in input order (batch: 1, 2, ...; eval: the items' ids).
        group_size : int
            Inputs per group.
        retried, appended : callable or None
            Called with each row computed again in place, and with each row appended, and what the engine gave
            beside it.

        Returns
        -------
        generator of Step
        """
        key = self.key
        if self.retry:
            redone: dict[K, Row] = {}

            def again(computed: Row | ScoredRow, extra: object) -> None:
                row = as_row(computed)
                redone[row[key]] = row
                if retried is not None:
                    retried(row, extra)

            yield Step(0, self.retry, again)
            self.rows = [redone.get(row[key], row) for row in self.rows]
            self.log.rewrite(self.rows)
        done = {row[key] for row in self.rows}
        skip = resume_point(keys, done, group_size)
        with self.log.appending() as write:

            def append(computed: Row | ScoredRow, extra: object) -> None:
                row = as_row(computed)
                if row[key] in done:  # done already: its group is computed again from its start
                    return
                write(row)
                if appended is not None:
                    appended(row, extra)

            yield Step(skip, None, append)

    @staticmethod
    def run(compute: Callable[[int, frozenset[K] | None, Emit], None], steps: Generator[Step[K], None, None]) -> None:
        """:meth:`steps` run by a synchronous engine: ``compute(skip, only, emit)`` for each :class:`Step`."""
        with closing(steps):
            for step in steps:
                compute(step.skip, step.only, step.emit)

    @staticmethod
    async def arun(
        compute: Callable[[int, frozenset[K] | None, Emit], Awaitable[None]], steps: Generator[Step[K], None, None]
    ) -> None:
        """:meth:`steps` run by an asynchronous engine: ``await compute(skip, only, emit)`` for each :class:`Step`."""
        with closing(steps):
            for step in steps:
                await compute(step.skip, step.only, step.emit)
