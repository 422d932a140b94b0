"""Grouping rows by length: ``length_runs`` finds the cheapest split; the teacher splits its responses so, and its
packed passes run no padding through the layers."""

from __future__ import annotations

import itertools
import random

import numpy as np

from blackbox_wd.teachers.forcing import HFTeacher
from blackbox_wd.teachers.pad import length_runs


def cost(runs: list[list[int]], lengths: list[int], overhead: int) -> int:
    """Tokens run (rows padded to their run's longest) plus the per-run overhead."""
    return sum(len(r) * lengths[r[-1]] + overhead for r in runs)


def test_short_rows_leave_a_long_one_alone():
    assert length_runs([1, 1, 1, 100], 0, 16384, overhead=64) == [[0, 1, 2], [3]]  # 67 + 164 < 464
    assert length_runs([1, 1, 1, 100], 0, 16384, overhead=1000) == [[0, 1, 2, 3]]  # 1400 < 2203


def test_budget_bounds_a_run_but_a_single_row_always_goes():
    assert length_runs([10, 10, 10, 10], 5, 30, overhead=1000) == [[0, 1], [2, 3]]  # 2 x (5 + 10) = 30
    assert length_runs([100], 5, 10) == [[0]]
    assert length_runs([], 0, 10) == []


def test_split_is_the_cheapest_of_all_splits():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 9)
        lengths = sorted(rng.randint(1, 60) for _ in range(n))
        extra, budget, overhead = rng.randint(0, 20), rng.randint(30, 300), rng.choice([0, 8, 64])
        runs = length_runs(lengths, extra, budget, overhead)
        assert [i for r in runs for i in r] == list(range(n))
        assert all(len(r) == 1 or len(r) * (extra + lengths[r[-1]]) <= budget for r in runs)
        best = None
        for cuts in itertools.product([False, True], repeat=n - 1):
            split, run = [], [0]
            for i, c in enumerate(cuts, start=1):
                if c:
                    split.append(run)
                    run = []
                run.append(i)
            split.append(run)
            if all(len(r) == 1 or len(r) * (extra + lengths[r[-1]]) <= budget for r in split):
                best = min(best if best is not None else 10**9, cost(split, lengths, overhead))
        assert cost(runs, lengths, overhead) == best


def test_teacher_splits_short_from_long_runs_no_padding_and_states_are_unchanged(tiny_llama):
    teacher = HFTeacher(*tiny_llama, name="tiny")
    prompt = teacher.prompt_ids([{"role": "user", "content": "say something"}])
    short = [teacher.response_ids(t) for t in ("yes", "no it is not", "ok")]
    long = teacher.response_ids(" ".join(["it is rome a big city"] * 7))
    pairs = [(prompt, r) for r in [*short, long]]
    assert 3 * (len(long) - max(map(len, short))) > 64  # padding the short rows to the long one costs over a run
    assert len({len(r) for r in short}) > 1  # the short rows pad each other in their run's attention
    runs = teacher._runs(sorted(len(r) for _, r in pairs), len(prompt))
    assert [len(r) for r in runs] == [3, 1]
    before_real, before_run = teacher.tokens.real, teacher.tokens.padded
    states = teacher.encode_ids(pairs)
    real = len(prompt) + sum(map(len, short)) + len(long)
    assert teacher.tokens.real - before_real == teacher.tokens.padded - before_run == real  # packed: no padding run
    teacher.token_budget = 1  # each response alone
    try:
        alone = teacher.encode_ids(pairs)
    finally:
        teacher.token_budget = 16384
    for a, b in zip(states, alone, strict=True):
        np.testing.assert_allclose(a.states, b.states, atol=1e-5)
