"""The teacher queue shared by concurrent requests: one teacher pass for all that arrived together.

A request puts its messages and K samples on the queue and awaits its Result. One worker takes the
first job waiting, then whatever else arrives within ``wait`` seconds (jobs queued while the
previous pass ran are taken at once), and runs ONE teacher pass over them on the model thread
(:meth:`~blackbox_wd.run.detector.Detector.teacher_pass`); the teacher's token budget bounds each forward of
the pass. Each request's exact OT and verdict (:meth:`~blackbox_wd.run.detector.Detector.outcome`) then run
on the OT threads while the next pass starts. Nothing heavy runs on the event loop.

A prompt the teacher cannot take gets its BBWDError (a value of the pass); if the shared pass
raises, each job runs alone so that the failure stays with the request that caused it.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from blackbox_wd.doors.serve.prometheus import Metrics
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages, SampleSet
from blackbox_wd.run.result import Result
from blackbox_wd.run.stages import PromptStates, scoring_failed

if TYPE_CHECKING:
    from blackbox_wd.run.detector import Detector

Prompt = tuple[Messages, SampleSet]  # a job's messages and samples, as a teacher pass takes them


@dataclass
class Job:
    """One request waiting for its scores."""

    messages: Messages
    samples: SampleSet
    result: asyncio.Future
    queued: float = field(default_factory=time.perf_counter)


class TeacherBatcher:
    """Queues requests' samples; runs one teacher pass per batch on ``model_pool`` and OT on ``ot_pool``."""

    def __init__(
        self, detector: Detector, model_pool: Executor, ot_pool: Executor, metrics: Metrics, wait: float = 0.005
    ) -> None:
        self.detector = detector
        self.model_pool = model_pool
        self.ot_pool = ot_pool
        self.metrics = metrics
        self.wait = wait
        self._queue: asyncio.Queue[Job] | None = None
        self._worker: asyncio.Task | None = None
        self._scoring: set[asyncio.Task] = set()

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._queue = asyncio.Queue()
        self._worker = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Finish the jobs queued and being scored, then stop the worker."""
        if self._queue is not None:
            await self._queue.join()
        if self._scoring:
            await asyncio.gather(*self._scoring, return_exceptions=True)
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    async def score(self, messages: Messages, samples: SampleSet) -> Result:
        """The Result of one request's samples, from a pass shared with the requests queued beside it."""
        if self._queue is None:
            raise RuntimeError("TeacherBatcher.start() was not called")
        job = Job(messages, samples, asyncio.get_running_loop().create_future())
        self._queue.put_nowait(job)
        self.metrics.queue_depth.inc()
        return await job.result

    async def _take(self) -> list[Job]:
        """The first job waiting and all queued with it; when it came alone, those that arrive within ``wait``."""
        assert self._queue is not None
        jobs = [await self._queue.get()]
        if self._queue.empty() and self.wait > 0:
            await asyncio.sleep(self.wait)
        while not self._queue.empty():
            jobs.append(self._queue.get_nowait())
        self.metrics.queue_depth.dec(len(jobs))
        return jobs

    async def _run(self) -> None:
        """Take batches and score them until cancelled; a batch that fails unexpectedly fails its jobs only."""
        assert self._queue is not None
        while True:
            jobs = await self._take()
            try:
                await self._batch([job for job in jobs if not job.result.done()])  # a client that left: skipped
            except Exception as exc:  # noqa: BLE001 - these requests fail; the worker goes on
                for job in jobs:
                    if not job.result.done():
                        job.result.set_exception(scoring_failed(exc))
            finally:
                for _ in jobs:
                    self._queue.task_done()

    async def _batch(self, jobs: list[Job]) -> None:
        """One teacher pass over the jobs on the model thread; then each job's OT, not waited for."""
        if not jobs:
            return
        now = time.perf_counter()
        for job in jobs:
            self.metrics.observe("queue", now - job.queued)
        self.metrics.teacher_batch.observe(len(jobs))
        passed = await asyncio.get_running_loop().run_in_executor(
            self.model_pool, self._pass, [(job.messages, job.samples) for job in jobs]
        )
        self.metrics.observe("teacher", time.perf_counter() - now)
        for job, states in zip(jobs, passed, strict=True):
            task = asyncio.create_task(self._finish(job, states))
            self._scoring.add(task)
            task.add_done_callback(self._scoring.discard)

    def _pass(self, items: list[Prompt]) -> list[PromptStates | Result | BBWDError]:
        """One teacher pass over the items whose verdict reads the teacher (on the model thread; ``Detector.forced``),
        alone each if the shared pass raises; the others judged from their texts."""
        return self.detector.forced(items, failed="teacher pass failed")

    async def _finish(self, job: Job, states: PromptStates | Result | BBWDError) -> None:
        """Exact OT, the scores and the verdict of one job on the OT threads (``Detector.outcome``); its Result or
        BBWDError to its future."""
        outcome = await asyncio.get_running_loop().run_in_executor(self.ot_pool, self.detector.outcome, states)
        if isinstance(outcome, Result) and "transport" in outcome.timings:  # not judged from the texts alone
            self.metrics.observe("transport", outcome.timings["transport"])
        if job.result.done():
            return
        if isinstance(outcome, BBWDError):
            job.result.set_exception(outcome)
        else:
            job.result.set_result(outcome)
