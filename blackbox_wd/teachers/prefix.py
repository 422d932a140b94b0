"""Shared prompt prefixes: run each prompt once, then continue it for many rows from its key/value cache.

A batch of prompts is run left-padded (so that every prompt ends in the last column) with explicit
position ids, giving each real token the position it has when run alone. The rows that continue
the prompts (teacher-forced responses, sampled answers) take a copy of the cache holding their
prompt's row, the prompt's attention mask, and positions that go on from the prompt's length.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import Cache, DynamicCache, PreTrainedModel

from blackbox_wd.teachers.pad import pad_batch


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token (pads get 0 too)."""
    return (mask.long().cumsum(-1) - 1).clamp_(min=0)


def select_rows(cache: Cache, index: torch.Tensor) -> Cache:
    """A copy of ``cache`` whose row r is row ``index[r]`` of it (repeats allowed); ``cache`` is not changed."""
    out = copy.copy(cache)
    out.layers = [copy.copy(layer) for layer in cache.layers]
    out.reorder_cache(index)  # index_select on the copies: new tensors, the originals stay
    return out


@dataclass
class Prefix:
    """Left-padded prompts run once: their cache, attention mask and real lengths, all on the model's device."""

    cache: Cache
    mask: torch.Tensor  # (B, P) 1 on real prompt tokens
    lengths: torch.Tensor  # (B,)

    @property
    def width(self) -> int:
        """P: the padded prompt length."""
        return int(self.mask.shape[1])

    def continuation(self, index: Sequence[int], mask: torch.Tensor) -> tuple[Cache, torch.Tensor, torch.Tensor]:
        """Cache copy, full attention mask and position ids for rows that continue prompts ``index``.

        ``mask`` is the (R, T) attention mask of the rows' own tokens (right-padded).
        """
        rows = torch.as_tensor(list(index), dtype=torch.long, device=self.mask.device)
        full = torch.cat([self.mask[rows], mask.to(self.mask.device)], dim=1)
        pos = self.lengths[rows, None] + torch.arange(mask.shape[1], device=self.mask.device)
        return select_rows(self.cache, rows), full, pos


def left_padded(prompts: Sequence[Sequence[int]], pad: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt token ids as one left-padded (B, P) batch and its mask, on ``device``."""
    ids, mask = pad_batch(prompts, pad, left=True)
    return ids.to(device), mask.to(device)


def new_cache(model: PreTrainedModel) -> DynamicCache:
    """An empty cache with the layer kinds (full or sliding-window attention) of the model's config."""
    return DynamicCache(config=model.config)
