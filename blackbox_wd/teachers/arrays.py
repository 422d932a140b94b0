"""A Llama-architecture teacher's forward pass in numpy, on the weights mapped read-only from its safetensors file:
the bundled SmolLM2's states without importing torch or transformers' model code (about 3 s of a new process, where
the pass of one prompt takes a fraction of a second).

The same arithmetic as transformers' ``LlamaForCausalLM`` in float32 (RMSNorm, rotary positions, grouped-query
attention, SwiGLU, tied or untied head), so ``hidden_states[layer]`` and the log-probs agree with it to float32
rounding (``tests/teachers/test_arrays.py``). :class:`LlamaArrays` reads one prompt and its responses: the prompt's
tokens once, each response attending to them.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import expit, softmax

from blackbox_wd.errors import BBWDError

_DTYPES = {"F32": np.float32}
_BLOCK_WEIGHTS = (
    "input_layernorm",
    "post_attention_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


@dataclass(frozen=True)
class LlamaShape:
    """What a Llama config.json says of the forward pass."""

    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    n_layers: int
    eps: float
    rope_theta: float
    tied: bool

    @classmethod
    def of(cls, config: dict) -> LlamaShape:
        """The shape of a config.json of ``model_type`` "llama" with default rotary positions; BBWDError for any
        other."""
        rope = config.get("rope_parameters") or {
            "rope_theta": config.get("rope_theta", 10000.0),
            "rope_type": "default",
        }
        plain = (
            config.get("model_type") == "llama"
            and config.get("hidden_act", "silu") == "silu"
            and rope.get("rope_type", "default") == "default"
            and not config.get("attention_bias")
            and not config.get("mlp_bias")
            and config.get("pretraining_tp", 1) == 1
        )
        if not plain:
            raise BBWDError("the numpy teacher reads Llama models with default rotary positions and no biases only")
        heads = int(config["num_attention_heads"])
        return cls(
            hidden=int(config["hidden_size"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads", heads)),
            head_dim=int(config.get("head_dim") or config["hidden_size"] // heads),
            n_layers=int(config["num_hidden_layers"]),
            eps=float(config["rms_norm_eps"]),
            rope_theta=float(rope["rope_theta"]),
            tied=bool(config.get("tie_word_embeddings", False)),
        )


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file as a read-only array mapped from it (nothing is read until used).

    Parameters
    ----------
    path : Path
        A safetensors file of float32 tensors.

    Returns
    -------
    dict of str to ndarray
    """
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in _DTYPES:
            raise BBWDError(f"the numpy teacher reads float32 weights only: {name} is {entry['dtype']}")
        start, stop = entry["data_offsets"]
        out[name] = data[start:stop].view(_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return out


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return weight * (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)))


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotary positions on (heads, tokens, head_dim) rows, as transformers' ``apply_rotary_pos_emb``."""
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


