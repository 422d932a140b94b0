"""The client's own request, forwarded to the API target unchanged with httpx.

The raw body goes to ``<base_url>/chat/completions`` with the target's key (never the client's
token), retried in budget by the client layer's rules (:mod:`blackbox_wd.clients.retry`: timeouts,
dropped connections, 408/409/429/5xx, Retry-After). A failure after retries is a 502 whose error
carries ``upstream_status``; a 4xx the target gives the request itself (400, 404, 422, ...; not 401
or 403, which are bbwd's key) comes back with its status and the target's error, as it would from
the target. Messages are scrubbed of the key and anything key-shaped.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception

from blackbox_wd.clients.api import APISampler
from blackbox_wd.clients.replay import scrub
from blackbox_wd.clients.retry import describe, is_retryable, make_stop, make_wait
from blackbox_wd.doors.serve.protocol import ChatRequest, ServeError
from blackbox_wd.errors import SamplingError, one_line
from blackbox_wd.records import Messages


def upstream_error(message: str, status: int | None) -> ServeError:
    """The 502 for a target that failed after retries, carrying its HTTP status (None: no answer)."""
    return ServeError(
        502, message, kind="upstream", type="upstream_error", code="upstream_error", upstream_status=status
    )


def sampling_failed(exc: SamplingError) -> ServeError:
    """The 502 for scoring samples the target did not give."""
    return upstream_error(f"scoring samples: {exc}", exc.status)


class Upstream:
    """Forwards chat requests to an API sampler's endpoint with its key, retry policy, timeout and transport."""

    def __init__(self, sampler: APISampler) -> None:
        self.endpoint = sampler.endpoint
        self.retry = sampler.retry
        self.url = f"{self.endpoint.base_url}/chat/completions"
        self.where = sampler.where
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(sampler.timeout), transport=sampler.transport() if sampler.transport else None
        )

    def admit(self, request: ChatRequest, prompt_tokens: int) -> None:
        """Nothing to refuse: the target answers with its own limits (its 4xx come back as they are)."""

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    async def _send(self, raw: bytes, stream: bool) -> httpx.Response:
        """The target's 2xx response to ``raw`` (body unread when ``stream``), retried in budget; ServeError else."""
        headers = {
            "Authorization": f"Bearer {self.endpoint.api_key}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
        }
        retrying = AsyncRetrying(
            stop=make_stop(self.retry), wait=make_wait(self.retry), retry=retry_if_exception(is_retryable), reraise=True
        )
        try:
            async for attempt in retrying:
                with attempt:
                    response = await self._http.send(
                        self._http.build_request("POST", self.url, content=raw, headers=headers), stream=stream
                    )
                    if not response.is_success:
                        await response.aread()
                        await response.aclose()
                        response.raise_for_status()
                    return response
        except Exception as exc:  # noqa: BLE001 - every failure becomes this request's error
            raise self._failure(exc) from None
        raise AssertionError("unreachable")  # pragma: no cover - tenacity either returns or raises

    def _failure(self, exc: Exception) -> ServeError:
        """The target's own 4xx for the request passed on, else a 502 with the upstream status."""
        response = exc.response if isinstance(exc, httpx.HTTPStatusError) else None
        status = response.status_code if response is not None else None
        if (
            response is not None
            and 400 <= response.status_code < 500
            and response.status_code not in (401, 403)
            and not is_retryable(exc)
        ):
            error = _error_object(response)
            message = self._scrub(str(error.pop("message", "") or response.reason_phrase))
            fields = {
                k: self._scrub(v) if isinstance(v, str) else v for k, v in error.items() if k not in ("status", "kind")
            }
            return ServeError(response.status_code, message, kind="upstream_request", **fields)
        return upstream_error(self._scrub(describe(exc, self.where)), status)

    def _scrub(self, text: str) -> str:
        """One line, without the target's key or anything key-shaped."""
        return scrub(one_line(text, 1000), (self.endpoint.api_key,))

    async def complete(self, request: ChatRequest, raw: bytes, messages: Messages) -> dict[str, Any]:
        """The target's response body to the client's exact request, as a dict."""
        response = await self._send(raw, stream=False)
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise upstream_error(f"{self.where} answered a body that is not a JSON object", response.status_code)
        return body

    async def stream(self, request: ChatRequest, raw: bytes, messages: Messages) -> AsyncGenerator[str, None]:
        """The lines of the target's event stream for the client's exact request, as they arrive.

        The request is sent when the first line is asked for, so a failure before the stream starts
        is raised there; a failure within it is a ServeError from the iteration.
        """
        response = await self._send(raw, stream=True)
        try:
            async for line in response.aiter_lines():
                yield line
        except httpx.HTTPError as exc:
            raise upstream_error(self._scrub(f"stream broken: {describe(exc, self.where)}"), None) from None
        finally:
            await response.aclose()


def _error_object(response: httpx.Response) -> dict[str, Any]:
    """The error object of a target's error body (``{"error": {...}}`` or ``{"error": "..."}``), else its text."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return dict(error)
    text = error if isinstance(error, str) else response.text or response.reason_phrase
    return {"message": text, "type": "invalid_request_error", "param": None, "code": None}
