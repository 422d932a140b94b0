"""Attention over shared key/value levels: tokens read once serve every row that continues them.

A forward pass sees, besides its rows' own tokens, frozen ``Level``s: the keys and values (at every
layer) of tokens run before, held once per group of rows (one group for a prefix that every row
shares, one per prompt for the prompts' own tokens). Row r reads group ``index[r]`` of a level in
place, so no cache is copied per row. Which keys a query sees is decided by positions (causal, and
the window of sliding-window layers) and a validity mask, so padding may sit anywhere. The
attention is plain scaled dot product with one float32 softmax over all levels together, as
transformers' eager attention computes it. Models run it through an attention implementation
registered as ``bbwd_levels:<base>`` that calls the base one whenever no levels are passed. On a
GPU, a pass with levels also runs each decoder layer compiled, with this attention outside the graph.
"""

from __future__ import annotations

import functools
import importlib.util
import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

import torch
from transformers import AttentionInterface, AttentionMaskInterface, PreTrainedModel
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

PREFIX = "bbwd_levels:"
NO_MASK = torch.ones((1, 1, 1, 1), dtype=torch.bool)  # a 4D mask makes transformers skip building its own


@dataclass
class Level:
    """Keys and values of G groups of tokens at every layer run, with each column's position and validity."""

    positions: torch.Tensor  # (G, L) long
    valid: torch.Tensor  # (G, L) bool: False on padding
    keys: dict[int, torch.Tensor] = field(default_factory=dict)  # layer -> (G, Hkv, L, D)
    values: dict[int, torch.Tensor] = field(default_factory=dict)

    @property
    def width(self) -> int:
        """L: the columns of each group."""
        return int(self.positions.shape[1])

    def select(self, rows: torch.Tensor) -> Level:
        """The level with only groups ``rows`` (index_select: a copy)."""
        return Level(
            self.positions[rows],
            self.valid[rows],
            {k: v[rows] for k, v in self.keys.items()},
            {k: v[rows] for k, v in self.values.items()},
        )


def _groups(index: torch.Tensor) -> list[tuple[int, torch.Tensor | slice]]:
    """(group, its rows) for each group that ``index`` (group of each row) names: a slice when the rows are
    contiguous, else an index tensor."""
    out: list[tuple[int, torch.Tensor | slice]] = []
    for g in torch.unique(index).tolist():
        rows = (index == g).nonzero()[:, 0]
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        out.append((g, slice(lo, hi) if hi - lo == len(rows) else rows))
    return out


class Levels:
    """What one run of forward passes attends to: shared levels (each with the group every row reads) and
    the rows' own tokens, which grow with every pass (a sampler's decode steps)."""

    def __init__(self, shared: Sequence[tuple[Level, torch.Tensor]] = ()) -> None:
        self.shared = [(level, index) for level, index in shared]
        self._own: Level | None = None
        self.query = torch.empty(0, 0, dtype=torch.long)
        self.query_valid = torch.empty(0, 0, dtype=torch.bool)
        self.packed: torch.Tensor | None = None  # flat (row-major) indices of the valid query tokens of a packed pass
        self._groups: list[list[tuple[int, torch.Tensor | slice]]] | None = None
        self._allowed: dict[int | None, torch.Tensor] = {}
        self._sdpa: dict[int | None, torch.Tensor] = {}

    @property
    def own(self) -> Level:
        """The rows' own tokens so far; there from the first :meth:`step` on."""
        if self._own is None:
            raise RuntimeError("Levels.step must run before the rows' own tokens are read")
        return self._own

    def step(self, positions: torch.Tensor, valid: torch.Tensor, packed: bool = False) -> None:
        """Get ready for a pass of (R, Q) tokens at ``positions`` (``valid`` False on padding).

        ``packed``: the model runs the valid tokens only, as one row (:meth:`pack`); the attention alone sees
        them as the (R, Q) rows, so the layers' matrix products do no work on padding.
        """
        if self._own is None:
            self._own = Level(positions, valid)
        else:
            self.own.positions = torch.cat([self.own.positions, positions], 1)
            self.own.valid = torch.cat([self.own.valid, valid], 1)
        self.query, self.query_valid = positions, valid
        self.packed = valid.flatten().nonzero()[:, 0] if packed else None
        self._groups = None
        self._allowed, self._sdpa = {}, {}

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(R, Q, ...) rows of a packed pass -> (1, T, ...): their valid tokens in row order."""
        return x.flatten(0, 1)[cast(torch.Tensor, self.packed)][None]

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(1, T, ...) tokens of a packed pass -> (R, Q, ...) rows, zeros on padding."""
        r, q = self.query_valid.shape
        out = x.new_zeros(r * q, *x.shape[2:])
        return out.index_copy_(0, cast(torch.Tensor, self.packed), x[0]).view(r, q, *x.shape[2:])

    @property
    def groups(self) -> list[list[tuple[int, torch.Tensor | slice]]]:
        """Per shared level, (group, its rows) for each group this pass's rows read (found once a pass)."""
        if self._groups is None:
            self._groups = [_groups(index) for _, index in self.shared]
        return self._groups

    def keep(self, rows: torch.Tensor) -> None:
        """Go on with rows ``rows`` only (the others have finished)."""
        self.shared = [(level, index[rows]) for level, index in self.shared]
        self._own = None if self._own is None else self._own.select(rows)

    def allowed(self, window: int | None) -> torch.Tensor:
        """(R, Q, L) True where a query may see a key of the levels and own tokens, in order."""
        if window not in self._allowed:
            q = self.query[:, :, None]
            parts = []
            sources: list[tuple[Level, torch.Tensor | slice]] = [*self.shared, (self.own, slice(None))]
            for level, index in sources:
                k = level.positions[index][:, None, :]
                ok = level.valid[index][:, None, :] & (k <= q)
                parts.append(ok & (k > q - window) if window else ok)
            self._allowed[window] = torch.cat(parts, -1)
        return self._allowed[window]

    def sdpa_mask(self, window: int | None) -> torch.Tensor:
        """(R, 1, Q, L) :meth:`allowed` with padding queries seeing every key: finite, and never read."""
        if window not in self._sdpa:
            self._sdpa[window] = (self.allowed(window) | ~self.query_valid[:, :, None])[:, None]
        return self._sdpa[window]


