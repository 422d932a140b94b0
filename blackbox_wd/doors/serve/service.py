"""One request's way through the pipeline: the target's answer beside the scoring, and the verdict.

For every chat request the target's answer (the API target's own response to the exact request,
or a local model's) is produced while, concurrently, the K scoring samples are drawn for the text of
its messages with the detector's settings (API: ``APISampler.asample``, with its cache, retries and
shared concurrency; local: ``LocalSampler`` on the model thread), queued for a teacher pass shared
with the other requests (:class:`~blackbox_wd.doors.serve.batcher.TeacherBatcher`) and scored by exact
OT. The answer comes back with a ``bbwd`` verdict; a stream sends it as one last chunk before
``[DONE]``. The heavy objects (teacher, samplers, calibration) are loaded once, in :meth:`Service.load`.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol

from blackbox_wd.calibration import Calibration
from blackbox_wd.calibration.choice import AUTO
from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.sampling import BatchSampler, draw_group
from blackbox_wd.doors.serve.batcher import TeacherBatcher
from blackbox_wd.doors.serve.local import LocalTarget
from blackbox_wd.doors.serve.prometheus import Metrics
from blackbox_wd.doors.serve.protocol import (
    ChatRequest,
    ServeError,
    answer_text,
    context_exceeded,
    delta_text,
    scoring_messages,
    sse,
    verdict,
)
from blackbox_wd.doors.serve.upstream import Upstream, sampling_failed, upstream_error
from blackbox_wd.errors import BBWDError, PromptTooLong, SamplingError
from blackbox_wd.records import Messages, Sample, SampleSet
from blackbox_wd.run.detector import Detector
from blackbox_wd.run.result import Result
from blackbox_wd.run.rounds import sampler_draw, score_in_rounds
from blackbox_wd.settings import Settings
from blackbox_wd.signals.decompose import list_claims


class Target(Protocol):
    """Who answers a chat request: the API target (forwarded unchanged) or a local model."""

    def admit(self, request: ChatRequest, prompt_tokens: int) -> None: ...

    async def complete(self, request: ChatRequest, raw: bytes, messages: Messages) -> dict[str, Any]: ...

    def stream(self, request: ChatRequest, raw: bytes, messages: Messages) -> AsyncGenerator[str, None]: ...


def claims_of(request: ChatRequest) -> tuple[str, ...] | None:
    """The request's ``bbwd.claims``, or None."""
    return None if request.bbwd is None or request.bbwd.claims is None else tuple(request.bbwd.claims)


def _forget(task: asyncio.Task) -> None:
    """Cancel a task whose outcome is no longer wanted (an exception it raised is not reported)."""
    task.cancel()
    task.add_done_callback(lambda t: t.cancelled() or t.exception())


def _chunk_head(data: str) -> dict[str, Any]:
    """id, created and model of a streamed chunk (empty when it is not a JSON object)."""
    try:
        chunk = json.loads(data)
    except ValueError:
        return {}
    return {k: chunk[k] for k in ("id", "created", "model") if k in chunk} if isinstance(chunk, dict) else {}


