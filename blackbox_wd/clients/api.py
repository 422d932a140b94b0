"""Black-box sampling from an OpenAI-compatible chat API with the official async openai client.

K samples per prompt: one request with ``n`` = the samples not in the cache; when fewer choices
come back (DeepSeek and ``transformers serve`` ignore ``n``), the rest go out as concurrent single
requests with per-sample seeds (``seed + i``). All requests of all prompts share one semaphore of
``concurrency`` slots; failures worth retrying (429, 5xx, timeouts, dropped connections) are
retried with tenacity, everything else fails at once with the server's message.

Environment: ``BBWD_API_RECORD=<file>`` records every exchange to a scrubbed fixture,
``BBWD_API_REPLAY=<file>`` serves a fixture instead of the network; ``BBWD_API_TIMEOUT``,
``BBWD_API_ATTEMPTS`` and ``BBWD_API_BACKOFF_CAP`` tune timeouts and retries.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from blackbox_wd.clients.cache import CachedSample, SampleCache, sample_key
from blackbox_wd.clients.presets import Endpoint, is_api_target, resolve_endpoint
from blackbox_wd.clients.replay import Cassette, RecordingTransport, ReplayTransport
from blackbox_wd.clients.retry import RetryPolicy, fatal_error, is_retryable, make_wait, server_message
from blackbox_wd.errors import BBWDError
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams, Usage

if TYPE_CHECKING:
    from blackbox_wd.pipeline import Settings

__all__ = ["APISampler", "is_api_target", "make_api_sampler"]

TransportFactory = Callable[[], httpx.AsyncBaseTransport]
_N_FIELD = re.compile(r"""(?:\bn\b|'n'|"n")""")


class NRejected(BBWDError):
    """A 400 that names the ``n`` field: the server cannot give that many choices in one request."""


@dataclass(frozen=True)
class Choice:
    """One parsed choice of a chat completion, with its completion token count."""

    text: str
    token_logprobs: tuple[float, ...] | None
    finish_reason: str | None
    completion_tokens: int


def parse_choices(response: Any) -> tuple[list[Choice], int]:
    """Choices (by index) and prompt tokens of a ChatCompletion; per-choice tokens from logprobs when sent."""
    choices = sorted(response.choices or [], key=lambda c: c.index or 0)
    usage = response.usage
    total = int(getattr(usage, "completion_tokens", 0) or 0)
    out = []
    for c in choices:
        content = getattr(getattr(c, "logprobs", None), "content", None)
        lps = tuple(float(t.logprob) for t in content) if content else None
        n_tok = len(lps) if lps is not None else round(total / max(len(choices), 1))
        out.append(Choice(c.message.content or "", lps, c.finish_reason, n_tok))
    return out, int(getattr(usage, "prompt_tokens", 0) or 0)


class APISampler:
    """Draws K responses per prompt from an OpenAI-compatible endpoint, cached and retried."""

    def __init__(self, endpoint: Endpoint, *, concurrency: int = 16, cache: SampleCache | None = None,
                 retry: RetryPolicy = RetryPolicy(), timeout: float = 60.0,
                 transport: TransportFactory | None = None) -> None:
        if concurrency < 1:
            raise BBWDError(f"concurrency must be at least 1 (got {concurrency})")
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.cache = cache
        self.retry = retry
        self.timeout = timeout
        self.transport = transport
        self.honours_n = endpoint.honours_n
        self._bound: tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI, asyncio.Semaphore] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"APISampler({self.endpoint!r}, concurrency={self.concurrency})"

    # -- per-event-loop client and semaphore ------------------------------------------------
    def _client(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """The client and the shared semaphore of the running event loop (made on first use)."""
        loop = asyncio.get_running_loop()
        if self._bound is None or self._bound[0] is not loop:
            http = httpx.AsyncClient(
                transport=self.transport() if self.transport else None, timeout=httpx.Timeout(self.timeout),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency))
            client = openai.AsyncOpenAI(api_key=self.endpoint.api_key, base_url=self.endpoint.base_url,
                                        max_retries=0, timeout=self.timeout, http_client=http)
            self._bound = (loop, client, asyncio.Semaphore(self.concurrency))
        return self._bound[1], self._bound[2]

    def sample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt (sync: runs :meth:`asample` on the sampler's own event loop)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise BBWDError("APISampler.sample called inside an event loop: await asample instead")
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(self.asample(messages, params))

    def close(self) -> None:
        """Close the HTTP client, the private event loop and the cache."""
        if self._loop is not None and not self._loop.is_closed():
            if self._bound is not None and self._bound[0] is self._loop:
                self._loop.run_until_complete(self._bound[1].close())
            self._loop.close()
        self._bound = None
        if self.cache is not None:
            self.cache.close()

    # -- sampling ---------------------------------------------------------------------------
    async def asample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt: cache hits first, then one ``n`` request, then single requests."""
        usage = Usage()
        keys = [sample_key(self.endpoint.host, self.endpoint.model, messages, params, i) for i in range(params.k)]
        slots: list[Sample | None] = [None] * params.k
        if self.cache is not None:
            for i, key in enumerate(keys):
                hit = self.cache.get(key)
                if hit is not None:
                    slots[i] = Sample(hit.text, token_logprobs=hit.token_logprobs,
                                      finish_reason=hit.finish_reason, cached=True)
                    usage.cache_hits += 1
                    usage.cached_completion_tokens += hit.completion_tokens
        missing = [i for i, s in enumerate(slots) if s is None]

        def keep(index: int, choice: Choice) -> None:
            slots[index] = Sample(choice.text, token_logprobs=choice.token_logprobs,
                                  finish_reason=choice.finish_reason)
            usage.completion_tokens += choice.completion_tokens
            if self.cache is not None:
                self.cache.put(keys[index], CachedSample(choice.text, choice.token_logprobs,
                                                         choice.finish_reason, choice.completion_tokens))

        if len(missing) > 1 and self.honours_n is not False:
            try:
                choices = await self._create(messages, params, len(missing), missing[0], usage)
            except NRejected:  # e.g. llama.cpp caps n at its slot count: fan out instead
                self.honours_n, choices = False, []
            if self.honours_n is None:
                self.honours_n = len(choices) >= len(missing)
            for index, choice in zip(missing, choices):
                keep(index, choice)
            missing = missing[len(choices):]

        async def single(index: int) -> None:
            keep(index, (await self._create(messages, params, 1, index, usage))[0])  # cached on arrival

        results = await asyncio.gather(*(single(i) for i in missing), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return SampleSet([s for s in slots if s is not None], usage)

    def _body(self, messages: Messages, params: SamplingParams, n: int, index: int) -> dict[str, Any]:
        """Request arguments for ``n`` choices whose first is sample ``index``."""
        body: dict[str, Any] = dict(model=self.endpoint.model, messages=messages, temperature=params.temperature,
                                    top_p=params.top_p, max_tokens=params.max_tokens)
        if n > 1:
            body["n"] = n
        if params.seed is not None and self.endpoint.seed:
            body["seed"] = params.seed + index
        if self.endpoint.logprobs:
            body.update(logprobs=True, top_logprobs=1)
        return body

    async def _create(self, messages: Messages, params: SamplingParams, n: int, index: int,
                      usage: Usage) -> list[Choice]:
        """One chat completion with retries; non-retryable or exhausted failures become BBWDError."""
        client, slots = self._client()
        body = self._body(messages, params, n, index)

        def count_retry(_state: Any) -> None:
            usage.retries += 1

        retrying = AsyncRetrying(stop=stop_after_attempt(max(1, self.retry.attempts)), wait=make_wait(self.retry),
                                 retry=retry_if_exception(is_retryable), before_sleep=count_retry, reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    async with slots:
                        usage.requests += 1
                        response = await client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            error = fatal_error(exc, f"{self.endpoint.base_url} ({self.endpoint.model})")
            if n > 1 and isinstance(exc, openai.BadRequestError) and _N_FIELD.search(server_message(exc)):
                raise NRejected(str(error)) from None
            raise error from None
        choices, prompt_tokens = parse_choices(response)
        if not choices:
            raise BBWDError(f"{self.endpoint.base_url} returned no choices for {self.endpoint.model}")
        usage.prompt_tokens += prompt_tokens
        return choices[:n]


def _env_float(name: str, default: float) -> float:
    """A float from the environment, or the default."""
    raw = os.environ.get(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise BBWDError(f"{name} must be a number, got '{raw}'") from None


def make_api_sampler(settings: "Settings") -> APISampler:
    """The API sampler for the settings' target (cache, concurrency, record/replay from the environment)."""
    replay = os.environ.get("BBWD_API_REPLAY")
    record = os.environ.get("BBWD_API_RECORD")
    if replay and record:
        raise BBWDError("set BBWD_API_REPLAY or BBWD_API_RECORD, not both")
    endpoint = resolve_endpoint(settings.target, settings.base_url, settings.api_key_env, require_key=not replay)
    transport: TransportFactory | None = None
    if replay:
        cassette = Cassette.load(replay)
        shared = ReplayTransport(cassette, source=Path(replay).name)
        transport = lambda: shared  # noqa: E731 - one replay state across loops
    elif record:
        rec = Cassette(meta={"base_url_host": endpoint.host, "model": endpoint.model})
        transport = lambda: RecordingTransport(record, rec, secrets=(endpoint.api_key,))  # noqa: E731
    policy = RetryPolicy(attempts=int(_env_float("BBWD_API_ATTEMPTS", RetryPolicy.attempts)),
                         cap=_env_float("BBWD_API_BACKOFF_CAP", RetryPolicy.cap))
    cache = SampleCache(settings.cache_dir) if settings.cache else None
    return APISampler(endpoint, concurrency=settings.concurrency, cache=cache, retry=policy,
                      timeout=_env_float("BBWD_API_TIMEOUT", 60.0), transport=transport)
