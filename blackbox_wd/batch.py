"""Batch scoring of JSONL logs: streamed, pipelined, resumable and crash-safe.

Records are processed in groups of ``group_size`` consecutive records. The sampling of the next
groups runs (asynchronously, for API targets) while the teacher and OT work on the current one,
and each group's responses share one length-bucketed teacher pass. Output lines are written in
input order and flushed one by one. A rerun after a crash keeps the complete lines already
written, recomputes the unfinished group from its start (groups are fixed by input position, so
it batches exactly as before) and appends only the missing lines: the file ends as an
uninterrupted run's would.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from itertools import islice
from pathlib import Path
from typing import Any

from blackbox_wd.errors import BBWDError
from blackbox_wd.logs import LogRecord, read_records
from blackbox_wd.pipeline import Detector, Result
from blackbox_wd.records import Sample, SampleSet, Usage


@dataclass
class BatchSummary:
    """What a batch run did."""

    records: int = 0
    errors: int = 0
    resumed_from: int = 0
    seconds: float = 0.0
    usage: Usage = field(default_factory=Usage)

    @property
    def prompts_per_s(self) -> float:
        """Records processed per second in this run."""
        return self.records / self.seconds if self.seconds else 0.0

    def line(self) -> str:
        """One human-readable summary line."""
        u = self.usage
        return (f"{self.records} records ({self.resumed_from} already done), {self.errors} errors, "
                f"{self.prompts_per_s:.2f} prompts/s; API: {u.requests} requests, {u.cache_hits} cached, "
                f"{u.retries} retries, {u.completion_tokens} completion tokens fresh, "
                f"{u.cached_completion_tokens} cached")


def completed_lines(path: Path) -> int:
    """Count the complete output lines and cut off a partial last line left by a crash."""
    if not path.exists():
        return 0
    with open(path, "rb+") as f:
        data = f.read()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            f.truncate(keep)
    return data[:keep].count(b"\n")


def _groups(records: Iterator[LogRecord], size: int) -> Iterator[list[LogRecord]]:
    """Consecutive groups of ``size`` records."""
    while group := list(islice(records, size)):
        yield group


def output_row(rec: LogRecord, result: Result | BBWDError | None, save_matrix: bool) -> dict[str, Any]:
    """The JSON object written for one record."""
    row: dict[str, Any] = {"id": rec.id, "line": rec.line}
    if isinstance(result, Result):
        row.update(avg_wd=result.avg_wd, eigen_wd=result.eigen_wd, n_samples=len(result.responses),
                   token_counts=result.token_counts, timings=result.timings)
        if save_matrix:
            row["D"] = result.D.tolist()
    else:
        row.update(avg_wd=None, eigen_wd=None, n_samples=0, token_counts=[], timings={})
    if rec.label is not None:
        row["label"] = rec.label
    error = rec.error or (None if isinstance(result, Result) else f"line {rec.line}: {result}")
    row["error"] = error
    return row


class BatchRunner:
    """Scores a JSONL log with one detector; samples missing responses when it has a target."""

    def __init__(self, detector: Detector, sample_missing: bool, group_size: int = 8, prefetch_groups: int = 2) -> None:
        self.detector = detector
        self.sample_missing = sample_missing
        self.group_size = group_size
        self.prefetch_groups = prefetch_groups

    def _need(self, rec: LogRecord) -> int | BBWDError:
        """How many responses to draw for a record, or why it cannot be scored."""
        teacher = self.detector.teacher
        n_prompt = len(teacher.prompt_ids(rec.messages))
        if teacher.max_length and n_prompt >= teacher.max_length:  # caught before any sampling
            return BBWDError(f"field 'prompt' has {n_prompt} tokens, over the teacher's context of {teacher.max_length}")
        need = self.detector.settings.k - len(rec.responses)
        if not self.sample_missing:
            if len(rec.responses) < 2:
                return BBWDError(f"field 'responses' has {len(rec.responses)} response(s); "
                                 "at least 2 are needed without a --target to sample more")
            return 0
        return max(need, 0)

    async def _group_samples(self, group: list[LogRecord]) -> list[SampleSet | BBWDError | None]:
        """Given responses topped up to K: one batched draw for a local target, concurrent API calls else."""
        needs = [None if rec.error else self._need(rec) for rec in group]
        sampler = self.detector.sampler
        params = self.detector.settings.sampling()
        todo = [n for n, need in enumerate(needs) if isinstance(need, int) and need > 0]
        drawn: dict[int, SampleSet | BBWDError] = {}
        t0 = time.perf_counter()
        if todo and hasattr(sampler, "sample_many"):
            try:
                sets = await asyncio.to_thread(sampler.sample_many, [(group[n].messages, needs[n]) for n in todo], params)
            except BBWDError as exc:  # one draw for the group: its failure is each record's error
                sets = [exc] * len(todo)
            drawn = dict(zip(todo, sets))
        elif todo:
            async def one(n: int) -> SampleSet | BBWDError:
                try:
                    return await sampler.asample(group[n].messages, replace(params, k=needs[n]))
                except BBWDError as exc:
                    return exc
            drawn = dict(zip(todo, await asyncio.gather(*(one(n) for n in todo))))
        seconds = time.perf_counter() - t0
        out: list[SampleSet | BBWDError | None] = []
        for n, (rec, need) in enumerate(zip(group, needs)):
            if need is None or isinstance(need, BBWDError):
                out.append(need)
                continue
            got = drawn.get(n, SampleSet([]))
            if isinstance(got, SampleSet):
                got.samples[:0] = [Sample(r) for r in rec.responses]
                got.seconds = seconds / max(len(todo), 1) if n in drawn else 0.0
            out.append(got)
        return out

    def _score_group(self, group: list[LogRecord], sets: list[SampleSet | BBWDError | None]) -> list[Result | BBWDError | None]:
        """Teacher pass and OT for a group's records that have samples."""
        ready = [n for n, s in enumerate(sets) if isinstance(s, SampleSet)]
        results: list[Result | BBWDError | None] = list(sets)  # errors and None pass through
        scored = self.detector.score_many([(group[n].messages, sets[n]) for n in ready])
        for n, res in zip(ready, scored):
            if isinstance(res, Result):
                res.timings = {"sample": sets[n].seconds, **res.timings}
            results[n] = res
        return results

    async def run(self, src: Path, dst: Path, save_matrix: bool = False,
                  progress: Callable[[int, int], None] | None = None) -> BatchSummary:
        """Score ``src`` into ``dst``, resuming after the lines ``dst`` already holds."""
        done = completed_lines(dst)
        start_group = done // self.group_size
        skip_in_group = done - start_group * self.group_size
        summary = BatchSummary(resumed_from=done)
        t0 = time.perf_counter()
        groups = _groups(read_records(src, skip=start_group * self.group_size), self.group_size)
        pending: deque[tuple[list[LogRecord], asyncio.Task]] = deque()
        # A local target shares the teacher's CPU (often its very model): sample it only between
        # teacher passes. An API target samples the next groups while this one is scored.
        local = self.sample_missing and hasattr(self.detector.sampler, "sample_many")
        ahead = 0 if local else self.prefetch_groups

        def refill() -> None:
            while len(pending) < 1 + ahead:
                group = next(groups, None)
                if group is None:
                    return
                pending.append((group, asyncio.ensure_future(self._group_samples(group))))

        with open(dst, "a", encoding="utf-8") as out:
            refill()
            while pending:
                group, task = pending.popleft()
                sets = await task
                if ahead:
                    refill()
                results = await asyncio.to_thread(self._score_group, group, sets)
                refill()
                for rec, res, sset in zip(group, results, sets):
                    if skip_in_group:
                        skip_in_group -= 1
                        continue
                    row = output_row(rec, res, save_matrix)
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                    os.fsync(out.fileno())
                    summary.records += 1
                    summary.errors += row["error"] is not None
                    if isinstance(sset, SampleSet):
                        summary.usage.add(sset.usage)
                    if progress:
                        progress(summary.records, summary.errors)
        summary.seconds = time.perf_counter() - t0
        return summary
