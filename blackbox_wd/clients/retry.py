"""Which API failures are retried and how long to wait: tenacity with Retry-After, backoff, jitter, cap."""

from __future__ import annotations

import random
from dataclasses import dataclass

import openai
from tenacity import RetryCallState

from blackbox_wd.errors import BBWDError

RETRYABLE = (openai.RateLimitError, openai.InternalServerError, openai.APITimeoutError, openai.APIConnectionError)
FATAL_STATUS = (400, 401, 403, 404, 422)


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and waits: exponential ``initial * 2**n`` plus jitter, capped; Retry-After when sent."""

    attempts: int = 6
    initial: float = 0.5
    cap: float = 20.0
    jitter: float = 0.5
    retry_after_cap: float = 60.0


def is_retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts and dropped connections; never 4xx other than 429."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return isinstance(exc, RETRYABLE)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds from a Retry-After (or retry-after-ms) header of an API error, if any."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if headers.get("retry-after-ms") is not None:
            return float(headers["retry-after-ms"]) / 1000
        if headers.get("retry-after") is not None:
            return float(headers["retry-after"])
    except ValueError:  # an HTTP date: treat as unknown
        return None
    return None


def make_wait(policy: RetryPolicy):  # noqa: ANN201 - a tenacity wait callable
    """A tenacity wait: the server's Retry-After when sent (up to its cap), else capped backoff + jitter."""

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hinted = retry_after(exc)
        if hinted is not None and hinted >= 0:
            return min(hinted, policy.retry_after_cap)
        backoff = policy.initial * 2 ** (state.attempt_number - 1)
        return min(policy.cap, backoff + random.uniform(0, policy.jitter))

    return wait


def server_message(exc: openai.APIStatusError) -> str:
    """The error message the server sent, on one line."""
    body = exc.body
    msg = None
    if isinstance(body, dict):
        err = body.get("error", body)
        msg = err.get("message") if isinstance(err, dict) else err
        msg = msg or body.get("detail")
    text = str(msg or exc.message or exc.response.text)
    return " ".join(text.split())[:500]


def fatal_error(exc: BaseException, where: str) -> BBWDError:
    """The one-line BBWDError for an API failure that is not (or no longer) retried."""
    if isinstance(exc, openai.APIStatusError):
        return BBWDError(f"{where} answered HTTP {exc.status_code}: {server_message(exc)}")
    if isinstance(exc, openai.APITimeoutError):
        return BBWDError(f"{where} timed out (after retries)")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return BBWDError(f"could not reach {where}: {type(cause).__name__ if cause else 'connection error'}"
                         f"{': ' + str(cause).splitlines()[0] if cause and str(cause) else ''}")
    return BBWDError(f"{where}: {type(exc).__name__}: {exc}")
