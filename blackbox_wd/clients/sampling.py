"""Declared sampler interfaces, and the one place that chooses how a group of prompts is drawn.

A sampler says what it is by the class it derives from, as an httpx transport does
(``BaseTransport`` / ``AsyncBaseTransport``); nothing probes it for methods:

=====================  ==========================================  ===============================
interface              what it adds to ``sample``                  drawn by :func:`draw_group`
=====================  ==========================================  ===============================
:class:`Sampler`       nothing: one prompt, sync (any object)      one thread per prompt
:class:`AsyncSampler`  ``asample``: one prompt on the caller's      concurrently on the event loop
                       event loop (an API target)
:class:`BatchSampler`  ``sample_many``: many prompts in one call    one call for the group
                       on a local model
=====================  ==========================================  ===============================
"""

from __future__ import annotations

import asyncio
import enum
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams

# Draws more samples: for each (messages, n) the n samples from ``params.start`` on; a BBWDError for a prompt
# whose draw failed (``rounds.sampler_draw`` gives a sampler's).
Draw = Callable[[list[tuple[Messages, int]], SamplingParams], Awaitable[list[SampleSet | BBWDError]]]


class Sampler(Protocol):
    """Anything that draws K responses for a prompt (sync, one prompt at a time)."""

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet: ...


class AsyncSampler(ABC):
    """A sampler awaited on the caller's event loop: an API target at ``endpoint``."""

    endpoint: Any  # its ``clients.presets.Endpoint``: the host goes into the reported settings

    @abstractmethod
    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt, outside any event loop."""

    @abstractmethod
    async def asample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt; a failure is a BBWDError."""


class BatchSampler(ABC):
    """A sampler that draws many prompts in one call on the local model of ``teacher``."""

    teacher: Any  # the HFTeacher whose model it samples
    name: str  # what draws: "llama.cpp" or "transformers" (a reported setting: it changes the samples)

    @abstractmethod
    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt."""

    @abstractmethod
    def sample_many(
        self, requests: Sequence[tuple[Messages, int]], params: SamplingParams, answers: bool = False
    ) -> list[SampleSet]:
        """``k`` samples for each (messages, k); with ``answers``, each prompt's greedy answer too."""


@dataclass(frozen=True)
class RecordedSamples:
    """The sampler of data that carries its samples (``bbwd batch`` without ``--target``, ``bbwd eval`` on
    recorded samples, ``Detector.from_settings(..., recorded=True)``): nothing is drawn.

    Its runs report ``target`` "recorded", no sampler and no sampling settings, and ``samples_from``: ``origin``,
    who drew the samples as the user says it (e.g. "gpt-4o-mini at T=1.0"; None: not said). Drawing from it raises.
    """

    origin: str | None = None

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """Never called: recorded samples are scored as they are."""
        raise BBWDError("recorded samples are scored as they are: nothing is drawn")

    @staticmethod
    def first_k(responses: Sequence[str] | None, k: int) -> list[str]:
        """The first ``k`` of a prompt's recorded responses (every prompt of a run is scored on the same K);
        BBWDError when there are fewer."""
        n = 0 if responses is None else len(responses)
        if responses is None or n < k:
            raise BBWDError(
                f"{n} recorded response(s) given; a recorded run scores every prompt on K={k} of its own "
                "(nothing is drawn): give at least K, or set k"
            )
        return list(responses[:k])


class Mode(enum.Enum):
    """How a sampler draws a group: its declared interface."""

    SYNC = "sync"
    ASYNC = "async"
    BATCH = "batch"


def draw_mode(sampler: object) -> Mode:
    """The interface the sampler's class declares (a plain ``sample`` is SYNC)."""
    if isinstance(sampler, BatchSampler):
        return Mode.BATCH
    if isinstance(sampler, AsyncSampler):
        return Mode.ASYNC
    return Mode.SYNC


def shares_model(sampler: object, teacher: object) -> bool:
    """True when the sampler draws from the teacher's own model, so that its token ids are reused."""
    return isinstance(sampler, BatchSampler) and sampler.teacher is teacher


def sampler_name(sampler: object) -> str | None:
    """What draws a local target ("llama.cpp" or "transformers"); None for an API target or recorded samples."""
    return sampler.name if isinstance(sampler, BatchSampler) else None


def endpoint_host(sampler: object) -> str | None:
    """The host of an API sampler's endpoint (part of the reported settings), else None."""
    return sampler.endpoint.host if isinstance(sampler, AsyncSampler) else None


@dataclass
class Drawn:
    """One prompt's draw: its samples (or why there are none), its greedy answer when asked, the seconds taken."""

    samples: SampleSet | BBWDError
    answer: Sample | BBWDError | None = None
    timings: dict[str, float] = field(default_factory=dict)


async def draw_group(
    sampler: Sampler | AsyncSampler | BatchSampler,
    requests: Sequence[tuple[Messages, int]],
    params: SamplingParams,
    greedy: SamplingParams | None = None,
    executor: Executor | None = None,
) -> list[Drawn]:
    """Each request's ``k`` samples (and with ``greedy``, one more answer drawn with those parameters).

    A :class:`BatchSampler` draws the whole group in one call on ``executor`` (the answers as extra
    rows of it) and each prompt gets an equal share of its seconds; any other sampler draws each
    request on its own, concurrently. A BBWDError is the failed prompt's value (for a batch call,
    every prompt's); each SampleSet's ``seconds`` is its sampling time.
    """
    loop = asyncio.get_running_loop()
    if isinstance(sampler, BatchSampler):  # draw_mode's Mode.BATCH
        t0 = time.perf_counter()
        try:
            sets = await loop.run_in_executor(
                executor, lambda: sampler.sample_many(list(requests), params, answers=greedy is not None)
            )
        except BBWDError as exc:  # one draw for the group: its failure is each prompt's error
            return [Drawn(exc, exc if greedy is not None else None) for _ in requests]
        share = (time.perf_counter() - t0) / max(len(requests), 1)
        for s in sets:
            s.seconds = share
        return [Drawn(s, s.answer, {"sample": share}) for s in sets]

    async def timed(messages: Messages, p: SamplingParams) -> tuple[SampleSet | BBWDError, float]:
        t = time.perf_counter()
        try:
            got = await (
                sampler.asample(messages, p)
                if isinstance(sampler, AsyncSampler)  # draw_mode's Mode.ASYNC
                else loop.run_in_executor(executor, sampler.sample, messages, p)
            )
        except BBWDError as exc:
            return exc, time.perf_counter() - t
        got.seconds = time.perf_counter() - t
        return got, got.seconds

    async def one(messages: Messages, k: int) -> Drawn:
        calls = [timed(messages, replace(params, k=k))] + ([timed(messages, greedy)] if greedy is not None else [])
        (samples, seconds), *rest = await asyncio.gather(*calls)
        if not rest:
            return Drawn(samples, None, {"sample": seconds})
        answer, answer_seconds = rest[0]
        return Drawn(
            samples,
            answer.samples[0] if isinstance(answer, SampleSet) else answer,
            {"sample": seconds, "greedy": answer_seconds},
        )

    return list(await asyncio.gather(*(one(messages, k) for messages, k in requests)))
