"""A model's weights and tokenizer, read from its files (``files.ModelFiles``) in a dtype: step 3 of the one path
(``hf.ready_teacher``)."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from blackbox_wd.teachers.files import ModelFiles
from blackbox_wd.teachers.gguf import load_gguf


def load_weights(files: ModelFiles, dtype: torch.dtype) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A model's weights and tokenizer from its files, in ``dtype`` (a GGUF file dequantised: ``gguf.load_gguf``).

    Parameters
    ----------
    files : ModelFiles
        The model's files, present.
    dtype : torch.dtype
        The dtype the weights are loaded in.

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
        tokenizer = AutoTokenizer.from_pretrained(files.source)
        return AutoModelForCausalLM.from_pretrained(files.source, dtype=dtype), tokenizer
    except OSError as exc:  # hub unreachable, gated repo, missing files
        raise files.unreadable(exc) from exc