class LlamaArrays:
    """A Llama causal LM's forward pass in numpy, on weights mapped from its folder's model.safetensors.

    Parameters
    ----------
    folder : Path
        A Hugging Face folder (config.json, model.safetensors) of a Llama model in float32.
    """

    def __init__(self, folder: Path) -> None:
        self.shape = LlamaShape.of(json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")))
        self.weights = read_safetensors(Path(folder) / "model.safetensors")
        s = self.shape
        head = [] if s.tied else ["lm_head.weight"]
        blocks = [f"model.layers.{b}.{part}.weight" for b in range(s.n_layers) for part in _BLOCK_WEIGHTS]
        names = ["model.embed_tokens.weight", "model.norm.weight", *blocks, *head]
        missing = [n for n in names if n not in self.weights]
        if missing:
            raise BBWDError(f"the numpy teacher misses {len(missing)} weights, the first {missing[0]}")
        # in float32, as transformers computes them
        exponents = np.arange(0, s.head_dim, 2).astype(np.float32) / np.float32(s.head_dim)
        self.inv_freq = np.float32(1.0) / (np.float32(s.rope_theta) ** exponents)

    def _w(self, name: str) -> np.ndarray:
        return self.weights[name]

    def _rope(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        freqs = positions.astype(np.float32)[:, None] * self.inv_freq[None, :]
        emb = np.concatenate([freqs, freqs], axis=-1)
        return np.cos(emb), np.sin(emb)

    def forward(
        self, prompt: Sequence[int], responses: Sequence[Sequence[int]], layer: int, final: bool = False
    ) -> tuple[list[np.ndarray], list[np.ndarray] | None, np.ndarray | None]:
        """The states after block ``layer`` (``hidden_states[layer]``) of each response's tokens after the prompt;
        with ``final``, also each response's final normed states and the prompt's last one (for log-probs).

        Parameters
        ----------
        prompt : sequence of int
            The prompt's token ids (positions 0..P-1).
        responses : sequence of sequences of int
            Each response's ids, at positions P.. after the prompt, attending to it and to its own earlier tokens.
        layer : int
            The layer whose states are kept, 1..n_layers.
        final : bool
            Run every block and the final norm too.

        Returns
        -------
        mids : list of (n_i, hidden) float32 arrays
        finals : list of (n_i, hidden) float32 arrays, or None without ``final``
        prompt_final : (hidden,) float32 array, or None without ``final``
        """
        s = self.shape
        p, lengths = len(prompt), [len(r) for r in responses]
        starts = np.cumsum([p, *lengths])  # the responses' rows after the prompt's
        ids = np.asarray([*prompt, *(t for r in responses for t in r)], dtype=np.int64)
        positions = np.concatenate([np.arange(p), *(p + np.arange(n) for n in lengths)])
        cos, sin = self._rope(positions)
        h = np.asarray(self._w("model.embed_tokens.weight")[ids], dtype=np.float32)
        blocks = s.n_layers if final else layer
        mid = h
        for b in range(blocks):
            h = self._block(b, h, cos, sin, p, starts)
            if b == layer - 1:
                mid = h
        mids = [mid[starts[i] : starts[i + 1]] for i in range(len(responses))]
        if not final:
            return mids, None, None
        normed = _rms_norm(h, self._w("model.norm.weight"), s.eps)
        return mids, [normed[starts[i] : starts[i + 1]] for i in range(len(responses))], normed[p - 1]

    def _block(self, b: int, h: np.ndarray, cos: np.ndarray, sin: np.ndarray, p: int, starts: np.ndarray) -> np.ndarray:
        """Decoder block ``b`` over every row: the prompt's causal, each response's over the prompt and itself."""
        s, w = self.shape, f"model.layers.{b}."
        x = _rms_norm(h, self._w(w + "input_layernorm.weight"), s.eps)
        rows = len(h)
        q = (x @ self._w(w + "self_attn.q_proj.weight").T).reshape(rows, s.heads, s.head_dim).transpose(1, 0, 2)
        k = (x @ self._w(w + "self_attn.k_proj.weight").T).reshape(rows, s.kv_heads, s.head_dim).transpose(1, 0, 2)
        v = (x @ self._w(w + "self_attn.v_proj.weight").T).reshape(rows, s.kv_heads, s.head_dim).transpose(1, 0, 2)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        group = s.heads // s.kv_heads
        k, v = np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)
        scale = np.float32(s.head_dim**-0.5)
        out = np.empty_like(q)
        segments = [(0, p, 0)] + [(int(starts[i]), int(starts[i + 1]), p) for i in range(len(starts) - 1)]
        for lo, hi, shared in segments:  # shared: the prompt's rows every row of the segment sees
            keys = np.concatenate([k[:, :shared], k[:, lo:hi]], axis=1)
            values = np.concatenate([v[:, :shared], v[:, lo:hi]], axis=1)
            scores = (q[:, lo:hi] @ keys.transpose(0, 2, 1)) * scale
            n = hi - lo
            scores[:, :, shared:][:, np.triu(np.ones((n, n), dtype=bool), 1)] = -np.inf
            out[:, lo:hi] = softmax(scores, axis=-1) @ values
        attn = out.transpose(1, 0, 2).reshape(rows, s.heads * s.head_dim)
        h = h + attn @ self._w(w + "self_attn.o_proj.weight").T
        x = _rms_norm(h, self._w(w + "post_attention_layernorm.weight"), s.eps)
        gate = x @ self._w(w + "mlp.gate_proj.weight").T
        up = x @ self._w(w + "mlp.up_proj.weight").T
        return h + (gate * expit(gate) * up) @ self._w(w + "mlp.down_proj.weight").T  # SiLU(gate) * up

    def logits(self, hidden: np.ndarray) -> np.ndarray:
        """Next-token logits of final normed states (the tied embeddings where the model ties them)."""
        head = "model.embed_tokens.weight" if self.shape.tied else "lm_head.weight"
        return hidden @ self._w(head).T
