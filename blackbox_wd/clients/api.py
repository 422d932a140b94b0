"""Black-box sampling from an OpenAI-compatible chat API with the official async openai client.

K samples per prompt: one request with ``n`` = the samples not in the cache; when fewer choices
come back (DeepSeek and ``transformers serve`` ignore ``n``) or some come back empty, the rest go
out as concurrent single requests with per-sample seeds (``seed + i``). All requests of all prompts
share one semaphore of ``concurrency`` slots; a sampler that is one of several (the Ray engine's
sampling actors) also holds a ``shared_slot`` of the budget they share for each request.

Retried with tenacity (rules in :mod:`blackbox_wd.clients.retry`): timeouts, dropped connections,
HTTP 408, 409, 429 and 5xx, and a single request whose content is null, "" or whitespace (such
content is never cached nor returned); ``x-should-retry: true``/``false`` forces or forbids a retry.
Each request retries for up to ``settings.retry_budget`` seconds (300) since its first attempt: it
waits the server's Retry-After (seconds or HTTP-date) when sent and stops at once when that is more
than the budget has left, else ``0.5 s * 2**n`` plus jitter capped at 30 s. A 400 that names
``logprobs``/``top_logprobs`` or ``seed`` is sent again once without it, and this sampler omits it
from then on; a 400 that names ``n`` turns the prompt to single requests; other failures are final.
Every failure of :meth:`APISampler.asample` is a one-line :class:`~blackbox_wd.errors.SamplingError`
with the prompt's usage so far, ``transient`` when the last failure was of a retried kind.

Environment: ``BBWD_API_RECORD=<file>`` records every exchange to a scrubbed fixture,
``BBWD_API_REPLAY=<file>`` serves a fixture instead of the network; ``BBWD_API_TIMEOUT`` (seconds
per request), ``BBWD_API_ATTEMPTS`` and ``BBWD_API_BACKOFF_CAP`` tune timeouts and retries (the retry
budget is ``--retry-budget``'s alone). :func:`api_options` reads them (with the API key and the cache
folder) once, into an :class:`APIOptions` value that
:func:`make_api_sampler` builds from, so that another process (a Ray actor) builds the same sampler
from the value alone: nothing read from its environment, the key never written into one.
"""

from __future__ import annotations

import asyncio
import math
import os
import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from blackbox_wd.clients.cache import CachedSample, SampleCache, default_cache_dir, sample_key
from blackbox_wd.clients.presets import Endpoint, api_endpoint
from blackbox_wd.clients.replay import Cassette, RecordingTransport, ReplayMiss, ReplayTransport, scrub
from blackbox_wd.clients.retry import (
    EmptyContent,
    RetryPolicy,
    describe,
    gave_up,
    is_retryable,
    make_stop,
    make_wait,
    server_message,
)
from blackbox_wd.clients.sampling import AsyncSampler
from blackbox_wd.errors import BBWDError, SamplingError
from blackbox_wd.records import Messages, Sample, SampleSet, SamplingParams, Usage

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletion

    from blackbox_wd.settings import Settings

__all__ = ["APIOptions", "APISampler", "api_options", "make_api_sampler"]

TransportFactory = Callable[[], httpx.AsyncBaseTransport]
SlotFactory = Callable[[], AbstractAsyncContextManager]
_N_FIELD = re.compile(r"""(?:\bn\b|'n'|"n")""")
# Optional request fields a server may refuse, and how its 400 names them (top_logprobs drops logprobs).
_OPTIONAL = {"logprobs": re.compile(r"logprobs"), "seed": re.compile(r"\bseed\b")}


class NRejected(SamplingError):
    """A 400 that names the ``n`` field: the server cannot give that many choices in one request."""


class ReplayMissed(SamplingError, ReplayMiss):
    """A replay miss while sampling: a SamplingError that is still the fixture's ReplayMiss."""


@dataclass(frozen=True)
class Choice:
    """One parsed choice of a chat completion, with its completion token count."""

    text: str
    token_logprobs: tuple[float, ...] | None
    finish_reason: str | None
    completion_tokens: int


def _choice(raw: Any, share: int) -> Choice | None:
    """One choice, None when its content is null, empty or whitespace; tokens from logprobs when sent."""
    text = getattr(getattr(raw, "message", None), "content", None) or ""
    if not text.strip():
        return None
    content = getattr(getattr(raw, "logprobs", None), "content", None)
    lps = tuple(float(t.logprob) for t in content) if content else None
    return Choice(text, lps, raw.finish_reason, len(lps) if lps is not None else share)


