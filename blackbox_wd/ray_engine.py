"""Batch scoring on a Ray cluster (``bbwd batch --engine ray``): one Ray Data pipeline over the local engine's stages.

    read    a task per group, on the driver's node: its lines, numbered, bad lines kept as error records
    sample  API targets only: an actor pool on the driver's node (where the API cache is); every
            request holds a slot of one budget for the whole cluster
    teacher an actor pool, the model loaded once per actor (local targets are sampled here)
    score   CPU tasks: exact OT, AvgWD, EigenWD
    write   the driver, in input order, through :func:`blackbox_wd.batch.resume_run`

A row of the dataset is one group of ``group_size`` consecutive records, formed by input position as
the local engine forms them, so a prompt's K responses and its group's teacher pass stay together:
nothing is shuffled, and the teacher pads and rounds each group as the local engine does. Each
stage calls the functions of :mod:`blackbox_wd.groups`, as :class:`~blackbox_wd.batch.BatchRunner`
does. The teacher stage hands on only the projected 128-d states (with one unprojected last-token
state per response), which the score stage drops.

The API budget (``--concurrency``) is the whole cluster's: one async actor, :class:`RequestSlots`,
leases request slots to every sampling actor. The API cache is the driver's: the sampling actors
run on the driver's node and open the same diskcache folder (``--cache-dir``, else the user
cache), which is safe across the processes of one machine, so a rerun on that machine, with either
engine, finds the samples already drawn.

Fault tolerance is Ray's own: a dead actor is restarted and its tasks retried (Ray Data's defaults
for actor pools, ``max_restarts=-1``, ``max_task_retries=-1``), a failed task is retried. Only the
driver writes, each row once and in order, appending, flushing and fsyncing as the local engine
does, so a killed driver is resumed by the same rules.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from blackbox_wd.batch import BatchSummary, Emit, resume_run
from blackbox_wd.calibration import Calibration
from blackbox_wd.clients import target_kind
from blackbox_wd.clients.api import api_endpoint, api_timeout, make_api_sampler
from blackbox_wd.errors import BBWDError
from blackbox_wd.groups import groups, sample_group, score_group_in_stages, score_records, teacher_group
from blackbox_wd.logs import LogRecord, line_offsets, read_span
from blackbox_wd.pipeline import AUTO, Detector
from blackbox_wd.settings import GROUP_SIZE, Settings
from blackbox_wd.teachers.card import load_card

try:
    import ray
    from ray.data import ActorPoolStrategy
    from ray.data.block import Block, BlockAccessor, BlockMetadata
    from ray.data.datasource import Datasource, ReadTask
except ImportError as exc:  # the extra is not installed
    raise BBWDError("--engine ray needs Ray: pip install 'blackbox-wd[ray]' (ray[data]==2.60.0)") from exc


@dataclass
class Group:
    """One group of consecutive records and what the stages have made of it so far (one slot per record)."""

    records: list[LogRecord]
    sets: list[Any] | None = None  # SampleSet | BBWDError | None, after sampling
    states: list[Any] | None = None  # PromptStates | BBWDError | None, after the teacher
    results: list[Any] | None = None  # Result | BBWDError | None, after scoring


def pack(items: list[Group]) -> dict[str, np.ndarray]:
    """A dataset batch of groups: one pickled group a row (records, samples and states are Python objects)."""
    column = np.empty(len(items), dtype=object)
    column[:] = [pickle.dumps(g, protocol=5) for g in items]
    return {"group": column}


def unpack(batch: dict[str, np.ndarray]) -> list[Group]:
    """The groups of a dataset batch."""
    return [pickle.loads(raw) for raw in batch["group"]]


Span = tuple[int, tuple[int, ...]]  # a group in the log: the byte offset of its first line, its line numbers


def group_spans(src: Path, skip: int, lines: frozenset[int] | None, size: int) -> list[Span]:
    """Each group of the lines after ``skip`` (only ``lines`` when given): where it starts and its lines.

    Consecutive groups of ``size`` of the chosen lines, as ``groups.select_records`` and
    ``groups.groups`` make them for the local engine; found by scanning line ends, without parsing.
    """
    chosen = ((n, at) for n, at in line_offsets(src, skip) if lines is None or n in lines)
    return [(g[0][1], tuple(n for n, _ in g)) for g in groups(chosen, size)]


class LogGroups(Datasource):
    """The groups of a JSONL log, one read task each, so that each is a bundle any actor can take."""

    def __init__(self, src: Path, spans: list[Span]) -> None:
        super().__init__()
        self.src, self.spans = src, spans

    def estimate_inmemory_data_size(self) -> int | None:
        """Unknown before reading."""
        return None

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None
    ) -> list[ReadTask]:
        """One task per group: its lines read, numbered and parsed (a bad line becomes an error record)."""
        src = self.src

        def read(offset: int, numbers: tuple[int, ...]) -> Iterator[Block]:
            yield BlockAccessor.batch_to_block(pack([Group(read_span(src, offset, numbers))]))

        meta = BlockMetadata(num_rows=1, size_bytes=None, input_files=(str(src),), exec_stats=None)
        return [ReadTask(functools.partial(read, *span), meta) for span in self.spans]


class RequestSlots:
    """The cluster's API budget: at most ``slots`` requests in flight across every sampling actor (an async actor).

    A slot is leased for at most ``lease`` seconds (longer than a request may take), so that the
    slots of a sampling actor that died mid-request come back.
    """

    def __init__(self, slots: int, lease: float) -> None:
        self.slots, self.lease = slots, lease
        self.held: dict[int, float] = {}  # lease id -> expiry (monotonic seconds)
        self.issued = 0
        self.changed: asyncio.Condition | None = None

    async def acquire(self) -> int:
        """Wait for a free slot; its lease id."""
        self.changed = self.changed or asyncio.Condition()
        async with self.changed:
            while True:
                now = time.monotonic()
                self.held = {n: t for n, t in self.held.items() if t > now}
                if len(self.held) < self.slots:
                    self.issued += 1
                    self.held[self.issued] = now + self.lease
                    return self.issued
                with suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), min(self.held.values()) - now)

    async def release(self, lease: int) -> None:
        """Give a slot back."""
        self.changed = self.changed or asyncio.Condition()
        async with self.changed:
            self.held.pop(lease, None)
            self.changed.notify()


class ClusterSlot:
    """One slot of the cluster's API budget, held for an ``async with``."""

    def __init__(self, limiter: Any) -> None:
        self.limiter = limiter
        self.lease: int | None = None

    async def __aenter__(self) -> None:
        self.lease = await self.limiter.acquire.remote()

    async def __aexit__(self, *exc: object) -> None:
        await self.limiter.release.remote(self.lease)


