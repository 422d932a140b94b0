"""Batch scoring of JSONL logs: streamed, pipelined, resumable and crash-safe.

Every input line gets exactly one output line, in input order. Records are processed in groups of
``group_size`` consecutive lines. The sampling of the next groups runs (asynchronously, for API
targets) while the teacher and OT work on the current one, and each group's responses share one
length-bucketed teacher pass. Every record of a run is scored on the same number K of responses.

Output lines carry the settings' fingerprint and the hash of their input line, and with a
calibration its probability, flag and the calibration's id. A rerun checks them (another input,
other settings or another calibration is refused, and a file that is not bbwd output is never touched),
keeps the complete lines, recomputes the records whose error was transient (network, 5xx, 429),
drops a torn last line, recomputes the unfinished group from its start (groups are fixed by input
position, so it batches exactly as before) and appends only the missing lines.

That driver is :class:`blackbox_wd.run.runlog.Resume`, the one eval uses too, run by :meth:`Runner.run`.
:class:`Runner` is the one interface of both engines: :class:`BatchRunner` here (one process) and
``ray_engine.RayRunner`` (a Ray cluster) each take a detector built by ``Detector.from_settings``
(with the engine's :meth:`Runner.build_options`), have its ``k`` and ``group_size``, and differ only
in :meth:`Runner.engine`; both run the stages of :mod:`blackbox_wd.run.groups`.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import count, islice
from pathlib import Path
from typing import Any

from blackbox_wd.clients.sampling import Mode, draw_mode
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject, SampleSet, Usage
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.groups import (
    detector_samples,
    groups,
    score_group_in_rounds,
    score_records,
    select_records,
    teacher_group,
)
from blackbox_wd.run.inputs import LogRecord, line_hash, raw_lines, read_records
from blackbox_wd.run.result import ANSWER_SCORES, SAMPLE_SCORES, Result, RowFields, result_row
from blackbox_wd.run.runlog import Emit as RowEmit
from blackbox_wd.run.runlog import Resume, Row, RunLog, check_output_path
from blackbox_wd.run.texts import SKIPPED
from blackbox_wd.scored_row import ScoredRow, is_scored_row
from blackbox_wd.settings import Settings

# the result's fields every batch row carries (``result.result_row``)
BATCH_FIELDS = (
    *SAMPLE_SCORES,
    "sentences",
    "claims",
    *ANSWER_SCORES,
    "baselines",
    "n_samples",
    "target_tokens",
    "usage",
    "token_counts",
    "timings",
)
# what marks a batch row (``is_scored``)
SCORED = ("id", "line", "avg_wd", "eigen_wd", "n_samples", "settings", "fingerprint", "input_hash")
OPTIONAL = ("answer_error", "stages")  # written when they have a value (and D with --save-matrix, when scored)
CALIBRATED = ("p_hallucination", "flag", "members")  # with a calibration


def batch_fields(save_matrix: bool, calibrated: bool) -> RowFields:
    """The result's fields of a batch row.

    Parameters
    ----------
    save_matrix : bool
        With D (``--save-matrix``).
    calibrated : bool
        With the verdict of a calibration (its p_hallucination, flag and members).

    Returns
    -------
    RowFields
    """
    matrix = ("D",) if save_matrix else ()
    verdict = CALIBRATED if calibrated else ()
    return RowFields((*BATCH_FIELDS, *matrix, *OPTIONAL, *verdict), optional=frozenset((*matrix, *OPTIONAL)))


@dataclass
class BatchSummary:
    """What a batch run did."""

    k: int = 0
    k_source: str = ""
    records: int = 0
    errors: int = 0
    resumed_from: int = 0
    retried: int = 0  # earlier rows with a transient error, computed again
    skipped: int = 0  # rows of this run judged from their texts, not forced (``Detector.forced``)
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)
    settings: dict[str, Any] | None = None  # the run's reported settings (``Detector.reported_settings``)

    @property
    def prompts_per_s(self) -> float:
        """Records processed per second in this run."""
        return self.records / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        """One human-readable summary line."""
        u = self.usage
        return (
            f"{self.records} records ({self.resumed_from} already done, {self.retried} retried), "
            f"{self.errors} errors, K={self.k} responses each ({self.k_source}), "
            f"{self.prompts_per_s:.2f} prompts/s; API: {u.requests} requests, {u.cache_hits} cached, "
            f"{u.retries} retries, {u.completion_tokens} completion tokens fresh, "
            f"{u.cached_completion_tokens} cached"
        )

    def teacher_line(self) -> str | None:
        """One line on the rows of this run that skipped the teacher pass, and why (None when none did)."""
        if not self.skipped:
            return None
        return (
            f"{self.skipped} of {self.records} rows skipped the teacher pass: {SKIPPED}; their W2 fields are null "
            "(--all-scores forces every row, with the same p and flag)"
        )

    def settings_line(self) -> str:
        """The run's reported settings as one line, ``settings: {...}`` (JSON): what every row's fingerprint hashes
        (``target`` "recorded" and ``samples_from`` for recorded samples), for a reader and ``bbwd calibrate
        --settings-from``."""
        return f"settings: {json.dumps(self.settings)}"


def plan_k(src: Path, k: int | None, sample_missing: bool, default: int = 10) -> tuple[int, str]:
    """K for every record of a run, and where it came from.

    ``k`` when given; else with a target to sample from, ``default``; else the number of responses
    of the first record that parses and has at least 2 (``default`` when none has).
    """
    if k is not None:
        return k, "-k"
    if sample_missing:
        return default, "the default K"
    for rec in read_records(src):
        if rec.error is None and len(rec.responses) >= 2:
            return len(rec.responses), f"the count of line {rec.line}'s responses"
    return default, "the default K: no record has 2 responses"


def batch_log(dst: Path) -> RunLog:
    """The run log of a batch output: each line a :class:`ScoredRow` (``scored_row.is_scored_row``), numbered as its
    input line."""
    return RunLog(dst, "batch", "a bbwd row", is_scored_row)


def read_done(dst: Path) -> list[ScoredRow]:
    """The complete rows of an earlier run, checked to be bbwd output; a torn last line is cut off (``RunLog.read``)."""
    return batch_log(dst).read_scored()


def is_scored(path: Path) -> bool:
    """True when the first JSON line of ``path`` is a row that ``bbwd batch`` wrote (``SCORED``): its scores, not a
    log record to score."""
    with path.open("rb") as f:  # bytes: a bad line further on is the log's to report, not this check's
        for line in f:
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:  # UnicodeDecodeError included
                    return False
                return isinstance(row, dict) and all(key in row for key in SCORED)
    return False


def check_resume(done: list[Row], fingerprint: str, src: Path, dst: Path, calibration: str | None = None) -> None:
    """Raise BBWDError unless every done row has this run's fingerprint, calibration id and its input line's hash."""
    batch_log(dst).check_settings(done, fingerprint, calibration)
    hashes = {n: line_hash(raw) for n, raw in enumerate(islice(raw_lines(src), len(done)), start=1)}
    other = RunLog.other_input(done, "line", hashes)
    if other is not None and other[0] <= len(hashes):
        line = other[1]["line"]
        raise BBWDError(
            f"{dst} line {line} was computed from another input than {src} line {line}: choose another "
            "-o for this input"
        )
    if len(done) > len(hashes):
        raise BBWDError(f"{dst} has {len(done)} lines, more than the input {src}: choose another -o")


def output_row(
    rec: LogRecord,
    result: Result | BBWDError | None,
    save_matrix: bool,
    settings: JSONObject,
    calibration: str | None = None,
) -> ScoredRow:
    """The row written for one record, its line of the output (with a response: its answer_wd, sentences and
    sentence_wd; with a calibration, its id, p_hallucination and flag).

    Parameters
    ----------
    rec : LogRecord
        The record.
    result : Result, BBWDError or None
        Its result, or why it has none (None: its line did not parse).
    save_matrix : bool
        With D (``--save-matrix``).
    settings : dict
        The run's reported settings with their fingerprint (``Detector.reported_settings``); every row carries
        them, so that ``bbwd calibrate`` and a re-judge read rows of batch with nothing beside them.
    calibration : str or None
        The id of the run's calibration.

    Returns
    -------
    ScoredRow
    """
    scored = result if isinstance(result, Result) else None
    return ScoredRow(
        id=rec.id,
        line=rec.line,
        scores=result_row(scored, batch_fields(save_matrix, calibration is not None)),
        calibration=calibration,
        label=rec.label,
        error=rec.error or (None if isinstance(result, Result) else f"line {rec.line}: {result}"),
        transient=bool(rec.error is None and getattr(result, "transient", False)),
        settings=settings,
        fingerprint=settings["fingerprint"],
        input_hash=rec.input_hash,
    )


# What an engine calls for each record, in input order: the record, its result (or why it has none), its samples.
Emit = Callable[[LogRecord, Result | BBWDError | None, SampleSet | BBWDError | None], None]


class Runner:
    """The one interface of ``bbwd batch``'s engines: scores a JSONL log with a detector built by
    ``Detector.from_settings`` (with :meth:`build_options`), resuming the output (:meth:`run`).

    Parameters
    ----------
    detector : Detector
        The run's wiring: settings, teacher (or its card), sampler, calibration, group size.
    sample_missing : bool
        Top records up to K from the target (there is one).

    An engine implements :meth:`engine`; ``k`` and ``group_size`` are the detector's.
    """

    def __init__(self, detector: Detector, sample_missing: bool) -> None:
        self.detector = detector
        self.sample_missing = sample_missing

    @classmethod
    def build_options(cls, settings: Settings) -> dict[str, Any]:
        """The keywords of ``Detector.from_settings`` for the detector this engine takes.

        Parameters
        ----------
        settings : Settings
            The run's settings.

        Returns
        -------
        dict
            Empty here: this process loads the teacher and builds the sampler.
        """
        return {}

    @property
    def k(self) -> int:
        """Responses scored per record."""
        return self.detector.settings.k

    @property
    def group_size(self) -> int:
        """Records per shared teacher pass (the wiring's)."""
        return self.detector.group_size

    async def engine(self, src: Path, skip: int, lines: frozenset[int] | None, emit: Emit) -> None:
        """Score the records of ``src`` after its first ``skip`` lines (only ``lines`` when given), in groups of
        consecutive records, calling ``emit`` for each in input order."""
        raise NotImplementedError

    async def run(
        self, src: Path, dst: Path, save_matrix: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> BatchSummary:
        """Score ``src`` into ``dst`` (``runlog.Resume``): retry the transient errors already there, then append
        what is missing.

        Parameters
        ----------
        src, dst : Path
            The JSONL input and output.
        save_matrix : bool
            Add D to every output line.
        progress : callable or None
            ``progress(records, errors)`` after each record of this run.

        Returns
        -------
        BatchSummary
        """
        check_output_path(dst)
        settings = self.detector.reported_settings()
        fingerprint = settings["fingerprint"]
        cal = self.detector.calibration.id if self.detector.calibration is not None else None
        resume = Resume(batch_log(dst), "line", lambda done: check_resume(done, fingerprint, src, dst, cal))
        summary = BatchSummary(k=self.k, resumed_from=len(resume.rows), retried=len(resume.retry))
        summary.settings = settings
        t0 = time.perf_counter()

        def counted(row: Row, sset: object) -> None:
            summary.records += 1
            summary.errors += row["error"] is not None
            summary.skipped += row["error"] is None and row["avg_wd"] is None  # judged from its texts alone
            usage = sset.usage if isinstance(sset, SampleSet) else getattr(sset, "usage", None)
            if usage is not None:
                summary.usage.add(usage)
            if progress:
                progress(summary.records, summary.errors)

        async def compute(skip: int, lines: frozenset[int] | None, emit: RowEmit) -> None:
            def row(rec: LogRecord, res: Result | BBWDError | None, sset: SampleSet | BBWDError | None) -> None:
                emit(output_row(rec, res, save_matrix, settings, cal), sset)

            await self.engine(src, skip, lines, row)

        await resume.arun(compute, resume.steps(count(1), self.group_size, retried=counted, appended=counted))
        summary.seconds = time.perf_counter() - t0
        return summary


class BatchRunner(Runner):
    """The local engine: scores a JSONL log with one detector; samples missing responses when it has a target."""

    def __init__(self, detector: Detector, sample_missing: bool, prefetch_groups: int = 2) -> None:
        super().__init__(detector, sample_missing)
        self.prefetch_groups = prefetch_groups

    async def _group_samples(self, group: list[LogRecord]) -> list[SampleSet | BBWDError | None]:
        """The group's samples (``groups.detector_samples``); with ``-k auto`` its given responses only."""
        return await detector_samples(
            self.detector, group, self.sample_missing, draw=self.detector.settings.stop is None
        )

    def _score_group(
        self, group: list[LogRecord], sets: list[SampleSet | BBWDError | None]
    ) -> list[Result | BBWDError | None]:
        """Teacher pass and OT for a group's records that have samples (``groups.teacher_group``, ``score_records``)."""
        return score_records(self.detector, teacher_group(self.detector, group, sets), sets)

    async def _process(self, records: Iterable[LogRecord], emit: Emit) -> None:
        """Sample, teacher-force and score records group by group, calling ``emit`` in input order."""
        batches = groups(records, self.group_size)
        pending: deque[tuple[list[LogRecord], asyncio.Task]] = deque()
        # A local target shares the teacher's CPU (often its very model): sample it only between
        # teacher passes. An API target samples the next groups while this one is scored.
        local = self.sample_missing and draw_mode(self.detector.sampler) is Mode.BATCH
        ahead = 0 if local else self.prefetch_groups

        def refill() -> None:
            while len(pending) < 1 + ahead:
                group = next(batches, None)
                if group is None:
                    return
                pending.append((group, asyncio.ensure_future(self._group_samples(group))))

        refill()
        while pending:
            group, task = pending.popleft()
            sets = await task
            if ahead:
                refill()
            if self.detector.settings.stop is not None:  # -k auto: draws in rounds as it scores
                sampler = self.detector.sampler if self.sample_missing else None
                results = await score_group_in_rounds(self.detector, group, sets, sampler)
            else:
                results = await asyncio.to_thread(self._score_group, group, sets)
            refill()
            for rec, res, sset in zip(group, results, sets, strict=True):
                emit(rec, res, sset)

    async def engine(self, src: Path, skip: int, lines: frozenset[int] | None, emit: Emit) -> None:
        """The records of ``src`` after ``skip`` lines (only ``lines`` when given), scored in input order."""
        await self._process(select_records(src, skip, lines), emit)
