"""The retry rules and the time budget without a server: which failures retry, waits, stops, settings."""

from __future__ import annotations

import email.utils
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import openai
import pytest
from tenacity import AsyncRetrying, Future, RetryCallState

from blackbox_wd.clients.api import APISampler, make_api_sampler
from blackbox_wd.clients.presets import Endpoint
from blackbox_wd.clients.replay import Cassette, ReplayMiss, ReplayTransport
from blackbox_wd.clients.retry import EmptyContent, RetryPolicy, is_retryable, make_stop, make_wait, retry_after
from blackbox_wd.errors import SamplingError
from blackbox_wd.records import SamplingParams

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status_error(status: int, **headers: str) -> openai.APIStatusError:
    """The openai error for an HTTP status with the given response headers."""
    response = httpx.Response(status, headers={k.replace("_", "-"): v for k, v in headers.items()}, request=REQUEST)
    return openai.APIStatusError(f"HTTP {status}", response=response, body=None)


def failed_state(exc: BaseException, attempt: int, elapsed: float) -> RetryCallState:
    """A tenacity state: attempt ``attempt`` failed with ``exc``, ``elapsed`` s after the first began."""
    state = RetryCallState(retry_object=AsyncRetrying(), fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    outcome = Future(attempt)
    outcome.set_exception(exc)
    state.outcome, state.outcome_timestamp = outcome, state.start_time + elapsed
    return state


def http_date(seconds_from_now: float) -> str:
    """An HTTP-date that many seconds from now."""
    return email.utils.formatdate(time.time() + seconds_from_now, usegmt=True)


def test_retry_after_reads_seconds_milliseconds_and_http_dates():
    assert retry_after(status_error(429, retry_after="2.5")) == 2.5
    assert retry_after(status_error(429, retry_after_ms="1500", retry_after="9")) == 1.5
    assert 98 <= retry_after(status_error(429, retry_after=http_date(100))) <= 100
    assert retry_after(status_error(503, retry_after=http_date(-3600))) == 0.0  # a past date: go now
    assert retry_after(status_error(429, retry_after="soon")) is None
    assert retry_after(status_error(429)) is None and retry_after(None) is None


def test_which_statuses_are_retried():
    retried = [408, 409, 429, 500, 503]
    assert [is_retryable(status_error(s)) for s in retried + [400, 401, 403, 404, 422]] == [True] * 5 + [False] * 5
    assert is_retryable(status_error(400, x_should_retry="true"))  # the server's word wins, as in openai-python
    assert not is_retryable(status_error(500, x_should_retry="false"))


def test_transport_failures_and_empty_content_are_retried():
    assert is_retryable(openai.APITimeoutError(REQUEST)) and is_retryable(openai.APIConnectionError(request=REQUEST))
    assert is_retryable(EmptyContent(1)) and not is_retryable(ReplayMiss("miss")) and not is_retryable(ValueError())


def test_default_budget_keeps_a_429_retrying_for_minutes():
    policy = RetryPolicy()
    stop, wait = make_stop(policy), make_wait(policy)
    assert policy.budget == 300.0 and policy.cap == 30.0 and policy.attempts >= 100
    exc, elapsed, waits = status_error(429), 0.0, []
    for attempt in range(1, policy.attempts + 1):
        state = failed_state(exc, attempt, elapsed)
        state.upcoming_sleep = wait(state)
        if stop(state):
            break
        waits.append(state.upcoming_sleep)
        elapsed += state.upcoming_sleep
    assert len(waits) >= 8 and sum(waits[:7]) > 15.0  # the old 6 attempts gave up after ~15 s
    assert max(waits) <= policy.cap and waits[-1] == pytest.approx(policy.cap, abs=policy.jitter)
    assert policy.budget - policy.cap <= elapsed < policy.budget  # stopped by the budget, not the attempts


def test_a_server_wait_is_honoured_up_to_what_is_left_of_the_budget():
    policy = RetryPolicy(budget=300.0)
    stop, wait = make_stop(policy), make_wait(policy)
    for after, elapsed, stops in ((120, 0.0, False), (900, 0.0, True), (10, 285.0, False), (10, 295.0, True)):
        state = failed_state(status_error(429, retry_after=str(after)), 2, elapsed)
        state.upcoming_sleep = wait(state)
        assert state.upcoming_sleep == after and stop(state) is stops, (after, elapsed)


def test_a_small_budget_stops_after_the_first_backoff_past_it():
    policy = RetryPolicy(budget=0.5, initial=0.2, cap=10.0, jitter=0.0)
    stop, wait = make_stop(policy), make_wait(policy)
    state = failed_state(status_error(500), 2, 0.2)  # next wait 0.4 s: 0.6 s > 0.5 s
    state.upcoming_sleep = wait(state)
    assert state.upcoming_sleep == pytest.approx(0.4) and stop(state)


def test_make_api_sampler_reads_the_retry_budget(monkeypatch):
    for name in (
        "BBWD_API_RETRY_BUDGET",
        "BBWD_API_ATTEMPTS",
        "BBWD_API_BACKOFF_CAP",
        "BBWD_API_REPLAY",
        "BBWD_API_RECORD",
    ):
        monkeypatch.delenv(name, raising=False)
    settings = dict(
        target="served-model",
        base_url="http://127.0.0.1:9/v1",
        api_key_env=None,
        cache=False,
        cache_dir=None,
        concurrency=2,
    )
    without = make_api_sampler(SimpleNamespace(**settings))  # a Settings object without the field yet
    assert without.retry == RetryPolicy() and without.retry.budget == 300.0
    assert make_api_sampler(SimpleNamespace(**settings, retry_budget=42.0)).retry.budget == 42.0
    monkeypatch.setenv("BBWD_API_RETRY_BUDGET", "7.5")  # no such variable: --retry-budget alone sets it
    assert make_api_sampler(SimpleNamespace(**settings, retry_budget=42.0)).retry.budget == 42.0
    monkeypatch.setenv("BBWD_API_RETRY_BUDGET", "forever")
    assert make_api_sampler(SimpleNamespace(**settings)).retry.budget == 300.0


def test_a_replay_miss_is_a_non_transient_sampling_error():
    cassette = Cassette.load(FIXTURES / "transformers_serve.json")
    transport = ReplayTransport(cassette, "transformers_serve.json")
    sampler = APISampler(
        Endpoint(cassette.meta["model"], "http://127.0.0.1:9/v1", "replay-key", None), transport=lambda: transport
    )
    with pytest.raises(SamplingError, match="replay miss in transformers_serve.json") as err:
        sampler.sample([{"role": "user", "content": "a prompt never recorded"}], SamplingParams(k=2, seed=0))
    assert isinstance(err.value, ReplayMiss) and err.value.transient is False
    assert err.value.usage.requests == 1 and transport.served == 0
    sampler.close()
