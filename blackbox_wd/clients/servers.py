"""Real OpenAI-compatible servers on 127.0.0.1 for recording fixtures and live tests.

``transformers serve`` (ignores ``n``, no logprobs) runs as a subprocess on a plain Hugging Face
folder; llama.cpp (honours ``n``, returns logprobs) runs in-process from the GGUF through the
``xllamacpp`` wheel (the white-box sampler's own llama.cpp, ``clients.llamacpp``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from blackbox_wd.errors import BBWDError

HOST = "127.0.0.1"


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def sampling_folder(folder: Path) -> Path:
    """A sibling of an HF folder (symlinked weights) whose generation config samples.

    ``transformers serve`` decodes greedily unless the model's generation config sets
    ``do_sample``; the embedded model's folder does not, so K samples would all be equal.
    """
    folder = Path(folder)
    out = folder.with_name(folder.name + "-serve")
    if (out / "generation_config.json").exists():
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for item in folder.iterdir():
        if item.name != "generation_config.json":
            (tmp / item.name).symlink_to(item.resolve())
    src = folder / "generation_config.json"
    gen = json.loads(src.read_text()) if src.exists() else {}
    gen.update(do_sample=True, top_k=0)
    (tmp / "generation_config.json").write_text(json.dumps(gen, indent=1))
    try:
        os.replace(tmp, out)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Poll ``url`` until it answers 200; BBWDError on timeout or if the process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BBWDError(f"server exited with code {proc.returncode} before becoming healthy")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise BBWDError(f"server at {url} not healthy after {timeout:.0f} s")


@dataclass
class TransformersServer:
    """``transformers serve <folder>`` on 127.0.0.1; serves the model under the folder's path."""

    folder: Path
    port: int = 0
    startup_timeout: float = 180.0
    log_path: Path | None = None
    proc: subprocess.Popen | None = None

    @property
    def model(self) -> str:
        """The name the server answers to: the folder path it was started with."""
        return str(self.folder)

    @property
    def base_url(self) -> str:
        """The OpenAI base URL."""
        return f"http://{HOST}:{self.port}/v1"

    def __enter__(self) -> TransformersServer:
        self.port = self.port or free_port()
        exe = shutil.which("transformers") or str(Path(sys.executable).with_name("transformers"))
        log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [
                exe,
                "serve",
                str(self.folder),
                "--host",
                HOST,
                "--port",
                str(self.port),
                "--device",
                "cpu",
                "--dtype",
                "float32",
                "--log-level",
                "warning",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        try:
            wait_healthy(f"http://{HOST}:{self.port}/health", self.startup_timeout, self.proc)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def llamacpp_server(
    gguf: Path,
    *,
    slots: int,
    context: int,
    threads: int,
    unified: bool = False,
    alias: str | None = None,
    api_key: str | None = None,
    port: int = 0,
    slot_dir: Path | None = None,
) -> Any:
    """llama.cpp's server started in this process (xllamacpp) on ``gguf`` at 127.0.0.1 (port 0: a free one),
    quiet and without warm-up: ``slots`` sequences, ``context`` KV cells (one cache shared by all sequences when
    ``unified``, else split evenly), ``threads`` CPU threads.

    With ``slot_dir`` its slots can be saved to and restored from files there (``/slots/<id>?action=save``), and
    its host-memory prompt cache is off: a slot then holds only what its own requests or a restore left in it.
    """
    try:
        import xllamacpp as xlc
    except ImportError as exc:  # a core dependency: only a broken install gets here
        raise BBWDError("llama.cpp needs the xllamacpp wheel: pip install xllamacpp") from exc
    p = xlc.CommonParams()
    p.model.path = str(gguf)
    if alias:
        p.model_alias = {alias}
    if api_key:
        p.api_keys = [api_key]
    p.n_parallel = slots
    p.n_ctx = context
    p.kv_unified = unified
    p.warmup = False
    p.verbosity = -1
    p.hostnames = [HOST]
    p.port = port
    p.cpuparams.n_threads = p.cpuparams_batch.n_threads = threads
    if slot_dir is not None:
        p.slot_save_path = os.path.join(slot_dir, "")  # llama.cpp appends the file name to it as it is
        p.cache_ram_mib = 0
        p.cache_idle_slots = False
    return xlc.Server(p)


@dataclass
class LlamaCppServer:
    """llama.cpp's server in-process (xllamacpp) on 127.0.0.1 from a GGUF file."""

    gguf: Path
    alias: str = "smollm2-135m"
    api_key: str | None = None
    n_parallel: int = 4
    n_threads: int = 2
    port: int = 0  # 0: any free port
    server: Any = None
    base: str = ""

    @property
    def model(self) -> str:
        """The model name to send."""
        return self.alias

    @property
    def base_url(self) -> str:
        """The OpenAI base URL."""
        return self.base + "/v1"

    def __enter__(self) -> LlamaCppServer:
        self.server = llamacpp_server(
            self.gguf,
            slots=self.n_parallel,
            context=2048 * self.n_parallel,
            threads=self.n_threads,
            alias=self.alias,
            api_key=self.api_key,
            port=self.port,
        )
        self.base = self.server.listening_address
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server = None  # the destructor stops the server
