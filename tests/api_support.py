"""A loopback OpenAI-compatible server that injects faults, serving real recorded response bodies.

Each request takes the next action of ``script`` (then ``then``, by default ``"ok"``):
``ok``, ``429`` (no Retry-After), ``429:<seconds>`` (Retry-After in seconds), ``429date:<seconds>``
(Retry-After as the HTTP-date that many seconds ahead, rounded up to a whole second), ``500``,
``noretry500`` (a 500 with ``x-should-retry: false``), ``retry400`` (a 400 with ``x-should-retry:
true``), ``nullcontent``/``blankcontent``/``spacecontent`` (a 200 whose choices' content is null,
"" or whitespace; ``:<j>`` empties choice j only), ``stall:<seconds>`` (answer only after that
long), ``drop`` (headers and half the body, then the connection is closed), ``401``/``408``/... .
``override(body)`` may pick the action for a request instead (None: the script's), and a request
whose body carries a field named in ``rejects`` is answered 400 naming that field.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def recorded_bodies(name: str = "transformers_serve.json") -> list[dict[str, Any]]:
    """The 200 response bodies of a recorded fixture."""
    data = json.loads((FIXTURES / name).read_text())
    return [ex["response"]["body"] for ex in data["exchanges"] if ex["response"]["status"] == 200]


def recorded_error(status: int, name: str = "llamacpp.json") -> dict[str, Any]:
    """A recorded error body with the given status (falls back to an OpenAI-shaped one)."""
    data = json.loads((FIXTURES / name).read_text())
    for ex in data["exchanges"]:
        if ex["response"]["status"] == status:
            return ex["response"]["body"]
    return {"error": {"message": f"injected HTTP {status}", "type": "invalid_request_error", "code": status}}


REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
EMPTY_CONTENT = {"nullcontent": None, "blankcontent": "", "spacecontent": " \n\t "}


@dataclass
class FaultServer:
    """Threaded asyncio HTTP/1.1 server on 127.0.0.1 (random port), one response per connection."""

    script: list[str] = field(default_factory=list)
    then: str = "ok"
    override: Callable[[dict[str, Any]], str | None] | None = None
    rejects: tuple[str, ...] = ()
    latency: float = 0.0
    honour_n: bool = False
    api_key: str | None = None
    bodies: list[dict[str, Any]] = field(default_factory=recorded_bodies)
    error_bodies: dict[int, dict[str, Any]] = field(default_factory=dict)
    received: list[dict[str, Any]] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    max_in_flight: int = 0
    port: int = 0

    def __post_init__(self) -> None:
        self._script = deque(self.script)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._next_body = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FaultServer:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            pending = asyncio.all_tasks(self._loop)
            for task in pending:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.close()

    def _next_action(self, request: dict[str, Any]) -> str:
        """A rejection of a field in ``rejects``, else the override's action, else the script's next."""
        refused = next((f for f in self.rejects if f in request), None)
        if refused is not None:
            return f"reject:{refused}"
        forced = self.override(request) if self.override is not None else None
        if forced is not None:
            return forced
        with self._lock:
            return self._script.popleft() if self._script else self.then

    def _empty_body(self, request: dict[str, Any], action: str) -> dict[str, Any]:
        """An ok body whose choices (or only choice j of ``<kind>:<j>``) have empty content."""
        kind, _, which = action.partition(":")
        body = json.loads(json.dumps(self._ok_body(request)))  # its choices may be shared with ``bodies``
        for j, choice in enumerate(body["choices"]):
            if not which or int(which) == j:
                choice["message"]["content"] = EMPTY_CONTENT[kind]
        return body

    def _ok_body(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            base = self.bodies[self._next_body % len(self.bodies)]
            self._next_body += 1
        body = json.loads(json.dumps(base))
        body["model"] = request.get("model", body.get("model"))
        if self.honour_n and int(request.get("n") or 1) > 1:
            n = int(request["n"])
            pool = [self.bodies[(self._next_body + j) % len(self.bodies)]["choices"][0] for j in range(n)]
            body["choices"] = [{**c, "index": j} for j, c in enumerate(pool)]
        return body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one keep-alive connection until the client or an action closes it."""
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request as the script says; False when the connection must close."""
        head = await reader.readuntil(b"\r\n\r\n")
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            lines = head.decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            request = json.loads(raw or b"{}")
            action = self._next_action(request)
            with self._lock:
                self.received.append(
                    {
                        "path": lines[0].split()[1],
                        "body": request,
                        "authorization": headers.get("authorization", ""),
                        "t": time.monotonic(),
                    }
                )
                self.actions.append(action)
            if self.latency:
                await asyncio.sleep(self.latency)
            if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
                await self._send(writer, 401, self.error_bodies.get(401, recorded_error(401)))
            elif action == "ok":
                await self._send(writer, 200, self._ok_body(request))
            elif action.startswith("429date:"):
                when = math.ceil(time.time() + float(action.split(":", 1)[1]))
                await self._send(
                    writer,
                    429,
                    {"error": {"message": "rate limited", "type": "rate_limit"}},
                    {"Retry-After": email.utils.formatdate(when, usegmt=True)},
                )
            elif action.startswith("429"):
                wait = {"Retry-After": action.split(":", 1)[1]} if ":" in action else {}
                await self._send(writer, 429, {"error": {"message": "rate limited", "type": "rate_limit"}}, wait)
            elif action.partition(":")[0] in EMPTY_CONTENT:
                await self._send(writer, 200, self._empty_body(request, action))
            elif action.startswith("reject:"):
                name = action.split(":", 1)[1]
                await self._send(
                    writer,
                    400,
                    {
                        "error": {
                            "message": f"Unrecognized request argument supplied: {name}",
                            "type": "invalid_request_error",
                            "param": name,
                        }
                    },
                )
            elif action == "noretry500":
                await self._send(
                    writer,
                    500,
                    {"error": {"message": "injected server error", "type": "server_error"}},
                    {"x-should-retry": "false"},
                )
            elif action == "retry400":
                await self._send(writer, 400, recorded_error(400), {"x-should-retry": "true"})
            elif action.startswith("stall"):
                await asyncio.sleep(float(action.split(":", 1)[1]) if ":" in action else 5.0)
                await self._send(writer, 200, self._ok_body(request))
                return False
            elif action == "drop":
                data = json.dumps(self._ok_body(request)).encode()
                writer.write(
                    f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                    + data[: len(data) // 2]
                )
                await writer.drain()
                return False
            else:
                status = int(action)
                default = (
                    {"error": {"message": "injected server error", "type": "server_error"}}
                    if status >= 500
                    else recorded_error(status)
                )
                await self._send(writer, status, self.error_bodies.get(status, default))
            return True
        finally:
            with self._lock:
                self._in_flight -= 1

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter, status: int, body: dict[str, Any], extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        head = (
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n"
        )
        head += "".join(f"{k}: {v}\r\n" for k, v in (extra or {}).items())
        writer.write(head.encode() + b"\r\n" + data)
        with contextlib.suppress(ConnectionError):
            await writer.drain()


def main() -> None:
    """``python tests/api_support.py [latency]``: serve until killed; prints the port on stdout."""
    import sys

    with FaultServer(latency=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0) as server:
        print(server.port, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    main()
