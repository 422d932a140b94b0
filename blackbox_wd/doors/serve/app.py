"""The HTTP edge of ``bbwd serve``: a FastAPI app over a :class:`~blackbox_wd.doors.serve.service.Service`, run
by uvicorn.

Routes: ``POST /v1/chat/completions`` (the answer plus its ``bbwd`` verdict), ``GET /metrics``
(Prometheus), ``GET /healthz`` (no token needed). Every other route needs the server's own bearer
token when one is set. Errors are raised where they are found and become OpenAI-style bodies here.
"""

from __future__ import annotations

import logging
import os
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from blackbox_wd.clients import target_kind
from blackbox_wd.clients.presets import is_loopback
from blackbox_wd.doors.serve.http import HEAD_LIMIT, GuardedH11Protocol
from blackbox_wd.doors.serve.protocol import ServeError, forwarded, parse_request
from blackbox_wd.doors.serve.service import Service
from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.settings import Settings

log = logging.getLogger("uvicorn.error")  # formatted and shown by uvicorn
bearer = HTTPBearer(auto_error=False)


@dataclass(frozen=True)
class ServeOptions:
    """How the server listens and guards itself (the scoring settings are a Settings); checked on creation."""

    host: str = "127.0.0.1"
    port: int = 8080
    server_key_env: str | None = None
    calibration: Any = "auto"  # a Calibration, "auto" (the shipped one when it applies) or None (no verdict)
    max_body_bytes: int = 4 * 1024 * 1024
    batch_wait_ms: float = 5.0
    all_scores: bool = False  # force every request through the teacher (``Detector.all_scores``)

    def __post_init__(self) -> None:
        """Raise BBWDError naming the first option out of its range."""
        if not 0 <= self.port <= 65535:
            raise BBWDError(f"port must be in 0..65535 (got {self.port})")
        if self.max_body_bytes < 1:
            raise BBWDError(f"max_body_bytes must be at least 1 (got {self.max_body_bytes})")
        if not 0 <= self.batch_wait_ms <= 1000:
            raise BBWDError(f"batch_wait_ms must be in 0..1000 (got {self.batch_wait_ms})")
        loopback = is_loopback(f"http://[{self.host}]" if ":" in self.host else f"http://{self.host}")
        if self.server_key_env is None and not loopback:
            raise BBWDError(
                f"binding {self.host} (not loopback) needs a server token: set one in an environment "
                "variable and name it with --server-key-env"
            )

    def server_key(self) -> str | None:
        """The bearer token clients must send (from ``server_key_env``), or None without one."""
        if self.server_key_env is None:
            return None
        key = os.environ.get(self.server_key_env, "")
        if not key:
            raise BBWDError(f"{self.server_key_env} is not set: export {self.server_key_env}=<a token for clients>")
        return key


def service_of(request: Request) -> Service:
    """The app's service (dependency)."""
    return request.app.state.service


