"""A live ``bbwd serve`` subprocess on 127.0.0.1 for the server tests, and readers of its /metrics."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from bench.common import HOST, free_port, wait_healthy

REPO = Path(__file__).resolve().parents[1]
TOKEN_ENV = "BBWD_TEST_SERVER_TOKEN"


def bbwd_score(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> dict:
    """`bbwd score --json ARGS` in a new process from the repository root (``env`` over this one's), its result."""
    proc = subprocess.run(
        [sys.executable, "-m", "blackbox_wd", "score", "--json", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@dataclass
class BbwdServe:
    """``python -m blackbox_wd serve ARGS`` run from the repository root, its output in ``log_path``."""

    args: list[str]
    log_path: Path
    token: str | None = "bbwd-server-token-271828"
    env: dict[str, str] = field(default_factory=dict)
    startup_timeout: float = 300.0
    port: int = 0
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI base URL."""
        return self.url + "/v1"

    def __enter__(self) -> BbwdServe:
        self.port = free_port()
        # one torch thread: on a shared 2-core machine, OpenMP's spinning threads slow a forward 10-30x
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **self.env}
        key = []
        if self.token is not None:
            env[TOKEN_ENV] = self.token
            key = ["--server-key-env", TOKEN_ENV]
        cmd = [
            sys.executable,
            "-m",
            "blackbox_wd",
            "serve",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--device",
            "cpu",
            *key,
            *self.args,
        ]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        try:
            wait_healthy(self.url + "/healthz", self.startup_timeout, self.proc)
        except BaseException:
            self.__exit__()
            raise
        return self

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (graceful shutdown), then the exit code; killed if it does not exit in ``timeout``."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.stop()
        self._log.close()

    def client(self, **kw: Any) -> openai.OpenAI:
        """The official sync client with the server's token, no client-side retries."""
        kw.setdefault("api_key", self.token or "none")
        return openai.OpenAI(base_url=self.base_url, max_retries=0, timeout=kw.pop("timeout", 300.0), **kw)

    def async_client(self, **kw: Any) -> openai.AsyncOpenAI:
        """The official async client with the server's token, no client-side retries."""
        kw.setdefault("api_key", self.token or "none")
        return openai.AsyncOpenAI(base_url=self.base_url, max_retries=0, timeout=kw.pop("timeout", 300.0), **kw)

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of /metrics as {(name, sorted labels): value}."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        text = httpx.get(self.url + "/metrics", headers=headers, timeout=30).raise_for_status().text
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }


def metric(samples: dict, name: str, **labels: str) -> float:
    """One sample's value (0 when absent)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def passes_with_company(samples: dict) -> float:
    """Teacher passes that held more than one request: all passes less those of one (bucket le=1)."""
    return metric(samples, "bbwd_teacher_batch_requests_count") - metric(
        samples, "bbwd_teacher_batch_requests_bucket", le="1.0"
    )


class CuttingProxy:
    """A loopback proxy (Starlette on uvicorn, in a thread) in front of an OpenAI-compatible server.

    Requests pass through unchanged, except that a streamed request whose last message contains
    ``[cut]`` loses its connection after the target's first two events (a disconnect mid-stream).
    """

    def __init__(self, upstream: str) -> None:
        import threading

        import uvicorn
        from starlette.applications import Starlette
        from starlette.responses import Response, StreamingResponse
        from starlette.routing import Route

        async def forward(request):
            raw = await request.body()
            body = json.loads(raw)
            client = httpx.AsyncClient(timeout=300)
            sent = client.build_request(
                "POST", upstream + "/chat/completions", content=raw, headers={"Content-Type": "application/json"}
            )
            response = await client.send(sent, stream=True)
            cut = body.get("stream") and "[cut]" in str(body["messages"][-1].get("content"))

            async def relay():
                events = 0
                try:
                    async for chunk in response.aiter_raw():
                        yield chunk
                        events += chunk.count(b"\n\n")
                        if cut and events >= 2:
                            raise ConnectionAbortedError("cut by the test proxy")
                finally:
                    await response.aclose()
                    await client.aclose()

            if not body.get("stream"):
                data = b"".join([c async for c in relay()])
                return Response(data, status_code=response.status_code, media_type="application/json")
            return StreamingResponse(relay(), status_code=response.status_code, media_type="text/event-stream")

        self.port = free_port()
        app = Starlette(routes=[Route("/v1/chat/completions", forward, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=self.port, log_level="critical"))
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL."""
        return f"http://{HOST}:{self.port}/v1"

    def __enter__(self) -> CuttingProxy:
        import time

        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the test proxy did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        self._thread.join(30)
