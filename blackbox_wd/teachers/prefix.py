"""Shared prompt prefixes: each prompt is read once, and the tokens its prompts share (a few-shot
prompt's exemplars) once for them all; the rows that continue the prompts attend to them in place.

A batch of prompts is read in two passes. The longest token prefix common to them (when it is at
least ``SHARED_MIN`` tokens) runs once as one row; then each prompt's remaining tokens run
left-padded, attending to the shared tokens, with explicit position ids that give every real token
the position it has when its prompt runs alone. Both passes are kept as ``levels.Level``s, and the
rows that continue the prompts (teacher-forced responses, sampled answers) read them through
``levels.Levels``: no key/value cache is copied per row, and padding in the middle is masked out.
A ``SharedMemo`` keeps the last shared prefix, so that the next batches that start with it (the other
groups of an eval's dataset) do not read it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from blackbox_wd.teachers.levels import NO_MASK, Level, Levels
from blackbox_wd.teachers.pad import pad_batch

SHARED_MIN = 32  # shorter common prefixes are read with each prompt: sharing them saves too little

# A pass: token ids (R, Q), validity (R, Q), position ids (R, Q) and the levels it attends to (``step`` done);
# returns the final hidden states (R, Q, H), or None when the pass stopped early.
Pass = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Levels], "torch.Tensor | None"]


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token (pads get 0 too)."""
    return (mask.long().cumsum(-1) - 1).clamp_(min=0)


def left_padded(prompts: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt token ids as one left-padded (B, P) batch and its mask, on ``device``."""
    ids, mask = pad_batch(prompts, pad, left=True)
    return ids.to(device), mask.to(device)


def shared_length(prompts: Sequence[Sequence[int]]) -> int:
    """Tokens the prompts share at their start, read once: their longest common prefix, leaving every
    prompt at least one token of its own; 0 when that is under ``SHARED_MIN``."""
    shortest = min(len(p) for p in prompts)
    first = prompts[0]
    n = 0
    while n < shortest - 1 and all(p[n] == first[n] for p in prompts):
        n += 1
    return n if n >= SHARED_MIN else 0


@dataclass
class Prefix:
    """Prompts read once: the level of their shared tokens (if any), the level of each prompt's own tokens
    (left-padded to ``width`` - shared columns), and each prompt's length."""

    shared: Level | None
    own: Level
    lengths: torch.Tensor  # (B,)

    @property
    def width(self) -> int:
        """Columns a continuing row attends to before its own tokens."""
        return self.own.width + (self.shared.width if self.shared else 0)

    def continuation(self, index: torch.Tensor) -> Levels:
        """The levels for rows that continue prompts ``index`` (R,)."""
        shared = [(self.shared, torch.zeros_like(index))] if self.shared else []
        return Levels([*shared, (self.own, index)])


class SharedMemo:
    """The last shared prefix read through every layer of a model, kept for the next batches whose prompts
    all start with it (an eval's few-shot exemplars are the same for every group of a dataset)."""

    def __init__(self, n_layers: int) -> None:
        self.n_layers = n_layers
        self.tokens: tuple[int, ...] = ()
        self.level: Level | None = None

    def find(self, prompts: Sequence[Sequence[int]]) -> int:
        """Tokens of the kept prefix when every prompt starts with it and goes on after it, else 0."""
        n = len(self.tokens)
        ok = self.level is not None and all(len(p) > n and tuple(p[:n]) == self.tokens for p in prompts)
        return n if ok else 0

    def keep(self, tokens: Sequence[int], level: Level) -> None:
        """Keep a shared prefix's level when it covers every layer (a pass cut at a layer does not)."""
        if len(level.keys) == self.n_layers:
            self.tokens, self.level = tuple(tokens), level


def read_prompts(
    prompts: Sequence[Sequence[int]], pad: int, device: torch.device, run: Pass, memo: SharedMemo | None = None
) -> tuple[Prefix, torch.Tensor | None]:
    """Read the prompts (the prefix they share once, or the one ``memo`` kept, then each one's rest); the
    prefix and the final hidden state at each prompt's last token (None when ``run`` stops early)."""
    n = memo.find(prompts) if memo else 0
    shared = memo.level if memo and n else None
    if not n and len(prompts) > 1 and (n := shared_length(prompts)):
        ids = torch.tensor([list(prompts[0][:n])], device=device)
        levels = Levels()
        valid = torch.ones_like(ids, dtype=torch.bool)
        pos = torch.arange(n, device=device)[None]
        levels.step(pos, valid, packed=True)
        run(ids, valid, pos, levels)
        shared = levels.own
        if memo:
            memo.keep(prompts[0][:n], shared)
    ids, mask = left_padded([p[n:] for p in prompts], pad, device)
    valid = mask.bool()
    levels = Levels([(shared, torch.zeros(len(prompts), dtype=torch.long, device=device))] if shared else [])
    pos = positions(mask) + n
    levels.step(pos, valid, packed=True)
    last = run(ids, valid, pos, levels)
    lengths = mask.sum(1) + n
    return Prefix(shared, levels.own, lengths), None if last is None else last[:, -1]


def decoder_pass(model: PreTrainedModel) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Levels], torch.Tensor]:
    """A pass through the model's decoder stack with levels: its final (normed) hidden states, as (R, Q, H) rows
    (a packed pass runs the valid tokens only). On a GPU the layers run compiled (``levels.compile_layers``)."""
    decoder = model.get_decoder()

    def run(ids: torch.Tensor, valid: torch.Tensor, pos: torch.Tensor, levels: Levels) -> torch.Tensor:
        packed = levels.packed is not None
        ids, pos = (levels.pack(ids), levels.pack(pos)) if packed else (ids, pos)
        out = decoder(
            input_ids=ids, attention_mask=NO_MASK.to(ids.device), position_ids=pos, use_cache=False, levels=levels
        ).last_hidden_state
        return levels.unpack(out) if packed else out

    return run
