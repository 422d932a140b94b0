"""Shared fixtures: the real embedded teacher (loaded once per session) and a tiny random Llama."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def smollm_teacher():
    """The embedded SmolLM2-135M teacher on CPU (downloaded and converted on first use)."""
    from blackbox_wd.teachers.hf import load_teacher

    return load_teacher("smollm2-135m", device="cpu")


@pytest.fixture(scope="session")
def tiny_llama():
    """A randomly initialised 4-layer Llama with a word-level tokenizer and a chat template."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<user>", "<assistant>", "<end>"] + \
        "what is the capital of france paris it rome city a an big small yes no".split()
    vocab = {w: i for i, w in enumerate(words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>",
                                  additional_special_tokens=["<user>", "<assistant>", "<end>"])
    tok.chat_template = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} <end> {% endfor %}"
                         "{% if add_generation_prompt %}<assistant> {% endif %}")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(words), hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                         pad_token_id=0, eos_token_id=1, bos_token_id=None)
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = [1, vocab["<end>"]]
    model.generation_config.pad_token_id = 0
    return model, tok