class SampleStage:
    """Draws each group's missing responses from the API target: one sampler and event loop per actor."""

    def __init__(self, settings: Settings, sample_missing: bool, limiter: Any, key: dict[str, str]) -> None:
        os.environ.update(key)  # the API key's variable, from the driver (this process is the actor's own)
        self.card = load_card(settings.teacher, settings.layer)  # checks prompts without the weights
        self.sampler = make_api_sampler(settings, shared_slot=lambda: ClusterSlot(limiter))
        self.params = settings.sampling()
        self.sample_missing = sample_missing
        self.loop = asyncio.new_event_loop()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each group with its sets (``groups.sample_group``)."""
        out = unpack(batch)
        for g in out:
            g.sets = self.loop.run_until_complete(
                sample_group(g.records, self.card, self.sampler, self.params, self.sample_missing)
            )
        return pack(out)


class TeacherStage:
    """Teacher-forces each group: the model loads once per actor; a local target samples here first. With
    ``-k auto`` (``staged``: the driver's calibration, the API slots and key) the actor runs the group's stages
    (``groups.score_group_in_stages``), drawing from the target (an API one through the cluster's slots) as it
    goes, and the group leaves scored."""

    def __init__(
        self, settings: Settings, sample_missing: bool, threads: int, staged: tuple[Any, Any, dict] | None = None
    ) -> None:
        import torch
        from threadpoolctl import threadpool_limits
        from transformers.utils import logging as hf_logging

        torch.set_num_threads(threads)  # float reductions round as in a local run with as many threads,
        threadpool_limits(threads)  # and the states' projection (numpy BLAS; Ray set OMP_NUM_THREADS to our CPUs)
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        # the teacher, and a local target's sampler (an API target is drawn by the sampling actors)
        api = target_kind(settings) == "api"
        self.detector = Detector.from_settings(settings, None, sample=not api)
        if staged is not None:
            calibration, limiter, key = staged
            os.environ.update(key)
            sampler = make_api_sampler(settings, shared_slot=lambda: ClusterSlot(limiter)) if api else None
            self.detector = dataclasses.replace(
                self.detector, sampler=sampler or self.detector.sampler
            ).with_calibration(calibration)
        self.staged = staged is not None
        self.params = settings.sampling()
        self.sample_missing = sample_missing

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each group with its token states (``groups.sample_group`` when not sampled yet, ``groups.teacher_group``);
        with ``-k auto``, scored stage by stage."""
        out = unpack(batch)
        for g in out:
            if self.staged:
                d = self.detector
                g.sets = asyncio.run(
                    sample_group(g.records, d.teacher, d.sampler, self.params, self.sample_missing, False)
                )
                sampler = d.sampler if self.sample_missing else None
                g.results = asyncio.run(score_group_in_stages(d, g.records, g.sets, sampler))
                continue
            if g.sets is None:
                g.sets = asyncio.run(
                    sample_group(
                        g.records, self.detector.teacher, self.detector.sampler, self.params, self.sample_missing
                    )
                )
            g.states = teacher_group(self.detector, g.records, g.sets)
        return pack(out)


def score_stage(batch: dict[str, np.ndarray], detector: Detector) -> dict[str, np.ndarray]:
    """Each group with its results (``groups.score_records``, with the driver's wiring); the token states stop here."""
    out = unpack(batch)
    for g in out:
        if g.results is not None:  # -k auto: scored stage by stage in the teacher stage
            continue
        assert g.states is not None and g.sets is not None, "the sample and teacher stages ran before scoring"
        g.results = score_records(detector, g.states, g.sets)
        g.states = None
    return pack(out)


@contextmanager
def ray_cluster(address: str | None = None) -> Iterator[None]:
    """Connected to Ray for the block: the running connection, else ``address`` (None: $RAY_ADDRESS or a new local
    cluster)."""
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # bbwd reports what it did
    if ray.is_initialized():
        yield
        return
    ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


class RayRunner:
    """The Ray engine: scores a JSONL log on the connected cluster, with the output of
    :class:`~blackbox_wd.batch.BatchRunner`.

    ``teacher_workers`` teacher actors (default: one per GPU of the cluster, else one), each with
    ``teacher_gpus`` GPUs (default: 1 on a cluster with GPUs unless the device is cpu) and
    ``teacher_cpus`` CPUs; ``sample_workers`` sampling actors for an API target; scoring tasks of
    ``score_cpus`` CPUs. A teacher actor runs torch and BLAS on ``threads`` threads (default: the
    driver's torch threads), so that its states round as a local run's on the same kind of machine.
    """

    def __init__(
        self,
        settings: Settings,
        sample_missing: bool,
        group_size: int = GROUP_SIZE,
        *,
        teacher_workers: int | None = None,
        teacher_gpus: float | None = None,
        teacher_cpus: float = 1.0,
        sample_workers: int = 2,
        score_cpus: float = 1.0,
        threads: int | None = None,
        calibration: Calibration | str | None = AUTO,
    ) -> None:
        import torch

        self.settings = settings
        self.sample_missing = sample_missing
        self.api = target_kind(settings) == "api"
        endpoint = api_endpoint(settings) if self.api else None  # a missing key fails here
        key_env = endpoint.key_env if endpoint is not None else None  # the sampling actors get the key from here
        self.key = {key_env: os.environ[key_env]} if key_env and key_env in os.environ else {}
        gpus = ray.cluster_resources().get("GPU", 0) if settings.device != "cpu" else 0
        self.teacher_gpus = (1 if gpus else 0) if teacher_gpus is None else teacher_gpus
        # the driver's wiring (the teacher's card: a bad teacher or layer fails here, not in an actor), the device
        # resolved for the cluster's teacher actors; the calibration is checked here, before the cluster works
        self.detector = Detector.from_settings(
            settings, calibration, weights=False, sample=False, group_size=group_size, cuda=bool(self.teacher_gpus)
        )
        _ = self.detector.reported  # resolved on the driver, where the API key is, before the wiring is shipped
        self.teacher_workers = teacher_workers or max(1, int(gpus))
        self.teacher_cpus, self.sample_workers, self.score_cpus = teacher_cpus, sample_workers, score_cpus
        self.threads = threads or torch.get_num_threads()

    @property
    def k(self) -> int:
        """Responses scored per record."""
        return self.settings.k

    @property
    def group_size(self) -> int:
        """Records per shared teacher pass (the wiring's)."""
        return self.detector.group_size

    def dataset(self, src: Path, spans: list[Span], limiter: Any = None) -> ray.data.Dataset:
        """The pipeline over the groups of ``src`` at ``spans``; its rows are the scored groups, in order."""
        env = {"env_vars": {k: v for k, v in os.environ.items() if k.startswith("BBWD_")}}
        here = {"ray.io/node-id": ray.get_runtime_context().get_node_id()}  # the node that holds the log
        ds = ray.data.read_datasource(
            LogGroups(src, spans), override_num_blocks=len(spans), num_cpus=0, concurrency=2, label_selector=here
        )
        ds.context.execution_options.preserve_order = True  # rows leave in input order
        ds.context.enable_progress_bars = False
        ds.context.print_on_execution_start = False
        staged = (self.detector.calibration, limiter, self.key) if self.settings.stop is not None else None
        if self.api and staged is None:  # beside the log and the API cache (-k auto: the teacher actors draw)
            ds = ds.map_batches(
                SampleStage,
                batch_size=1,
                compute=ActorPoolStrategy(size=self.sample_workers),
                fn_constructor_args=(self.settings, self.sample_missing, limiter, self.key),
                num_cpus=0,
                label_selector=here,
                runtime_env=env,
            )
        ds = ds.map_batches(
            TeacherStage,
            batch_size=1,
            compute=ActorPoolStrategy(size=self.teacher_workers),
            fn_constructor_args=(self.settings, self.sample_missing, self.threads, staged),
            num_cpus=self.teacher_cpus,
            num_gpus=self.teacher_gpus,
            runtime_env=env,
        )
        return ds.map_batches(
            score_stage, batch_size=1, num_cpus=self.score_cpus, fn_kwargs={"detector": self.detector}
        )

    async def engine(self, src: Path, skip: int, lines: frozenset[int] | None, emit: Emit) -> None:
        """Score the records of ``src`` after ``skip`` lines (only ``lines`` when given) on the cluster, emitting in
        input order."""
        spans = group_spans(src, skip, lines, self.group_size)
        if not spans:
            return
        concurrency = self.settings.concurrency
        limiter = (
            ray.remote(RequestSlots)
            .options(max_concurrency=4 * self.sample_workers * concurrency + 16, num_cpus=0)
            .remote(concurrency, 2 * api_timeout() + 30)
            if self.api
            else None
        )
        try:
            for row in self.dataset(src, spans, limiter).iter_rows():
                g = pickle.loads(row["group"])
                for rec, res, sset in zip(g.records, g.results, g.sets, strict=True):
                    emit(rec, res, sset)
        finally:
            if limiter is not None:
                # ray types remote()'s result as "ActorHandle or the class" (its ActorProxy): it is the handle
                ray.kill(cast("ray.actor.ActorHandle[RequestSlots]", limiter))

    async def run(
        self, src: Path, dst: Path, save_matrix: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> BatchSummary:
        """Score ``src`` into ``dst``: retry the transient errors already there, then append what is missing."""
        cal = self.detector.calibration.id if self.detector.calibration is not None else None
        return await resume_run(
            self.engine, src, dst, self.detector.fingerprint, self.k, self.group_size, save_matrix, progress, cal
        )