def authorize(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
    """Require the server's bearer token when it has one (dependency)."""
    key: str | None = request.app.state.server_key
    if key is None:
        return
    if credentials is None:
        raise ServeError(
            401,
            "missing bearer token: send 'Authorization: Bearer <token>'",
            kind="unauthorized",
            code="invalid_api_key",
        )
    if not secrets.compare_digest(credentials.credentials.encode(), key.encode()):
        raise ServeError(401, "Incorrect API key provided", kind="unauthorized", code="invalid_api_key")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body; ServeError 413 as soon as it is known to pass ``limit`` bytes."""
    too_large = ServeError(
        413, f"the request body is larger than {limit} bytes", kind="body_too_large", code="request_too_large"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise too_large
    except ClientDisconnect:  # the client hung up before its body was in: its own kind, not an internal error
        raise ServeError(
            499, "the client closed the connection before sending the whole body", kind="client_disconnected"
        ) from None
    return bytes(body)


def _route(request: Request) -> str:
    """The matched route's path (one label per route in /metrics), or 'unmatched'."""
    route = request.scope.get("route")
    return getattr(route, "path", "unmatched")


def create_app(service: Service, server_key: str | None = None, max_body_bytes: int = 4 * 1024 * 1024) -> FastAPI:
    """The FastAPI app over a loaded service; its lifespan starts the teacher queue and closes everything after."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(title="bbwd", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    app.state.server_key = server_key
    metrics = service.metrics

    def failed(request: Request, err: ServeError) -> JSONResponse:
        metrics.requests.labels(_route(request), str(err.status)).inc()
        metrics.errors.labels(err.kind).inc()
        if err.status >= 500:
            log.warning("%s %s: %s", err.status, err.kind, err)
        headers = {"WWW-Authenticate": "Bearer"} if err.status == 401 else None
        return JSONResponse(err.body(), status_code=err.status, headers=headers)

    @app.exception_handler(ServeError)
    async def serve_error(request: Request, err: ServeError) -> JSONResponse:
        return failed(request, err)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return failed(
            request,
            ServeError(
                exc.status_code,
                str(exc.detail),
                kind="not_found" if exc.status_code == 404 else "http",
                code="not_found" if exc.status_code == 404 else None,
            ),
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return failed(
            request,
            ServeError(
                500,
                f"unexpected {type(exc).__name__}: {one_line(exc)}",
                kind="internal",
                type="server_error",
                code="internal_error",
            ),
        )

    @app.get("/healthz")
    async def healthz(svc: Service = Depends(service_of)) -> dict[str, Any]:
        """Liveness: the served model and the settings fingerprint."""
        return {"status": "ok", "model": svc.model, "fingerprint": svc.fingerprint}

    @app.get("/metrics", dependencies=[Depends(authorize)])
    async def prometheus(request: Request, svc: Service = Depends(service_of)) -> Response:
        """Prometheus text format."""
        data, content_type = svc.metrics.render()
        svc.metrics.requests.labels(_route(request), "200").inc()
        return Response(data, media_type=content_type)

    @app.post("/v1/chat/completions", dependencies=[Depends(authorize)])
    async def chat_completions(request: Request, svc: Service = Depends(service_of)) -> Response:
        """The target's answer to the request with a ``bbwd`` verdict (streamed when ``stream`` is true)."""
        raw = await read_body(request, max_body_bytes)
        chat = parse_request(raw, svc.model)
        raw = forwarded(raw, chat)
        if chat.stream:
            events = await svc.stream(chat, raw)
            svc.metrics.requests.labels(_route(request), "200").inc()
            return StreamingResponse(events, media_type="text/event-stream")
        body = await svc.complete(chat, raw)
        svc.metrics.requests.labels(_route(request), "200").inc()
        return JSONResponse(body)

    return app


def run(settings: Settings, options: ServeOptions) -> None:
    """Load everything once, then serve until SIGINT/SIGTERM (requests in flight are finished first)."""
    key = options.server_key()
    service = Service.load(settings, options.batch_wait_ms / 1000, options.calibration, options.all_scores)
    app = create_app(service, key, options.max_body_bytes)
    print(
        f"bbwd serve: http://{options.host}:{options.port}/v1 serves '{service.model}' "
        f"({target_kind(settings)} target), teacher "
        f"{settings.teacher}, K={settings.k}, fingerprint {service.fingerprint}, "
        f"token {'required' if key else 'not required'}",
        file=sys.stderr,
        flush=True,
    )
    if service.detector.calibration_note:
        print(service.detector.calibration_note, file=sys.stderr, flush=True)
    config = uvicorn.Config(
        app,
        host=options.host,
        port=options.port,
        log_level="info",
        lifespan="on",
        http=GuardedH11Protocol,
        h11_max_incomplete_event_size=HEAD_LIMIT,
    )
    uvicorn.Server(config).run()
