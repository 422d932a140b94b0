"""Padding token id lists into one batch tensor and its attention mask."""

from __future__ import annotations

from collections.abc import Sequence

import torch


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
