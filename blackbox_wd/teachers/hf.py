"""Teacher forcing with a Hugging Face causal LM: mid-layer states of exactly the response tokens."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from jinja2 import TemplateError
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from blackbox_wd.errors import BBWDError, one_line
from blackbox_wd.records import Messages, TokenStates
from blackbox_wd.teachers.embedded import ensure_hf_folder
from blackbox_wd.teachers.gguf import load_gguf
from blackbox_wd.teachers.projection import PROJ_DIM, PROJ_SEED, projection_matrix
from blackbox_wd.teachers.registry import EMBEDDED_MODELS, ModelSpec, resolve

Response = str | Sequence[int]


class _Stop(Exception):
    """Raised by the mid-layer hook to skip the layers above it."""


def pick_device(device: str) -> torch.device:
    """'auto' -> cuda when available, else cpu; 'cpu'/'cuda'/'cuda:N' as given."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise BBWDError(f"device '{device}' asked for but no CUDA GPU is available")
    return torch.device(device)


def pick_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' -> bfloat16 on GPU, float32 on CPU; else the named torch dtype."""
    if dtype == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    except KeyError:
        raise BBWDError(f"unknown dtype '{dtype}': use auto, float32, bfloat16 or float16") from None


def load_model(spec: ModelSpec, device: str = "auto", dtype: str = "auto") -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load weights and tokenizer for a resolved model spec, in eval mode on the chosen device."""
    dev = pick_device(device)
    dt = pick_dtype(dtype, dev)
    try:
        if spec.kind == "gguf":
            model, tokenizer = load_gguf(Path(spec.source), dt)
        else:
            source = str(ensure_hf_folder(EMBEDDED_MODELS[spec.source])) if spec.kind == "embedded" else spec.source
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dt)
    except OSError as exc:  # hub unreachable, gated repo, missing files
        raise BBWDError(f"could not load model '{spec.name}' from {spec.source}: {str(exc).splitlines()[0]}") from exc
    return model.to(dev).eval(), tokenizer


def pad_batch(seqs: Sequence[Sequence[int]], pad: int, left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Token id lists as one (B, T) id tensor and its attention mask, padded right (or left)."""
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        cols = slice(width - len(seq), width) if left else slice(0, len(seq))
        ids[row, cols] = torch.tensor(seq, dtype=torch.long)
        mask[row, cols] = 1
    return ids, mask


