"""Padding token id lists into one batch tensor and its attention mask, and grouping them so that little is padded."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

RUN_OVERHEAD = 64  # a forward pass's fixed cost on CPU, in tokens' worth of compute (measured ~30-90 for SmolLM2)


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


def length_runs(lengths: Sequence[int], extra: int, budget: int, overhead: int = RUN_OVERHEAD) -> list[list[int]]:
    """Split rows of ascending ``lengths`` into consecutive runs, one forward pass each, that minimise the tokens
    run (every row padded to its run's longest) plus ``overhead`` per run; a run of two or more rows keeps
    rows x (``extra`` + its longest) within ``budget`` (exact: dynamic programming over the cut points)."""
    n = len(lengths)
    best = [0.0] + [math.inf] * n  # best[j]: the cheapest split of the first j rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest = lengths[j - 1]
        for i in range(j - 1, -1, -1):  # the run i .. j-1, padded to row j-1
            rows = j - i
            if rows > 1 and rows * (extra + longest) > budget:
                break
            cost = best[i] + rows * longest + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    runs: list[list[int]] = []
    while n:
        runs.append(list(range(cut[n], n)))
        n = cut[n]
    return runs[::-1]
