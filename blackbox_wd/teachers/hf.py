"""The one path from a name to a ready teacher (:func:`ready_teacher`), and the device and dtype it runs in
(:func:`placement`).

In order, each step in one home: the name resolved to a spec (``registry.resolve``), its files made present
(``files.present``: the function of its kind), the device and dtype chosen (:func:`placement`, once a run: the
sampler of another local model as the target takes the same), the weights loaded in that dtype
(``weights.load_weights``) and put on that device, and the teacher's level reader and projection attached
(``forcing.HFTeacher``); without a placement, the teacher's card (``card.read_card``). A placement for one prompt on
CPU in float32 (``placement(..., one_prompt=True)``, ``bbwd score``) forces a bundled Llama teacher in numpy instead
(``array_forcing.ArrayTeacher``): the same states to float32 rounding, without torch's import.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast, overload

from blackbox_wd.errors import BBWDError
from blackbox_wd.teachers.card import TeacherCard, read_card
from blackbox_wd.teachers.files import present
from blackbox_wd.teachers.registry import ModelSpec, resolve

if TYPE_CHECKING:
    from blackbox_wd.teachers.forcing import HFTeacher
    from blackbox_wd.teachers.teacher import Teacher


@dataclass(frozen=True)
class Placement:
    """Where a teacher's weights run, in which dtype and by which engine: chosen once a run (:func:`placement`), for
    the teacher and for another local model that draws the target's samples."""

    device: str
    dtype: DType
    engine: Engine = "torch"


DType = Literal["float32", "bfloat16", "float16"]
DTYPES: tuple[DType, ...] = ("float32", "bfloat16", "float16")
# transformers' model in torch (``forcing.HFTeacher``), or a bundled Llama in numpy (``array_forcing.ArrayTeacher``)
Engine = Literal["torch", "numpy"]

# Where a GPU's driver shows itself on Linux: NVIDIA's, Jetson's, ROCm's (torch.cuda serves all three) and WSL's.
GPU_DRIVERS = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/nvhost-ctrl-gpu", "/dev/kfd", "/dev/dxg")


def cuda_available() -> bool:
    """Whether torch sees a CUDA (or ROCm) GPU: on Linux without a GPU driver, False without importing torch (its
    import takes a second or two, which a run whose teacher never loads should not pay); else torch's answer."""
    if sys.platform.startswith("linux") and not any(os.path.exists(p) for p in GPU_DRIVERS):
        return False
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str, cuda: bool | None = None) -> str:
    """The device a teacher runs on, as its weights report it: 'auto' -> "cuda:0" when a GPU is there, else "cpu";
    "cuda" -> "cuda:0" (where torch puts "cuda"; a Ray actor's GPU is its "cuda:0"); "cpu" and "cuda:N" as given.

    ``cuda``: whether a GPU is there (a Ray driver asks its cluster); None: this process's (:func:`cuda_available`).
    BBWDError when a GPU is named and there is none.
    """
    cuda = cuda_available() if cuda is None else cuda
    if device == "auto":
        device = "cuda" if cuda else "cpu"
    if device.startswith("cuda") and not cuda:
        raise BBWDError(f"device '{device}' asked for but no CUDA GPU is available")
    return "cuda:0" if device == "cuda" else device


def pick_dtype(dtype: str, device: str) -> DType:
    """'auto' -> "bfloat16" on GPU, "float32" on CPU; else the dtype named (the name of a torch dtype)."""
    if dtype == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in DTYPES:
        raise BBWDError(f"unknown dtype '{dtype}': use auto, float32, bfloat16 or float16")
    return dtype  # one of DTYPES


def placement(
    device: str = "auto", dtype: str = "auto", cuda: bool | None = None, *, one_prompt: bool = False
) -> Placement:
    """The device (:func:`resolve_device`), the dtype (:func:`pick_dtype`) and the engine a teacher runs in.

    Parameters
    ----------
    device : str
        "auto", "cpu", "cuda" or "cuda:N".
    dtype : str
        "auto", "float32", "bfloat16" or "float16".
    cuda : bool or None
        Whether a GPU is there for "auto" (a Ray driver asks its cluster); None: this process's
        (:func:`cuda_available`).
    one_prompt : bool
        The run scores one prompt (``bbwd score``), where start-up outweighs throughput: on CPU in float32, a
        bundled Llama teacher is forced in numpy (engine "numpy"); else, and for any other teacher, in torch.

    Returns
    -------
    Placement
    """
    resolved = resolve_device(device, cuda)
    dtype_name = pick_dtype(dtype, resolved)
    engine: Engine = "numpy" if one_prompt and resolved == "cpu" and dtype_name == "float32" else "torch"
    return Placement(resolved, dtype_name, engine)


@overload
def ready_teacher(
    name: str | ModelSpec, place: Placement, layer: int | None = ..., token_budget: int = ...
) -> Teacher: ...
@overload
def ready_teacher(
    name: str | ModelSpec, place: None, layer: int | None = ..., token_budget: int = ...
) -> TeacherCard: ...
@overload
def ready_teacher(
    name: str | ModelSpec, place: Placement | None, layer: int | None = ..., token_budget: int = ...
) -> Teacher | TeacherCard: ...
def ready_teacher(
    name: str | ModelSpec, place: Placement | None, layer: int | None = None, token_budget: int = 16384
) -> Teacher | TeacherCard:
    """A name made a ready teacher, in one pass: the name resolved to a spec (``registry.resolve``), its files made
    present (``files.present``: its kind's function), then its weights loaded in the placement's dtype
    (``weights.load_weights``) and put on its device, and the teacher's level reader and projection attached
    (:class:`~blackbox_wd.teachers.forcing.HFTeacher`); a bundled Llama teacher under the engine "numpy", its
    weights mapped by :class:`~blackbox_wd.teachers.array_forcing.ArrayTeacher`; without a placement, its card
    (``card.read_card``: tokenizer, context and layer, no weights).

    Parameters
    ----------
    name : str or ModelSpec
        A registry name, a hub id, a model folder or a .gguf file; or a spec already resolved.
    place : Placement or None
        Where the weights run, and in which dtype; None: the card only.
    layer : int or None
        The layer whose states are kept; None: half the model's.
    token_budget : int
        Tokens a teacher pass holds.

    Returns
    -------
    HFTeacher or ArrayTeacher, or TeacherCard without a placement
    """
    spec = name if isinstance(name, ModelSpec) else resolve(name)
    files = present(spec)
    if place is not None and place.engine == "numpy" and spec.kind == "embedded":
        from blackbox_wd.teachers.array_forcing import array_teacher

        numpy_teacher = array_teacher(read_card(files, layer), Path(files.source))
        if numpy_teacher is not None:  # else not a Llama in float32: torch's
            return numpy_teacher
    if place is not None:
        from blackbox_wd.teachers.weights import torch_teacher  # transformers' model code, where weights load

        return torch_teacher(files, place.device, place.dtype, layer, token_budget)
    return read_card(files, layer)


def load_teacher(
    name: str, device: str = "auto", dtype: str = "auto", layer: int | None = None, token_budget: int = 16384
) -> HFTeacher:
    """The teacher of a registry name, hub id, folder or GGUF file (:func:`ready_teacher`), on ``device`` in
    ``dtype`` (:func:`placement`), in torch."""
    return cast("HFTeacher", ready_teacher(name, placement(device, dtype), layer, token_budget))


def load_card(name: str, layer: int | None = None) -> TeacherCard:
    """The card of a registry name, hub id, folder or GGUF file: :func:`ready_teacher` without a placement."""
    return read_card(present(resolve(name)), layer)
