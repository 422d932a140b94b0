"""``transformers serve`` (ignores ``n``, no logprobs) as a subprocess on 127.0.0.1 on a plain Hugging Face folder,
for the live tests and ``scripts/record_fixtures.py`` (llama.cpp's server and the helpers: ``bench/common.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import HOST, free_port, wait_healthy


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
