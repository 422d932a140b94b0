"""Dequantising a GGUF file into a plain transformers model (needs the ``gguf`` and ``accelerate`` packages), and
the Hugging Face folder saved once from a bundled model's."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from filelock import FileLock

from blackbox_wd.teachers.embedded import SMOLLM2, WheelModel, ensure_gguf, models_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


def strip_quantizer(model: PreTrainedModel) -> PreTrainedModel:
    """Forget that a model came from a GGUF file: its weights are plain tensors once dequantised."""
    loaded: Any = model  # the loader's own attributes, which torch's typing of Module attributes does not know
    loaded.hf_quantizer = None
    loaded.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model


def load_gguf(path: Path, dtype: str = "float32") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Dequantise a GGUF file into a transformers model and its tokenizer, in ``dtype`` (a torch dtype's name)."""
    # the model code (torch with it): imported where a GGUF file is dequantised, not where the folder is found
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=dtype)
    return strip_quantizer(model), tokenizer


def ensure_hf_folder(model: WheelModel = SMOLLM2) -> Path:
    """A regular Hugging Face folder saved once from the dequantised GGUF; built on first use."""
    folder = models_dir() / f"{model.name}-hf"
    if (folder / "config.json").exists():
        return folder
    gguf = ensure_gguf(model)
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