def _grouped(x: torch.Tensor, mats: torch.Tensor, groups: list[tuple[int, torch.Tensor | slice]]) -> torch.Tensor:
    """Row r of x (R, H, M, A) times mats[group of r] (G, H, A, B): (R, H, M, B), each group in one matmul."""
    r, h, m, _ = x.shape
    if len(groups) == 1 and groups[0][1] == slice(0, r):
        g = groups[0][0]
        return (x.transpose(0, 1).reshape(h, r * m, -1) @ mats[g]).view(h, r, m, -1).transpose(0, 1)
    out = x.new_empty(r, h, m, mats.shape[-1])
    for g, rows in groups:
        part = x[rows]
        prod = part.transpose(0, 1).reshape(h, -1, part.shape[-1]) @ mats[g]
        out[rows] = prod.view(h, len(part), m, -1).transpose(0, 1)
    return out


def _per_row(level: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """A level's (G, ...) tensor read for each row: an expanded view when there is one group, else a copy."""
    return level.expand(len(index), *level.shape[1:]) if level.shape[0] == 1 else level[index]


@torch.compiler.disable  # a compiled layer runs it eagerly: its control flow reads the levels' Python state
def level_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    levels: Levels,
    scaling: float,
    softcap: float | None = None,
    sliding_window: int | None = None,
) -> torch.Tensor:
    """Attention of (R, Hq, Q, D) queries over the shared levels and the rows' own keys (this pass's appended):
    output (R, Q, Hq, D). In a packed pass (``Levels.step(packed=True)``) the tensors hold one row of the valid
    tokens, (1, H, T, D) in and (1, T, Hq, D) out, and the rows are unpacked for the attention alone.

    A pass of several tokens a row (prompts, teacher-forced responses: few rows) gathers each row's keys
    and runs ``scaled_dot_product_attention`` (:func:`_gathered`); a decode step (one token a row, many rows)
    reads every level in place, one matmul per group (:func:`_in_place`).
    """
    if levels.packed is not None:
        query, key, value = (levels.unpack(x.transpose(1, 2)).transpose(1, 2) for x in (query, key, value))
    layer, own = cast(int, module.layer_idx), levels.own  # transformers' attention modules number their layer
    if layer in own.keys:
        own.keys[layer] = torch.cat([own.keys[layer], key], 2)
        own.values[layer] = torch.cat([own.values[layer], value], 2)
    else:
        own.keys[layer], own.values[layer] = key, value
    if query.shape[2] > 1 and softcap is None:
        out = _gathered(query, layer, levels, scaling, sliding_window)
    else:
        out = _in_place(query, layer, levels, scaling, softcap, sliding_window)
    return out if levels.packed is None else levels.pack(out)


