"""Batch scoring on a Ray cluster (``bbwd batch --engine ray``): one Ray Data pipeline over the local engine's stages.

    read    a task per group, on the driver's node: its lines, numbered, bad lines kept as error records
    sample  API targets only: an actor pool on the driver's node (where the API cache is); every
            request holds a slot of one budget for the whole cluster
    teacher an actor pool, the model loaded once per actor (local targets are sampled here)
    score   CPU tasks: exact OT, AvgWD, EigenWD
    write   the driver, in input order, through the resume driver of both engines (``batch.Runner.run``,
            ``runlog.Resume``)

A row of the dataset is one group of ``group_size`` consecutive records, formed by input position as
the local engine forms them, so a prompt's K responses and its group's teacher pass stay together:
nothing is shuffled, and the teacher pads and rounds each group as the local engine does. Each
stage calls the functions of :mod:`blackbox_wd.run.groups`, as :class:`~blackbox_wd.doors.batch.BatchRunner`
does. The teacher stage hands on only the projected 128-d states (with one unprojected last-token
state per response), which the score stage drops.

:class:`RayRunner` is a :class:`~blackbox_wd.doors.batch.Runner`: it takes the driver's detector, built by
``Detector.from_settings`` with :meth:`RayRunner.build_options` (the teacher's card, no weights, no
sampler, the device resolved for the cluster's teacher actors), which the score tasks use. The actors
get that detector and build their own with the same builder (:func:`actor_detector`: the weights, a
sampler); an API target's options (:func:`blackbox_wd.clients.api.api_options`: the key as a value,
record/replay, timeout, retries, the cache folder), read once on the driver, go to them as an
argument. Nothing goes through an actor's environment.

The API budget (``--concurrency``) is the whole cluster's: one async actor, :class:`RequestSlots`,
leases request slots to every sampling actor. The API cache is the driver's: the sampling actors
run on the driver's node and open the same diskcache folder (``--cache-dir``, else the driver's user
cache), which is safe across the processes of one machine, so a rerun on that machine, with either
engine, finds the samples already drawn.

Fault tolerance is Ray's own: a dead actor is restarted and its tasks retried (Ray Data's defaults
for actor pools, ``max_restarts=-1``, ``max_task_retries=-1``), a failed task is retried. Only the
driver writes, each row once and in order, appending, flushing and fsyncing as the local engine
does, so a killed driver is resumed by the same rules.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import pickle
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from transformers.utils import logging as hf_logging

from blackbox_wd.clients import target_kind
from blackbox_wd.clients.api import APIOptions, api_options
from blackbox_wd.clients.sampling import RecordedSamples
from blackbox_wd.doors.batch import Emit, Runner
from blackbox_wd.errors import BBWDError
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.groups import detector_samples, groups, score_group_in_rounds, score_records, teacher_group
from blackbox_wd.run.inputs import LogRecord, line_offsets, read_span
from blackbox_wd.settings import Settings
from blackbox_wd.teachers.card import TeacherCard

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


def actor_detector(
    driver: Detector, *, weights: bool, sample: bool, calibrated: bool, api: APIOptions | None
) -> Detector:
    """An actor's detector: the driver's wiring built again by the one builder (``Detector.from_settings``).

    Parameters
    ----------
    driver : Detector
        The driver's detector (settings, calibration, group size, LNE, recorded samples).
    weights : bool
        Load the teacher's weights (teacher actors); False: its card (sampling actors check prompts with it).
    sample : bool
        Build the target's sampler.
    calibrated : bool
        Keep the driver's calibration (an actor that scores: ``-k auto``); False: none.
    api : APIOptions or None
        An API target's options, read on the driver (the key as a value), with the cluster's request slots where
        the actor draws.

    Returns
    -------
    Detector
        Without weights, on the driver's device (resolved for the teacher actors); with them, on the actor's.
    """
    return Detector.from_settings(
        driver.settings,
        driver.calibration if calibrated else None,
        recorded=isinstance(driver.sampler, RecordedSamples),
        samples_from=driver.sampler.origin if isinstance(driver.sampler, RecordedSamples) else None,
        weights=weights,
        sample=sample,
        lne=driver.lne,
        group_size=driver.group_size,
        cuda=driver.resolved_device.startswith("cuda"),
        api=api,
        all_scores=driver.all_scores,
    )


class SampleStage:
    """Draws each group's missing responses from the API target: one detector (the teacher's card, the API sampler
    through the cluster's slots) and event loop per actor."""

    def __init__(self, driver: Detector, sample_missing: bool, api: APIOptions) -> None:
        self.detector = actor_detector(driver, weights=False, sample=True, calibrated=False, api=api)
        self.sample_missing = sample_missing
        self.loop = asyncio.new_event_loop()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each group with its sets (``groups.detector_samples``)."""
        out = unpack(batch)
        d = self.detector
        for g in out:
            g.sets = self.loop.run_until_complete(detector_samples(d, g.records, self.sample_missing))
        return pack(out)


class TeacherStage:
    """Teacher-forces each group: the model loads once per actor; a local target samples here first. With
    ``-k auto`` (``adaptive``) the actor keeps the driver's calibration and runs the group's rounds
    (``groups.score_group_in_rounds``), drawing from the target (an API one through the cluster's slots, ``api``)
    as it goes, and the group leaves scored."""

    def __init__(
        self, driver: Detector, sample_missing: bool, threads: int, adaptive: bool, api: APIOptions | None
    ) -> None:
        torch.set_num_threads(threads)  # float reductions round as in a local run with as many threads,
        threadpool_limits(threads)  # and the states' projection (numpy BLAS; Ray set OMP_NUM_THREADS to our CPUs)
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        # the teacher, and a local target's sampler (an API target is drawn by the sampling actors, or here with
        # -k auto)
        sample = adaptive or target_kind(driver.settings) != "api"
        self.detector = actor_detector(driver, weights=True, sample=sample, calibrated=adaptive, api=api)
        if not adaptive:  # the driver's calibration and settings as run say which it forces (``Detector.forced``)
            self.detector = self.detector.deciding_as(driver)
        self.adaptive = adaptive
        self.sample_missing = sample_missing

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each group with its token states (``groups.detector_samples`` when not sampled yet, then
        ``groups.teacher_group``); with ``-k auto``, scored round by round."""
        out = unpack(batch)
        d = self.detector
        for g in out:
            if self.adaptive:
                g.sets = asyncio.run(detector_samples(d, g.records, self.sample_missing, draw=False))
                sampler = d.sampler if self.sample_missing else None
                g.results = asyncio.run(score_group_in_rounds(d, g.records, g.sets, sampler))
                continue
            if g.sets is None:
                g.sets = asyncio.run(detector_samples(d, g.records, self.sample_missing))
            g.states = teacher_group(d, g.records, g.sets)
        return pack(out)


def score_stage(batch: dict[str, np.ndarray], detector: Detector) -> dict[str, np.ndarray]:
    """Each group with its results (``groups.score_records``, with the driver's wiring); the token states stop here."""
    out = unpack(batch)
    for g in out:
        if g.results is not None:  # -k auto: scored round by round in the teacher stage
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


def cluster_gpus(settings: Settings) -> float:
    """The GPUs of the connected cluster the teacher may use (none for ``device="cpu"``)."""
    return ray.cluster_resources().get("GPU", 0) if settings.device != "cpu" else 0


class RayRunner(Runner):
    """The Ray engine: scores a JSONL log on the connected cluster, with the output of
    :class:`~blackbox_wd.doors.batch.BatchRunner`.

    Parameters
    ----------
    detector : Detector
        The driver's wiring, built by ``Detector.from_settings(settings, ..., **RayRunner.build_options(settings))``:
        the teacher's card (no weights), no sampler, the device resolved for the cluster; the score tasks use it,
        the actors build theirs from it.
    sample_missing : bool
        Top records up to K from the target.
    teacher_workers : int or None
        Teacher actors; default one per GPU of the cluster, else one.
    teacher_gpus : float or None
        GPUs of each teacher actor; default 1 on a cluster with GPUs unless the device is cpu.
    teacher_cpus : float
        CPUs of each teacher actor.
    sample_workers : int
        Sampling actors, for an API target.
    score_cpus : float
        CPUs of each scoring task.
    threads : int or None
        Torch and BLAS threads of a teacher actor; default the driver's torch threads, so that its states round
        as a local run's on the same kind of machine.
    """

    def __init__(
        self,
        detector: Detector,
        sample_missing: bool,
        *,
        teacher_workers: int | None = None,
        teacher_gpus: float | None = None,
        teacher_cpus: float = 1.0,
        sample_workers: int = 2,
        score_cpus: float = 1.0,
        threads: int | None = None,
    ) -> None:
        if not isinstance(detector.teacher, TeacherCard):
            raise BBWDError(
                "RayRunner takes the driver's detector, the teacher's card (the actors load the weights): "
                "Detector.from_settings(settings, ..., **RayRunner.build_options(settings))"
            )
        super().__init__(detector, sample_missing)
        settings = detector.settings
        self.api_target = target_kind(settings) == "api"
        if self.api_target:
            # read here, where the environment is (a missing key fails here); the actors get it as a value
            self.api: APIOptions | None = api_options(settings)
        else:
            self.api = None
        _ = detector.reported  # resolved on the driver, before the wiring is shipped to the score tasks
        gpus = cluster_gpus(settings)
        self.teacher_gpus = (1 if gpus else 0) if teacher_gpus is None else teacher_gpus
        self.teacher_workers = teacher_workers or max(1, int(gpus))
        self.teacher_cpus, self.sample_workers, self.score_cpus = teacher_cpus, sample_workers, score_cpus
        self.threads = threads or torch.get_num_threads()

    @classmethod
    def build_options(cls, settings: Settings) -> dict[str, Any]:
        """``Runner.build_options`` for the driver's detector (connected to the cluster): no weights and no sampler
        (the actors load and draw), and whether the cluster's teacher actors have a GPU (``cuda``), which resolves
        ``device="auto"``: a bad teacher or layer fails here, not in an actor."""
        return {"weights": False, "sample": False, "cuda": bool(cluster_gpus(settings))}

    def dataset(self, src: Path, spans: list[Span], limiter: Any = None) -> ray.data.Dataset:
        """The pipeline over the groups of ``src`` at ``spans``; its rows are the scored groups, in order."""
        here = {"ray.io/node-id": ray.get_runtime_context().get_node_id()}  # the node that holds the log
        ds = ray.data.read_datasource(
            LogGroups(src, spans), override_num_blocks=len(spans), num_cpus=0, concurrency=2, label_selector=here
        )
        ds.context.execution_options.preserve_order = True  # rows leave in input order
        ds.context.enable_progress_bars = False
        ds.context.print_on_execution_start = False
        adaptive = self.detector.settings.stop is not None
        # the API options each drawing actor builds its sampler from, its requests through the cluster's slots
        api = self.api.sharing(functools.partial(ClusterSlot, limiter)) if self.api is not None else None
        if self.api_target and not adaptive:  # beside the log and the API cache (-k auto: the teacher actors draw)
            ds = ds.map_batches(
                SampleStage,
                batch_size=1,
                compute=ActorPoolStrategy(size=self.sample_workers),
                fn_constructor_args=(self.detector, self.sample_missing, api),
                num_cpus=0,
                label_selector=here,
            )
        ds = ds.map_batches(
            TeacherStage,
            batch_size=1,
            compute=ActorPoolStrategy(size=self.teacher_workers),
            fn_constructor_args=(self.detector, self.sample_missing, self.threads, adaptive, api if adaptive else None),
            num_cpus=self.teacher_cpus,
            num_gpus=self.teacher_gpus,
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
        concurrency = self.detector.settings.concurrency
        limiter = (
            ray.remote(RequestSlots)
            .options(max_concurrency=4 * self.sample_workers * concurrency + 16, num_cpus=0)
            .remote(concurrency, 2 * self.api.timeout + 30)
            if self.api is not None
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
