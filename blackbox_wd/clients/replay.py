"""Record and replay HTTP exchanges under the real openai client, as httpx transports.

A fixture (cassette) is one JSON file: ``meta`` (server, model, how it was recorded) and
``exchanges``, each a request (method, path, JSON body) and its response (status, a few headers,
JSON body). Headers are never recorded except content-type and retry-after, so the Authorization
header cannot leak; the API key and anything shaped like one are scrubbed from bodies too.
Replay matches requests by (method, path, canonical body); a miss raises :class:`ReplayMiss`.
"""

from __future__ import annotations

import json
import re
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from blackbox_wd.errors import BBWDError

SCRUBBED = "<scrubbed>"
# The dummy key the loopback recordings are made with (scripts/record_fixtures.py); tests grep for it.
RECORDING_KEY = "sk-bbwd-loopback-recording-7f3a9c2e5d"
KEPT_HEADERS = ("content-type", "retry-after", "retry-after-ms")
_KEY_LIKE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9_\-\.]+)")


class ReplayMiss(BBWDError):
    """A request that the replayed fixture has no recording of."""


def scrub(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Replace the given secrets and key-shaped strings by a placeholder."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, SCRUBBED)
    return _KEY_LIKE.sub(SCRUBBED, text)


def _json_or_text(raw: bytes) -> Any:
    """Parsed JSON when the bytes are JSON, else the decoded text."""
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return raw.decode("utf-8", "replace")


def canonical(body: object) -> str:
    """A stable string for a JSON body (sorted keys, no spaces)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Cassette:
    """The recorded exchanges of one fixture file."""

    meta: dict[str, Any] = field(default_factory=dict)
    exchanges: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, path: str | Path) -> Cassette:
        """Read a fixture file; a missing or malformed one is a BBWDError."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise BBWDError(f"cannot read replay fixture {path}: {exc}") from exc
        return cls(data.get("meta", {}), data.get("exchanges", []))

    def save(self, path: str | Path) -> None:
        """Write the fixture file (pretty JSON)."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(
            json.dumps({"meta": self.meta, "exchanges": self.exchanges}, indent=1, ensure_ascii=False) + "\n"
        )


class RecordingTransport(httpx.AsyncBaseTransport):
    """Forwards to a real transport and appends each scrubbed exchange to a cassette file."""

    def __init__(
        self,
        path: str | Path,
        cassette: Cassette,
        secrets: tuple[str, ...] = (),
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.path, self.cassette, self.secrets = Path(path), cassette, secrets
        self.inner = inner or httpx.AsyncHTTPTransport()
        self._lock = threading.Lock()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send, read the whole body, record, and hand back an equivalent response."""
        response = await self.inner.handle_async_request(request)
        raw = await response.aread()
        await response.aclose()
        req_body = _json_or_text(scrub(request.content.decode("utf-8", "replace"), self.secrets).encode())
        resp_body = _json_or_text(scrub(raw.decode("utf-8", "replace"), self.secrets).encode())
        headers = {k: response.headers[k] for k in KEPT_HEADERS if k in response.headers}
        with self._lock:
            self.cassette.exchanges.append(
                {
                    "request": {"method": request.method, "path": request.url.path, "body": req_body},
                    "response": {"status": response.status_code, "headers": headers, "body": resp_body},
                }
            )
            self.cassette.save(self.path)
        return httpx.Response(response.status_code, headers=response.headers, content=raw, request=request)

    async def aclose(self) -> None:
        """Close the wrapped transport."""
        await self.inner.aclose()


class ReplayTransport(httpx.AsyncBaseTransport):
    """Serves recorded responses; identical requests get their recordings in order, then the last again."""

    def __init__(self, cassette: Cassette, source: str = "fixture") -> None:
        self.source = source
        self._queues: dict[tuple[str, str, str], deque] = defaultdict(deque)
        self._last: dict[tuple[str, str, str], dict[str, Any]] = {}
        for ex in cassette.exchanges:
            req = ex["request"]
            self._queues[(req["method"], req["path"], canonical(req["body"]))].append(ex["response"])
        self._lock = threading.Lock()
        self.served = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The recorded response for this request, or ReplayMiss."""
        body = _json_or_text(request.content)
        key = (request.method, request.url.path, canonical(body))
        with self._lock:
            queue = self._queues.get(key)
            if queue:
                self._last[key] = queue.popleft()
            resp = self._last.get(key)
            if resp is None:
                raise ReplayMiss(
                    f"replay miss in {self.source}: no recording of {request.method} "
                    f"{request.url.path} {canonical(body)[:300]}; re-record the fixtures"
                )
            self.served += 1
        content = resp["body"] if isinstance(resp["body"], str) else json.dumps(resp["body"])
        headers = {"content-type": "application/json", **resp.get("headers", {})}
        return httpx.Response(resp["status"], headers=headers, content=content.encode(), request=request)