def _gathered(query: torch.Tensor, layer: int, levels: Levels, scaling: float, window: int | None) -> torch.Tensor:
    """:func:`level_attention` by each row's keys gathered from every level, and one fused attention."""
    own = levels.own
    keys = torch.cat([*(_per_row(lv.keys[layer], i) for lv, i in levels.shared), own.keys[layer]], 2)
    values = torch.cat([*(_per_row(lv.values[layer], i) for lv, i in levels.shared), own.values[layer]], 2)
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        keys,
        values,
        attn_mask=levels.sdpa_mask(window),
        scale=scaling,
        enable_gqa=query.shape[1] != keys.shape[1],
    )
    return out.transpose(1, 2).contiguous()


def _in_place(
    query: torch.Tensor, layer: int, levels: Levels, scaling: float, softcap: float | None, window: int | None
) -> torch.Tensor:
    """:func:`level_attention` reading every level in place: one matmul per group, one float32 softmax."""
    own = levels.own
    r, hq, q_len, d = query.shape
    hkv = own.keys[layer].shape[1]
    q = query.reshape(r, hkv, hq // hkv * q_len, d)  # query head i reads key head i // (hq // hkv)
    parts = [
        _grouped(q, level.keys[layer].transpose(2, 3), groups)
        for (level, _), groups in zip(levels.shared, levels.groups, strict=True)
    ]
    scores = torch.cat([*parts, q @ own.keys[layer].transpose(2, 3)], -1) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.view(r, hkv, hq // hkv, q_len, -1).masked_fill_(
        ~levels.allowed(window)[:, None, None], torch.finfo(scores.dtype).min
    )
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype).view(r, hkv, -1, scores.shape[-1])
    start, parts = 0, []
    for (level, _), groups in zip(levels.shared, levels.groups, strict=True):
        parts.append(_grouped(weights[..., start : start + level.width], level.values[layer], groups))
        start += level.width
    parts.append(weights[..., start : start + own.width] @ own.values[layer])
    return functools.reduce(operator.add, parts).reshape(r, hq, q_len, d).transpose(1, 2).contiguous()


def _dispatch(base: str):
    """The attention function registered as PREFIX + base: levels when given, else the base implementation."""

    def attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, levels=None, **kwargs):
        if levels is None:
            eager = getattr(sys.modules[type(module).__module__], "eager_attention_forward", None)
            # transformers types the default as callable; get_interface returns it only for base "eager"
            return ALL_ATTENTION_FUNCTIONS.get_interface(base, eager)(  # type: ignore[arg-type]
                module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
            )
        if kwargs.get("s_aux") is not None:
            raise NotImplementedError("attention sinks are not supported by shared levels")
        return level_attention(
            module, query, key, value, levels, scaling, kwargs.get("softcap"), kwargs.get("sliding_window")
        ), None

    return attention


def attach(model: PreTrainedModel) -> None:
    """Route the model's attention through ``level_attention`` when levels are passed (idempotent); every
    other call goes to the implementation it had, with the same masks. On a GPU with Triton (which compiles the
    kernels), also :func:`compile_layers`."""
    config = model.config
    base = config._attn_implementation or "eager"
    if not base.startswith(PREFIX):
        name = PREFIX + base
        if name not in ALL_ATTENTION_FUNCTIONS:
            AttentionInterface.register(name, _dispatch(base))
            if base in ALL_MASK_ATTENTION_FUNCTIONS:
                AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[base])
        for cfg in {id(c): c for c in (config, config.get_text_config())}.values():
            cfg._attn_implementation = name
    if next(model.parameters()).device.type == "cuda" and importlib.util.find_spec("triton"):  # inductor's GPU backend
        compile_layers(model)


def compile_layers(model: PreTrainedModel) -> None:
    """Give each decoder layer a compiled forward (``torch.compile``, dynamic shapes; the attention stays out of
    the graph) that runs when levels are passed, in bbwd's passes; any other call runs the layer's own forward.
    Idempotent."""
    for layer in model.get_decoder().layers:
        if "forward" not in vars(layer):  # the class's forward: not compiled yet
            layer.forward = functools.partial(_by_levels, layer.forward, torch.compile(layer.forward, dynamic=True))


def _by_levels(eager, compiled, *args, **kwargs):
    """A layer's call: compiled when levels are passed (bbwd's passes), else its own forward."""
    return (eager if kwargs.get("levels") is None else compiled)(*args, **kwargs)
