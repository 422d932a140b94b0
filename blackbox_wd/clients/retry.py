"""Which API failures are retried, for how long, and how long to wait between tries (tenacity).

Retried (openai's or httpx's errors alike): timeouts, dropped connections, HTTP 408, 409, 429 and 5xx, and a reply
whose content is empty (null, "" or whitespace); a response header ``x-should-retry: true`` makes any status
retried and ``x-should-retry: false`` makes none retried (as openai-python does). Everything else
(400, 401, 403, 404, 422, ...) fails at once.

How long: each request retries until its ``budget`` (300 s by default) since its first attempt
would be passed by the next wait, or until ``attempts`` tries (100: the budget is what stops).
The wait is the server's ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP-date) when sent,
honoured in full up to what is left of the budget (a longer one stops at once); otherwise
``initial * 2**n`` plus up to ``jitter`` seconds, capped at ``cap`` (30 s).
"""

from __future__ import annotations

import email.utils
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import httpx
import openai
from tenacity import RetryCallState, stop_after_attempt, stop_before_delay, wait_exponential, wait_random
from tenacity.stop import stop_base

from blackbox_wd.errors import BBWDError
from blackbox_wd.records import JSONObject

RETRY_STATUS = frozenset({408, 409, 429})


class EmptyContent(BBWDError):
    """A 200 whose one choice has null, empty or whitespace-only content (retried like a 5xx)."""

    def __init__(self, times: int) -> None:
        super().__init__(f"returned empty content {times} time{'s' if times != 1 else ''}")


@dataclass(frozen=True)
class RetryPolicy:
    """Retry ``budget`` in seconds since the first attempt, an attempts cap, and the backoff's shape."""

    budget: float = 300.0
    attempts: int = 100
    initial: float = 0.5
    cap: float = 30.0
    jitter: float = 0.5


def is_retryable(exc: BaseException) -> bool:
    """True for timeouts, dropped connections, empty content, HTTP 408/409/429/5xx or ``x-should-retry: true``.

    The same rules for the openai client's errors and for httpx's (the server forwards with httpx).
    """
    if isinstance(exc, (openai.APIStatusError, httpx.HTTPStatusError)):
        hint = exc.response.headers.get("x-should-retry")
        if hint in ("true", "false"):
            return hint == "true"
        status = exc.response.status_code
        return status in RETRY_STATUS or status >= 500
    # APITimeoutError is an APIConnectionError; httpx's timeouts and dropped connections are TransportErrors
    return isinstance(exc, (openai.APIConnectionError, httpx.TransportError, EmptyContent))


def _seconds(raw: str | None) -> float | None:
    """A non-negative number of seconds from a header value, or None when absent or not a number."""
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return None if math.isnan(value) else max(value, 0.0)


def _until(raw: str | None) -> float | None:
    """Seconds from now until an HTTP-date (0 when it is past), or None when it is not one."""
    try:
        when = email.utils.parsedate_to_datetime(raw) if raw else None
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    when = when if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return max((when - datetime.now(timezone.utc)).total_seconds(), 0.0)


def retry_after(exc: BaseException | None) -> float | None:
    """Seconds the server asked to wait: ``retry-after-ms``, else ``Retry-After`` in seconds or as an HTTP-date."""
    response = getattr(exc, "response", None)
    headers = response.headers if isinstance(response, httpx.Response) else httpx.Headers()
    ms = _seconds(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000
    raw = headers.get("retry-after")
    seconds = _seconds(raw)
    return seconds if seconds is not None else _until(raw)


def make_wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    """A tenacity wait: the server's Retry-After when sent, else ``initial * 2**n`` + jitter capped at ``cap``."""
    backoff = wait_exponential(multiplier=policy.initial, max=policy.cap) + wait_random(0, policy.jitter)

    def wait(state: RetryCallState) -> float:
        """The wait before the next attempt of ``state``."""
        hinted = retry_after(state.outcome.exception() if state.outcome else None)
        return min(backoff(state), policy.cap) if hinted is None else hinted

    return wait


def make_stop(policy: RetryPolicy) -> stop_base:
    """A tenacity stop: when the next wait would end past the budget, or after ``attempts`` tries."""
    return stop_before_delay(policy.budget) | stop_after_attempt(max(1, policy.attempts))


def gave_up(exc: BaseException, policy: RetryPolicy, stats: JSONObject) -> str:
    """Why a retryable failure was retried no more: a server wait past the budget, or the tries spent."""
    hinted = retry_after(exc)
    elapsed = float(stats.get("delay_since_first_attempt") or 0.0)
    if hinted is not None and elapsed + hinted >= policy.budget:
        return (
            f"retry after {hinted:g} s is beyond the retry budget of {policy.budget:g} s, "
            f"{max(policy.budget - elapsed, 0.0):.0f} s left"
        )
    attempts = int(stats.get("attempt_number") or 1)
    return f"{attempts} attempt{'s' if attempts != 1 else ''} in {elapsed:.1f} s"


def _error_text(body: Any) -> str | None:
    """The message of an error body: ``error.message``, ``error`` when a string, or ``detail``."""
    if not isinstance(body, dict):
        return None
    err = body.get("error", body)
    msg = err.get("message") if isinstance(err, dict) else err
    return msg or body.get("detail")


def server_message(exc: openai.APIStatusError | httpx.HTTPStatusError) -> str:
    """The error message the server sent, on one line."""
    if isinstance(exc, httpx.HTTPStatusError):
        try:
            body = exc.response.json()
        except (ValueError, httpx.ResponseNotRead):
            body = None
        text = _error_text(body) or (exc.response.text if exc.response.is_closed else "") or exc.response.reason_phrase
    else:
        text = _error_text(exc.body) or exc.message or exc.response.text
    return " ".join(str(text).split())[:500]


def describe(exc: BaseException, where: str) -> str:
    """What went wrong with a request to ``where``, in one line (openai's or httpx's errors)."""
    if isinstance(exc, (openai.APIStatusError, httpx.HTTPStatusError)):
        return f"{where} answered HTTP {exc.response.status_code}: {server_message(exc)}"
    if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
        return f"{where} timed out"
    if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        return (
            f"could not reach {where}: {type(cause).__name__ if cause else 'connection error'}"
            f"{': ' + str(cause).splitlines()[0] if cause and str(cause) else ''}"
        )
    if isinstance(exc, BBWDError):
        return f"{where} {exc}" if isinstance(exc, EmptyContent) else str(exc)
    return f"{where}: {type(exc).__name__}: {exc}"