class HFTeacher:
    """Teacher-forces responses through a causal LM and returns their mid-layer token states.

    The layer is ell = floor(L / 2) unless given; ``hidden_states[ell]`` in transformers' numbering,
    i.e. the output of decoder block ell - 1. Only the blocks up to ell run unless log-probs are
    asked for. States are projected by the fixed matrix of ``projection.projection_matrix``.
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, name: str = "",
                 layer: int | None = None, proj_dim: int = PROJ_DIM, proj_seed: int = PROJ_SEED,
                 token_budget: int = 16384) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.n_layers = int(model.config.get_text_config().num_hidden_layers)
        self.layer = self.n_layers // 2 if layer is None else int(layer)
        if not 1 <= self.layer <= self.n_layers:
            raise BBWDError(f"layer {self.layer} out of range: the teacher has layers 1..{self.n_layers}")
        self.hidden_size = int(model.config.get_text_config().hidden_size)
        self.proj_dim = proj_dim
        self.proj_seed = proj_seed
        self.projection = projection_matrix(self.hidden_size, proj_dim, proj_seed)
        self.token_budget = token_budget
        self.max_length = getattr(model.config.get_text_config(), "max_position_embeddings", None)
        self._blocks = model.get_decoder().layers

    @property
    def device(self) -> torch.device:
        """Device of the model's weights."""
        return next(self.model.parameters()).device

    def prompt_ids(self, messages: Messages) -> list[int]:
        """Token ids of the prompt up to where the assistant's answer starts."""
        tok = self.tokenizer
        if tok.chat_template:
            try:
                text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                               enable_thinking=False)
            except TemplateError as exc:  # e.g. roles that do not alternate, no user turn
                raise BBWDError(f"the teacher's chat template rejects these messages: {one_line(exc)}") from None
            return tok(text, add_special_tokens=False)["input_ids"]
        text = "\n\n".join(m["content"] for m in messages) + "\n"
        return tok(text, add_special_tokens=True)["input_ids"]

    def response_ids(self, response: Response) -> list[int]:
        """Token ids of a response: its text tokenized alone, no special tokens, no EOS."""
        if isinstance(response, str):
            return self.tokenizer(response, add_special_tokens=False)["input_ids"]
        return [int(t) for t in response]

    def encode(self, messages: Messages, responses: Sequence[Response], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force every response after the same prompt; one TokenStates per response."""
        prompt = self.prompt_ids(messages)
        return self.encode_ids([(prompt, self.response_ids(r)) for r in responses], logprobs)

    def encode_ids(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool = False) -> list[TokenStates]:
        """Teacher-force (prompt ids, response ids) pairs, batched by length under the token budget."""
        for i, pair in enumerate(pairs):
            self.check(i, *pair)
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out: list[TokenStates | None] = [None] * len(pairs)
        for chunk in self._chunks(order, pairs):
            for i, ts in zip(chunk, self._forward([pairs[i] for i in chunk], logprobs)):
                out[i] = ts
        return out  # type: ignore[return-value]

    def check(self, index: int, prompt: list[int], response: list[int]) -> None:
        """Raise BBWDError when response ``index`` is empty or does not fit the teacher's context."""
        if not response:
            raise BBWDError(f"response {index} is empty: no tokens to measure")
        if self.max_length and len(prompt) + len(response) > self.max_length:
            raise BBWDError(f"prompt+response {index} has {len(prompt) + len(response)} tokens, "
                            f"over the teacher's context of {self.max_length}")

    def _chunks(self, order: list[int], pairs: Sequence[tuple[list[int], list[int]]]) -> list[list[int]]:
        """Consecutive groups of the length-sorted indices whose padded size fits the token budget."""
        chunks: list[list[int]] = [[]]
        for i in order:
            length = len(pairs[i][0]) + len(pairs[i][1])  # sorted, so the newest is the longest
            if chunks[-1] and (len(chunks[-1]) + 1) * length > self.token_budget:
                chunks.append([])
            chunks[-1].append(i)
        return chunks

    @torch.inference_mode()
    def _forward(self, pairs: Sequence[tuple[list[int], list[int]]], logprobs: bool) -> list[TokenStates]:
        """One right-padded forward pass over a batch of prompt+response sequences."""
        ids, mask = pad_batch([p + r for p, r in pairs], self.tokenizer.pad_token_id or 0)
        ids, mask = ids.to(self.device), mask.to(self.device)

        captured: list[torch.Tensor] = []

        def hook(_module, _args, output):
            captured.append(output[0] if isinstance(output, tuple) else output)
            if not logprobs:
                raise _Stop

        handle = self._blocks[self.layer - 1].register_forward_hook(hook)
        try:
            last_hidden = self.model.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        except _Stop:
            last_hidden = None
        finally:
            handle.remove()
        mid = captured[0].float()

        out = []
        for row, (prompt, response) in enumerate(pairs):
            lo, hi = len(prompt), len(prompt) + len(response)
            states = mid[row, lo:hi].cpu().double().numpy()
            lp = None
            if last_hidden is not None:
                lp = self._token_logprobs(last_hidden[row, lo - 1 : hi - 1], ids[row, lo:hi])
            out.append(TokenStates(states=states @ self.projection, last=states[-1].copy(), logprobs=lp))
        return out

    def _token_logprobs(self, hidden: torch.Tensor, targets: torch.Tensor) -> np.ndarray:
        """log p(target_t | prefix) from the final hidden states preceding each target token."""
        logits = self.model.get_output_embeddings()(hidden).float()
        cap = getattr(self.model.config.get_text_config(), "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        lp = torch.log_softmax(logits, dim=-1).gather(-1, targets[:, None])[:, 0]
        return lp.cpu().double().numpy()


def load_teacher(name: str, device: str = "auto", dtype: str = "auto", layer: int | None = None,
                 token_budget: int = 16384) -> HFTeacher:
    """Resolve a registry name, hub id, folder or GGUF file and wrap it as a teacher."""
    spec = resolve(name)
    model, tokenizer = load_model(spec, device, dtype)
    return HFTeacher(model, tokenizer, name=name, layer=layer, token_budget=token_budget)
