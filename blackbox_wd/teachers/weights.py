"""A model's weights and tokenizer, read from its files (``files.ModelFiles``) in a dtype, and the teacher forced in
torch on them (:func:`torch_teacher`): steps 3 and 4 of the one path (``hf.ready_teacher``), imported where weights
load (transformers' model code, torch with it)."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from blackbox_wd.teachers.card import read_tokenizer
from blackbox_wd.teachers.files import ModelFiles
from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.gguf import load_gguf


def load_weights(files: ModelFiles, dtype: str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A model's weights and tokenizer from its files, in ``dtype`` (a GGUF file dequantised: ``gguf.load_gguf``).

    Parameters
    ----------
    files : ModelFiles
        The model's files, present.
    dtype : str
        The name of the torch dtype the weights are loaded in (``hf.DTYPES``).

    Returns
    -------
    tuple of (PreTrainedModel, PreTrainedTokenizerBase)

    Raises
    ------
    BBWDError
        When the files cannot be read (hub unreachable, gated repo, missing files).
    """
    try:
        if files.gguf_file is not None:
            return load_gguf(Path(files.source) / files.gguf_file, dtype)
        tokenizer = read_tokenizer(files)  # as the card reads it
        return AutoModelForCausalLM.from_pretrained(files.source, dtype=dtype), tokenizer
    except OSError as exc:  # hub unreachable, gated repo, missing files
        raise files.unreadable(exc) from exc


def torch_teacher(files: ModelFiles, device: str, dtype: str, layer: int | None, token_budget: int) -> HFTeacher:
    """The teacher forced in torch: its weights loaded in the placement's dtype (:func:`load_weights`), put on its
    device, and the level reader and projection attached (``forcing.HFTeacher``).

    Parameters
    ----------
    files : ModelFiles
        The model's files, present.
    device, dtype : str
        Where the weights run, and the name of their torch dtype (``hf.placement``).
    layer : int or None
        The layer whose states are kept; None: half the model's.
    token_budget : int
        Tokens a teacher pass holds.

    Returns
    -------
    HFTeacher
    """
    model, tokenizer = load_weights(files, dtype)
    # transformers wraps PreTrainedModel.to in functools.wraps, whose typing reads the bound call as unbound
    model = model.to(device).eval()  # type: ignore[arg-type]
    return HFTeacher(model, tokenizer, name=files.spec.name, layer=layer, token_budget=token_budget)
