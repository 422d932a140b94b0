"""Dequantising a GGUF file into a plain transformers model (needs the ``gguf`` and ``accelerate`` packages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase


def strip_quantizer(model: PreTrainedModel) -> PreTrainedModel:
    """Forget that a model came from a GGUF file: its weights are plain tensors once dequantised."""
    loaded: Any = model  # the loader's own attributes, which torch's typing of Module attributes does not know
    loaded.hf_quantizer = None
    loaded.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def load_gguf(path: Path, dtype: torch.dtype = torch.float32) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Dequantise a GGUF file into a transformers model and its tokenizer."""
    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    return strip_quantizer(model), tokenizer
