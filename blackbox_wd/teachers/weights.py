"""A model's weights and tokenizer, read from its files (``files.ModelFiles``) in a dtype: step 3 of the one path
(``hf.ready_teacher``)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerBase

from blackbox_wd.teachers.card import read_tokenizer
from blackbox_wd.teachers.files import ModelFiles
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
            return load_gguf(Path(files.source) / files.gguf_file, getattr(torch, dtype))
        tokenizer = read_tokenizer(files)  # as the card reads it
        return AutoModelForCausalLM.from_pretrained(files.source, dtype=getattr(torch, dtype)), tokenizer
    except OSError as exc:  # hub unreachable, gated repo, missing files
        raise files.unreadable(exc) from exc