@dataclass
class Service:
    """What the server holds for its lifetime: the detector, the target, the teacher queue, metrics, threads."""

    detector: Detector
    target: Target
    batcher: TeacherBatcher
    metrics: Metrics
    model: str  # the one model name requests may ask for
    model_pool: ThreadPoolExecutor  # one thread: every use of a local model (teacher passes, local sampling)
    ot_pool: ThreadPoolExecutor

    @classmethod
    def load(
        cls,
        settings: Settings,
        batch_wait: float = 0.005,
        calibration: Calibration | str | None = AUTO,
        all_scores: bool = False,
    ) -> Service:
        """Build the run's wiring once (``Detector.from_settings``: teacher, sampler, calibration; with ``all_scores``
        every request forced through the teacher)."""
        return cls.for_detector(Detector.from_settings(settings, calibration, all_scores=all_scores), batch_wait)

    @classmethod
    def for_detector(cls, detector: Detector, batch_wait: float = 0.005) -> Service:
        """A service over a loaded detector: its sampler's target answers, its teacher scores."""
        metrics = Metrics.create()
        model_pool = ThreadPoolExecutor(1, thread_name_prefix="bbwd-model")
        ot_pool = ThreadPoolExecutor(min(4, os.cpu_count() or 1), thread_name_prefix="bbwd-ot")
        settings, sampler = detector.settings, detector.sampler
        if isinstance(sampler, APISampler):  # an API target answers itself
            target: Target = Upstream(sampler)
            model = sampler.endpoint.model
        elif isinstance(sampler, BatchSampler):
            model = settings.target or settings.teacher
            target = LocalTarget(sampler, settings.sampling(), model, model_pool)
        else:
            raise BBWDError("bbwd serve answers from an API target or a local model: the detector has neither")
        batcher = TeacherBatcher(detector, model_pool, ot_pool, metrics, batch_wait)
        return cls(detector, target, batcher, metrics, model, model_pool, ot_pool)

    @property
    def fingerprint(self) -> str:
        """The settings fingerprint every verdict carries."""
        return self.detector.fingerprint

    async def start(self) -> None:
        """Start the teacher queue (on the server's event loop)."""
        self.batcher.start()

    async def stop(self) -> None:
        """Finish queued scoring, then close the HTTP clients, the cache and the threads."""
        await self.batcher.stop()
        if isinstance(self.target, Upstream):
            await self.target.aclose()
        if isinstance(self.detector.sampler, APISampler):
            await self.detector.sampler.aclose()
        self.model_pool.shutdown()
        self.ot_pool.shutdown()

    async def admit(self, request: ChatRequest, messages: Messages) -> None:
        """Refuse, before any sampling or answer, a request the teacher cannot take or whose work is over the bound.

        The prompt is read off the event loop and off the model thread (a long one is refused by its
        byte length alone); ServeError 400 when the teacher's template rejects it, when it fills the
        teacher's context or leaves no room for a scoring sample of ``--max-tokens``, or when the
        target refuses its sampling fields (``Target.admit``).
        """
        teacher, max_tokens = self.detector.teacher, self.detector.settings.max_tokens
        try:
            prompt_tokens = len(await asyncio.to_thread(teacher.prompt_ids, messages))
        except PromptTooLong as exc:
            raise context_exceeded(str(exc)) from None
        except BBWDError as exc:
            raise ServeError(
                400, f"messages: {exc}", kind="invalid_request", param="messages", code="invalid_value"
            ) from None
        if teacher.max_length and prompt_tokens + max_tokens > teacher.max_length:
            raise context_exceeded(
                f"the prompt has {prompt_tokens} tokens: with a scoring sample of up to "
                f"{max_tokens} tokens (--max-tokens) it is over the teacher's context of "
                f"{teacher.max_length}"
            )
        self.target.admit(request, prompt_tokens)

    async def samples(self, messages: Messages) -> SampleSet:
        """The K scoring samples for the messages, with the detector's settings (``-k auto``: its first round's)."""
        settings = self.detector.settings
        params = replace(settings.sampling(), k=settings.rounds[0])
        drawn = (
            await draw_group(self.detector.drawing_sampler, [(messages, params.k)], params, executor=self.model_pool)
        )[0]
        if isinstance(drawn.samples, BBWDError):
            raise drawn.samples
        return drawn.samples

    async def score(self, messages: Messages, samples: SampleSet) -> Result:
        """The Result of the samples, through the shared teacher batcher; with ``-k auto``, round by round
        (``rounds.score_in_rounds``) until its verdict is settled, drawing more as it goes."""
        if self.detector.settings.stop is None:
            return await self.batcher.score(messages, samples)

        async def batched(
            items: list[tuple[Messages, SampleSet]], _entails_each: list[Any]
        ) -> list[Result | BBWDError]:
            out: list[Result | BBWDError] = []
            for m, s in items:
                try:
                    out.append(await self.batcher.score(m, s))
                except BBWDError as exc:
                    out.append(exc)
            return out

        done = await score_in_rounds(
            self.detector,
            [(messages, samples)],
            sampler_draw(self.detector.drawing_sampler, self.model_pool),  # later rounds, drawn as the first is
            drawn=[len(samples.samples)],
            score=batched,
        )
        if isinstance(done[0], BBWDError):
            raise done[0]
        return done[0]

    async def bbwd_object(
        self, messages: Messages, answer: Awaitable[str | None] | None = None, claims: tuple[str, ...] | None = None
    ) -> dict[str, Any]:
        """The ``bbwd`` object of the messages: sample, queue for the shared teacher pass, OT; with ``answer``
        (the forwarded answer's text, once it is complete) its AnswerWD too, and with ``claims`` (the request's
        ``bbwd.claims``) each claim's score, p and flag."""
        t0 = time.perf_counter()
        try:
            samples = await self.samples(messages)
        except SamplingError as exc:
            raise sampling_failed(exc) from None
        except BBWDError as exc:
            raise _scoring_failed(exc) from None
        self.metrics.observe("sample", time.perf_counter() - t0)
        text = await answer if answer is not None else None
        samples.answer = Sample(text) if text is not None else None
        if claims is None and text is not None and self.detector.settings.claims is not None:
            claims = await self.listed_claims(text, samples)
        samples.claims = claims
        try:
            result = await self.score(messages, samples)
        except SamplingError as exc:  # a later round's draw (-k auto)
            raise sampling_failed(exc) from None
        except BBWDError as exc:
            raise _scoring_failed(exc) from None
        return verdict(result)

    async def listed_claims(self, answer: str, samples: SampleSet) -> tuple[str, ...]:
        """The answer's claims as the target lists them (``serve --claims target``), the request's cost added to the
        samples'; a failed request is a 502, as a failed draw is."""
        draw = sampler_draw(self.detector.drawing_sampler, self.model_pool)
        listed = (await list_claims(draw, [answer], self.detector.settings.seed))[0]
        if isinstance(listed, BBWDError):
            raise upstream_error(f"listing the answer's claims: {listed}", getattr(listed, "status", None))
        samples.usage.add(listed[1])
        return listed[0]

    async def complete(self, request: ChatRequest, raw: bytes) -> dict[str, Any]:
        """The target's response body with the ``bbwd`` object added."""
        t0 = time.perf_counter()
        messages = scoring_messages(request)
        await self.admit(request, messages)
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        scoring = asyncio.create_task(self.bbwd_object(messages, answer, claims_of(request)))
        try:
            body = await self.target.complete(request, raw, messages)
            self.metrics.observe("answer", time.perf_counter() - t0)
            answer.set_result(answer_text(body))
            body["bbwd"] = await scoring
        finally:
            _forget(scoring)
        self.metrics.observe("request", time.perf_counter() - t0)
        return body

    async def stream(self, request: ChatRequest, raw: bytes) -> AsyncIterator[bytes]:
        """The target's event stream unchanged, then the verdict chunk and ``[DONE]``.

        The stream's first line is awaited here, so a failure before the stream starts is raised
        (an HTTP error status); a failure after it ends the stream with an ``{"error": ...}`` event.
        """
        t0 = time.perf_counter()
        messages = scoring_messages(request)
        await self.admit(request, messages)
        answer: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        scoring = asyncio.create_task(self.bbwd_object(messages, answer, claims_of(request)))
        lines = self.target.stream(request, raw, messages)
        try:
            first = await anext(lines, None)
        except BaseException:
            _forget(scoring)
            await lines.aclose()
            raise
        return self._splice(first, lines, scoring, answer, t0)

    async def _splice(
        self,
        first: str | None,
        lines: AsyncGenerator[str, None],
        scoring: asyncio.Task,
        answer: asyncio.Future[str | None],
        t0: float,
    ) -> AsyncIterator[bytes]:
        """Pass the target's lines on up to its ``[DONE]`` (gathering the answer's text for AnswerWD); then the
        verdict chunk and our own ``[DONE]``."""
        head: dict[str, Any] = {}
        parts: list[str] = []
        try:
            line = first
            while line is not None:
                if line.startswith("data:"):
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    head = head or _chunk_head(data)
                    parts.append(delta_text(data))
                yield (line + "\n").encode()
                line = await anext(lines, None)
            self.metrics.observe("answer", time.perf_counter() - t0)
            text = "".join(parts)
            answer.set_result(text if text.strip() else None)
            yield sse({**head, "object": "chat.completion.chunk", "choices": [], "bbwd": await scoring})
            yield b"data: [DONE]\n\n"
            self.metrics.observe("request", time.perf_counter() - t0)
        except ServeError as err:
            self.metrics.errors.labels(err.kind).inc()
            yield sse(err.body())
        finally:
            _forget(scoring)
            await lines.aclose()


def _scoring_failed(exc: BBWDError) -> ServeError:
    """The 500 for a request the teacher (or the local sampler) could not score: the pipeline's own text of the
    failure (``stages.scoring_failed`` already says which stage failed)."""
    return ServeError(500, str(exc), kind="teacher", type="server_error", code="teacher_error")