def parse_choices(response: ChatCompletion) -> tuple[list[Choice | None], int]:
    """Choices (by index, None where empty) and prompt tokens of a ChatCompletion."""
    choices = sorted(response.choices or [], key=lambda c: c.index or 0)
    usage = response.usage
    share = round(int(getattr(usage, "completion_tokens", 0) or 0) / max(len(choices), 1))
    return [_choice(c, share) for c in choices], int(getattr(usage, "prompt_tokens", 0) or 0)


class APISampler(AsyncSampler):
    """Draws K responses per prompt from an OpenAI-compatible endpoint, cached and retried."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        concurrency: int = 16,
        cache: SampleCache | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float = 60.0,
        transport: TransportFactory | None = None,
        shared_slot: SlotFactory | None = None,
    ) -> None:
        """A sampler for ``endpoint``; ``transport`` makes the httpx transport of each event loop, and
        ``shared_slot`` a slot of a budget shared with other samplers, held by each request on top of this one's."""
        if concurrency < 1:
            raise BBWDError(f"concurrency must be at least 1 (got {concurrency})")
        self.endpoint = endpoint
        self.concurrency = concurrency
        self.cache = cache
        self.retry = retry
        self.timeout = timeout
        self.transport = transport
        self.shared_slot = shared_slot or nullcontext
        self.honours_n = endpoint.honours_n
        # Optional fields not to send: the preset's knowledge, then what the server refused with a 400.
        self.unsupported = {
            name for name, sent in (("logprobs", endpoint.logprobs), ("seed", endpoint.seed)) if not sent
        }
        self._bound: tuple[asyncio.AbstractEventLoop, openai.AsyncOpenAI, asyncio.Semaphore] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        """The endpoint (never its key) and the concurrency."""
        return f"APISampler({self.endpoint!r}, concurrency={self.concurrency})"

    @property
    def where(self) -> str:
        """The endpoint and model, as error messages name them."""
        return f"{self.endpoint.base_url} ({self.endpoint.model})"

    # -- per-event-loop client and semaphore ------------------------------------------------
    def _client(self) -> tuple[openai.AsyncOpenAI, asyncio.Semaphore]:
        """The client and the shared semaphore of the running event loop (made on first use)."""
        loop = asyncio.get_running_loop()
        if self._bound is None or self._bound[0] is not loop:
            http = httpx.AsyncClient(
                transport=self.transport() if self.transport else None,
                timeout=httpx.Timeout(self.timeout),
                limits=httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency),
            )
            # openai takes an httpx client at run time as well as an httpx2 one; its type names httpx2's only
            client = openai.AsyncOpenAI(
                api_key=self.endpoint.api_key,
                base_url=self.endpoint.base_url,
                max_retries=0,
                timeout=self.timeout,
                http_client=http,  # type: ignore[arg-type]  # openai's stub names httpx2's client only
            )
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

    async def aclose(self) -> None:
        """Close the HTTP client of the running event loop and the cache (what :meth:`close` does, awaited)."""
        if self._bound is not None and self._bound[0] is asyncio.get_running_loop():
            await self._bound[1].close()
            self._bound = None
        if self.cache is not None:
            self.cache.close()

    # -- sampling ---------------------------------------------------------------------------
    async def asample(self, messages: Messages, params: SamplingParams) -> SampleSet:
        """K samples for one prompt; any failure is a SamplingError carrying the usage so far."""
        usage = Usage()
        try:
            return await self._draw(messages, params, usage)
        except SamplingError:
            raise
        except Exception as exc:  # the cache or a reply the client cannot read: still one line
            raise SamplingError(self._message(describe(exc, self.where)), usage) from exc

    def _cached(self, key: str, usage: Usage) -> Sample | None:
        """The cached sample of a key (counted in usage), or None; an empty one is a miss."""
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is None or not hit.text.strip():
            return None
        usage.cache_hits += 1
        usage.cached_completion_tokens += hit.completion_tokens
        return Sample(hit.text, token_logprobs=hit.token_logprobs, finish_reason=hit.finish_reason, cached=True)

    async def _draw(self, messages: Messages, params: SamplingParams, usage: Usage) -> SampleSet:
        """Cache hits first, then one ``n`` request, then single requests for the samples still missing."""
        first = params.start
        host, model = self.endpoint.host, self.endpoint.model
        keys = [sample_key(host, model, messages, params, first + i) for i in range(params.k)]
        slots = [self._cached(key, usage) for key in keys]
        missing = [i for i, s in enumerate(slots) if s is None]

        def keep(index: int, choice: Choice | None) -> None:
            """Put a non-empty choice in its slot and the cache; an empty one leaves the slot missing."""
            if choice is None:
                return
            slots[index] = Sample(choice.text, token_logprobs=choice.token_logprobs, finish_reason=choice.finish_reason)
            usage.completion_tokens += choice.completion_tokens
            if self.cache is not None:
                self.cache.put(
                    keys[index],
                    CachedSample(choice.text, choice.token_logprobs, choice.finish_reason, choice.completion_tokens),
                )

        if len(missing) > 1 and self.honours_n is not False:
            try:
                choices = await self._create(messages, params, len(missing), first + missing[0], usage)
            except NRejected:  # e.g. llama.cpp caps n at its slot count: fan out instead
                self.honours_n, choices = False, []
            if self.honours_n is None:
                self.honours_n = len(choices) >= len(missing)
            for index, choice in zip(missing, choices, strict=False):
                keep(index, choice)
            missing = [i for i in missing if slots[i] is None]

        async def single(index: int) -> None:
            """Draw sample ``index`` alone (cached on arrival)."""
            keep(index, (await self._create(messages, params, 1, first + index, usage))[0])

        results = await asyncio.gather(*(single(i) for i in missing), return_exceptions=True)
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            raise failure
        return SampleSet([s for s in slots if s is not None], usage)

    def _body(self, messages: Messages, params: SamplingParams, n: int, index: int) -> dict[str, Any]:
        """Request arguments for ``n`` choices whose first is sample ``index``, less the unsupported fields."""
        body: dict[str, Any] = dict(
            model=self.endpoint.model,
            messages=messages,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_tokens,
        )
        if n > 1:
            body["n"] = n
        if params.seed is not None and "seed" not in self.unsupported:
            body["seed"] = params.seed + index
        if "logprobs" not in self.unsupported:
            body.update(logprobs=True, top_logprobs=1)
        return body

    async def _create(
        self, messages: Messages, params: SamplingParams, n: int, index: int, usage: Usage
    ) -> list[Choice | None]:
        """One chat completion (None for empty choices), retried in budget; its final failure a SamplingError."""
        client, slots = self._client()
        body = self._body(messages, params, n, index)
        empty = 0

        def count_retry(_state: RetryCallState) -> None:
            """Count a retry in the prompt's usage."""
            usage.retries += 1

        retrying = AsyncRetrying(
            stop=make_stop(self.retry),
            wait=make_wait(self.retry),
            retry=retry_if_exception(is_retryable),
            before_sleep=count_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    async with slots, self.shared_slot():
                        usage.requests += 1
                        response = await client.chat.completions.create(**body)
                    choices, prompt_tokens = parse_choices(response)
                    usage.prompt_tokens += prompt_tokens
                    if n == 1 and (choices or [None])[0] is None:
                        empty += 1
                        raise EmptyContent(empty)
        except Exception as exc:
            if self._omit_refused(body, exc):
                return await self._create(messages, params, n, index, usage)
            raise self._failure(exc, n, index, usage, retrying.statistics) from exc
        return choices[:n]

    def _omit_refused(self, body: dict[str, Any], exc: Exception) -> bool:
        """After a 400 naming ``logprobs``/``seed`` that ``body`` carried, omit it from now on; True if so."""
        if not isinstance(exc, openai.BadRequestError):
            return False
        named = {name for name, pattern in _OPTIONAL.items() if name in body and pattern.search(server_message(exc))}
        self.unsupported |= named
        return bool(named)

    def _failure(self, exc: Exception, n: int, index: int, usage: Usage, stats: dict[str, Any]) -> SamplingError:
        """The SamplingError for a request that failed for good; transient when its last failure was retried."""
        transient = is_retryable(exc)
        message = describe(exc, self.where)
        if transient and not isinstance(exc, EmptyContent):
            message += f" ({gave_up(exc, self.retry, stats)})"
        message = self._message(f"sample {index}: {message}" if n == 1 else message)
        if isinstance(exc, ReplayMiss):
            return ReplayMissed(message, usage, transient)
        n_refused = n > 1 and isinstance(exc, openai.BadRequestError) and _N_FIELD.search(server_message(exc))
        status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
        return (NRejected if n_refused else SamplingError)(message, usage, transient, status)

    def _message(self, text: str) -> str:
        """An error message on one line, with the API key and anything key-shaped scrubbed."""
        return scrub(" ".join(text.split()), (self.endpoint.api_key,))


def _env_float(name: str, default: float) -> float:
    """A finite float from the environment, or the default."""
    raw = os.environ.get(name)
    try:
        value = float(raw) if raw else default
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise BBWDError(f"{name} must be a number, got '{raw}'")
    return value


def api_timeout() -> float:
    """Seconds an API request may take (``BBWD_API_TIMEOUT``, default 60)."""
    return _env_float("BBWD_API_TIMEOUT", 60.0)


@dataclass(frozen=True)
class APIOptions:
    """How an API sampler is built beyond the settings, read once from a process's environment
    (:func:`api_options`) and passed on as a value (to a Ray actor, as an argument).

    Parameters
    ----------
    endpoint : Endpoint
        The target, with its API key as a value (never printed: ``Endpoint.__repr__``).
    replay, record : str or None
        ``BBWD_API_REPLAY`` / ``BBWD_API_RECORD``: the fixture to serve, or to record into.
    timeout : float
        Seconds a request may take (``BBWD_API_TIMEOUT``).
    retry : RetryPolicy
        The retry budget (``settings.retry_budget``: ``--retry-budget``), attempts and backoff cap.
    cache_dir : Path or None
        The API cache's folder (``--cache-dir``, else ``<bbwd cache>/api``); None: no cache.
    shared_slot : callable or None
        A slot of a budget shared with other samplers, held by each request (Ray's sampling actors).
    """

    endpoint: Endpoint
    replay: str | None = None
    record: str | None = None
    timeout: float = 60.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cache_dir: Path | None = None
    shared_slot: SlotFactory | None = None

    def sharing(self, slot: SlotFactory) -> APIOptions:
        """The same options, each request also holding a ``slot()`` of a shared budget."""
        return replace(self, shared_slot=slot)


def api_options(settings: Settings) -> APIOptions:
    """The API options of the settings' target, from this process's environment: the key (BBWDError when it is
    missing; none needed to replay a fixture), record/replay, timeout, retries and the cache folder.

    Parameters
    ----------
    settings : Settings
        An API target's settings.

    Returns
    -------
    APIOptions
    """
    endpoint = api_endpoint(settings)
    retry = RetryPolicy(
        budget=getattr(settings, "retry_budget", RetryPolicy.budget),
        attempts=int(_env_float("BBWD_API_ATTEMPTS", RetryPolicy.attempts)),
        cap=_env_float("BBWD_API_BACKOFF_CAP", RetryPolicy.cap),
    )
    cache_dir = (Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()) if settings.cache else None
    return APIOptions(
        endpoint,
        replay=os.environ.get("BBWD_API_REPLAY") or None,
        record=os.environ.get("BBWD_API_RECORD") or None,
        timeout=api_timeout(),
        retry=retry,
        cache_dir=cache_dir,
    )


def make_api_sampler(
    settings: Settings, shared_slot: SlotFactory | None = None, options: APIOptions | None = None
) -> APISampler:
    """The API sampler for the settings' target (cache, concurrency, retry budget, record/replay).

    Parameters
    ----------
    settings : Settings
        An API target's settings (its concurrency).
    shared_slot : callable or None
        A slot of a shared budget each request holds (over ``options.shared_slot``).
    options : APIOptions or None
        The key, record/replay, timeout, retries and cache folder; None: this process's environment
        (:func:`api_options`).

    Returns
    -------
    APISampler
    """
    opts = options if options is not None else api_options(settings)
    endpoint = opts.endpoint
    transport: TransportFactory | None = None
    if opts.replay:
        cassette = Cassette.load(opts.replay)
        shared = ReplayTransport(cassette, source=Path(opts.replay).name)
        transport = lambda: shared  # noqa: E731 - one replay state across loops
    elif opts.record:
        record = opts.record
        rec = Cassette(meta={"base_url_host": endpoint.host, "model": endpoint.model})
        transport = lambda: RecordingTransport(record, rec, secrets=(endpoint.api_key,))  # noqa: E731
    return APISampler(
        endpoint,
        concurrency=settings.concurrency,
        cache=SampleCache(opts.cache_dir) if opts.cache_dir is not None else None,
        retry=opts.retry,
        timeout=opts.timeout,
        transport=transport,
        shared_slot=shared_slot or opts.shared_slot,
    )
